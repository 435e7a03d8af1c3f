"""Operating the stack under mocks: names that replacements need, default tags, log groups, metric filters,
alarms, the dashboard, conversation memory, and an instance type change with autoscaling on."""

import json
from typing import Any

import pytest

from infra.config import ConfigError
from infra.metrics import AGENT_METRICS, NAMESPACE_ENV, SPEECH_METRICS, filter_namespace
from speech_protocol import emf
from speech_protocol.emf import Metric, emf_record
from tests.infra.pulumi_harness import ProgramRun, RecordedResource, run_program

LOG_GROUP = "aws:cloudwatch/logGroup:LogGroup"
ADOPTED_LOG_GROUP = "pulumi-python:dynamic/voicestack:AdoptedLogGroup"
LOG_GROUP_SWEEP = "pulumi-python:dynamic/voicestack:LogGroupSweep"
ALARM = "aws:cloudwatch/metricAlarm:MetricAlarm"
FILTER = "aws:cloudwatch/logMetricFilter:LogMetricFilter"
MEMORY = "aws:bedrock/agentcoreMemory:AgentcoreMemory"
RUNTIME = "aws:bedrock/agentcoreAgentRuntime:AgentcoreAgentRuntime"
ENDPOINT = "aws:sagemaker/endpoint:Endpoint"
TARGET = "aws:appautoscaling/target:Target"
NAME_INPUTS = ("name", "agentRuntimeName", "dashboardName")


@pytest.fixture(scope="module")
def dev() -> ProgramRun:
    return run_program({})


@pytest.fixture(scope="module")
def ops() -> ProgramRun:
    return run_program(
        {
            "alarmEmail": "ops@example.com",
            "logRetentionDays": "90",
            "tags": '{"team": "voice"}',
            "retainStorage": "true",
        }
    )


def find(run: ProgramRun, type_: str, name: str) -> RecordedResource:
    matches = [r for r in run.resources if (r.type, r.name) == (type_, name)]
    assert len(matches) == 1, f"{type_} {name}"
    return matches[0]


def of_type(run: ProgramRun, type_: str) -> list[RecordedResource]:
    return [r for r in run.resources if r.type == type_]


def test_named_replaceable_resources_free_their_name_before_a_replacement(dev: ProgramRun) -> None:
    named = {r.name for r in dev.resources if r.type.startswith("aws:") and any(k in r.inputs for k in NAME_INPUTS)}
    # The runtime's log group is not among them: AgentCore names and creates it (AdoptedLogGroup takes it over).
    assert named == {
        "agent-memory",
        "agent-runtime",
        "speech-logs",
        "speech-endpoint",
        "monitoring-dashboard",
    }
    for resource in dev.resources:
        if resource.name in named - {"speech-endpoint"}:
            assert resource.delete_before_replace is True, resource.urn
    # The endpoint's name carries its instance type: a replacement has a new name, created before the old goes.
    endpoint = find(dev, ENDPOINT, "speech-endpoint")
    assert endpoint.delete_before_replace is False, endpoint.urn
    unnamed = [r for r in dev.resources if r.type.startswith("aws:") and r.name not in named]
    assert [r.urn for r in unnamed if r.delete_before_replace] == []


def test_an_instance_type_change_replaces_endpoint_and_scalable_target_instead_of_updating() -> None:
    before = run_program({"autoscalingEnabled": "true"})
    after = run_program({"autoscalingEnabled": "true", "instanceType": "ml.g6.xlarge"})
    assert find(before, ENDPOINT, "speech-endpoint").inputs["name"] == "voicestack-dev-speech-g5-xlarge"
    assert find(after, ENDPOINT, "speech-endpoint").inputs["name"] == "voicestack-dev-speech-g6-xlarge"
    # resourceId is a replace-only property of a scalable target: the old registration is removed with the old
    # endpoint instead of blocking an UpdateEndpoint that changes the instance type.
    assert find(after, TARGET, "speech-scaling-target").inputs["resourceId"] == (
        "endpoint/voicestack-dev-speech-g6-xlarge/variant/AllTraffic"
    )
    runtime = find(after, RUNTIME, "agent-runtime")
    assert runtime.inputs["environmentVariables"]["SPEECH_ENDPOINT_NAME"] == "voicestack-dev-speech-g6-xlarge"


