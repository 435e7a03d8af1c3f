"""`voicestack preflight`: every check against botocore's Stubber (requests and responses checked against the
service models), the stack read through a stand-in Pulumi CLI, the tools through canned processes; exact
lines and exit codes."""

from __future__ import annotations

import hashlib
import json
import subprocess
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import botocore.session  # type: ignore[import-untyped]
import pytest
from botocore.config import Config  # type: ignore[import-untyped]
from botocore.exceptions import EndpointConnectionError  # type: ignore[import-untyped]
from botocore.stub import Stubber  # type: ignore[import-untyped]

from voicestack.cli import build_parser, main
from voicestack.preflight import PreflightCommand
from voicestack.pulumi_stack import StackView, read_stack
from voicestack.repository import REPO_ROOT
from voicestack.tool_checks import required_pulumi_cli

ACCOUNT = "123456789012"
REGION = "us-east-1"
MODEL = "us.anthropic.claude-haiku-4-5-20251001-v1:0"
BASE_MODEL = "anthropic.claude-haiku-4-5-20251001-v1:0"
QUOTA_CODE = "L-1928E07B"
SESSION = botocore.session.get_session()
"""One botocore session for the module: it loads each service model once."""
SKELETON = ("aws", "bedrock-agentcore", "invoke-agent-runtime", "/dev/null", "--generate-cli-skeleton")
BUILDX = """Name:          default
Driver:        docker
Last Activity: 2026-12-02 10:00:00 +0000 UTC

Nodes:
Name:             default
Endpoint:         default
Status:           running
BuildKit version: v0.26.2
Platforms:        linux/amd64, linux/amd64/v2, linux/arm64*, linux/386
"""
DEV_CONFIG = {
    "aws:region": {"value": REGION, "secret": False},
    "voicestack:retainStorage": {"value": "false", "secret": False},
    "voicestack:instanceType": {"value": "ml.g5.xlarge", "secret": False},
    "voicestack:speechMode": {"value": "stream", "secret": False},
}
READY = [
    f"PASS  pulumi cli: v{required_pulumi_cli()} (needs {required_pulumi_cli()} or later)",
    "PASS  aws cli: 2.31.13, with `aws bedrock-agentcore invoke-agent-runtime`",
    "PASS  docker buildx: the builder offers linux/amd64, linux/arm64",
    f"PASS  credentials: account {ACCOUNT} as arn:aws:iam::{ACCOUNT}:user/deployer",
    "PASS  agentcore region: AgentCore Runtime answers in us-east-1",
    "PASS  runtime name: no runtime named voicestack_dev_agent yet",
    "PASS  kept memory: no memory named voicestack_dev_memory yet",
    "PASS  endpoint name: no endpoint named voicestack-dev-speech-g5-xlarge yet",
    "PASS  instance type: ml.g5.xlarge is offered for endpoints in us-east-1",
    'PASS  endpoint quota: "ml.g5.xlarge for endpoint usage" is 2 in us-east-1; the stack needs 2 (twice the fleet of '
    "1, for blue/green updates)",
    f"PASS  inference profile: {MODEL} is ACTIVE in us-east-1",
    f"PASS  model access: {BASE_MODEL}: agreement AVAILABLE, authorization AUTHORIZED, entitlement AVAILABLE, "
    "region AVAILABLE",
]


# --- stand-ins --------------------------------------------------------------------------------------


