"""The speech endpoint: a SageMaker model serving Kokoro-82M over bidirectional streaming.

The model mounts the weight prefix uncompressed at /opt/ml/model and runs the speech image with
network isolation (weights come from S3; the container never needs the internet). An endpoint
configuration picks the GPU instance type and the start-up timeouts; the endpoint's name is fixed
up front so that its execution role can be scoped to its log group. Optional target tracking
scales on concurrent requests per instance, which counts a stream until its last byte is sent, or
on the speech server's own gauge of open sessions (`ActiveSessions`, from its metric log lines).

Updates are blue/green, all at once: SageMaker starts a whole new fleet, shifts traffic, and keeps
the old fleet until the termination wait is over, rolling back if the 5XX alarm fires. That needs
instance quota for twice the fleet during an update (infra/README.md). A rolling update would need
less, but SageMaker requires its batch to be 5-50 % of the fleet, which no batch of a 1-instance
endpoint can be. The log group SageMaker writes to is created first, with the stack's retention.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Final

import pulumi
import pulumi_aws as aws

from infra.aws_context import AwsContext
from infra.config import AutoscalingConfig
from infra.iam import sagemaker_log_group, sagemaker_trust_policy, speech_execution_policy
from infra.metrics import (
    ACTIVE_SESSIONS_METRIC,
    NAMESPACE_ENV,
    SAGEMAKER_INSTANCE_NAMESPACE,
    SPEECH_SERVICE,
    errors_alarm,
    filter_namespace,
)
from infra.monitoring import metric_alarm
from kokoro_server.settings import SAGEMAKER_MODEL_DIR, env_var

VARIANT_NAME: Final = "AllTraffic"
INFERENCE_AMI_VERSION: Final = "al2-ami-sagemaker-inference-gpu-3-1"
"""NVIDIA driver 550 (CUDA 12.4). Without it ml.g5 hosts default to driver 470 (CUDA 11.4), on which
the speech image's PyTorch (CUDA 12.8 wheels, images/kokoro/Dockerfile) cannot initialise the GPU."""
SCALABLE_DIMENSION: Final = "sagemaker:variant:DesiredInstanceCount"
CONCURRENCY_METRIC: Final = "SageMakerVariantConcurrentRequestsPerModelHighResolution"
SCALE_OUT_COOLDOWN_S: Final = 60
SCALE_IN_COOLDOWN_S: Final = 600
"""Scale in slowly: a GPU instance takes minutes to start and load the model."""
TERMINATION_WAIT_S: Final = 300
"""The old fleet stays (and takes traffic back on rollback) 5 minutes after the shift."""
BLUE_GREEN_TIMEOUT_S: Final = 3600
"""Starting a GPU fleet and loading the model fits in an hour with room to spare."""


def container_environment(metrics_namespace: str) -> dict[str, str]:
    """Environment of the speech container (kokoro_server.settings): the real model, on the GPU, from the
    weights SageMaker mounts; never the Hugging Face hub (the model runs with network isolation)."""
    return {
        env_var("model_dir"): str(SAGEMAKER_MODEL_DIR),
        env_var("engine"): "kokoro",
        # "cuda", not "auto": a GPU endpoint whose container cannot see the GPU must fail its health check,
        # not serve at CPU speed.
        env_var("device"): "cuda",
        "HF_HUB_OFFLINE": "1",
        NAMESPACE_ENV: metrics_namespace,
    }


def deployment_config(rollback_alarm_name: pulumi.Input[str]) -> aws.sagemaker.EndpointDeploymentConfigArgsDict:
    """Blue/green, all at once, with automatic rollback on the endpoint's 5XX alarm (see module docstring)."""
    return {
        "blue_green_update_policy": {
            "traffic_routing_configuration": {"type": "ALL_AT_ONCE", "wait_interval_in_seconds": 0},
            "termination_wait_in_seconds": TERMINATION_WAIT_S,
            "maximum_execution_timeout_in_seconds": BLUE_GREEN_TIMEOUT_S,
        },
        "auto_rollback_configuration": {"alarms": [{"alarm_name": rollback_alarm_name}]},
    }