def test_every_aws_resource_uses_the_provider_with_the_default_tags(ops: ProgramRun) -> None:
    [provider] = of_type(ops, "pulumi:providers:aws")
    assert json.loads(provider.inputs["defaultTags"]) == {
        "tags": {"project": "voicestack", "stack": "dev", "team": "voice"}
    }
    reference = f"{provider.urn}::aws-provider"  # the mock's id for the provider named "aws"
    for resource in ops.resources:
        if resource.type.startswith("aws:"):
            assert resource.provider == reference, resource.urn


def test_log_groups_are_the_ones_the_services_write_with_the_configured_retention(ops: ProgramRun) -> None:
    speech = find(ops, LOG_GROUP, "speech-logs")
    agent = find(ops, ADOPTED_LOG_GROUP, "agent-logs")
    runtime = find(ops, RUNTIME, "agent-runtime")
    endpoint = find(ops, ENDPOINT, "speech-endpoint")
    assert speech.inputs == {"name": "/aws/sagemaker/Endpoints/voicestack-dev-speech-g5-xlarge", "retentionInDays": 90}
    assert agent.inputs["name"] == f"/aws/bedrock-agentcore/runtimes/{runtime.outputs['agentRuntimeId']}-DEFAULT"
    assert agent.inputs["retentionInDays"] == 90, agent.urn
    assert agent.inputs["tags"] == {"project": "voicestack", "stack": "dev", "team": "voice"}, agent.urn
    # SageMaker would create its group (kept forever) as soon as the container starts: ours must exist first.
    assert speech.urn in endpoint.dependencies, endpoint.urn
    assert agent.property_dependencies["name"] == (runtime.urn,), agent.urn
    # Not retained with storage: logs go with the stack.
    assert (speech.retain_on_delete, agent.retain_on_delete) == (False, False)


# --- the runtime's log group (infra/runtime_logs.py) ------------------------------------------------


def test_the_runtime_log_group_is_taken_over_not_declared_as_a_log_group(dev: ProgramRun) -> None:
    # A plain LogGroup of that name fails the first `pulumi up` (AgentCore created it with the runtime).
    groups = [r.inputs.get("name", "") for r in dev.resources if r.type == "aws:cloudwatch/logGroup:LogGroup"]
    assert [name for name in groups if name.startswith("/aws/bedrock-agentcore/")] == []
    adopted = find(dev, ADOPTED_LOG_GROUP, "agent-logs")
    runtime = find(dev, RUNTIME, "agent-runtime")
    assert {key: value for key, value in adopted.inputs.items() if key != "__provider"} == {
        "name": f"/aws/bedrock-agentcore/runtimes/{runtime.outputs['agentRuntimeId']}-DEFAULT",
        "retentionInDays": 30,
        "tags": {"project": "voicestack", "stack": "dev"},
        "region": "us-east-1",
    }, adopted.urn


def test_destroy_deletes_the_group_then_the_runtime_then_sweeps_what_it_left(dev: ProgramRun) -> None:
    adopted = find(dev, ADOPTED_LOG_GROUP, "agent-logs")
    sweep = find(dev, LOG_GROUP_SWEEP, "agent-log-sweep")
    runtime = find(dev, RUNTIME, "agent-runtime")
    # Pulumi deletes dependents first: the adopted group (it depends on the runtime) goes before the runtime,
    # the sweep (the runtime depends on it) after it.
    assert adopted.property_dependencies["name"] == (runtime.urn,), adopted.urn
    assert sweep.urn in runtime.dependencies, runtime.urn
    assert sweep.dependencies == (), sweep.urn
    assert sweep.inputs["prefix"] == "/aws/bedrock-agentcore/runtimes/voicestack_dev_agent-", sweep.urn
    assert adopted.inputs["name"].startswith(sweep.inputs["prefix"]), adopted.urn
    # The runtime role writes exactly the groups the sweep removes.
    policy = find(dev, "aws:iam/rolePolicy:RolePolicy", "agent-role-policy")
    [writes] = [s for s in json.loads(policy.inputs["policy"])["Statement"] if s["Sid"] == "WriteLogs"]
    assert writes["Resource"] == [
        f"arn:aws:logs:us-east-1:123456789012:log-group:{sweep.inputs['prefix']}*:log-stream:*"
    ], policy.urn


