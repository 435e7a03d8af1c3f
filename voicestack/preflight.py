"""`voicestack preflight --stack NAME`: before the first `pulumi up`, what would fail, each line with its fix.

The stack's configuration is read through the Pulumi CLI (voicestack/pulumi_stack.py) and resolved
as the program resolves it: Pulumi.yaml's declared defaults, the stack's values on top, parsed by
infra/config.py itself (which imports nothing of Pulumi). Then, in this order:

- the local tools (voicestack/tool_checks.py): Pulumi CLI, AWS CLI, Docker buildx with both platforms;
- credentials and account (STS);
- AgentCore in the stack's region, and no other runtime holding the stack's runtime name;
- the stack's memory: a memory kept by an earlier destroy must be adopted (`memoryId`), an adopted
  one must exist;
- on a stack open to people (publicAccess): no other runtime holding the public runtime's name, and
  the managed login domain's prefix free or the stack's own (prefixes are unique per region across
  all accounts; the answer also says that Cognito is offered in the region);
- no other endpoint holding the stack's endpoint name;
- the SageMaker instance type offered for endpoints in the region, and its endpoint quota at least
  twice the fleet (a blue/green update runs both fleets);
- the Bedrock model: its inference profile in the region, and the account's access to the model.

Every AWS call is a read (Get, List, Describe); infra/deployer-policy/ allows them. Exit codes: 0
every check passed, 1 one failed (voicestack/checks.py), 2 the stack or its configuration cannot be
read (the message names the key).
"""

from __future__ import annotations

import argparse
import shlex
import shutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any, Final

from voicestack import repository
from voicestack.checks import Outcome, exit_code, report
from voicestack.errors import UsageError
from voicestack.pulumi_stack import StackView, read_stack
from voicestack.tool_checks import Runner, run_command, tool_outcomes

repository.make_importable()

from botocore.exceptions import (  # type: ignore[import-untyped]  # noqa: E402  (after make_importable)
    ClientError,
    EndpointConnectionError,
    NoCredentialsError,
    PartialCredentialsError,
    ProfileNotFound,
)

from infra import naming  # noqa: E402  (infra is read from the repository, not installed)
from infra.config import (  # noqa: E402
    INFERENCE_PROFILE_GEOGRAPHIES,
    ConfigError,
    StackConfig,
    check_memory_of_stack,
    config_values,
    parse_config,
)

Clients = Callable[[str], Any]
"""service name -> a botocore client for the stack's region and profile."""

TITLE: Final = "preflight"
BLUE_GREEN_FLEETS: Final = 2
"""A blue/green update (and an instance type change) runs the old and the new fleet side by side."""
AGENTCORE_REGIONS: Final = "https://docs.aws.amazon.com/bedrock-agentcore/latest/devguide/agentcore-regions.html"
ALLOW_PREFLIGHT: Final = "attach the deployer policies of infra/deployer-policy/ (they allow the preflight's reads)"


@dataclass(frozen=True)
class Target:
    """What the account is checked against: the stack's resolved settings, names and current outputs."""

    stack: str
    project: str
    region: str
    profile: str | None
    config: StackConfig
    outputs: Mapping[str, Any]

    @property
    def runtime_name(self) -> str:
        return naming.runtime_name(self.project, self.stack)

    @property
    def public_runtime_name(self) -> str:
        return naming.public_runtime_name(self.project, self.stack)

    @property
    def memory_name(self) -> str:
        return naming.memory_name(self.project, self.stack)

    @property
    def endpoint_name(self) -> str:
        return naming.endpoint_name(self.project, self.stack, self.config.instance_type)

    @property
    def fleet(self) -> int:
        """The most instances the endpoint runs: the autoscaling maximum, else the configured count."""
        scaling = self.config.autoscaling
        return scaling.max_capacity if scaling is not None else self.config.instance_count

    def key(self, name: str) -> str:
        return f"{self.project}:{name}"


