"""Runs the real Pulumi program (infra.program.run) offline under mocks and records the resource graph.

Public API (stable; the policy-pack tests import it):

    record_program(config: Mapping[str, str], *, stack: str = "dev",
                   sink: list[RecordedResource] | None = None) -> list[RecordedResource]

`config` holds stack config as `pulumi config` stores it: values are strings ("true", "2"), keys
are namespaced ("voicestack:retainStorage", "aws:region"); a bare key ("retainStorage") means the
project namespace. Like the Pulumi CLI, the harness first applies every default that Pulumi.yaml
declares, then `config` on top. Two local inputs are stood in for, never fetched:

- `voicestack:weightsDir` unset or empty: it points at a tiny temporary directory holding every
  weight file name (a few bytes each); the program never downloads weights here.
- `images/kokoro/requirements.txt` missing: a temporary one pinning `torch==FALLBACK_TORCH_PIN`
  (`speech_requirements_path()` says which file the run reads).

Every registered resource (components included, the root stack excluded) is recorded in
registration order as a `RecordedResource`: type token, logical name, URN, inputs as the engine
receives them (camelCase keys, secrets unwrapped, assets as `pulumi.FileAsset`, numbers as floats),
parent URN, dependency URNs, per-property dependency URNs, the retain-on-delete and
delete-before-replace options, the provider reference, the outputs the mock gave it, and the import id. The
program's explicit AWS provider (default tags) is recorded too, as `pulumi:providers:aws`.

Invokes are answered for exactly the tokens in `OfflineAws.CALLS`; any other invoke, and any
resource type without a realistic mock, raises `UnmockedError` (a program change must extend the
mocks on purpose). Resources get the outputs AWS would give them: auto-names with a stable
suffix, ARNs in account 123456789012 (e.g. `arn:aws:sagemaker:us-east-1:123456789012:endpoint/<name>`).
A program error (e.g. `infra.config.ConfigError`) propagates; `sink`, if given, receives the
resources registered before it (none, for configuration errors).

`run_program` also returns the exported stack outputs, resolved to plain values, and the invokes made.
"""

from __future__ import annotations

import asyncio
import atexit
import hashlib
import tempfile
import threading
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import pulumi
from pulumi.runtime import mocks, rpc

from infra import program
from infra.config import config_values
from infra.config import declared_config as config_declared_in
from infra.weights import weight_files

PROJECT: Final = "voicestack"
ACCOUNT_ID: Final = "123456789012"
DEFAULT_REGION: Final = "us-east-1"
PARTITION: Final = "aws"
FALLBACK_TORCH_PIN: Final = "2.10.0"
PULUMI_YAML: Final = program.REPO_ROOT / "Pulumi.yaml"

Handler = Callable[["OfflineAws", mocks.MockResourceArgs], tuple[str, dict[str, Any]]]


class UnmockedError(LookupError):
    """The program made an invoke or declared a resource type that the harness does not mock."""


@dataclass(frozen=True)
class RecordedResource:
    """One resource registration, as the engine received it."""

    type: str
    name: str
    urn: str
    inputs: dict[str, Any]
    parent: str
    """URN of the parent: the root stack's for top-level components."""
    dependencies: tuple[str, ...]
    property_dependencies: dict[str, tuple[str, ...]]
    retain_on_delete: bool = False
    """The `retain_on_delete` resource option: `pulumi destroy` leaves the cloud resource in place."""
    delete_before_replace: bool = False
    """The `delete_before_replace` resource option."""
    provider: str = ""
    """The provider reference (`<provider URN>::<id>`); empty for components and default providers."""
    outputs: dict[str, Any] = field(default_factory=dict)
    """The state the mock gave the resource (physical names, ARNs), as the engine received it."""
    import_id: str = ""
    """The `import_` resource option: the id of an existing resource the engine adopts; empty: none."""