def completed(argv: Sequence[str], code: int = 0, out: str = "", err: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.CompletedProcess(list(argv), code, out, err)


def tools(**overrides: subprocess.CompletedProcess[str] | None) -> Callable[[Sequence[str]], Any]:
    """The local commands; an override of None means the program is not installed."""
    answers: dict[tuple[str, ...], subprocess.CompletedProcess[str] | None] = {
        ("pulumi", "version"): completed(["pulumi"], out=f"v{required_pulumi_cli()}\n"),
        ("aws", "--version"): completed(
            ["aws"], out="aws-cli/2.31.13 Python/3.13.7 Linux/6.8.0 exe/x86_64.ubuntu.24\n"
        ),
        SKELETON: completed(SKELETON, out='{"agentRuntimeArn": "", "payload": ""}\n'),
        ("docker", "buildx", "inspect", "--bootstrap"): completed(["docker"], out=BUILDX),
    }
    named = {"pulumi": ("pulumi", "version"), "aws": ("aws", "--version"), "skeleton": SKELETON}
    named["docker"] = ("docker", "buildx", "inspect", "--bootstrap")
    for key, value in overrides.items():
        answers[named[key]] = value

    def run(argv: Sequence[str]) -> subprocess.CompletedProcess[str]:
        answer = answers[tuple(argv)]
        if answer is None:
            raise FileNotFoundError(argv[0])
        return answer

    return run


def pulumi_cli(config: Mapping[str, Any], outputs: Mapping[str, Any] | None = None, code: int = 0, err: str = ""):
    """`pulumi stack output --json` and `pulumi config --json` of one stack, as the CLI prints them."""

    def run(argv: Sequence[str]) -> subprocess.CompletedProcess[str]:
        if code != 0:
            return completed(argv, code, err=err)
        text = json.dumps(outputs or {}) if argv[1] == "stack" else json.dumps(config)
        return completed(argv, out=text)

    return lambda stack: read_stack(stack, runner=run, pulumi="/usr/local/bin/pulumi")


@dataclass
class Account:
    """Stubbed clients, one per service, for one region; `stub` queues what AWS answers."""

    region: str = REGION
    clients: dict[str, Any] = field(default_factory=dict)
    stubbers: dict[str, Stubber] = field(default_factory=dict)
    regions_asked: list[tuple[str, str | None]] = field(default_factory=list)

    def client(self, service: str) -> Any:
        if service not in self.clients:
            self.clients[service] = SESSION.create_client(
                service,
                region_name=self.region,
                aws_access_key_id="AKIDEXAMPLE",
                aws_secret_access_key="secret",
                config=Config(retries={"max_attempts": 1, "mode": "standard"}),
            )
        return self.clients[service]

    def stub(self, service: str) -> Stubber:
        if service not in self.stubbers:
            self.stubbers[service] = Stubber(self.client(service))
            self.stubbers[service].activate()
        return self.stubbers[service]

    def factory(self, region: str, profile: str | None) -> Callable[[str], Any]:
        self.regions_asked.append((region, profile))
        return self.client

    def done(self) -> None:
        for stubber in self.stubbers.values():
            stubber.assert_no_pending_responses()
            stubber.deactivate()


def quota(value: float, name: str = "ml.g5.xlarge for endpoint usage") -> dict[str, Any]:
    return {
        "ServiceCode": "sagemaker",
        "ServiceName": "Amazon SageMaker",
        "QuotaArn": f"arn:aws:servicequotas:{REGION}:{ACCOUNT}:sagemaker/{QUOTA_CODE}",
        "QuotaCode": QUOTA_CODE,
        "QuotaName": name,
        "Value": value,
        "Unit": "None",
        "Adjustable": True,
        "GlobalQuota": False,
    }


def memory(memory_id: str, status: str = "ACTIVE") -> dict[str, Any]:
    return {
        "arn": f"arn:aws:bedrock-agentcore:{REGION}:{ACCOUNT}:memory/{memory_id}",
        "id": memory_id,
        "status": status,
        "createdAt": "2026-11-30T10:00:00Z",
        "updatedAt": "2026-11-30T10:00:00Z",
    }


def ready(
    account: Account,
    *,
    quota_value: float = 2.0,
    memories: Sequence[dict[str, Any]] = (),
    runtimes: Sequence[dict[str, Any]] = (),
    authorization: str = "AUTHORIZED",
    agreement: str = "AVAILABLE",
    agentcore: bool = True,
    quotas: Sequence[dict[str, Any]] | None = None,
) -> Account:
    """Queues the answers of an account where everything is in place, but for what the arguments change."""
    account.stub("sts").add_response(
        "get_caller_identity",
        {"UserId": "AIDAEXAMPLE", "Account": ACCOUNT, "Arn": f"arn:aws:iam::{ACCOUNT}:user/deployer"},
        {},
    )
    if agentcore:
        control = account.stub("bedrock-agentcore-control")
        control.add_response("list_agent_runtimes", {"agentRuntimes": list(runtimes)}, {})
        control.add_response("list_memories", {"memories": list(memories)}, {})
    account.stub("sagemaker").add_client_error(
        "describe_endpoint",
        service_error_code="ValidationException",
        service_message=f'Could not find endpoint "arn:aws:sagemaker:{REGION}:{ACCOUNT}:endpoint/'
        'voicestack-dev-speech-g5-xlarge".',
        http_status_code=400,
        expected_params={"EndpointName": "voicestack-dev-speech-g5-xlarge"},
    )
    account.stub("service-quotas").add_response(
        "list_service_quotas",
        {
            "Quotas": list(quotas)
            if quotas is not None
            else [quota(4.0, "ml.g5.2xlarge for endpoint usage"), quota(quota_value)]
        },
        {"ServiceCode": "sagemaker"},
    )
    bedrock = account.stub("bedrock")
    bedrock.add_response(
        "get_inference_profile",
        {
            "inferenceProfileName": "US Anthropic Claude Haiku 4.5",
            "inferenceProfileArn": f"arn:aws:bedrock:{REGION}:{ACCOUNT}:inference-profile/{MODEL}",
            "models": [{"modelArn": f"arn:aws:bedrock:{REGION}::foundation-model/{BASE_MODEL}"}],
            "inferenceProfileId": MODEL,
            "status": "ACTIVE",
            "type": "SYSTEM_DEFINED",
        },
        {"inferenceProfileIdentifier": MODEL},
    )
    bedrock.add_response(
        "get_foundation_model_availability",
        {
            "modelId": BASE_MODEL,
            "agreementAvailability": {"status": agreement},
            "authorizationStatus": authorization,
            "entitlementAvailability": "AVAILABLE",
            "regionAvailability": "AVAILABLE",
        },
        {"modelId": BASE_MODEL},
    )
    return account


@pytest.fixture
def account() -> Iterator[Account]:
    stubbed = Account()
    yield stubbed
    stubbed.done()


def preflight(
    capsys: pytest.CaptureFixture[str],
    account: Account,
    *,
    config: Mapping[str, Any] = DEV_CONFIG,
    outputs: Mapping[str, Any] | None = None,
    run: Callable[[Sequence[str]], Any] | None = None,
) -> tuple[int, list[str], str]:
    command = PreflightCommand(read=pulumi_cli(config, outputs), clients=account.factory, run=run or tools())
    code = main(["preflight", "--stack", "dev"], commands=[command])
    captured = capsys.readouterr()
    return code, captured.out.splitlines(), captured.err


# --- a ready account, and what each missing piece looks like -------------------------------------------


def test_a_ready_account_passes_every_check(capsys: pytest.CaptureFixture[str], account: Account) -> None:
    code, lines, err = preflight(capsys, ready(account))
    assert lines == [*READY, "preflight: all 12 checks passed"]
    assert (code, err) == (0, "")
    assert account.regions_asked == [("us-east-1", None)]


IAM_PREFIX = {"bedrock-agentcore-control": "bedrock-agentcore", "service-quotas": "servicequotas"}


def test_the_deployer_policies_allow_every_call_the_preflight_makes(
    capsys: pytest.CaptureFixture[str], account: Account
) -> None:
    ready(account, quotas=[quota(4.0, "ml.g5.2xlarge for endpoint usage")])
    account.stub("service-quotas").add_response(
        "list_aws_default_service_quotas", {"Quotas": [quota(2.0)]}, {"ServiceCode": "sagemaker"}
    )
    called: list[str] = []
    for service, client in account.clients.items():
        prefix = IAM_PREFIX.get(service, service)
        client.meta.events.register(
            "before-parameter-build", lambda model, prefix=prefix, **_: called.append(f"{prefix}:{model.name}")
        )
    assert preflight(capsys, account)[0] == 0
    allowed = {
        action
        for path in (REPO_ROOT / "infra" / "deployer-policy").glob("*.json")
        for statement in json.loads(path.read_text(encoding="utf-8"))["Statement"]
        for action in statement["Action"]
    }
    assert sorted(set(called)) == [
        "bedrock-agentcore:ListAgentRuntimes",
        "bedrock-agentcore:ListMemories",
        "bedrock:GetFoundationModelAvailability",
        "bedrock:GetInferenceProfile",
        "sagemaker:DescribeEndpoint",
        "servicequotas:ListAWSDefaultServiceQuotas",
        "servicequotas:ListServiceQuotas",
        "sts:GetCallerIdentity",
    ]
    assert sorted(set(called) - allowed) == []


def test_a_quota_below_twice_the_fleet_fails_with_the_increase_to_ask_for(
    capsys: pytest.CaptureFixture[str], account: Account
) -> None:
    code, lines, _ = preflight(capsys, ready(account, quota_value=1.0))
    assert lines[9:11] == [
        'FAIL  endpoint quota: "ml.g5.xlarge for endpoint usage" is 1 in us-east-1; the stack needs 2 (twice the '
        "fleet of 1, for blue/green updates)",
        "      fix: aws service-quotas request-service-quota-increase --region us-east-1 --service-code sagemaker "
        f"--quota-code {QUOTA_CODE} --desired-value 2",
    ]
    assert lines[-1] == "preflight: 1 of 12 checks failed (endpoint quota)"
    assert code == 1


def test_the_fleet_with_autoscaling_is_its_maximum(capsys: pytest.CaptureFixture[str], account: Account) -> None:
    config = {
        **DEV_CONFIG,
        "voicestack:autoscalingEnabled": {"value": "true", "secret": False},
        "voicestack:autoscalingMaxCapacity": {"value": "3", "secret": False},
    }
    code, lines, _ = preflight(capsys, ready(account, quota_value=4.0), config=config)
    assert lines[9] == (
        'FAIL  endpoint quota: "ml.g5.xlarge for endpoint usage" is 4 in us-east-1; the stack needs 6 (twice the '
        "fleet of 3, for blue/green updates)"
    )
    assert code == 1


def test_a_model_without_access_fails_with_the_one_time_step(
    capsys: pytest.CaptureFixture[str], account: Account
) -> None:
    code, lines, _ = preflight(capsys, ready(account, authorization="NOT_AUTHORIZED", agreement="NOT_AVAILABLE"))
    assert lines[11:] == [
        f"FAIL  model access: {BASE_MODEL}: agreement NOT_AVAILABLE, authorization NOT_AUTHORIZED, entitlement "
        "AVAILABLE, region AVAILABLE",
        "      fix: request access once per account (infra/README.md, One-time steps), then aws bedrock-runtime "
        f"converse --region us-east-1 --model-id {MODEL} --messages "
        """'[{"role":"user","content":[{"text":"hi"}]}]'""",
        "preflight: 1 of 12 checks failed (model access)",
    ]
    assert code == 1


def test_an_inference_profile_the_region_does_not_offer(capsys: pytest.CaptureFixture[str], account: Account) -> None:
    ready(account)
    bedrock = account.stub("bedrock")
    bedrock.deactivate()
    account.stubbers["bedrock"] = Stubber(account.client("bedrock"))
    account.stubbers["bedrock"].activate()
    account.stubbers["bedrock"].add_client_error(
        "get_inference_profile",
        service_error_code="ResourceNotFoundException",
        service_message="The inference profile does not exist.",
        http_status_code=404,
        expected_params={"inferenceProfileIdentifier": MODEL},
    )
    account.stubbers["bedrock"].add_response(
        "get_foundation_model_availability",
        {
            "modelId": BASE_MODEL,
            "agreementAvailability": {"status": "AVAILABLE"},
            "authorizationStatus": "AUTHORIZED",
            "entitlementAvailability": "AVAILABLE",
            "regionAvailability": "NOT_AVAILABLE",
        },
        {"modelId": BASE_MODEL},
    )
    code, lines, _ = preflight(capsys, account)
    assert lines[10:] == [
        f"FAIL  inference profile: {MODEL} is not offered in us-east-1 (ResourceNotFoundException)",
        "      fix: pulumi config set voicestack:bedrockModelId <the profile of us-east-1's geography> --stack dev",
        # Through a profile the model may run in another region of its geography: region availability is not asked.
        f"PASS  model access: {BASE_MODEL}: agreement AVAILABLE, authorization AUTHORIZED, entitlement AVAILABLE, "
        "region NOT_AVAILABLE",
        "preflight: 1 of 12 checks failed (inference profile)",
    ]
    assert code == 1


def test_a_region_without_agentcore(capsys: pytest.CaptureFixture[str]) -> None:
    account = Account(region="ca-west-1")
    ready(account, agentcore=False)
    control = account.client("bedrock-agentcore-control")

    def unreachable(request: Any, **_: Any) -> None:
        # What a region without the service gives: its endpoint's name does not resolve.
        raise EndpointConnectionError(endpoint_url=request.url)

    control.meta.events.register("before-send.bedrock-agentcore-control", unreachable)
    config = {**DEV_CONFIG, "aws:region": {"value": "ca-west-1", "secret": False}}
    code, lines, _ = preflight(capsys, account, config=config)
    account.done()
    assert lines[4:8] == [
        "FAIL  agentcore region: AgentCore Runtime is not offered in ca-west-1 "
        "(https://bedrock-agentcore-control.ca-west-1.amazonaws.com does not answer)",
        "      fix: pulumi config set aws:region <a region with AgentCore Runtime> --stack dev  "
        "(https://docs.aws.amazon.com/bedrock-agentcore/latest/devguide/agentcore-regions.html)",
        "SKIP  runtime name: needs AgentCore",
        "SKIP  kept memory: needs AgentCore",
    ]
    assert lines[-1] == "preflight: 1 of 12 checks failed (agentcore region), 2 skipped"
    assert code == 1


def test_no_arm64_builder(capsys: pytest.CaptureFixture[str], account: Account) -> None:
    amd64_only = BUILDX.replace("linux/arm64*, ", "")
    run = tools(docker=completed(["docker"], out=amd64_only))
    code, lines, _ = preflight(capsys, ready(account), run=run)
    assert lines[2:4] == [
        "FAIL  docker buildx: the builder offers linux/amd64, linux/amd64/v2, linux/386, not linux/arm64",
        "      fix: docker run --privileged --rm tonistiigi/binfmt --install arm64  (QEMU emulation for the agent's "
        "linux/arm64 image; Docker Desktop ships it)",
    ]
    assert lines[-1] == "preflight: 1 of 12 checks failed (docker buildx)"
    assert code == 1


def test_a_memory_kept_by_an_earlier_destroy_must_be_adopted(
    capsys: pytest.CaptureFixture[str], account: Account
) -> None:
    kept = "voicestack_dev_memory-AbCdE12345"
    code, lines, _ = preflight(
        capsys, ready(account, memories=[memory("voicestack_prod_memory-ZyXwV98765"), memory(kept)])
    )
    assert lines[6:8] == [
        f"FAIL  kept memory: {kept} has this stack's memory name, kept by an earlier destroy: AgentCore refuses a "
        "second one",
        f"      fix: pulumi config set voicestack:memoryId {kept} --stack dev  (adopts it, conversations included)",
    ]
    assert code == 1


def test_an_adopted_memory_passes_and_a_gone_one_fails(capsys: pytest.CaptureFixture[str]) -> None:
    kept = "voicestack_dev_memory-AbCdE12345"
    config = {**DEV_CONFIG, "voicestack:memoryId": {"value": kept, "secret": False}}
    present = ready(Account(), memories=[memory(kept)])
    code, lines, _ = preflight(capsys, present, config=config)
    present.done()
    assert (code, lines[6]) == (0, f"PASS  kept memory: the stack adopts its kept memory {kept}")
    gone = ready(Account())
    code, lines, _ = preflight(capsys, gone, config=config)
    gone.done()
    assert lines[6:8] == [
        f"FAIL  kept memory: voicestack:memoryId is {kept}, which is not in us-east-1",
        "      fix: pulumi config rm voicestack:memoryId --stack dev  (the next pulumi up creates a memory)",
    ]
    assert code == 1


def test_the_stacks_own_resources_are_not_conflicts(capsys: pytest.CaptureFixture[str], account: Account) -> None:
    arn = f"arn:aws:bedrock-agentcore:{REGION}:{ACCOUNT}:runtime/voicestack_dev_agent-Qr5tUv7wXy"
    own = {
        "agentRuntimeArn": arn,
        "agentRuntimeId": "voicestack_dev_agent-Qr5tUv7wXy",
        "agentRuntimeVersion": "3",
        "agentRuntimeName": "voicestack_dev_agent",
        "description": "voicestack",
        "lastUpdatedAt": "2026-11-30T10:00:00Z",
        "status": "READY",
    }
    ready(account, runtimes=[own], memories=[memory("voicestack_dev_memory-AbCdE12345")])
    outputs = {"agentRuntimeArn": arn, "memoryId": "voicestack_dev_memory-AbCdE12345"}
    code, lines, _ = preflight(capsys, account, outputs=outputs)
    assert lines[5:7] == [
        "PASS  runtime name: voicestack_dev_agent is the stack's own runtime",
        "PASS  kept memory: voicestack_dev_memory-AbCdE12345 is the stack's own memory",
    ]
    assert code == 0


def test_a_runtime_of_that_name_outside_the_stack_is_a_conflict(
    capsys: pytest.CaptureFixture[str], account: Account
) -> None:
    other = {
        "agentRuntimeArn": f"arn:aws:bedrock-agentcore:{REGION}:{ACCOUNT}:runtime/voicestack_dev_agent-OtHeR12345",
        "agentRuntimeId": "voicestack_dev_agent-OtHeR12345",
        "agentRuntimeVersion": "1",
        "agentRuntimeName": "voicestack_dev_agent",
        "description": "made by hand",
        "lastUpdatedAt": "2026-11-30T10:00:00Z",
        "status": "READY",
    }
    code, lines, _ = preflight(capsys, ready(account, runtimes=[other]))
    assert lines[5:7] == [
        "FAIL  runtime name: a runtime named voicestack_dev_agent already exists (voicestack_dev_agent-OtHeR12345), "
        "not this stack's",
        "      fix: aws bedrock-agentcore-control delete-agent-runtime --region us-east-1 --agent-runtime-id "
        "voicestack_dev_agent-OtHeR12345, or deploy under another stack name",
    ]
    assert code == 1


def test_an_instance_type_the_region_does_not_offer(capsys: pytest.CaptureFixture[str], account: Account) -> None:
    ready(account, quotas=[quota(4.0, "ml.g5.2xlarge for endpoint usage")])
    account.stub("service-quotas").add_response(
        "list_aws_default_service_quotas",
        {"Quotas": [quota(0.0, "ml.g4dn.xlarge for endpoint usage")]},
        {"ServiceCode": "sagemaker"},
    )
    code, lines, _ = preflight(capsys, account)
    assert lines[8:11] == [
        "FAIL  instance type: SageMaker offers no ml.g5.xlarge for endpoints in us-east-1 (Service Quotas lists no "
        '"ml.g5.xlarge for endpoint usage")',
        "      fix: pulumi config set voicestack:instanceType <a GPU type offered there> --stack dev",
        "SKIP  endpoint quota: needs an instance type offered in the region",
    ]
    assert code == 1


def test_no_credentials_skips_the_aws_checks(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for variable in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent/credentials")
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent/config")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    sts = botocore.session.Session().create_client("sts", region_name=REGION)
    command = PreflightCommand(
        read=pulumi_cli(DEV_CONFIG), clients=lambda region, profile: lambda service: sts, run=tools()
    )
    code = main(["preflight", "--stack", "dev"], commands=[command])
    lines = capsys.readouterr().out.splitlines()
    assert lines[3:] == [
        "FAIL  credentials: no AWS credentials found",
        "      fix: aws configure, aws sso login, or export AWS_PROFILE=<profile> in the shell that runs pulumi",
        "SKIP  agentcore region: needs credentials",
        "SKIP  runtime name: needs credentials",
        "SKIP  kept memory: needs credentials",
        "SKIP  endpoint name: needs credentials",
        "SKIP  instance type: needs credentials",
        "SKIP  endpoint quota: needs credentials",
        "preflight: 1 of 10 checks failed (credentials), 6 skipped",
    ]
    assert code == 1


# --- the tools ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        (
            {"pulumi": completed(["pulumi"], out="v3.100.0\n")},
            [
                f"FAIL  pulumi cli: v3.100.0, older than the program's SDK {required_pulumi_cli()}",
                f"      fix: install the Pulumi CLI {required_pulumi_cli()} or later: https://www.pulumi.com/docs/install/",
            ],
        ),
        (
            {"aws": completed(["aws"], out="aws-cli/1.36.2 Python/3.12.1 Linux/6.8.0 botocore/1.35.2\n")},
            [
                "FAIL  aws cli: 1.36.2 is not the AWS CLI v2",
                "      fix: install or update the AWS CLI v2: "
                "https://docs.aws.amazon.com/cli/latest/userguide/getting-started-install.html",
            ],
        ),
        (
            {"skeleton": completed(SKELETON, 252, err="aws: error: argument command: Invalid choice")},
            [
                "FAIL  aws cli: 2.31.13 has no `aws bedrock-agentcore invoke-agent-runtime` "
                "(the stack's invokeCommand)",
                "      fix: install or update the AWS CLI v2: "
                "https://docs.aws.amazon.com/cli/latest/userguide/getting-started-install.html",
            ],
        ),
        (
            {"docker": None},
            [
                "FAIL  docker buildx: `docker` is not on the PATH",
                "      fix: install Docker with the buildx plugin: https://docs.docker.com/build/install-buildx/",
            ],
        ),
        (
            {"docker": completed(["docker"], 1, err="docker: 'buildx' is not a docker command.\nSee 'docker --help'")},
            [
                "FAIL  docker buildx: `docker buildx inspect` failed: docker: 'buildx' is not a docker command.",
                "      fix: install Docker with the buildx plugin: https://docs.docker.com/build/install-buildx/",
            ],
        ),
    ],
)
def test_each_missing_tool_says_what_to_install(
    capsys: pytest.CaptureFixture[str], account: Account, overrides: dict[str, Any], expected: list[str]
) -> None:
    code, lines, _ = preflight(capsys, ready(account), run=tools(**overrides))
    assert [line for line in lines if line.startswith(("FAIL", "      fix"))] == expected
    assert code == 1