def target_of(view: StackView, project_file: Path) -> Target:
    """The stack's configuration resolved as the program resolves it; `UsageError` names a bad or missing key."""
    project = repository.project_name(project_file)
    region = view.config.get("aws:region")
    if not isinstance(region, str) or not region:
        raise UsageError(
            f"stack {view.name!r} sets no aws:region: pulumi config set aws:region us-east-1 --stack {view.name}"
        )
    profile = view.config.get("aws:profile")
    try:
        config = parse_config(config_values(project_file, project, view.config), namespace=project)
        check_memory_of_stack(config.memory_id, naming.memory_name(project, view.name), namespace=project)
    except ConfigError as error:
        raise UsageError(f"stack {view.name!r}: {error}") from None
    return Target(
        stack=view.name,
        project=project,
        region=region,
        profile=profile if isinstance(profile, str) and profile else None,
        config=config,
        outputs=view.outputs,
    )


# --- AWS checks -------------------------------------------------------------------------------------


def _code(error: ClientError) -> str:
    return str(error.response.get("Error", {}).get("Code", "Unknown"))


def _refused(name: str, action: str, error: ClientError) -> Outcome:
    return Outcome.failed(name, f"{action} was refused: {_code(error)}", ALLOW_PREFLIGHT)


def _pages(client: Any, operation: str, key: str, **params: Any) -> list[dict[str, Any]]:
    return [item for page in client.get_paginator(operation).paginate(**params) for item in page[key]]


def check_credentials(clients: Clients, target: Target) -> tuple[Outcome, str | None]:
    """Whose credentials these are; returns the account too (None when there are none)."""
    name = "credentials"
    try:
        identity = clients("sts").get_caller_identity()
    except (NoCredentialsError, PartialCredentialsError):
        profile = f" (the stack's aws:profile is {target.profile})" if target.profile else ""
        return Outcome.failed(
            name,
            f"no AWS credentials found{profile}",
            "aws configure, aws sso login, or export AWS_PROFILE=<profile> in the shell that runs pulumi",
        ), None
    except ClientError as error:
        return Outcome.failed(
            name,
            f"sts:GetCallerIdentity was refused: {_code(error)}",
            "renew the credentials (aws sso login, or new keys)",
        ), None
    return Outcome.passed(name, f"account {identity['Account']} as {identity['Arn']}"), str(identity["Account"])


def check_agentcore(clients: Clients, target: Target) -> tuple[Outcome, list[dict[str, Any]] | None]:
    """AgentCore answers in the region; returns its runtimes too (None when it does not answer)."""
    name = "agentcore region"
    client = clients("bedrock-agentcore-control")
    try:
        runtimes = _pages(client, "list_agent_runtimes", "agentRuntimes")
    except EndpointConnectionError:
        return (
            Outcome.failed(
                name,
                f"AgentCore Runtime is not offered in {target.region} ({client.meta.endpoint_url} does not answer)",
                f"pulumi config set aws:region <a region with AgentCore Runtime> --stack {target.stack}  "
                f"({AGENTCORE_REGIONS})",
            ),
            None,
        )
    except ClientError as error:
        return _refused(name, "bedrock-agentcore:ListAgentRuntimes", error), None
    return Outcome.passed(name, f"AgentCore Runtime answers in {target.region}"), runtimes


def check_runtime_name(
    target: Target,
    runtimes: list[dict[str, Any]],
    *,
    name: str = "runtime name",
    runtime_name: str | None = None,
    output: str = "agentRuntimeArn",
) -> Outcome:
    """No runtime outside the stack holds its name (the IAM runtime's by default; the public one's by argument)."""
    wanted = target.runtime_name if runtime_name is None else runtime_name
    taken = [runtime for runtime in runtimes if runtime["agentRuntimeName"] == wanted]
    if not taken:
        return Outcome.passed(name, f"no runtime named {wanted} yet")
    runtime = taken[0]
    if runtime["agentRuntimeArn"] == target.outputs.get(output):
        return Outcome.passed(name, f"{wanted} is the stack's own runtime")
    return Outcome.failed(
        name,
        f"a runtime named {wanted} already exists ({runtime['agentRuntimeId']}), not this stack's",
        f"aws bedrock-agentcore-control delete-agent-runtime --region {target.region} "
        f"--agent-runtime-id {runtime['agentRuntimeId']}, or deploy under another stack name",
    )


def check_public_runtime_name(target: Target, runtimes: list[dict[str, Any]]) -> Outcome:
    return check_runtime_name(
        target,
        runtimes,
        name="public runtime name",
        runtime_name=target.public_runtime_name,
        output="publicAgentRuntimeArn",
    )


