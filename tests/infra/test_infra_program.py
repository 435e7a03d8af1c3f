"""The whole program under Pulumi mocks: which resources exist, how they depend on one another, and
the inputs that matter (failure messages carry the URN of the resource concerned)."""

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest
from pulumi.runtime.mocks import MockCallArgs

from infra.images import torch_version
from infra.program import REPO_ROOT
from infra.speech import container_environment
from infra.weights import file_sha256, weight_files, weights_prefix
from tests.infra.pulumi_harness import (
    ACCOUNT_ID,
    OfflineAws,
    ProgramRun,
    RecordedResource,
    UnmockedError,
    record_program,
    run_program,
    speech_requirements_path,
    tiny_weights_dir,
)

ENDPOINT = "aws:sagemaker/endpoint:Endpoint"
RUNTIME = "aws:bedrock/agentcoreAgentRuntime:AgentcoreAgentRuntime"
MODEL = "aws:sagemaker/model:Model"
IMAGE = "docker-build:index:Image"
OBJECT = "aws:s3/bucketObjectv2:BucketObjectv2"
ROLE_POLICY = "aws:iam/rolePolicy:RolePolicy"
LOG_GROUP = "aws:cloudwatch/logGroup:LogGroup"
ALARM = "aws:cloudwatch/metricAlarm:MetricAlarm"
FILTER = "aws:cloudwatch/logMetricFilter:LogMetricFilter"
ADOPTED_LOG_GROUP = "pulumi-python:dynamic/voicestack:AdoptedLogGroup"
LOG_GROUP_SWEEP = "pulumi-python:dynamic/voicestack:LogGroupSweep"
SPEECH_METRIC_NAMES = ("TimeToFirstAudio", "SynthesisRTF", "Cancels", "Errors", "ActiveSessions", "QueuedRequests")
DEV_ENDPOINT = "voicestack-dev-speech-g5-xlarge"
SCALING = {
    ("aws:appautoscaling/target:Target", "speech-scaling-target"),
    ("aws:appautoscaling/policy:Policy", "speech-scaling-policy"),
}

EXPECTED = {
    ("voicestack:index:Storage", "storage"),
    ("aws:ecr/repository:Repository", "storage-images"),
    ("aws:ecr/lifecyclePolicy:LifecyclePolicy", "storage-images-lifecycle"),
    ("aws:s3/bucket:Bucket", "storage-weights"),
    (
        "aws:s3/bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration",
        "storage-weights-encryption",
    ),
    ("aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock", "storage-weights-public-access"),
    ("voicestack:index:WeightCache", "weights"),
    (OBJECT, "weights-config.json"),
    (OBJECT, "weights-kokoro-v1_0.pth"),
    (OBJECT, "weights-voices-af_heart.pt"),
    (OBJECT, "weights-voices-af_bella.pt"),
    (OBJECT, "weights-voices-am_michael.pt"),
    (OBJECT, "weights-voices-bf_emma.pt"),
    ("voicestack:index:Images", "images"),
    (IMAGE, "images-speech"),
    (IMAGE, "images-agent"),
    ("voicestack:index:SpeechEndpoint", "speech"),
    ("aws:iam/role:Role", "speech-role"),
    (ROLE_POLICY, "speech-role-policy"),
    (MODEL, "speech-model"),
    ("aws:sagemaker/endpointConfiguration:EndpointConfiguration", "speech-config"),
    (ENDPOINT, "speech-endpoint"),
    ("voicestack:index:AgentRuntime", "agent"),
    ("aws:iam/role:Role", "agent-role"),
    (ROLE_POLICY, "agent-role-policy"),
    (RUNTIME, "agent-runtime"),
    ("pulumi:providers:aws", "aws"),
    ("aws:s3/bucketPolicy:BucketPolicy", "storage-weights-tls-only"),
    ("voicestack:index:Alerts", "alerts"),
    ("aws:sns/topic:Topic", "alerts-topic"),
    (LOG_GROUP, "speech-logs"),
    (ALARM, "speech-5xx"),
    ("aws:bedrock/agentcoreMemory:AgentcoreMemory", "agent-memory"),
    (ADOPTED_LOG_GROUP, "agent-logs"),
    (LOG_GROUP_SWEEP, "agent-log-sweep"),
    ("voicestack:index:Monitoring", "monitoring"),
    *((FILTER, f"monitoring-speech-{name}") for name in SPEECH_METRIC_NAMES),
    *((FILTER, f"monitoring-agent-{name}") for name in ("TimeToFirstText", "TimeToFirstAudio", "Invocations")),
    *(
        (ALARM, f"monitoring-{key}")
        for key in (
            "model-latency-p99",
            "memory",
            "gpu-memory",
            "agent-system-errors",
            "agent-throttles",
            "time-to-first-audio-p95",
        )
    ),
    ("aws:cloudwatch/dashboard:Dashboard", "monitoring-dashboard"),
}


