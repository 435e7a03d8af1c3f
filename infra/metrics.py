"""The metrics the stack watches, as pure data: the containers' EMF contract, log metric filters, alarms.

Both containers print CloudWatch Embedded Metric Format (EMF) lines on stdout (speech_protocol/emf.py)
under the namespace in `VOICESTACK_METRICS_NAMESPACE`. Whether CloudWatch extracts EMF from the logs
SageMaker and AgentCore ship for a container is not documented for either service (AWS documents it
for Lambda, ECS/EKS with the CloudWatch agent, and PutLogEvents callers), so the stack does not rely
on it: a log metric filter per metric turns the same lines into metrics in a second namespace,
`<emf namespace>/logs`, and every alarm, the dashboard and session-based autoscaling read only that
one. If CloudWatch does extract EMF as well, the EMF namespace fills too and nothing counts twice,
because nothing reads it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final, Literal

import pulumi
import pulumi_aws as aws

Unit = Literal["Milliseconds", "Microseconds", "Count", "Percent", "None"]
Comparison = Literal["GreaterThanOrEqualToThreshold", "GreaterThanThreshold"]

NAMESPACE_ENV: Final = "VOICESTACK_METRICS_NAMESPACE"
"""The containers' namespace variable (speech_protocol.emf.NAMESPACE_ENV; a test keeps them equal)."""
SPEECH_SERVICE: Final = "speech"
AGENT_SERVICE: Final = "agent"
SAGEMAKER_NAMESPACE: Final = "AWS/SageMaker"
SAGEMAKER_INSTANCE_NAMESPACE: Final = "/aws/sagemaker/Endpoints"
AGENTCORE_NAMESPACE: Final = "AWS/Bedrock-AgentCore"
AGENTCORE_OPERATION: Final = "InvokeAgentRuntime"
ACTIVE_SESSIONS_METRIC: Final = "ActiveSessions"

# Thresholds: what a voice conversation can tolerate, not what the hardware can do.
TIME_TO_FIRST_AUDIO_P95_MS: Final = 2000.0
"""The caller hears the answer start within 2 s at p95 (LLM first sentence plus speech)."""
MODEL_LATENCY_P99_US: Final = 10_000_000.0
"""SageMaker ModelLatency is in microseconds: 10 s at p99."""
UTILIZATION_PERCENT: Final = 90.0


def metrics_namespace(project: str, stack: str) -> str:
    """The namespace the containers print EMF under: one per stack."""
    return f"{project}/{stack}"


def filter_namespace(emf_namespace: str) -> str:
    """The namespace the log metric filters publish to (see the module docstring)."""
    return f"{emf_namespace}/logs"


@dataclass(frozen=True)
class LogMetric:
    """One metric a container prints, and the log metric filter that publishes it."""

    service: str
    name: str
    unit: Unit
    extra_dimensions: tuple[str, ...] = ()

    @property
    def dimensions(self) -> tuple[str, ...]:
        return ("Service", *self.extra_dimensions)

    def filter_pattern(self) -> str:
        """Matches exactly the EMF lines of this service that carry this metric."""
        return f'{{ ($.Service = "{self.service}") && ($.{self.name} >= 0) }}'

    def transformation(self, namespace: str) -> aws.cloudwatch.LogMetricFilterMetricTransformationArgsDict:
        """The metric filter's transformation (PutMetricFilter `metricTransformations[0]`, snake_case)."""
        return {
            "name": self.name,
            "namespace": namespace,
            "value": f"$.{self.name}",
            "unit": self.unit,
            "dimensions": {dimension: f"$.{dimension}" for dimension in self.dimensions},
        }


SPEECH_METRICS: Final = (
    LogMetric(SPEECH_SERVICE, "TimeToFirstAudio", "Milliseconds"),
    LogMetric(SPEECH_SERVICE, "SynthesisRTF", "None"),
    LogMetric(SPEECH_SERVICE, "Cancels", "Count"),
    LogMetric(SPEECH_SERVICE, "Errors", "Count"),
    LogMetric(SPEECH_SERVICE, ACTIVE_SESSIONS_METRIC, "Count"),
    LogMetric(SPEECH_SERVICE, "QueuedRequests", "Count"),
)
AGENT_METRICS: Final = (
    LogMetric(AGENT_SERVICE, "TimeToFirstText", "Milliseconds"),
    LogMetric(AGENT_SERVICE, "TimeToFirstAudio", "Milliseconds"),
    LogMetric(AGENT_SERVICE, "Invocations", "Count", ("Outcome",)),
)