def sign_in_prefix(target: Target, account: str) -> str:
    """The managed login domain's prefix the program will declare (configured, or derived as it derives it)."""
    public = target.config.public
    if public is not None and public.domain_prefix is not None:
        return public.domain_prefix
    return naming.sign_in_domain_prefix(target.project, target.stack, account, target.region)


def check_sign_in_domain(clients: Clients, target: Target, account: str) -> Outcome:
    name = "sign-in domain"
    prefix = sign_in_prefix(target, account)
    client = clients("cognito-idp")
    try:
        found = client.describe_user_pool_domain(Domain=prefix)["DomainDescription"]
    except EndpointConnectionError:
        return Outcome.failed(
            name,
            f"Cognito does not answer in {target.region} ({client.meta.endpoint_url})",
            f"pulumi config set aws:region <a region with Cognito and AgentCore> --stack {target.stack}",
        )
    except ClientError as error:
        return _refused(name, "cognito-idp:DescribeUserPoolDomain", error)
    owner = found.get("UserPoolId")
    if not owner:
        return Outcome.passed(name, f"{prefix}.auth.{target.region}.amazoncognito.com is free")
    if owner == target.outputs.get("userPoolId"):
        return Outcome.passed(name, f"{prefix} is the stack's own (user pool {owner})")
    return Outcome.failed(
        name,
        f"the prefix {prefix} is taken in {target.region} (user pool {owner}"
        + (f", account {found['AWSAccountId']})" if found.get("AWSAccountId") else ")"),
        f"pulumi config set {target.key('signInDomainPrefix')} <another prefix> --stack {target.stack}",
    )


def check_memory(clients: Clients, target: Target) -> Outcome:
    name = "kept memory"
    try:
        memories = _pages(clients("bedrock-agentcore-control"), "list_memories", "memories")
    except ClientError as error:
        return _refused(name, "bedrock-agentcore:ListMemories", error)
    ours = {
        memory["id"]: memory.get("status", "")
        for memory in memories
        if memory["id"].startswith(f"{target.memory_name}-")
    }
    adopted = target.config.memory_id
    if adopted is not None:
        if adopted not in ours:
            return Outcome.failed(
                name,
                f"{target.key('memoryId')} is {adopted}, which is not in {target.region}",
                f"pulumi config rm {target.key('memoryId')} --stack {target.stack}  "
                "(the next pulumi up creates a memory)",
            )
        if ours[adopted] != "ACTIVE":
            return Outcome.failed(
                name,
                f"the kept memory {adopted} is {ours[adopted]}",
                "wait until it is ACTIVE, then run the preflight again",
            )
        return Outcome.passed(name, f"the stack adopts its kept memory {adopted}")
    kept = sorted(memory_id for memory_id in ours if memory_id != target.outputs.get("memoryId"))
    if kept:
        return Outcome.failed(
            name,
            f"{kept[0]} has this stack's memory name, kept by an earlier destroy: AgentCore refuses a second one",
            f"pulumi config set {target.key('memoryId')} {kept[0]} --stack {target.stack}  (adopts it, conversations "
            "included)",
        )
    if ours:
        return Outcome.passed(name, f"{next(iter(ours))} is the stack's own memory")
    return Outcome.passed(name, f"no memory named {target.memory_name} yet")


def check_endpoint_name(clients: Clients, target: Target) -> Outcome:
    name = "endpoint name"
    endpoint = target.endpoint_name
    try:
        found = clients("sagemaker").describe_endpoint(EndpointName=endpoint)
    except ClientError as error:
        if _code(error) == "ValidationException" and "Could not find endpoint" in str(error):
            return Outcome.passed(name, f"no endpoint named {endpoint} yet")
        return _refused(name, "sagemaker:DescribeEndpoint", error)
    if target.outputs.get("speechEndpointName") == endpoint:
        return Outcome.passed(name, f"{endpoint} is the stack's own endpoint ({found['EndpointStatus']})")
    return Outcome.failed(
        name,
        f"an endpoint named {endpoint} already exists ({found['EndpointStatus']}), not this stack's",
        f"aws sagemaker delete-endpoint --region {target.region} --endpoint-name {endpoint}, "
        "or deploy under another stack name",
    )


def endpoint_quota_name(instance_type: str) -> str:
    """Service Quotas' name of the per-type endpoint quota (SageMaker service code)."""
    return f"{instance_type} for endpoint usage"