@pytest.fixture(scope="module")
def dev() -> ProgramRun:
    return run_program({})


@pytest.fixture(scope="module")
def production() -> ProgramRun:
    return run_program(
        {
            "retainStorage": "true",
            "autoscalingEnabled": "true",
            "autoscalingMaxCapacity": "3",
            "speechVoice": "bf_emma",
        },
        stack="prod",
    )


def find(resources: Iterable[RecordedResource], type_: str, name: str) -> RecordedResource:
    matches = [resource for resource in resources if (resource.type, resource.name) == (type_, name)]
    assert len(matches) == 1, f"{type_} {name}: {len(matches)} registered"
    return matches[0]


def depends_on(resources: list[RecordedResource], dependent: RecordedResource, target: RecordedResource) -> bool:
    by_urn = {resource.urn: resource for resource in resources}
    seen: set[str] = set()
    pending = list(dependent.dependencies)
    while pending:
        urn = pending.pop()
        if urn == target.urn:
            return True
        if urn not in seen:
            seen.add(urn)
            pending.extend(by_urn[urn].dependencies)
    return False


def test_the_dev_stack_declares_exactly_these_resources(dev: ProgramRun) -> None:
    assert {(resource.type, resource.name) for resource in dev.resources} == EXPECTED
    assert len(dev.resources) == len(EXPECTED)


def test_children_are_parented_and_named_after_their_component(dev: ProgramRun) -> None:
    components = {resource.urn: resource for resource in dev.resources if resource.type.startswith("voicestack:")}
    for resource in dev.resources:
        if resource.urn in components or resource.type.startswith("pulumi:providers:"):
            assert resource.parent.endswith("::pulumi:pulumi:Stack::voicestack-dev"), resource.urn
        else:
            assert resource.parent in components, resource.urn
            assert resource.name.startswith(f"{components[resource.parent].name}-"), resource.urn


def test_the_program_makes_exactly_the_mocked_invokes(dev: ProgramRun) -> None:
    assert sorted(set(dev.calls)) == sorted(OfflineAws.CALLS)


def test_unmocked_invokes_and_resource_types_fail_loudly(monkeypatch: pytest.MonkeyPatch) -> None:
    aws = OfflineAws("us-east-1")
    with pytest.raises(UnmockedError, match="getAvailabilityZones"):
        aws.call(MockCallArgs("aws:index/getAvailabilityZones:getAvailabilityZones", {}, ""))
    monkeypatch.setattr(OfflineAws, "CALLS", OfflineAws.CALLS[:-1])
    with pytest.raises(UnmockedError) as raised:
        record_program({})
    assert str(raised.value) == (
        "the program invoked 'aws:ecr/getAuthorizationToken:getAuthorizationToken', which OfflineAws does not mock"
    )


def test_the_runtime_depends_on_the_endpoint(dev: ProgramRun) -> None:
    runtime = find(dev.resources, RUNTIME, "agent-runtime")
    endpoint = find(dev.resources, ENDPOINT, "speech-endpoint")
    assert depends_on(dev.resources, runtime, endpoint), runtime.urn
    memory = find(dev.resources, "aws:bedrock/agentcoreMemory:AgentcoreMemory", "agent-memory")
    assert set(runtime.property_dependencies["environmentVariables"]) == {endpoint.urn, memory.urn}, runtime.urn
    assert not depends_on(dev.resources, endpoint, runtime), endpoint.urn