@dataclass(frozen=True)
class ProgramRun:
    """A whole run: the resources in registration order and the stack outputs by export name."""

    resources: list[RecordedResource]
    outputs: dict[str, Any]
    calls: list[str]
    """Invoke tokens in the order the program made them."""


def record_program(
    config: Mapping[str, str],
    *,
    stack: str = "dev",
    sink: list[RecordedResource] | None = None,
) -> list[RecordedResource]:
    """Runs infra.program.run under mocks with `config` (see the module docstring); returns the graph."""
    return run_program(config, stack=stack, sink=sink).resources


def run_program(
    config: Mapping[str, str],
    *,
    stack: str = "dev",
    sink: list[RecordedResource] | None = None,
) -> ProgramRun:
    """Like `record_program`, and also resolves every exported stack output."""
    full_config = stack_config(config)
    recorded = sink if sink is not None else []
    aws = OfflineAws(region=full_config.get("aws:region", DEFAULT_REGION))
    monitor = RecordingMonitor(aws, recorded)
    exported: dict[str, Any] = {}

    @pulumi.runtime.test  # type: ignore[untyped-decorator]
    def drive() -> pulumi.Output[None]:
        outputs = program.run(_sources(), download=_refuse_download)
        return pulumi.Output.all(**outputs.exported()).apply(exported.update)

    # Each run gets its own event loop and root stack: futures of an earlier run never leak into this one.
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    try:
        pulumi.runtime.reset_options(project=PROJECT, stack=stack)
        pulumi.runtime.set_all_config(full_config)
        # Mocks must be installed before any resource is constructed: the program runs only in drive().
        pulumi.runtime.set_mocks(monitor.mocks, project=PROJECT, stack=stack, preview=False, monitor=monitor)
        drive()
    except Exception as failure:
        # The caller gets this error; outputs that still hold it must not report it again when collected.
        loop.set_exception_handler(_unless_reported(failure))
        raise
    finally:
        _settle(loop)
        asyncio.set_event_loop(None)
        loop.close()
        monitor.close()
    return ProgramRun(resources=recorded, outputs=exported, calls=aws.calls)


def _unless_reported(failure: BaseException) -> Callable[[asyncio.AbstractEventLoop, dict[str, Any]], None]:
    def handle(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        if context.get("exception") is not failure:
            loop.default_exception_handler(context)

    return handle


def _settle(loop: asyncio.AbstractEventLoop) -> None:
    """After a failed run, let the registrations still in flight finish cancelling, quietly."""
    pending = asyncio.all_tasks(loop)
    for task in pending:
        task.cancel()
    if pending:
        loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))


def stack_config(config: Mapping[str, str]) -> dict[str, str]:
    """Pulumi.yaml's defaults, then `config` (bare keys in the project namespace), as the CLI merges them."""
    namespaced = {(key if ":" in key else f"{PROJECT}:{key}"): value for key, value in config.items()}
    merged = {f"{PROJECT}:{key}": value for key, value in config_values(PULUMI_YAML, PROJECT, namespaced).items()}
    merged.update({key: value for key, value in namespaced.items() if not key.startswith(f"{PROJECT}:")})
    if merged.get(f"{PROJECT}:weightsDir", "") == "":
        merged[f"{PROJECT}:weightsDir"] = str(tiny_weights_dir())
    return merged


def declared_config() -> dict[str, dict[str, Any]]:
    """The `config:` block of Pulumi.yaml (key -> {type, default, description})."""
    return config_declared_in(PULUMI_YAML)


def speech_requirements_path() -> Path:
    """The requirements file the run reads the torch pin from: the real one, or the stand-in."""
    real = program.REPO_ROOT / program.SPEECH_REQUIREMENTS
    if real.is_file():
        return real
    stand_in = _scratch() / "requirements.txt"
    stand_in.write_text(f"numpy>=2\ntorch=={FALLBACK_TORCH_PIN}\n", encoding="utf-8")
    return stand_in