def test_the_log_group_and_the_sweep_follow_the_stacks_profile() -> None:
    run = run_program({"aws:profile": "deployer"})
    assert find(run, ADOPTED_LOG_GROUP, "agent-logs").inputs["profile"] == "deployer"
    assert find(run, LOG_GROUP_SWEEP, "agent-log-sweep").inputs["profile"] == "deployer"
    [provider] = of_type(run, "pulumi:providers:aws")
    assert provider.inputs["profile"] == "deployer", provider.urn


def test_metric_filters_publish_every_container_metric_to_the_filter_namespace(dev: ProgramRun) -> None:
    filters = of_type(dev, FILTER)
    speech_group = find(dev, LOG_GROUP, "speech-logs")
    agent_group = find(dev, ADOPTED_LOG_GROUP, "agent-logs")
    by_name = {f.name: f for f in filters}
    assert len(filters) == len(SPEECH_METRICS) + len(AGENT_METRICS) == 9
    for metric in (*SPEECH_METRICS, *AGENT_METRICS):
        resource = by_name[f"monitoring-{metric.service}-{metric.name}"]
        group = speech_group if metric.service == "speech" else agent_group
        assert resource.inputs["logGroupName"] == group.inputs.get("name", group.outputs["name"]), resource.urn
        assert resource.inputs["metricTransformation"]["namespace"] == "voicestack/dev/logs", resource.urn
    invocations = by_name["monitoring-agent-Invocations"].inputs
    assert invocations["pattern"] == '{ ($.Service = "agent") && ($.Invocations >= 0) }'
    assert invocations["metricTransformation"] == {
        "name": "Invocations",
        "namespace": "voicestack/dev/logs",
        "value": "$.Invocations",
        "unit": "Count",
        "dimensions": {"Service": "$.Service", "Outcome": "$.Outcome"},
    }


def test_the_namespace_variable_is_the_shared_formatters() -> None:
    assert NAMESPACE_ENV == emf.NAMESPACE_ENV == "VOICESTACK_METRICS_NAMESPACE"


@pytest.mark.parametrize("metric", [*SPEECH_METRICS, *AGENT_METRICS], ids=lambda m: f"{m.service}-{m.name}")
def test_each_filter_reads_fields_the_shared_emf_formatter_writes(metric: Any) -> None:
    extra = {dimension: "ok" for dimension in metric.extra_dimensions}
    record = emf_record(
        "voicestack/dev", {"Service": metric.service, **extra}, [Metric(metric.name, 12.0, metric.unit)], 1
    )
    # The filter pattern's two conditions and every $.field it reads exist at the top level of the line.
    assert record["Service"] == metric.service
    assert record[metric.name] == 12.0
    for dimension in metric.dimensions:
        assert dimension in record, dimension
    cloudwatch = record["_aws"]["CloudWatchMetrics"][0]  # type: ignore[index]
    assert cloudwatch["Metrics"] == [{"Name": metric.name, "Unit": metric.unit}]