@dataclass(frozen=True)
class AlarmSpec:
    """One CloudWatch alarm on one metric (a statistic or a percentile), in PutMetricAlarm's terms."""

    key: str
    """Short, stable name part: the resource is `<component>-<key>`."""
    description: str
    namespace: str
    metric_name: str
    dimensions: Mapping[str, pulumi.Input[str]]
    """Values may be outputs (an endpoint's name, a runtime's ARN): the builders stay plain functions."""
    threshold: float
    statistic: str | None = None
    extended_statistic: str | None = None
    comparison: Comparison = "GreaterThanThreshold"
    period_s: int = 60
    evaluation_periods: int = 5
    datapoints_to_alarm: int = 3
    treat_missing_data: str = "notBreaching"


def endpoint_alarms(endpoint_name: pulumi.Input[str], variant_name: str) -> list[AlarmSpec]:
    """Alarms on what SageMaker reports about the speech endpoint (not the 5XX alarm: see `errors_alarm`)."""
    variant: dict[str, pulumi.Input[str]] = {"EndpointName": endpoint_name, "VariantName": variant_name}
    return [
        AlarmSpec(
            "model-latency-p99",
            "Speech endpoint ModelLatency p99 above 10 s",
            SAGEMAKER_NAMESPACE,
            "ModelLatency",
            variant,
            MODEL_LATENCY_P99_US,
            extended_statistic="p99",
        ),
        AlarmSpec(
            "memory",
            "Speech instances use more than 90 % of their memory",
            SAGEMAKER_INSTANCE_NAMESPACE,
            "MemoryUtilization",
            variant,
            UTILIZATION_PERCENT,
            statistic="Maximum",
        ),
        AlarmSpec(
            "gpu-memory",
            "Speech instances use more than 90 % of their GPU memory",
            SAGEMAKER_INSTANCE_NAMESPACE,
            "GPUMemoryUtilization",
            variant,
            UTILIZATION_PERCENT,
            statistic="Maximum",
        ),
    ]


def errors_alarm(endpoint_name: pulumi.Input[str], variant_name: str) -> AlarmSpec:
    """5XX answers of the speech endpoint; also the auto-rollback alarm of its blue/green deployments."""
    return AlarmSpec(
        "5xx",
        "Speech endpoint answers with 5XX errors",
        SAGEMAKER_NAMESPACE,
        "Invocation5XXErrors",
        {"EndpointName": endpoint_name, "VariantName": variant_name},
        0.0,
        statistic="Sum",
        evaluation_periods=3,
        datapoints_to_alarm=2,
    )


def runtime_alarms(runtime_arn: pulumi.Input[str], runtime_name: str, key: str = "agent") -> list[AlarmSpec]:
    """AgentCore's own errors and throttles for one runtime (dimension names: see infra/README.md); `key` starts
    the alarms' keys (`agent` for the IAM runtime, `public-agent` for the one people reach)."""
    dimensions: dict[str, pulumi.Input[str]] = {
        "Resource": runtime_arn,
        "Operation": AGENTCORE_OPERATION,
        "Name": f"{runtime_name}::DEFAULT",
    }
    return [
        AlarmSpec(
            f"{key}-system-errors",
            f"AgentCore runtime {runtime_name}: server-side errors",
            AGENTCORE_NAMESPACE,
            "SystemErrors",
            dimensions,
            0.0,
            statistic="Sum",
        ),
        AlarmSpec(
            f"{key}-throttles",
            f"AgentCore runtime {runtime_name} throttles invocations",
            AGENTCORE_NAMESPACE,
            "Throttles",
            dimensions,
            0.0,
            statistic="Sum",
        ),
    ]