def tiny_weights_dir() -> Path:
    """A directory with every weight file the program uploads, a few bytes each."""
    directory = _scratch() / "weights"
    for relative in weight_files():
        path = directory / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(f"stand-in for {relative}\n".encode())
    return directory


def _sources() -> program.SourceTree:
    return program.SourceTree(root=program.REPO_ROOT, speech_requirements=speech_requirements_path())


def _refuse_download() -> Path:
    raise AssertionError("the program tried to download weights during a test")


_SCRATCH: list[tempfile.TemporaryDirectory[str]] = []


def _scratch() -> Path:
    # One directory per process, removed when the interpreter exits.
    if not _SCRATCH:
        directory = tempfile.TemporaryDirectory(prefix="voicestack-infra-")
        atexit.register(directory.cleanup)
        _SCRATCH.append(directory)
    return Path(_SCRATCH[0].name)


class RecordingMonitor(mocks.MockMonitor):
    """The mock monitor, plus a record of each registration's parent, dependencies and options.

    The SDK calls the monitor on executor threads, and the mock monitor gives each such thread an event
    loop of its own (to deserialize) that nobody closes; this one creates those loops itself and
    `close()` closes them, so no unclosed loop or socket is left for the garbage collector to report.
    """

    def __init__(self, mocks_: OfflineAws, sink: list[RecordedResource]) -> None:
        super().__init__(mocks_)
        self._sink = sink
        self._thread = threading.local()
        self._loops: list[asyncio.AbstractEventLoop] = []
        self._lock = threading.Lock()

    def _own_thread_loop(self) -> None:
        if getattr(self._thread, "loop", None) is None:
            loop = asyncio.new_event_loop()
            asyncio.set_event_loop(loop)
            self._thread.loop = loop
            with self._lock:
                self._loops.append(loop)

    def close(self) -> None:
        with self._lock:
            loops, self._loops = self._loops, []
        for loop in loops:
            loop.close()

    def Invoke(self, request: Any) -> Any:
        self._own_thread_loop()
        return super().Invoke(request)  # type: ignore[no-untyped-call]

    def ReadResource(self, request: Any) -> Any:
        self._own_thread_loop()
        return super().ReadResource(request)  # type: ignore[no-untyped-call]

    def RegisterResource(self, request: Any) -> Any:
        self._own_thread_loop()
        response = super().RegisterResource(request)  # type: ignore[no-untyped-call]
        if request.type != "pulumi:pulumi:Stack":
            inputs, _ = rpc.deserialize_properties_unwrap_secrets(request.object)
            outputs, _ = rpc.deserialize_properties_unwrap_secrets(response.object)
            self._sink.append(
                RecordedResource(
                    type=request.type,
                    name=request.name,
                    urn=response.urn,
                    inputs=dict(inputs),
                    parent=request.parent,
                    dependencies=tuple(request.dependencies),
                    property_dependencies={
                        key: tuple(value.urns) for key, value in request.propertyDependencies.items()
                    },
                    retain_on_delete=bool(request.retainOnDelete),
                    delete_before_replace=bool(request.deleteBeforeReplace),
                    provider=request.provider,
                    outputs=dict(outputs),
                    import_id=request.importId,
                )
            )
        return response


def _suffix(name: str, length: int = 7) -> str:
    return hashlib.sha256(name.encode()).hexdigest()[:length]


def _auto_name(args: mocks.MockResourceArgs, key: str = "name") -> str:
    """What Pulumi's autonaming would pick (a stable suffix here), unless the program chose a name."""
    chosen = args.inputs.get(key)
    return chosen if isinstance(chosen, str) and chosen else f"{args.name}-{_suffix(args.name)}"