def test_alarms_watch_what_the_issue_names_and_notify_the_topic(ops: ProgramRun) -> None:
    topic = find(ops, "aws:sns/topic:Topic", "alerts-topic").outputs["arn"]
    alarms = {a.name: a.inputs for a in of_type(ops, ALARM)}
    assert {name: (a["namespace"], a["metricName"]) for name, a in alarms.items()} == {
        "speech-5xx": ("AWS/SageMaker", "Invocation5XXErrors"),
        "monitoring-model-latency-p99": ("AWS/SageMaker", "ModelLatency"),
        "monitoring-memory": ("/aws/sagemaker/Endpoints", "MemoryUtilization"),
        "monitoring-gpu-memory": ("/aws/sagemaker/Endpoints", "GPUMemoryUtilization"),
        "monitoring-agent-system-errors": ("AWS/Bedrock-AgentCore", "SystemErrors"),
        "monitoring-agent-throttles": ("AWS/Bedrock-AgentCore", "Throttles"),
        "monitoring-time-to-first-audio-p95": ("voicestack/dev/logs", "TimeToFirstAudio"),
    }
    for name, alarm in alarms.items():
        assert alarm["alarmActions"] == [topic], name
        assert alarm["okActions"] == [topic], name
    assert alarms["monitoring-model-latency-p99"]["extendedStatistic"] == "p99"
    assert alarms["monitoring-time-to-first-audio-p95"]["extendedStatistic"] == "p95"
    assert alarms["monitoring-time-to-first-audio-p95"]["dimensions"] == {"Service": "agent"}
    assert alarms["speech-5xx"]["dimensions"] == {
        "EndpointName": "voicestack-dev-speech-g5-xlarge",
        "VariantName": "AllTraffic",
    }


def test_the_5xx_alarm_rolls_back_a_blue_green_deployment(dev: ProgramRun) -> None:
    endpoint = find(dev, ENDPOINT, "speech-endpoint")
    alarm = find(dev, ALARM, "speech-5xx")
    assert endpoint.inputs["deploymentConfig"] == {
        "blueGreenUpdatePolicy": {
            "trafficRoutingConfiguration": {"type": "ALL_AT_ONCE", "waitIntervalInSeconds": 0},
            "terminationWaitInSeconds": 300,
            "maximumExecutionTimeoutInSeconds": 3600,
        },
        "autoRollbackConfiguration": {"alarms": [{"alarmName": alarm.outputs["name"]}]},
    }


def test_the_e_mail_subscription_exists_only_when_configured(dev: ProgramRun, ops: ProgramRun) -> None:
    assert of_type(dev, "aws:sns/topicSubscription:TopicSubscription") == []
    [subscription] = of_type(ops, "aws:sns/topicSubscription:TopicSubscription")
    topic = find(ops, "aws:sns/topic:Topic", "alerts-topic")
    assert subscription.inputs == {"topic": topic.outputs["arn"], "protocol": "email", "endpoint": "ops@example.com"}


def test_the_dashboard_shows_the_alarmed_series_from_the_filter_namespace(dev: ProgramRun) -> None:
    dashboard = find(dev, "aws:cloudwatch/dashboard:Dashboard", "monitoring-dashboard")
    assert dashboard.inputs["dashboardName"] == "voicestack-dev"
    body = json.loads(dashboard.inputs["dashboardBody"])
    series = {(row[0], row[1]) for widget in body["widgets"] for row in widget["properties"]["metrics"]}
    namespace = filter_namespace("voicestack/dev")
    assert {
        ("AWS/SageMaker", "Invocation5XXErrors"),
        ("AWS/SageMaker", "ModelLatency"),
        ("/aws/sagemaker/Endpoints", "MemoryUtilization"),
        ("/aws/sagemaker/Endpoints", "GPUMemoryUtilization"),
        ("AWS/Bedrock-AgentCore", "SystemErrors"),
        ("AWS/Bedrock-AgentCore", "Throttles"),
        (namespace, "TimeToFirstAudio"),
        (namespace, "ActiveSessions"),
    } <= series
    # Nothing reads the raw EMF namespace: if CloudWatch also extracts EMF, nothing counts twice.
    assert "voicestack/dev" not in {row[0] for row in series}
    assert {widget["properties"]["region"] for widget in body["widgets"]} == {"us-east-1"}