def test_the_runtime_environment_is_exactly_the_agent_contract(dev: ProgramRun, production: ProgramRun) -> None:
    runtime = find(dev.resources, RUNTIME, "agent-runtime")
    assert runtime.inputs["environmentVariables"] == {
        "SPEECH_TRANSPORT": "sagemaker",
        "SPEECH_ENDPOINT_NAME": DEV_ENDPOINT,
        "SPEECH_MODE": "stream",
        "AWS_REGION": "us-east-1",
        "BEDROCK_MODEL_ID": "us.anthropic.claude-haiku-4-5-20251001-v1:0",
        "AGENTCORE_MEMORY_ID": dev.outputs["memoryId"],
        "VOICESTACK_METRICS_NAMESPACE": "voicestack/dev",
        "AGENT_AUTH": "iam",
    }, runtime.urn
    assert dev.outputs["memoryId"].startswith("voicestack_dev_memory-")
    prod_runtime = find(production.resources, RUNTIME, "agent-runtime")
    assert prod_runtime.inputs["environmentVariables"]["SPEECH_VOICE"] == "bf_emma", prod_runtime.urn
    assert prod_runtime.inputs["environmentVariables"]["SPEECH_ENDPOINT_NAME"] == "voicestack-prod-speech-g5-xlarge"


def test_the_runtime_is_named_and_runs_the_agent_image_by_digest(dev: ProgramRun) -> None:
    runtime = find(dev.resources, RUNTIME, "agent-runtime")
    assert runtime.inputs["agentRuntimeName"] == "voicestack_dev_agent", runtime.urn
    assert (
        runtime.inputs["agentRuntimeArtifact"]["containerConfiguration"]["containerUri"]
        == (dev.outputs["agentImageUri"])
    ), runtime.urn
    assert dev.outputs["agentImageUri"].startswith(f"{dev.outputs['imageRepositoryUrl']}@sha256:")
    assert runtime.inputs["networkConfiguration"] == {"networkMode": "PUBLIC"}, runtime.urn
    policy = find(dev.resources, ROLE_POLICY, "agent-role-policy")
    assert policy.urn in runtime.dependencies, runtime.urn


def test_the_invoke_permission_names_exactly_the_endpoint_arn(dev: ProgramRun) -> None:
    policy = find(dev.resources, ROLE_POLICY, "agent-role-policy")
    statements = json.loads(policy.inputs["policy"])["Statement"]
    invoke = [entry for entry in statements if "sagemaker:InvokeEndpointWithBidirectionalStream" in entry["Action"]]
    expected_arn = f"arn:aws:sagemaker:us-east-1:{ACCOUNT_ID}:endpoint/{DEV_ENDPOINT}"
    assert invoke == [
        {
            "Sid": "StreamToSpeechEndpoint",
            "Effect": "Allow",
            "Action": ["sagemaker:InvokeEndpointWithBidirectionalStream"],
            "Resource": [expected_arn],
        }
    ], policy.urn
    assert dev.outputs["speechEndpointArn"] == expected_arn
    endpoint = find(dev.resources, ENDPOINT, "speech-endpoint")
    assert endpoint.urn in policy.property_dependencies["policy"], policy.urn


def test_images_platforms_labels_context_and_registry(dev: ProgramRun) -> None:
    speech = find(dev.resources, IMAGE, "images-speech")
    agent = find(dev.resources, IMAGE, "images-agent")
    pin = torch_version(speech_requirements_path().read_text(encoding="utf-8"))
    assert speech.inputs["platforms"] == ["linux/amd64"], speech.urn
    assert agent.inputs["platforms"] == ["linux/arm64"], agent.urn
    assert speech.inputs["labels"] == {
        "com.amazonaws.sagemaker.capabilities.bidirectional-streaming": "true",
        "voicestack.torch-version": pin,
    }, speech.urn
    assert "labels" not in agent.inputs, agent.urn
    repository = dev.outputs["imageRepositoryUrl"]
    for image, dockerfile, tag in (
        (speech, "images/kokoro/Dockerfile", "speech"),
        (agent, "agent_app/Dockerfile", "agent"),
    ):
        # Docker v2 manifests: SageMaker CreateModel rejects OCI ones, which push=True leaves to BuildKit.
        assert image.inputs["push"] is False, image.urn
        assert image.inputs["exports"] == [{"registry": {"ociMediaTypes": False, "push": True}}], image.urn
        assert (Path.cwd() / image.inputs["context"]["location"]).resolve() == REPO_ROOT, image.urn
        assert (Path.cwd() / image.inputs["dockerfile"]["location"]).resolve() == REPO_ROOT / dockerfile, image.urn
        assert image.inputs["tags"] == [f"{repository}:{tag}"], image.urn
        assert image.inputs["registries"] == [
            {"address": repository.split("/")[0], "username": "AWS", "password": "mock-password"}
        ], image.urn