def check_instance_type_and_quota(clients: Clients, target: Target) -> list[Outcome]:
    offered, quota = "instance type", "endpoint quota"
    instance_type = target.config.instance_type
    wanted = endpoint_quota_name(instance_type)
    client = clients("service-quotas")
    try:
        found = [
            q
            for q in _pages(client, "list_service_quotas", "Quotas", ServiceCode="sagemaker")
            if q["QuotaName"] == wanted
        ]
        if not found:
            # An account that never changed a quota may list only AWS's defaults for it.
            defaults = _pages(client, "list_aws_default_service_quotas", "Quotas", ServiceCode="sagemaker")
            found = [q for q in defaults if q["QuotaName"] == wanted]
    except ClientError as error:
        return [
            Outcome.skipped(offered, "needs the SageMaker quotas"),
            _refused(quota, "servicequotas:ListServiceQuotas", error),
        ]
    if not found:
        return [
            Outcome.failed(
                offered,
                f"SageMaker offers no {instance_type} for endpoints in {target.region} (Service Quotas lists no "
                f'"{wanted}")',
                f"pulumi config set {target.key('instanceType')} <a GPU type offered there> --stack {target.stack}",
            ),
            Outcome.skipped(quota, "needs an instance type offered in the region"),
        ]
    value, code = int(found[0]["Value"]), found[0]["QuotaCode"]
    needed = BLUE_GREEN_FLEETS * target.fleet
    detail = (
        f'"{wanted}" is {value} in {target.region}; the stack needs {needed} (twice the fleet of {target.fleet}, '
        "for blue/green updates)"
    )
    outcome = (
        Outcome.passed(quota, detail)
        if value >= needed
        else Outcome.failed(
            quota,
            detail,
            f"aws service-quotas request-service-quota-increase --region {target.region} --service-code sagemaker "
            f"--quota-code {code} --desired-value {needed}",
        )
    )
    return [Outcome.passed(offered, f"{instance_type} is offered for endpoints in {target.region}"), outcome]


def check_model(clients: Clients, target: Target) -> list[Outcome]:
    model_id = target.config.bedrock_model_id
    geography, _, base_id = model_id.partition(".")
    through_profile = geography in INFERENCE_PROFILE_GEOGRAPHIES
    bedrock = clients("bedrock")
    outcomes: list[Outcome] = []
    if through_profile:
        outcomes.append(_check_profile(bedrock, target, model_id))
    foundation = base_id if through_profile else model_id
    name = "model access"
    try:
        found = bedrock.get_foundation_model_availability(modelId=foundation)
    except ClientError as error:
        if _code(error) in ("ResourceNotFoundException", "ValidationException"):
            outcomes.append(
                Outcome.failed(
                    name,
                    f"{foundation} is not a Bedrock model in {target.region} ({_code(error)})",
                    f"pulumi config set {target.key('bedrockModelId')} <a model id of the region> "
                    f"--stack {target.stack}",
                )
            )
        else:
            outcomes.append(_refused(name, "bedrock:GetFoundationModelAvailability", error))
        return outcomes
    state = {
        "agreement": found["agreementAvailability"]["status"],
        "authorization": found["authorizationStatus"],
        "entitlement": found["entitlementAvailability"],
        "region": found["regionAvailability"],
    }
    # Through a cross-region profile the model may run in another region of the geography.
    wanted = {"agreement": "AVAILABLE", "authorization": "AUTHORIZED", "entitlement": "AVAILABLE"}
    if not through_profile:
        wanted["region"] = "AVAILABLE"
    shown = ", ".join(f"{key} {value}" for key, value in state.items())
    if all(state[key] == value for key, value in wanted.items()):
        outcomes.append(Outcome.passed(name, f"{foundation}: {shown}"))
    else:
        converse = [
            "aws", "bedrock-runtime", "converse", "--region", target.region, "--model-id", model_id,
            "--messages", '[{"role":"user","content":[{"text":"hi"}]}]',
        ]  # fmt: skip
        outcomes.append(
            Outcome.failed(
                name,
                f"{foundation}: {shown}",
                f"request access once per account (infra/README.md, One-time steps), then {shlex.join(converse)}",
            )
        )
    return outcomes