class OfflineAws(mocks.Mocks):
    """Answers the program's invokes and gives each resource the outputs AWS would (IDs, ARNs, names)."""

    CALLS: Final = (
        "aws:index/getCallerIdentity:getCallerIdentity",
        "aws:index/getPartition:getPartition",
        "aws:index/getRegion:getRegion",
        "aws:ecr/getAuthorizationToken:getAuthorizationToken",
    )

    def __init__(self, region: str) -> None:
        self.region = region
        self.calls: list[str] = []

    def arn(self, service: str, resource: str, *, region: bool = True, account: bool = True) -> str:
        return f"arn:{PARTITION}:{service}:{self.region if region else ''}:{ACCOUNT_ID if account else ''}:{resource}"

    def call(self, args: mocks.MockCallArgs) -> tuple[dict[str, Any], list[tuple[str, str]] | None]:
        self.calls.append(args.token)
        if args.token not in self.CALLS:
            raise UnmockedError(f"the program invoked {args.token!r}, which OfflineAws does not mock")
        return self.answer(args.token, args.args), []

    def answer(self, token: str, arguments: Mapping[str, Any]) -> dict[str, Any]:
        """What AWS answers to one of `CALLS`."""
        registry = f"{ACCOUNT_ID}.dkr.ecr.{self.region}.amazonaws.com"
        answers: dict[str, dict[str, Any]] = {
            "aws:index/getCallerIdentity:getCallerIdentity": {
                "accountId": ACCOUNT_ID,
                "arn": f"arn:{PARTITION}:iam::{ACCOUNT_ID}:user/deployer",
                "id": ACCOUNT_ID,
                "userId": "AIDAEXAMPLEDEPLOYER",
            },
            "aws:index/getPartition:getPartition": {
                "id": PARTITION,
                "partition": PARTITION,
                "dnsSuffix": "amazonaws.com",
                "reverseDnsPrefix": "com.amazonaws",
            },
            "aws:index/getRegion:getRegion": {
                "id": self.region,
                "name": self.region,
                "region": self.region,
                "endpoint": f"ec2.{self.region}.amazonaws.com",
                "description": self.region,
            },
            "aws:ecr/getAuthorizationToken:getAuthorizationToken": {
                "id": self.region,
                "registryId": arguments.get("registryId", ACCOUNT_ID),
                "authorizationToken": "QVdTOm1vY2stcGFzc3dvcmQ=",
                "userName": "AWS",
                "password": "mock-password",
                "proxyEndpoint": f"https://{registry}",
                "expiresAt": "2030-01-01T00:00:00Z",
            },
        }
        return answers[token]

    def new_resource(self, args: mocks.MockResourceArgs) -> tuple[str, dict[str, Any]]:
        if not args.custom:
            return "", {}  # component resources have no physical state
        handler = _RESOURCES.get(args.typ)
        if handler is None:
            raise UnmockedError(f"the program declared {args.typ!r} ({args.name}), which OfflineAws does not mock")
        return handler(self, args)


def _repository(aws: OfflineAws, args: mocks.MockResourceArgs) -> tuple[str, dict[str, Any]]:
    name = _auto_name(args).lower()
    return name, {
        **args.inputs,
        "name": name,
        "arn": aws.arn("ecr", f"repository/{name}"),
        "registryId": ACCOUNT_ID,
        "repositoryUrl": f"{ACCOUNT_ID}.dkr.ecr.{aws.region}.amazonaws.com/{name}",
    }


def _bucket(aws: OfflineAws, args: mocks.MockResourceArgs) -> tuple[str, dict[str, Any]]:
    bucket = _auto_name(args, "bucket").lower()
    return bucket, {
        **args.inputs,
        "bucket": bucket,
        "arn": f"arn:{PARTITION}:s3:::{bucket}",
        "bucketDomainName": f"{bucket}.s3.amazonaws.com",
        "bucketRegionalDomainName": f"{bucket}.s3.{aws.region}.amazonaws.com",
        "region": aws.region,
    }