def test_the_model_mounts_the_prefix_the_weights_were_uploaded_to(dev: ProgramRun) -> None:
    model = find(dev.resources, MODEL, "speech-model")
    container = model.inputs["primaryContainer"]
    bucket = dev.outputs["weightsBucket"]
    prefix = weights_prefix()
    assert container["modelDataSource"] == {
        "s3DataSources": [{"s3Uri": f"s3://{bucket}/{prefix}/", "s3DataType": "S3Prefix", "compressionType": "None"}]
    }, model.urn
    assert container["environment"] == container_environment("voicestack/dev"), model.urn
    assert container["image"] == dev.outputs["speechImageUri"], model.urn
    assert model.inputs["enableNetworkIsolation"] is True, model.urn
    objects = [resource for resource in dev.resources if resource.type == OBJECT]
    assert sorted(obj.inputs["key"] for obj in objects) == sorted(f"{prefix}/{name}" for name in weight_files())
    for obj in objects:
        assert obj.inputs["bucket"] == bucket, obj.urn
        # The model waits for every upload: SageMaker copies the prefix when the endpoint starts.
        assert obj.urn in model.dependencies, model.urn


def test_weights_are_uploaded_from_the_directory_with_their_content_hash(dev: ProgramRun) -> None:
    source = tiny_weights_dir()
    for relative in weight_files():
        obj = find(dev.resources, OBJECT, f"weights-{relative.replace('/', '-')}")
        assert obj.inputs["source"].path == str(source / relative), obj.urn
        assert obj.inputs["sourceHash"] == file_sha256(source / relative), obj.urn


def test_a_changed_file_changes_only_its_own_object(tmp_path: Path, dev: ProgramRun) -> None:
    for relative in weight_files():
        (tmp_path / relative).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / relative).write_bytes((tiny_weights_dir() / relative).read_bytes())
    (tmp_path / "voices" / "bf_emma.pt").write_bytes(b"retrained")
    changed = record_program({"weightsDir": str(tmp_path)})
    before = {r.name: r.inputs["sourceHash"] for r in dev.resources if r.type == OBJECT}
    after = {r.name: r.inputs["sourceHash"] for r in changed if r.type == OBJECT}
    assert {name for name in before if before[name] != after[name]} == {"weights-voices-bf_emma.pt"}


def test_endpoint_configuration_sizes_and_timeouts(dev: ProgramRun) -> None:
    config = find(dev.resources, "aws:sagemaker/endpointConfiguration:EndpointConfiguration", "speech-config")
    model = find(dev.resources, MODEL, "speech-model")
    [recorded] = config.inputs["productionVariants"]
    variant = dict(recorded)
    # The model is auto-named (<logical name>-<suffix>), so that a changed model is created before the old one goes.
    assert re.fullmatch(r"speech-model-[0-9a-f]{7}", variant.pop("modelName")), config.urn
    assert variant == {
        "variantName": "AllTraffic",
        "instanceType": "ml.g5.xlarge",
        "initialInstanceCount": 1,
        "containerStartupHealthCheckTimeoutInSeconds": 600,
        "modelDataDownloadTimeoutInSeconds": 600,
        "inferenceAmiVersion": "al2-ami-sagemaker-inference-gpu-3-1",
    }, config.urn
    assert config.property_dependencies["productionVariants"] == (model.urn,), config.urn
    endpoint = find(dev.resources, ENDPOINT, "speech-endpoint")
    assert endpoint.inputs["name"] == DEV_ENDPOINT, endpoint.urn
    assert endpoint.property_dependencies["endpointConfigName"] == (config.urn,), endpoint.urn


def test_the_speech_role_reads_only_its_prefix(dev: ProgramRun) -> None:
    policy = find(dev.resources, ROLE_POLICY, "speech-role-policy")
    statements = {entry["Sid"]: entry for entry in json.loads(policy.inputs["policy"])["Statement"]}
    bucket = dev.outputs["weightsBucket"]
    assert statements["ReadWeights"]["Resource"] == [f"arn:aws:s3:::{bucket}/{weights_prefix()}/*"], policy.urn
    assert statements["PullImage"]["Resource"] == [
        f"arn:aws:ecr:us-east-1:{ACCOUNT_ID}:repository/{dev.outputs['imageRepositoryUrl'].split('/')[-1]}"
    ], policy.urn
    model = find(dev.resources, MODEL, "speech-model")
    assert policy.urn in model.dependencies, model.urn