def _check_profile(bedrock: Any, target: Target, profile_id: str) -> Outcome:
    name = "inference profile"
    try:
        profile = bedrock.get_inference_profile(inferenceProfileIdentifier=profile_id)
    except ClientError as error:
        if _code(error) in ("ResourceNotFoundException", "ValidationException"):
            return Outcome.failed(
                name,
                f"{profile_id} is not offered in {target.region} ({_code(error)})",
                f"pulumi config set {target.key('bedrockModelId')} <the profile of {target.region}'s geography> "
                f"--stack {target.stack}",
            )
        return _refused(name, "bedrock:GetInferenceProfile", error)
    if profile["status"] != "ACTIVE":
        return Outcome.failed(name, f"{profile_id} is {profile['status']}", "choose an ACTIVE inference profile")
    return Outcome.passed(name, f"{profile_id} is ACTIVE in {target.region}")


def aws_outcomes(target: Target, clients: Clients) -> list[Outcome]:
    """Every AWS check, in order; without credentials the others are skipped."""
    public = target.config.public is not None
    credentials, account = check_credentials(clients, target)
    runtime_names = ["runtime name", *(["public runtime name"] if public else [])]
    later = ("agentcore region", *runtime_names, "kept memory", *(["sign-in domain"] if public else []))
    later += ("endpoint name", "instance type", "endpoint quota")
    if credentials.status == "FAIL" or account is None:
        return [credentials, *(Outcome.skipped(name, "needs credentials") for name in later)]
    agentcore, runtimes = check_agentcore(clients, target)
    if runtimes is not None:
        names = [check_runtime_name(target, runtimes)]
        names += [check_public_runtime_name(target, runtimes)] if public else []
        names.append(check_memory(clients, target))
    else:
        names = [Outcome.skipped(name, "needs AgentCore") for name in (*runtime_names, "kept memory")]
    return [
        credentials,
        agentcore,
        *names,
        *([check_sign_in_domain(clients, target, account)] if public else []),
        check_endpoint_name(clients, target),
        *check_instance_type_and_quota(clients, target),
        *check_model(clients, target),
    ]


# --- the command ------------------------------------------------------------------------------------


def boto3_clients(region: str, profile: str | None) -> Clients:
    """Clients for the stack's region and profile, retried a little, never for long."""
    import boto3  # type: ignore[import-untyped]
    from botocore.config import Config  # type: ignore[import-untyped]

    try:
        session = boto3.session.Session(profile_name=profile, region_name=region)
    except ProfileNotFound:
        raise UsageError(
            f"aws:profile {profile!r} is not a profile of the AWS config (aws configure list-profiles)"
        ) from None
    config = Config(retries={"max_attempts": 3, "mode": "standard"}, connect_timeout=10, read_timeout=30)

    @cache
    def client(service: str) -> Any:
        return session.client(service, config=config)

    return client


def read_with_pulumi_cli(stack: str) -> StackView:
    """The stack through the Pulumi CLI, which commands that take only --stack (preflight, add-user) cannot do
    without."""
    if shutil.which("pulumi") is None:
        raise UsageError(
            "the stack is read through the Pulumi CLI, which is not on the PATH: "
            "install it (https://www.pulumi.com/docs/install/)"
        )
    return read_stack(stack)


class PreflightCommand:
    """`voicestack preflight`; the stack reader, the AWS clients and the command runner can be replaced."""

    def __init__(
        self,
        *,
        read: Callable[[str], StackView] = read_with_pulumi_cli,
        clients: Callable[[str, str | None], Clients] = boto3_clients,
        run: Runner = run_command,
        project_file: Path = repository.PULUMI_YAML,
    ) -> None:
        self._read, self._clients, self._run, self._project_file = read, clients, run, project_file

    def register(self, commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
        parser = commands.add_parser(
            "preflight",
            help="before pulumi up: what would fail on AWS and locally, each failing line with its fix",
            description=__doc__.splitlines()[0] if __doc__ else None,
        )
        parser.add_argument("--stack", required=True, metavar="NAME", help="the Pulumi stack to check (e.g. dev)")
        parser.set_defaults(run=self.run)

    def run(self, args: argparse.Namespace) -> int:
        target = target_of(self._read(args.stack), self._project_file)
        outcomes = [*tool_outcomes(self._run), *aws_outcomes(target, self._clients(target.region, target.profile))]
        for line in report(TITLE, outcomes):
            print(line)
        return int(exit_code(outcomes))


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Adds `preflight` with the real Pulumi CLI, AWS and local commands."""
    PreflightCommand().register(commands)