# --- what cannot be checked: exit 2, naming the flag or key -----------------------------------------


def test_an_unknown_stack_is_exit_2_with_the_clis_message(capsys: pytest.CaptureFixture[str], account: Account) -> None:
    read = pulumi_cli({}, code=255, err="error: no stack named 'dev' found\n")
    command = PreflightCommand(read=read, clients=account.factory, run=tools())
    assert main(["preflight", "--stack", "dev"], commands=[command]) == 2
    captured = capsys.readouterr()
    assert (captured.out, captured.err) == (
        "",
        "voicestack preflight: --stack dev: `stack output --json` failed: error: no stack named 'dev' found\n",
    )


def test_without_the_pulumi_cli_the_stack_cannot_be_read(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    assert main(["preflight", "--stack", "dev"], commands=[PreflightCommand()]) == 2
    assert capsys.readouterr().err == (
        "voicestack preflight: the stack is read through the Pulumi CLI, which is not on the PATH: "
        "install it (https://www.pulumi.com/docs/install/)\n"
    )


def test_a_stack_without_a_region_is_exit_2(capsys: pytest.CaptureFixture[str], account: Account) -> None:
    config = {key: value for key, value in DEV_CONFIG.items() if key != "aws:region"}
    code, lines, err = preflight(capsys, account, config=config)
    assert (code, lines) == (2, [])
    assert err == (
        "voicestack preflight: stack 'dev' sets no aws:region: pulumi config set aws:region us-east-1 --stack dev\n"
    )


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("speechMode", "fast", "voicestack:speechMode must be one of stream, batch (got 'fast')"),
        ("memoryEventExpiryDays", "5", "voicestack:memoryEventExpiryDays must be an integer from 7 to 365 (got '5')"),
        (
            "memoryId",
            "voicestack_prod_memory-AbCdE12345",
            "voicestack:memoryId must be the id of this stack's memory, voicestack_dev_memory-<10 letters or digits> "
            "(got 'voicestack_prod_memory-AbCdE12345')",
        ),
    ],
)
def test_an_invalid_value_is_exit_2_naming_the_key(
    capsys: pytest.CaptureFixture[str], account: Account, key: str, value: str, message: str
) -> None:
    config = {**DEV_CONFIG, f"voicestack:{key}": {"value": value, "secret": False}}
    code, lines, err = preflight(capsys, account, config=config)
    assert (code, lines, err) == (2, [], f"voicestack preflight: stack 'dev': {message}\n")