def test_the_speech_role_may_read_its_rollback_alarm_and_publish_instance_metrics(dev: ProgramRun) -> None:
    policy = find(dev.resources, ROLE_POLICY, "speech-role-policy")
    alarm = find(dev.resources, ALARM, "speech-5xx")
    statements = {entry["Sid"]: entry for entry in json.loads(policy.inputs["policy"])["Statement"]}
    assert statements["ReadRollbackAlarms"]["Resource"] == [
        f"arn:aws:cloudwatch:us-east-1:{ACCOUNT_ID}:alarm:{alarm.outputs['name']}"
    ], policy.urn
    assert alarm.urn in policy.property_dependencies["policy"], policy.urn
    assert statements["PublishInstanceMetrics"]["Condition"] == {
        "StringEquals": {"cloudwatch:namespace": "/aws/sagemaker/Endpoints"}
    }, policy.urn
    # The alarms on those metrics read the same namespace.
    memory_alarm = find(dev.resources, ALARM, "monitoring-memory")
    assert memory_alarm.inputs["namespace"] == "/aws/sagemaker/Endpoints", memory_alarm.urn


@pytest.mark.parametrize(("run", "retained"), [("dev", False), ("production", True)])
def test_retain_storage_flips_force_destroy_and_force_delete(
    run: str, retained: bool, request: pytest.FixtureRequest
) -> None:
    resources: list[RecordedResource] = request.getfixturevalue(run).resources
    bucket = find(resources, "aws:s3/bucket:Bucket", "storage-weights")
    repository = find(resources, "aws:ecr/repository:Repository", "storage-images")
    assert bucket.inputs["forceDestroy"] is (not retained), bucket.urn
    assert repository.inputs["forceDelete"] is (not retained), repository.urn
    memory = find(resources, "aws:bedrock/agentcoreMemory:AgentcoreMemory", "agent-memory")
    kept = [
        r
        for r in resources
        if r.parent.endswith(("$voicestack:index:Storage::storage", "WeightCache::weights", "Images::images"))
    ] + [memory]
    # Repository, its lifecycle rule, bucket and its 3 settings, 6 weight objects, 2 images, the memory.
    assert len(kept) == 15
    for resource in kept:
        assert resource.retain_on_delete is retained, resource.urn
    for resource in resources:
        if resource not in kept:
            assert resource.retain_on_delete is False, resource.urn


@pytest.mark.parametrize(("run", "retained"), [("dev", False), ("production", True)])
def test_retained_storage_keeps_the_pushed_images(run: str, retained: bool, request: pytest.FixtureRequest) -> None:
    # docker-build deletes every manifest it pushed when an Image is deleted: a retained repository would be
    # left with no image in it.
    resources: list[RecordedResource] = request.getfixturevalue(run).resources
    for name in ("images-speech", "images-agent"):
        image = find(resources, IMAGE, name)
        assert image.retain_on_delete is retained, image.urn


def test_storage_is_private_encrypted_and_scanned(dev: ProgramRun) -> None:
    block = find(
        dev.resources, "aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock", "storage-weights-public-access"
    )
    assert {key: block.inputs[key] for key in block.inputs if key != "bucket"} == {
        "blockPublicAcls": True,
        "blockPublicPolicy": True,
        "ignorePublicAcls": True,
        "restrictPublicBuckets": True,
    }, block.urn
    encryption = find(
        dev.resources,
        "aws:s3/bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration",
        "storage-weights-encryption",
    )
    assert encryption.inputs["rules"] == [{"applyServerSideEncryptionByDefault": {"sseAlgorithm": "AES256"}}], (
        encryption.urn
    )
    repository = find(dev.resources, "aws:ecr/repository:Repository", "storage-images")
    assert repository.inputs["imageScanningConfiguration"] == {"scanOnPush": True}, repository.urn
    lifecycle = find(dev.resources, "aws:ecr/lifecyclePolicy:LifecyclePolicy", "storage-images-lifecycle")
    rules = json.loads(lifecycle.inputs["policy"])["rules"]
    assert [rule["selection"]["tagStatus"] for rule in rules] == ["untagged"], lifecycle.urn
    assert lifecycle.property_dependencies["repository"] == (repository.urn,), lifecycle.urn


def test_autoscaling_is_absent_unless_enabled(dev: ProgramRun, production: ProgramRun) -> None:
    dev_types = {(resource.type, resource.name) for resource in dev.resources}
    assert dev_types & SCALING == set()
    assert {(resource.type, resource.name) for resource in production.resources} == EXPECTED | SCALING