def experience_alarms(namespace: str) -> list[AlarmSpec]:
    """What the caller hears: time to first audio p95, from the agent's own metric lines."""
    return [
        AlarmSpec(
            "time-to-first-audio-p95",
            "Callers wait more than 2 s for the first audio (p95)",
            namespace,
            "TimeToFirstAudio",
            {"Service": AGENT_SERVICE},
            TIME_TO_FIRST_AUDIO_P95_MS,
            extended_statistic="p95",
        ),
    ]


def dashboard_body(
    *,
    region: str,
    endpoint_name: str,
    variant_name: str,
    runtime_arn: str,
    runtime_name: str,
    namespace: str,
    other_runtimes: Sequence[tuple[str, str]] = (),
) -> dict[str, object]:
    """One CloudWatch dashboard of the series the alarms watch, plus the speech server's own gauges;
    `other_runtimes` ((ARN, name): the public runtime) join the runtime errors widget."""
    variant = ["EndpointName", endpoint_name, "VariantName", variant_name]

    def runtime_dimensions(arn: str, name: str) -> list[object]:
        return ["Resource", arn, "Operation", AGENTCORE_OPERATION, "Name", f"{name}::DEFAULT"]

    runtimes = [runtime_dimensions(runtime_arn, runtime_name)]
    runtimes += [runtime_dimensions(arn, name) for arn, name in other_runtimes]

    def widget(title: str, metrics: list[list[object]], stat: str, x: int, y: int) -> dict[str, object]:
        return {
            "type": "metric",
            "x": x,
            "y": y,
            "width": 12,
            "height": 6,
            "properties": {"title": title, "region": region, "stat": stat, "period": 60, "metrics": metrics},
        }

    return {
        "widgets": [
            widget(
                "Time to first audio p95 (ms)",
                [
                    [namespace, "TimeToFirstAudio", "Service", AGENT_SERVICE],
                    [namespace, "TimeToFirstAudio", "Service", SPEECH_SERVICE],
                    [namespace, "TimeToFirstText", "Service", AGENT_SERVICE],
                ],
                "p95",
                0,
                0,
            ),
            widget(
                "Speech sessions and queue",
                [
                    [namespace, ACTIVE_SESSIONS_METRIC, "Service", SPEECH_SERVICE],
                    [namespace, "QueuedRequests", "Service", SPEECH_SERVICE],
                ],
                "Maximum",
                12,
                0,
            ),
            widget(
                "Speech endpoint errors, cancels",
                [
                    [SAGEMAKER_NAMESPACE, "Invocation5XXErrors", *variant],
                    [namespace, "Errors", "Service", SPEECH_SERVICE],
                    [namespace, "Cancels", "Service", SPEECH_SERVICE],
                ],
                "Sum",
                0,
                6,
            ),
            widget("Speech ModelLatency p99 (us)", [[SAGEMAKER_NAMESPACE, "ModelLatency", *variant]], "p99", 12, 6),
            widget(
                "Speech instance memory and GPU (%)",
                [
                    [SAGEMAKER_INSTANCE_NAMESPACE, "MemoryUtilization", *variant],
                    [SAGEMAKER_INSTANCE_NAMESPACE, "GPUMemoryUtilization", *variant],
                    [SAGEMAKER_INSTANCE_NAMESPACE, "GPUUtilization", *variant],
                ],
                "Maximum",
                0,
                12,
            ),
            widget(
                "Agent runtime errors and throttles",
                [
                    [AGENTCORE_NAMESPACE, metric, *runtime]
                    for runtime in runtimes
                    for metric in ("SystemErrors", "UserErrors", "Throttles")
                ],
                "Sum",
                12,
                12,
            ),
            widget(
                "Speech synthesis real-time factor",
                [[namespace, "SynthesisRTF", "Service", SPEECH_SERVICE]],
                "p95",
                0,
                18,
            ),
        ]
    }


def dashboard_url(region: str, name: str) -> str:
    """The console address of a CloudWatch dashboard."""
    return f"https://{region}.console.aws.amazon.com/cloudwatch/home?region={region}#dashboards/dashboard/{name}"