def target_tracking(
    settings: AutoscalingConfig, metrics_namespace: str
) -> aws.appautoscaling.PolicyTargetTrackingScalingPolicyConfigurationArgsDict:
    """The scaling policy's target tracking: SageMaker's concurrency, or the server's open sessions."""
    if settings.metric == "concurrentRequests":
        return {
            "target_value": float(settings.target_concurrency),
            "predefined_metric_specification": {"predefined_metric_type": CONCURRENCY_METRIC},
            "scale_out_cooldown": SCALE_OUT_COOLDOWN_S,
            "scale_in_cooldown": SCALE_IN_COOLDOWN_S,
        }
    # Each instance prints its own gauge every 10 s under one dimension set, so the average over the
    # data points of a minute is the mean number of open sessions per instance.
    return {
        "target_value": float(settings.target_sessions),
        "customized_metric_specification": {
            "metric_name": ACTIVE_SESSIONS_METRIC,
            "namespace": filter_namespace(metrics_namespace),
            "dimensions": [{"name": "Service", "value": SPEECH_SERVICE}],
            "statistic": "Average",
            "unit": "Count",
        },
        "scale_out_cooldown": SCALE_OUT_COOLDOWN_S,
        "scale_in_cooldown": SCALE_IN_COOLDOWN_S,
    }


def scalable_resource_id(endpoint_name: str, variant_name: str = VARIANT_NAME) -> str:
    """Application Auto Scaling's id for an endpoint variant."""
    return f"endpoint/{endpoint_name}/variant/{variant_name}"


@dataclass(frozen=True)
class SpeechEndpointArgs:
    """Everything the endpoint needs: image, weights, sizing, scaling and where it lives."""

    endpoint_name: str
    image_uri: pulumi.Input[str]
    repository_arn: pulumi.Input[str]
    bucket_name: pulumi.Input[str]
    weights_prefix: str
    weights_s3_uri: pulumi.Input[str]
    instance_type: str
    instance_count: int
    health_check_timeout_s: int
    model_download_timeout_s: int
    autoscaling: AutoscalingConfig | None
    aws: AwsContext
    metrics_namespace: str
    log_retention_days: int
    alarm_topic_arn: pulumi.Input[str]