def test_autoscaling_tracks_concurrency_on_the_endpoint_variant(production: ProgramRun) -> None:
    target = find(production.resources, "aws:appautoscaling/target:Target", "speech-scaling-target")
    policy = find(production.resources, "aws:appautoscaling/policy:Policy", "speech-scaling-policy")
    endpoint = find(production.resources, ENDPOINT, "speech-endpoint")
    assert target.inputs == {
        "serviceNamespace": "sagemaker",
        "scalableDimension": "sagemaker:variant:DesiredInstanceCount",
        "resourceId": "endpoint/voicestack-prod-speech-g5-xlarge/variant/AllTraffic",
        "minCapacity": 1,
        "maxCapacity": 3,
    }, target.urn
    assert endpoint.urn in target.dependencies, target.urn
    assert policy.inputs["policyType"] == "TargetTrackingScaling", policy.urn
    assert policy.inputs["resourceId"] == target.inputs["resourceId"], policy.urn
    assert policy.inputs["targetTrackingScalingPolicyConfiguration"] == {
        "targetValue": 4,
        "predefinedMetricSpecification": {
            "predefinedMetricType": "SageMakerVariantConcurrentRequestsPerModelHighResolution"
        },
        "scaleOutCooldown": 60,
        "scaleInCooldown": 600,
    }, policy.urn


def test_stack_outputs(dev: ProgramRun) -> None:
    outputs: dict[str, Any] = dev.outputs
    runtime_arn = outputs["agentRuntimeArn"]
    assert runtime_arn.startswith(f"arn:aws:bedrock-agentcore:us-east-1:{ACCOUNT_ID}:runtime/voicestack_dev_agent-")
    assert outputs["speechEndpointName"] == DEV_ENDPOINT
    assert outputs["agentRuntimeName"] == "voicestack_dev_agent"
    assert outputs["weightsPrefix"] == weights_prefix()
    assert outputs["weightsS3Uri"] == f"s3://{outputs['weightsBucket']}/{weights_prefix()}/"
    assert outputs["region"] == "us-east-1"
    assert outputs["speechImageUri"].startswith(f"{outputs['imageRepositoryUrl']}@sha256:")
    assert outputs["invokeCommand"].startswith(
        f"aws bedrock-agentcore invoke-agent-runtime --region us-east-1 --agent-runtime-arn {runtime_arn} "
    )
    assert set(outputs) == {
        "speechEndpointName",
        "speechEndpointArn",
        "agentRuntimeName",
        "agentRuntimeArn",
        "imageRepositoryUrl",
        "speechImageUri",
        "agentImageUri",
        "weightsBucket",
        "weightsPrefix",
        "weightsS3Uri",
        "region",
        "invokeCommand",
        "memoryId",
        "dashboardUrl",
        "alarmTopicArn",
    }
    assert outputs["dashboardUrl"] == (
        "https://us-east-1.console.aws.amazon.com/cloudwatch/home?region=us-east-1#dashboards/dashboard/voicestack-dev"
    )
    assert re.fullmatch(rf"arn:aws:sns:us-east-1:{ACCOUNT_ID}:alerts-topic-[0-9a-f]{{7}}", outputs["alarmTopicArn"])


def test_the_region_follows_the_provider(dev: ProgramRun) -> None:
    frankfurt = run_program({"aws:region": "eu-central-1"})
    assert frankfurt.outputs["region"] == "eu-central-1"
    runtime = find(frankfurt.resources, RUNTIME, "agent-runtime")
    assert runtime.inputs["environmentVariables"]["AWS_REGION"] == "eu-central-1", runtime.urn
    assert frankfurt.outputs["speechEndpointArn"].startswith("arn:aws:sagemaker:eu-central-1:")


def test_the_entry_point_needs_no_pythonpath() -> None:
    """Run infra/ as Pulumi does (runpy on the directory, cwd infra/, no PYTHONPATH): every import resolves
    and the program gets as far as reading its configuration, which no engine provides here."""
    environment = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    completed = subprocess.run(
        [sys.executable, "-c", "import runpy; runpy.run_path('.', run_name='__main__')"],
        cwd=REPO_ROOT / "infra",
        env=environment,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert completed.returncode == 1, completed.stderr
    assert completed.stderr.rstrip().splitlines()[-1] == (
        "infra.config.ConfigError: project:retainStorage is not set; Pulumi.yaml declares it with a default "
        "(Pulumi CLI >= 3.44)"
    ), completed.stderr