def test_the_memory_is_the_one_the_runtime_and_its_role_use(dev: ProgramRun, ops: ProgramRun) -> None:
    memory = find(dev, MEMORY, "agent-memory")
    memory_id = dev.outputs["memoryId"]
    assert memory.inputs == {
        "name": "voicestack_dev_memory",
        "description": "voicestack: conversation history of the voice agent",
        "eventExpiryDuration": 30,
    }
    runtime = find(dev, RUNTIME, "agent-runtime")
    assert runtime.inputs["environmentVariables"]["AGENTCORE_MEMORY_ID"] == memory_id
    policy = find(dev, "aws:iam/rolePolicy:RolePolicy", "agent-role-policy")
    [statement] = [s for s in json.loads(policy.inputs["policy"])["Statement"] if s["Sid"] == "UseConversationMemory"]
    assert statement["Resource"] == [f"arn:aws:bedrock-agentcore:us-east-1:123456789012:memory/{memory_id}"]
    assert (memory.retain_on_delete, find(ops, MEMORY, "agent-memory").retain_on_delete) == (False, True)


KEPT_MEMORY = "voicestack_dev_memory-AbCdE12345"


def test_a_stack_that_kept_its_memory_adopts_it_on_the_next_deploy() -> None:
    """After `pulumi destroy` with retainStorage, the memory (a fixed name AgentCore will not create twice) is
    still in the account: the next `pulumi up` imports it instead of creating a second one, so the runtime
    reads the same conversation history and its role may use that memory and no other."""
    run = run_program({"retainStorage": "true", "memoryId": KEPT_MEMORY})
    memory = find(run, MEMORY, "agent-memory")
    assert memory.import_id == KEPT_MEMORY, memory.urn
    # The same name: the provider replaces a memory whose name changes, which would delete the history.
    assert memory.inputs["name"] == "voicestack_dev_memory", memory.urn
    assert (memory.retain_on_delete, memory.delete_before_replace) == (True, True), memory.urn
    assert run.outputs["memoryId"] == KEPT_MEMORY
    runtime = find(run, RUNTIME, "agent-runtime")
    assert runtime.inputs["environmentVariables"]["AGENTCORE_MEMORY_ID"] == KEPT_MEMORY, runtime.urn
    policy = find(run, "aws:iam/rolePolicy:RolePolicy", "agent-role-policy")
    [statement] = [s for s in json.loads(policy.inputs["policy"])["Statement"] if s["Sid"] == "UseConversationMemory"]
    assert statement["Resource"] == [f"arn:aws:bedrock-agentcore:us-east-1:123456789012:memory/{KEPT_MEMORY}"]


def test_without_a_kept_memory_the_stack_creates_one(dev: ProgramRun) -> None:
    memory = find(dev, MEMORY, "agent-memory")
    assert memory.import_id == "", memory.urn
    assert dev.outputs["memoryId"] != KEPT_MEMORY


def test_only_this_stacks_memory_can_be_adopted() -> None:
    # Another stack's memory has another name: adopting it would replace (delete) it.
    with pytest.raises(ConfigError) as raised:
        run_program({"memoryId": "voicestack_prod_memory-AbCdE12345"})
    assert str(raised.value) == (
        "voicestack:memoryId must be the id of this stack's memory, voicestack_dev_memory-<10 letters or digits> "
        "(got 'voicestack_prod_memory-AbCdE12345')"
    )


def test_session_autoscaling_tracks_the_servers_own_gauge() -> None:
    run = run_program({"autoscalingEnabled": "true", "autoscalingMetric": "activeSessions"})
    policy = find(run, "aws:appautoscaling/policy:Policy", "speech-scaling-policy")
    assert policy.inputs["targetTrackingScalingPolicyConfiguration"]["customizedMetricSpecification"] == {
        "metricName": "ActiveSessions",
        "namespace": "voicestack/dev/logs",
        "dimensions": [{"name": "Service", "value": "speech"}],
        "statistic": "Average",
        "unit": "Count",
    }
    model = find(run, "aws:sagemaker/model:Model", "speech-model")
    assert model.inputs["primaryContainer"]["environment"]["VOICESTACK_METRICS_NAMESPACE"] == "voicestack/dev"