def _bucket_setting(aws: OfflineAws, args: mocks.MockResourceArgs) -> tuple[str, dict[str, Any]]:
    return str(args.inputs["bucket"]), dict(args.inputs)


def _repository_setting(aws: OfflineAws, args: mocks.MockResourceArgs) -> tuple[str, dict[str, Any]]:
    return str(args.inputs["repository"]), {**args.inputs, "registryId": ACCOUNT_ID}


def _bucket_object(aws: OfflineAws, args: mocks.MockResourceArgs) -> tuple[str, dict[str, Any]]:
    key = str(args.inputs["key"])
    return key, {**args.inputs, "etag": _suffix(key, 32), "versionId": "null"}


def _image(aws: OfflineAws, args: mocks.MockResourceArgs) -> tuple[str, dict[str, Any]]:
    digest = "sha256:" + hashlib.sha256(repr(sorted(args.inputs.items())).encode()).hexdigest()
    tags = args.inputs.get("tags") or []
    ref = f"{tags[0]}@{digest}" if tags else digest
    return digest, {**args.inputs, "digest": digest, "ref": ref, "contextHash": _suffix(args.name, 64)}


def _role(aws: OfflineAws, args: mocks.MockResourceArgs) -> tuple[str, dict[str, Any]]:
    name = _auto_name(args)
    return name, {
        **args.inputs,
        "name": name,
        "arn": aws.arn("iam", f"role/{name}", region=False),
        "uniqueId": f"AROA{_suffix(name, 17).upper()}",
    }


def _role_policy(aws: OfflineAws, args: mocks.MockResourceArgs) -> tuple[str, dict[str, Any]]:
    name = _auto_name(args)
    return f"{args.inputs['role']}:{name}", {**args.inputs, "name": name}


def _sagemaker(kind: str) -> Handler:
    def handler(aws: OfflineAws, args: mocks.MockResourceArgs) -> tuple[str, dict[str, Any]]:
        name = _auto_name(args)
        # SageMaker lower-cases names in ARNs.
        return name, {**args.inputs, "name": name, "arn": aws.arn("sagemaker", f"{kind}/{name.lower()}")}

    return handler


def _scalable_target(aws: OfflineAws, args: mocks.MockResourceArgs) -> tuple[str, dict[str, Any]]:
    resource_id = str(args.inputs["resourceId"])
    arn = aws.arn("application-autoscaling", f"scalable-target/sgm{_suffix(resource_id, 20)}")
    return resource_id, {**args.inputs, "arn": arn}


def _scaling_policy(aws: OfflineAws, args: mocks.MockResourceArgs) -> tuple[str, dict[str, Any]]:
    name = _auto_name(args)
    arn = aws.arn(
        "autoscaling",
        f"scalingPolicy:{_suffix(name, 36)}:resource/sagemaker/{args.inputs['resourceId']}:policyName/{name}",
    )
    return name, {**args.inputs, "name": name, "arn": arn, "alarmArns": []}


def _agent_runtime(aws: OfflineAws, args: mocks.MockResourceArgs) -> tuple[str, dict[str, Any]]:
    runtime_id = f"{args.inputs['agentRuntimeName']}-{_suffix(args.name, 10)}"
    return runtime_id, {
        **args.inputs,
        "agentRuntimeId": runtime_id,
        "agentRuntimeArn": aws.arn("bedrock-agentcore", f"runtime/{runtime_id}"),
        "agentRuntimeVersion": "1",
    }


def _log_group(aws: OfflineAws, args: mocks.MockResourceArgs) -> tuple[str, dict[str, Any]]:
    name = _auto_name(args)
    return name, {**args.inputs, "name": name, "arn": aws.arn("logs", f"log-group:{name}")}


def _alarm(aws: OfflineAws, args: mocks.MockResourceArgs) -> tuple[str, dict[str, Any]]:
    name = _auto_name(args)
    return name, {**args.inputs, "name": name, "arn": aws.arn("cloudwatch", f"alarm:{name}")}