class SpeechEndpoint(pulumi.ComponentResource):
    """Execution role, model, endpoint configuration, endpoint and (optionally) autoscaling."""

    role: aws.iam.Role
    role_policy: aws.iam.RolePolicy
    model: aws.sagemaker.Model
    endpoint_config: aws.sagemaker.EndpointConfiguration
    endpoint: aws.sagemaker.Endpoint
    scaling_target: aws.appautoscaling.Target | None
    scaling_policy: aws.appautoscaling.Policy | None
    log_group: aws.cloudwatch.LogGroup
    errors_alarm: aws.cloudwatch.MetricAlarm
    endpoint_name: pulumi.Output[str]
    endpoint_arn: pulumi.Output[str]

    def __init__(self, name: str, args: SpeechEndpointArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("voicestack:index:SpeechEndpoint", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)

        self.role = aws.iam.Role(
            f"{name}-role",
            description="SageMaker execution role of the voicestack speech endpoint",
            assume_role_policy=json.dumps(sagemaker_trust_policy()),
            opts=child,
        )

        # Named from the endpoint's name (a plain string), so the endpoint's rollback can refer to it. Created
        # before the role's policy, which lets SageMaker read it (deployment guardrails use the execution role).
        self.errors_alarm = metric_alarm(
            name, errors_alarm(args.endpoint_name, VARIANT_NAME), args.alarm_topic_arn, child
        )

        policy = pulumi.Output.all(
            args.aws.scope(), args.bucket_name, args.repository_arn, self.errors_alarm.name
        ).apply(
            lambda values: json.dumps(
                speech_execution_policy(
                    values[0],
                    bucket_name=values[1],
                    weights_prefix=args.weights_prefix,
                    repository_arn=values[2],
                    endpoint_name=args.endpoint_name,
                    instance_metrics_namespace=SAGEMAKER_INSTANCE_NAMESPACE,
                    rollback_alarm_names=[values[3]],
                )
            )
        )
        self.role_policy = aws.iam.RolePolicy(
            f"{name}-role-policy",
            role=self.role.id,
            policy=policy,
            opts=child,
        )

        self.model = aws.sagemaker.Model(
            f"{name}-model",
            execution_role_arn=self.role.arn,
            enable_network_isolation=True,
            primary_container={
                "image": args.image_uri,
                "mode": "SingleModel",
                "environment": container_environment(args.metrics_namespace),
                "model_data_source": {
                    "s3_data_sources": [
                        {"s3_uri": args.weights_s3_uri, "s3_data_type": "S3Prefix", "compression_type": "None"}
                    ]
                },
            },
            # SageMaker uses the role as soon as the model exists (image and weights are checked), and the
            # permissions live in a separate RolePolicy that nothing here reads an output of.
            opts=pulumi.ResourceOptions(parent=self, depends_on=[self.role_policy]),
        )

        self.endpoint_config = aws.sagemaker.EndpointConfiguration(
            f"{name}-config",
            production_variants=[
                {
                    "variant_name": VARIANT_NAME,
                    "model_name": self.model.name,
                    "instance_type": args.instance_type,
                    "initial_instance_count": args.instance_count,
                    "container_startup_health_check_timeout_in_seconds": args.health_check_timeout_s,
                    "model_data_download_timeout_in_seconds": args.model_download_timeout_s,
                    "inference_ami_version": INFERENCE_AMI_VERSION,
                }
            ],
            opts=child,
        )

        # SageMaker writes the container's stdout here; created first so that retention applies from the start
        # (SageMaker would otherwise create it, kept forever). Its name is fixed: free it before a replacement.
        self.log_group = aws.cloudwatch.LogGroup(
            f"{name}-logs",
            name=sagemaker_log_group(args.endpoint_name),
            retention_in_days=args.log_retention_days,
            opts=pulumi.ResourceOptions(parent=self, delete_before_replace=True),
        )
        # The endpoint's name carries the instance type (infra/naming.py): a type change creates a new
        # endpoint before deleting the old one, so no delete_before_replace here.
        self.endpoint = aws.sagemaker.Endpoint(
            f"{name}-endpoint",
            name=args.endpoint_name,
            endpoint_config_name=self.endpoint_config.name,
            deployment_config=deployment_config(self.errors_alarm.name),
            opts=pulumi.ResourceOptions(parent=self, depends_on=[self.log_group]),
        )
        self.endpoint_name = self.endpoint.name
        self.endpoint_arn = self.endpoint.arn

        self.scaling_target = None
        self.scaling_policy = None
        if args.autoscaling is not None:
            self._autoscale(name, args.autoscaling, args.metrics_namespace)

        self.register_outputs({"endpoint_name": self.endpoint_name, "endpoint_arn": self.endpoint_arn})

    def _autoscale(self, name: str, settings: AutoscalingConfig, metrics_namespace: str) -> None:
        child = pulumi.ResourceOptions(parent=self)
        self.scaling_target = aws.appautoscaling.Target(
            f"{name}-scaling-target",
            service_namespace="sagemaker",
            scalable_dimension=SCALABLE_DIMENSION,
            resource_id=self.endpoint.name.apply(scalable_resource_id),
            min_capacity=settings.min_capacity,
            max_capacity=settings.max_capacity,
            opts=child,
        )
        self.scaling_policy = aws.appautoscaling.Policy(
            f"{name}-scaling-policy",
            policy_type="TargetTrackingScaling",
            service_namespace=self.scaling_target.service_namespace,
            scalable_dimension=self.scaling_target.scalable_dimension,
            resource_id=self.scaling_target.resource_id,
            target_tracking_scaling_policy_configuration=target_tracking(settings, metrics_namespace),
            opts=child,
        )