def test_structured_and_boolean_values_reach_the_parser_as_the_cli_hands_them(
    capsys: pytest.CaptureFixture[str], account: Account
) -> None:
    config = {
        **DEV_CONFIG,
        "voicestack:tags": {"value": '{"team":"voice"}', "objectValue": {"team": "voice"}, "secret": False},
        "voicestack:retainStorage": {"value": "true", "objectValue": True, "secret": False},
    }
    code, lines, _ = preflight(capsys, ready(account), config=config)
    assert (code, lines[-1]) == (0, "preflight: all 12 checks passed")


FAKE_PULUMI = """#!/bin/sh
case "$1" in
  version) echo "v%(version)s" ;;
  stack) echo '{}' ;;
  config) echo '{"aws:region": {"value": "us-east-1", "secret": false}}' ;;
  *) echo "unexpected: $*" >&2; exit 9 ;;
esac
"""


def test_the_real_wiring_without_an_aws_account(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The defaults end to end: the Pulumi CLI as a process, the tools looked up on the PATH, boto3's own
    credential chain (empty here, so nothing is sent anywhere)."""
    pulumi = tmp_path / "pulumi"
    pulumi.write_text(FAKE_PULUMI % {"version": required_pulumi_cli()}, encoding="utf-8")
    pulumi.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    for variable in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "credentials"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "config"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    assert main(["preflight", "--stack", "dev"]) == 1
    assert capsys.readouterr().out.splitlines()[:8] == [
        f"PASS  pulumi cli: v{required_pulumi_cli()} (needs {required_pulumi_cli()} or later)",
        "FAIL  aws cli: `aws` is not on the PATH",
        "      fix: install or update the AWS CLI v2: "
        "https://docs.aws.amazon.com/cli/latest/userguide/getting-started-install.html",
        "FAIL  docker buildx: `docker` is not on the PATH",
        "      fix: install Docker with the buildx plugin: https://docs.docker.com/build/install-buildx/",
        "FAIL  credentials: no AWS credentials found",
        "      fix: aws configure, aws sso login, or export AWS_PROFILE=<profile> in the shell that runs pulumi",
        "SKIP  agentcore region: needs credentials",
    ]


def test_the_command_is_registered_on_the_console_command() -> None:
    parser = build_parser()
    args = parser.parse_args(["preflight", "--stack", "prod"])
    assert (args.command, args.stack) == ("preflight", "prod")


def test_the_stack_view_is_what_read_stack_returns() -> None:
    view = pulumi_cli(DEV_CONFIG, {"memoryId": "m"})("dev")
    assert view == StackView(
        name="dev",
        outputs={"memoryId": "m"},
        config={"aws:region": REGION, "voicestack:retainStorage": "false", "voicestack:instanceType": "ml.g5.xlarge",
                "voicestack:speechMode": "stream"},
    )  # fmt: skip


# --- a stack open to people (publicAccess) -------------------------------------------------------------

PUBLIC_CONFIG = {**DEV_CONFIG, "voicestack:publicAccess": {"value": "true", "secret": False}}
DERIVED_PREFIX = "voicestack-dev-" + hashlib.sha256(b"123456789012:us-east-1:voicestack:dev").hexdigest()[:10]


def public_ready(account: Account, domain: Mapping[str, Any] | None = None, prefix: str = DERIVED_PREFIX) -> Account:
    ready(account)
    account.stub("cognito-idp").add_response(
        "describe_user_pool_domain", {"DomainDescription": dict(domain or {})}, {"Domain": prefix}
    )
    return account


def test_a_public_stack_also_checks_the_public_runtime_and_the_sign_in_domain(
    capsys: pytest.CaptureFixture[str], account: Account
) -> None:
    code, lines, err = preflight(capsys, public_ready(account), config=PUBLIC_CONFIG)
    assert lines == [
        *READY[:6],
        "PASS  public runtime name: no runtime named voicestack_dev_public yet",
        READY[6],
        f"PASS  sign-in domain: {DERIVED_PREFIX}.auth.us-east-1.amazoncognito.com is free",
        *READY[7:],
        "preflight: all 14 checks passed",
    ]
    assert (code, err) == (0, "")


def test_a_taken_prefix_fails_with_the_key_to_set(capsys: pytest.CaptureFixture[str], account: Account) -> None:
    config = {**PUBLIC_CONFIG, "voicestack:signInDomainPrefix": {"value": "talk", "secret": False}}
    taken = {"UserPoolId": "us-east-1_SoMeOnE12", "AWSAccountId": "210987654321", "Domain": "talk", "Status": "ACTIVE"}
    code, lines, _ = preflight(capsys, public_ready(account, taken, prefix="talk"), config=config)
    assert lines[8:10] == [
        "FAIL  sign-in domain: the prefix talk is taken in us-east-1 (user pool us-east-1_SoMeOnE12, account "
        "210987654321)",
        "      fix: pulumi config set voicestack:signInDomainPrefix <another prefix> --stack dev",
    ]
    assert code == 1


def test_the_stacks_own_pool_and_public_runtime_are_not_conflicts(
    capsys: pytest.CaptureFixture[str], account: Account
) -> None:
    arn = f"arn:aws:bedrock-agentcore:{REGION}:{ACCOUNT}:runtime/voicestack_dev_public-Qr5tUv7wXy"
    own = {
        "agentRuntimeArn": arn,
        "agentRuntimeId": "voicestack_dev_public-Qr5tUv7wXy",
        "agentRuntimeVersion": "1",
        "agentRuntimeName": "voicestack_dev_public",
        "description": "voicestack",
        "lastUpdatedAt": "2026-11-30T10:00:00Z",
        "status": "READY",
    }
    ready(account, runtimes=[own])
    pool = {"UserPoolId": "us-east-1_OuRs12345", "AWSAccountId": ACCOUNT, "Domain": DERIVED_PREFIX}
    account.stub("cognito-idp").add_response(
        "describe_user_pool_domain", {"DomainDescription": pool}, {"Domain": DERIVED_PREFIX}
    )
    outputs = {"publicAgentRuntimeArn": arn, "userPoolId": "us-east-1_OuRs12345"}
    code, lines, _ = preflight(capsys, account, config=PUBLIC_CONFIG, outputs=outputs)
    assert lines[6] == "PASS  public runtime name: voicestack_dev_public is the stack's own runtime"
    assert lines[8] == f"PASS  sign-in domain: {DERIVED_PREFIX} is the stack's own (user pool us-east-1_OuRs12345)"
    assert code == 0


def test_a_region_without_cognito_fails_the_sign_in_domain(
    capsys: pytest.CaptureFixture[str], account: Account
) -> None:
    ready(account)
    cognito = account.client("cognito-idp")

    def unreachable(**_: Any) -> Any:
        raise EndpointConnectionError(endpoint_url=cognito.meta.endpoint_url)

    cognito.describe_user_pool_domain = unreachable
    code, lines, _ = preflight(capsys, account, config=PUBLIC_CONFIG)
    assert lines[8:10] == [
        "FAIL  sign-in domain: Cognito does not answer in us-east-1 (https://cognito-idp.us-east-1.amazonaws.com)",
        "      fix: pulumi config set aws:region <a region with Cognito and AgentCore> --stack dev",
    ]
    assert code == 1


def test_the_deployer_policies_allow_the_public_checks(capsys: pytest.CaptureFixture[str], account: Account) -> None:
    public_ready(account)
    called: list[str] = []
    account.client("cognito-idp").meta.events.register(
        "before-parameter-build", lambda model, **_: called.append(f"cognito-idp:{model.name}")
    )
    assert preflight(capsys, account, config=PUBLIC_CONFIG)[0] == 0
    statements = [
        statement
        for path in (REPO_ROOT / "infra" / "deployer-policy").glob("*.json")
        for statement in json.loads(path.read_text(encoding="utf-8"))["Statement"]
    ]
    assert called == ["cognito-idp:DescribeUserPoolDomain"]
    assert [s["Sid"] for s in statements if "cognito-idp:DescribeUserPoolDomain" in s["Action"]] == ["AccountWide"]