def _named_setting(key: str) -> Handler:
    def handler(aws: OfflineAws, args: mocks.MockResourceArgs) -> tuple[str, dict[str, Any]]:
        name = _auto_name(args, key)
        return name, {**args.inputs, key: name}

    return handler


def _dashboard(aws: OfflineAws, args: mocks.MockResourceArgs) -> tuple[str, dict[str, Any]]:
    name = str(args.inputs["dashboardName"])
    return name, {**args.inputs, "dashboardArn": f"arn:{PARTITION}:cloudwatch::{ACCOUNT_ID}:dashboard/{name}"}


def _topic(aws: OfflineAws, args: mocks.MockResourceArgs) -> tuple[str, dict[str, Any]]:
    name = _auto_name(args)
    arn = aws.arn("sns", name)
    return arn, {**args.inputs, "name": name, "arn": arn}


def _subscription(aws: OfflineAws, args: mocks.MockResourceArgs) -> tuple[str, dict[str, Any]]:
    arn = f"{args.inputs['topic']}:{_suffix(args.name, 36)}"
    return arn, {**args.inputs, "arn": arn}


def _memory(aws: OfflineAws, args: mocks.MockResourceArgs) -> tuple[str, dict[str, Any]]:
    # An imported memory keeps its id; a new one gets `<name>-<10 characters>` as AgentCore gives it.
    memory_id = args.resource_id or f"{args.inputs['name']}-{_suffix(args.name, 10)}"
    return memory_id, {**args.inputs, "arn": aws.arn("bedrock-agentcore", f"memory/{memory_id}")}


def _adopted_log_group(aws: OfflineAws, args: mocks.MockResourceArgs) -> tuple[str, dict[str, Any]]:
    # The dynamic provider returns its inputs as outputs; the id is the group's name.
    return str(args.inputs["name"]), dict(args.inputs)


def _log_group_sweep(aws: OfflineAws, args: mocks.MockResourceArgs) -> tuple[str, dict[str, Any]]:
    return str(args.inputs["prefix"]), dict(args.inputs)


def _user_pool(aws: OfflineAws, args: mocks.MockResourceArgs) -> tuple[str, dict[str, Any]]:
    # Cognito's pool ids are `<region>_<9 letters or digits>`.
    pool_id = f"{aws.region}_{_suffix(args.name, 9).upper()}"
    return pool_id, {
        **args.inputs,
        "name": _auto_name(args),
        "arn": aws.arn("cognito-idp", f"userpool/{pool_id}"),
        "endpoint": f"cognito-idp.{aws.region}.amazonaws.com/{pool_id}",
    }


def _user_pool_client(aws: OfflineAws, args: mocks.MockResourceArgs) -> tuple[str, dict[str, Any]]:
    # App client ids are 26 lower-case letters and digits; a public client has no secret.
    return _suffix(args.name, 26), {**args.inputs, "clientSecret": ""}


def _user_pool_domain(aws: OfflineAws, args: mocks.MockResourceArgs) -> tuple[str, dict[str, Any]]:
    domain = str(args.inputs["domain"])
    return domain, {**args.inputs, "cloudfrontDistribution": f"d{_suffix(domain, 13)}.cloudfront.net"}


def _branding(aws: OfflineAws, args: mocks.MockResourceArgs) -> tuple[str, dict[str, Any]]:
    branding_id = str(uuid.UUID(_suffix(args.name, 32)))
    return f"{args.inputs['userPoolId']},{branding_id}", {**args.inputs, "managedLoginBrandingId": branding_id}


def _cloudfront_id(name: str) -> str:
    # CloudFront ids: E followed by 13 upper-case letters and digits.
    return f"E{_suffix(name, 13).upper()}"


def _access_control(aws: OfflineAws, args: mocks.MockResourceArgs) -> tuple[str, dict[str, Any]]:
    return _cloudfront_id(args.name), {**args.inputs, "etag": "E2QWRUHEXAMPLE", "arn": ""}


def _headers_policy(aws: OfflineAws, args: mocks.MockResourceArgs) -> tuple[str, dict[str, Any]]:
    return str(uuid.UUID(_suffix(args.name, 32))), {**args.inputs, "etag": "E2QWRUHEXAMPLE"}


def _distribution(aws: OfflineAws, args: mocks.MockResourceArgs) -> tuple[str, dict[str, Any]]:
    distribution_id = _cloudfront_id(args.name)
    return distribution_id, {
        **args.inputs,
        "arn": f"arn:{PARTITION}:cloudfront::{ACCOUNT_ID}:distribution/{distribution_id}",
        "domainName": f"d{_suffix(args.name, 13)}.cloudfront.net",
        "hostedZoneId": "Z2FDTNDATAQYW2",
        "status": "Deployed",
        "etag": "E2QWRUHEXAMPLE",
        "callerReference": f"terraform-{_suffix(args.name, 20)}",
    }


def _provider(aws: OfflineAws, args: mocks.MockResourceArgs) -> tuple[str, dict[str, Any]]:
    return f"{args.name}-provider", dict(args.inputs)


_RESOURCES: Final[dict[str, Handler]] = {
    "pulumi:providers:aws": _provider,
    "aws:s3/bucketPolicy:BucketPolicy": _bucket_setting,
    "aws:cloudwatch/logGroup:LogGroup": _log_group,
    "aws:cloudwatch/metricAlarm:MetricAlarm": _alarm,
    "aws:cloudwatch/logMetricFilter:LogMetricFilter": _named_setting("name"),
    "aws:cloudwatch/dashboard:Dashboard": _dashboard,
    "aws:sns/topic:Topic": _topic,
    "aws:sns/topicSubscription:TopicSubscription": _subscription,
    "aws:bedrock/agentcoreMemory:AgentcoreMemory": _memory,
    "aws:ecr/repository:Repository": _repository,
    "aws:ecr/lifecyclePolicy:LifecyclePolicy": _repository_setting,
    "aws:s3/bucket:Bucket": _bucket,
    "aws:s3/bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration": _bucket_setting,
    "aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock": _bucket_setting,
    "aws:s3/bucketObjectv2:BucketObjectv2": _bucket_object,
    "docker-build:index:Image": _image,
    "aws:iam/role:Role": _role,
    "aws:iam/rolePolicy:RolePolicy": _role_policy,
    "aws:sagemaker/model:Model": _sagemaker("model"),
    "aws:sagemaker/endpointConfiguration:EndpointConfiguration": _sagemaker("endpoint-config"),
    "aws:sagemaker/endpoint:Endpoint": _sagemaker("endpoint"),
    "aws:appautoscaling/target:Target": _scalable_target,
    "aws:appautoscaling/policy:Policy": _scaling_policy,
    "aws:bedrock/agentcoreAgentRuntime:AgentcoreAgentRuntime": _agent_runtime,
    "pulumi-python:dynamic/voicestack:AdoptedLogGroup": _adopted_log_group,
    "pulumi-python:dynamic/voicestack:LogGroupSweep": _log_group_sweep,
    "aws:s3/bucketOwnershipControls:BucketOwnershipControls": _bucket_setting,
    "aws:cognito/userPool:UserPool": _user_pool,
    "aws:cognito/userPoolClient:UserPoolClient": _user_pool_client,
    "aws:cognito/userPoolDomain:UserPoolDomain": _user_pool_domain,
    "aws:cognito/managedLoginBranding:ManagedLoginBranding": _branding,
    "aws:cloudfront/originAccessControl:OriginAccessControl": _access_control,
    "aws:cloudfront/responseHeadersPolicy:ResponseHeadersPolicy": _headers_policy,
    "aws:cloudfront/distribution:Distribution": _distribution,
}
