"""The API requests AWS receives for the recorded graph, checked against botocore's service models.

`requests_for(resource, default_tags)` translates one recorded resource (its inputs as the engine got
them, plus the physical names the mock gave it) into the API calls the AWS provider makes to create
it, in the API's own member names: SageMaker CreateModel/CreateEndpointConfig/CreateEndpoint,
bedrock-agentcore-control CreateAgentRuntime/CreateMemory, ECR, S3, IAM, Application Auto Scaling,
CloudWatch PutMetricAlarm/PutDashboard, Logs CreateLogGroup/PutRetentionPolicy/PutMetricFilter, SNS.
Every input key must be translated (or listed as provider-only): a new input fails until it is.

`validate(request)` runs botocore's `ParamValidator` (unknown keys, missing required members, types,
minimums) and then what that validator leaves out: enum values, maximum lengths and values, and
patterns, walking the operation's input shape.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any, Final

import botocore.session  # type: ignore[import-untyped]
import regex  # type: ignore[import-untyped]
from botocore.model import ListShape, MapShape, OperationModel, Shape, StructureShape  # type: ignore[import-untyped]
from botocore.validate import ParamValidator  # type: ignore[import-untyped]

from tests.infra.pulumi_harness import RecordedResource


@dataclass(frozen=True)
class ApiRequest:
    """One API call: service (botocore's name), operation, parameters."""

    service: str
    operation: str
    params: dict[str, Any]
    source: str
    """The URN of the resource the call creates or configures."""


class UntranslatedInput(KeyError):
    """A resource input that the translation does not know: extend the translator on purpose."""


PROVIDER_ONLY: Final = {
    # Inputs the provider acts on itself, never sent in a create call.
    "aws:ecr/repository:Repository": {"forceDelete"},
    "aws:s3/bucket:Bucket": {"forceDestroy"},
    "aws:s3/bucketObjectv2:BucketObjectv2": {"source", "sourceHash"},
}


@cache
def operation_model(service: str, operation: str) -> OperationModel:
    return botocore.session.get_session().get_service_model(service).operation_model(operation)


def validate(request: ApiRequest) -> list[str]:
    """Everything wrong with the request per the service model (empty when AWS would accept its shape)."""
    model = operation_model(request.service, request.operation)
    problems: list[str] = []
    report = ParamValidator().validate(request.params, model.input_shape)
    if report.has_errors():
        problems.extend(line.strip() for line in report.generate_report().splitlines() if line.strip())
    _check(model.input_shape, request.params, request.operation, problems)
    return problems


def _check(shape: Shape, value: Any, path: str, problems: list[str]) -> None:
    meta = shape.metadata
    if isinstance(shape, StructureShape) and isinstance(value, Mapping):
        for key, member in value.items():
            if key in shape.members:
                _check(shape.members[key], member, f"{path}.{key}", problems)
        return
    if isinstance(shape, ListShape) and isinstance(value, list):
        if "max" in meta and len(value) > meta["max"]:
            problems.append(f"{path}: {len(value)} items, at most {meta['max']}")
        for index, item in enumerate(value):
            _check(shape.member, item, f"{path}[{index}]", problems)
        return
    if isinstance(shape, MapShape) and isinstance(value, Mapping):
        if "max" in meta and len(value) > meta["max"]:
            problems.append(f"{path}: {len(value)} entries, at most {meta['max']}")
        for key, item in value.items():
            _check(shape.key, key, f"{path} key {key!r}", problems)
            _check(shape.value, item, f"{path}[{key!r}]", problems)
        return
    if shape.type_name == "string" and isinstance(value, str):
        enum = getattr(shape, "enum", None)
        if enum and value not in enum:
            problems.append(f"{path}: {value!r} is not one of {', '.join(enum)}")
        if "max" in meta and len(value) > meta["max"]:
            problems.append(f"{path}: {len(value)} characters, at most {meta['max']}")
        pattern = meta.get("pattern")
        if pattern is not None and _pattern(pattern).fullmatch(value) is None:
            problems.append(f"{path}: {value!r} does not match {pattern}")
        return
    if shape.type_name in ("integer", "long", "double", "float") and isinstance(value, int | float):
        if "max" in meta and value > meta["max"]:
            problems.append(f"{path}: {value} above the maximum {meta['max']}")
        if "min" in meta and value < meta["min"]:
            problems.append(f"{path}: {value} below the minimum {meta['min']}")


@cache
def _pattern(pattern: str) -> regex.Pattern[str]:
    # botocore's patterns are Java regular expressions with Unicode classes (\p{L}, \p{Alnum}); the `regex`
    # module reads those, `re` does not. A pattern it cannot compile fails the test, never skips it.
    # Java writes the supplementary planes as a UTF-16 surrogate range; Python needs the code points.
    return regex.compile(pattern.replace(r"\uD800\uDC00-\uDBFF\uDFFF", r"\U00010000-\U0010FFFF"))


# --- translation ----------------------------------------------------------------------------------


class _Inputs:
    """Takes inputs one by one; `rest()` lists those nobody took."""

    def __init__(self, resource: RecordedResource) -> None:
        self._left = dict(resource.inputs)
        for key in PROVIDER_ONLY.get(resource.type, ()):
            self._left.pop(key, None)
        self.outputs = resource.outputs
        self.urn = resource.urn

    def take(self, key: str, default: Any = None) -> Any:
        return self._left.pop(key, default)

    def rest(self) -> None:
        if self._left:
            raise UntranslatedInput(f"{self.urn}: inputs {sorted(self._left)} are not translated to an API request")


def _int(value: Any) -> int:
    # The engine carries numbers as floats; AWS's integer members need ints.
    return int(value)


def _tag_list(tags: Mapping[str, str], key: str = "Key", value: str = "Value") -> list[dict[str, str]]:
    return [{key: k, value: v} for k, v in sorted(tags.items())]


def _drop_none(params: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in params.items() if value is not None}


Translator = Callable[[_Inputs, dict[str, str]], list[tuple[str, str, dict[str, Any]]]]


def _repository(i: _Inputs, tags: dict[str, str]) -> list[tuple[str, str, dict[str, Any]]]:
    encryption = i.take("encryptionConfigurations")[0]
    params = {
        "repositoryName": i.outputs["name"],
        "imageTagMutability": i.take("imageTagMutability"),
        "imageScanningConfiguration": {"scanOnPush": i.take("imageScanningConfiguration")["scanOnPush"]},
        "encryptionConfiguration": {"encryptionType": encryption["encryptionType"]},
        "tags": _tag_list(tags),
    }
    return [("ecr", "CreateRepository", params)]


def _lifecycle(i: _Inputs, tags: dict[str, str]) -> list[tuple[str, str, dict[str, Any]]]:
    params = {"repositoryName": i.take("repository"), "lifecyclePolicyText": i.take("policy")}
    return [("ecr", "PutLifecyclePolicy", params)]


def _bucket(i: _Inputs, tags: dict[str, str]) -> list[tuple[str, str, dict[str, Any]]]:
    bucket = i.outputs["bucket"]
    return [
        ("s3", "CreateBucket", {"Bucket": bucket}),
        ("s3", "PutBucketTagging", {"Bucket": bucket, "Tagging": {"TagSet": _tag_list(tags)}}),
    ]


def _encryption(i: _Inputs, tags: dict[str, str]) -> list[tuple[str, str, dict[str, Any]]]:
    rules = [
        {
            "ApplyServerSideEncryptionByDefault": {
                "SSEAlgorithm": rule["applyServerSideEncryptionByDefault"]["sseAlgorithm"]
            }
        }
        for rule in i.take("rules")
    ]
    params = {"Bucket": i.take("bucket"), "ServerSideEncryptionConfiguration": {"Rules": rules}}
    return [("s3", "PutBucketEncryption", params)]


def _public_access(i: _Inputs, tags: dict[str, str]) -> list[tuple[str, str, dict[str, Any]]]:
    config = {
        "BlockPublicAcls": i.take("blockPublicAcls"),
        "IgnorePublicAcls": i.take("ignorePublicAcls"),
        "BlockPublicPolicy": i.take("blockPublicPolicy"),
        "RestrictPublicBuckets": i.take("restrictPublicBuckets"),
    }
    return [("s3", "PutPublicAccessBlock", {"Bucket": i.take("bucket"), "PublicAccessBlockConfiguration": config})]


def _bucket_policy(i: _Inputs, tags: dict[str, str]) -> list[tuple[str, str, dict[str, Any]]]:
    return [("s3", "PutBucketPolicy", {"Bucket": i.take("bucket"), "Policy": i.take("policy")})]


def _object(i: _Inputs, tags: dict[str, str]) -> list[tuple[str, str, dict[str, Any]]]:
    params = _drop_none(
        {
            "Bucket": i.take("bucket"),
            "Key": i.take("key"),
            "ContentType": i.take("contentType"),
            "Metadata": i.take("metadata"),
            "Body": b"",
            "Tagging": "&".join(f"{k}={v}" for k, v in sorted(tags.items())),
        }
    )
    return [("s3", "PutObject", params)]


def _role(i: _Inputs, tags: dict[str, str]) -> list[tuple[str, str, dict[str, Any]]]:
    params = _drop_none(
        {
            "RoleName": i.outputs["name"],
            "AssumeRolePolicyDocument": i.take("assumeRolePolicy"),
            "Description": i.take("description"),
            "Tags": _tag_list(tags),
        }
    )
    return [("iam", "CreateRole", params)]


def _role_policy(i: _Inputs, tags: dict[str, str]) -> list[tuple[str, str, dict[str, Any]]]:
    params = {"RoleName": i.take("role"), "PolicyName": i.outputs["name"], "PolicyDocument": i.take("policy")}
    return [("iam", "PutRolePolicy", params)]


def _model(i: _Inputs, tags: dict[str, str]) -> list[tuple[str, str, dict[str, Any]]]:
    container = dict(i.take("primaryContainer"))
    sources = container.pop("modelDataSource")["s3DataSources"]
    if len(sources) != 1:
        raise UntranslatedInput(f"{i.urn}: CreateModel takes exactly one S3DataSource, got {len(sources)}")
    source = sources[0]
    api_container = _drop_none(
        {
            "Image": container.pop("image"),
            "Mode": container.pop("mode", None),
            "Environment": container.pop("environment", None),
            "ModelDataSource": {
                "S3DataSource": {
                    "S3Uri": source["s3Uri"],
                    "S3DataType": source["s3DataType"],
                    "CompressionType": source["compressionType"],
                }
            },
        }
    )
    if container:
        raise UntranslatedInput(f"{i.urn}: primaryContainer keys {sorted(container)} are not translated")
    params = {
        "ModelName": i.outputs["name"],
        "ExecutionRoleArn": i.take("executionRoleArn"),
        "EnableNetworkIsolation": i.take("enableNetworkIsolation"),
        "PrimaryContainer": api_container,
        "Tags": _tag_list(tags),
    }
    return [("sagemaker", "CreateModel", params)]


_VARIANT_KEYS: Final[dict[str, tuple[str, Callable[[Any], Any]]]] = {
    "variantName": ("VariantName", str),
    "modelName": ("ModelName", str),
    "instanceType": ("InstanceType", str),
    "initialInstanceCount": ("InitialInstanceCount", _int),
    "containerStartupHealthCheckTimeoutInSeconds": ("ContainerStartupHealthCheckTimeoutInSeconds", _int),
    "modelDataDownloadTimeoutInSeconds": ("ModelDataDownloadTimeoutInSeconds", _int),
    "inferenceAmiVersion": ("InferenceAmiVersion", str),
}


def _endpoint_config(i: _Inputs, tags: dict[str, str]) -> list[tuple[str, str, dict[str, Any]]]:
    variants = []
    for variant in i.take("productionVariants"):
        unknown = sorted(set(variant) - set(_VARIANT_KEYS))
        if unknown:
            raise UntranslatedInput(f"{i.urn}: production variant keys {unknown} are not translated")
        variants.append({_VARIANT_KEYS[key][0]: _VARIANT_KEYS[key][1](value) for key, value in variant.items()})
    params = {"EndpointConfigName": i.outputs["name"], "ProductionVariants": variants, "Tags": _tag_list(tags)}
    return [("sagemaker", "CreateEndpointConfig", params)]


def _deployment_config(config: Mapping[str, Any]) -> dict[str, Any]:
    policy = config["blueGreenUpdatePolicy"]
    routing = policy["trafficRoutingConfiguration"]
    return {
        "BlueGreenUpdatePolicy": {
            "TrafficRoutingConfiguration": {
                "Type": routing["type"],
                "WaitIntervalInSeconds": _int(routing["waitIntervalInSeconds"]),
            },
            "TerminationWaitInSeconds": _int(policy["terminationWaitInSeconds"]),
            "MaximumExecutionTimeoutInSeconds": _int(policy["maximumExecutionTimeoutInSeconds"]),
        },
        "AutoRollbackConfiguration": {
            "Alarms": [{"AlarmName": alarm["alarmName"]} for alarm in config["autoRollbackConfiguration"]["alarms"]]
        },
    }


def _endpoint(i: _Inputs, tags: dict[str, str]) -> list[tuple[str, str, dict[str, Any]]]:
    deployment = i.take("deploymentConfig")
    params = _drop_none(
        {
            "EndpointName": i.take("name"),
            "EndpointConfigName": i.take("endpointConfigName"),
            "DeploymentConfig": None if deployment is None else _deployment_config(deployment),
            "Tags": _tag_list(tags),
        }
    )
    return [("sagemaker", "CreateEndpoint", params)]


def _scalable_target(i: _Inputs, tags: dict[str, str]) -> list[tuple[str, str, dict[str, Any]]]:
    params = {
        "ServiceNamespace": i.take("serviceNamespace"),
        "ResourceId": i.take("resourceId"),
        "ScalableDimension": i.take("scalableDimension"),
        "MinCapacity": _int(i.take("minCapacity")),
        "MaxCapacity": _int(i.take("maxCapacity")),
        "Tags": dict(tags),
    }
    return [("application-autoscaling", "RegisterScalableTarget", params)]


def _target_tracking(config: Mapping[str, Any]) -> dict[str, Any]:
    api: dict[str, Any] = {
        "TargetValue": config["targetValue"],
        "ScaleOutCooldown": _int(config["scaleOutCooldown"]),
        "ScaleInCooldown": _int(config["scaleInCooldown"]),
    }
    if "predefinedMetricSpecification" in config:
        api["PredefinedMetricSpecification"] = {
            "PredefinedMetricType": config["predefinedMetricSpecification"]["predefinedMetricType"]
        }
    if "customizedMetricSpecification" in config:
        custom = config["customizedMetricSpecification"]
        api["CustomizedMetricSpecification"] = {
            "MetricName": custom["metricName"],
            "Namespace": custom["namespace"],
            "Dimensions": [{"Name": d["name"], "Value": d["value"]} for d in custom["dimensions"]],
            "Statistic": custom["statistic"],
            "Unit": custom["unit"],
        }
    return api


def _scaling_policy(i: _Inputs, tags: dict[str, str]) -> list[tuple[str, str, dict[str, Any]]]:
    params = {
        "PolicyName": i.outputs["name"],
        "ServiceNamespace": i.take("serviceNamespace"),
        "ResourceId": i.take("resourceId"),
        "ScalableDimension": i.take("scalableDimension"),
        "PolicyType": i.take("policyType"),
        "TargetTrackingScalingPolicyConfiguration": _target_tracking(
            i.take("targetTrackingScalingPolicyConfiguration")
        ),
    }
    return [("application-autoscaling", "PutScalingPolicy", params)]


def _runtime(i: _Inputs, tags: dict[str, str]) -> list[tuple[str, str, dict[str, Any]]]:
    artifact = i.take("agentRuntimeArtifact")["containerConfiguration"]
    params = _drop_none(
        {
            "agentRuntimeName": i.take("agentRuntimeName"),
            "description": i.take("description"),
            "agentRuntimeArtifact": {"containerConfiguration": {"containerUri": artifact["containerUri"]}},
            "roleArn": i.take("roleArn"),
            "networkConfiguration": {"networkMode": i.take("networkConfiguration")["networkMode"]},
            "protocolConfiguration": {"serverProtocol": i.take("protocolConfiguration")["serverProtocol"]},
            "environmentVariables": i.take("environmentVariables"),
            "tags": dict(tags),
        }
    )
    return [("bedrock-agentcore-control", "CreateAgentRuntime", params)]


def _memory(i: _Inputs, tags: dict[str, str]) -> list[tuple[str, str, dict[str, Any]]]:
    params = _drop_none(
        {
            "name": i.take("name"),
            "description": i.take("description"),
            "eventExpiryDuration": _int(i.take("eventExpiryDuration")),
            "tags": dict(tags),
        }
    )
    return [("bedrock-agentcore-control", "CreateMemory", params)]


def _log_group(i: _Inputs, tags: dict[str, str]) -> list[tuple[str, str, dict[str, Any]]]:
    name = i.take("name")
    return [
        ("logs", "CreateLogGroup", {"logGroupName": name, "tags": dict(tags)}),
        ("logs", "PutRetentionPolicy", {"logGroupName": name, "retentionInDays": _int(i.take("retentionInDays"))}),
    ]


def _metric_filter(i: _Inputs, tags: dict[str, str]) -> list[tuple[str, str, dict[str, Any]]]:
    transformation = i.take("metricTransformation")
    params = {
        "logGroupName": i.take("logGroupName"),
        "filterName": i.outputs["name"],
        "filterPattern": i.take("pattern"),
        "metricTransformations": [
            _drop_none(
                {
                    "metricName": transformation["name"],
                    "metricNamespace": transformation["namespace"],
                    "metricValue": transformation["value"],
                    "dimensions": transformation.get("dimensions"),
                    "unit": transformation.get("unit"),
                }
            )
        ],
    }
    return [("logs", "PutMetricFilter", params)]


def _alarm(i: _Inputs, tags: dict[str, str]) -> list[tuple[str, str, dict[str, Any]]]:
    dimensions = i.take("dimensions") or {}
    params = _drop_none(
        {
            "AlarmName": i.outputs["name"],
            "AlarmDescription": i.take("alarmDescription"),
            "AlarmActions": i.take("alarmActions"),
            "OKActions": i.take("okActions"),
            "MetricName": i.take("metricName"),
            "Namespace": i.take("namespace"),
            "Statistic": i.take("statistic"),
            "ExtendedStatistic": i.take("extendedStatistic"),
            "Dimensions": _tag_list(dimensions, "Name", "Value"),
            "Period": _int(i.take("period")),
            "EvaluationPeriods": _int(i.take("evaluationPeriods")),
            "DatapointsToAlarm": _int(i.take("datapointsToAlarm")),
            "Threshold": i.take("threshold"),
            "ComparisonOperator": i.take("comparisonOperator"),
            "TreatMissingData": i.take("treatMissingData"),
            "Tags": _tag_list(tags),
        }
    )
    return [("cloudwatch", "PutMetricAlarm", params)]


def _dashboard(i: _Inputs, tags: dict[str, str]) -> list[tuple[str, str, dict[str, Any]]]:
    params = {"DashboardName": i.take("dashboardName"), "DashboardBody": i.take("dashboardBody")}
    return [("cloudwatch", "PutDashboard", params)]


def _topic(i: _Inputs, tags: dict[str, str]) -> list[tuple[str, str, dict[str, Any]]]:
    return [("sns", "CreateTopic", {"Name": i.outputs["name"], "Tags": _tag_list(tags)})]


def _subscription(i: _Inputs, tags: dict[str, str]) -> list[tuple[str, str, dict[str, Any]]]:
    params = {"TopicArn": i.take("topic"), "Protocol": i.take("protocol"), "Endpoint": i.take("endpoint")}
    return [("sns", "Subscribe", params)]


TRANSLATORS: Final[dict[str, Translator]] = {
    "aws:ecr/repository:Repository": _repository,
    "aws:ecr/lifecyclePolicy:LifecyclePolicy": _lifecycle,
    "aws:s3/bucket:Bucket": _bucket,
    "aws:s3/bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration": _encryption,
    "aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock": _public_access,
    "aws:s3/bucketPolicy:BucketPolicy": _bucket_policy,
    "aws:s3/bucketObjectv2:BucketObjectv2": _object,
    "aws:iam/role:Role": _role,
    "aws:iam/rolePolicy:RolePolicy": _role_policy,
    "aws:sagemaker/model:Model": _model,
    "aws:sagemaker/endpointConfiguration:EndpointConfiguration": _endpoint_config,
    "aws:sagemaker/endpoint:Endpoint": _endpoint,
    "aws:appautoscaling/target:Target": _scalable_target,
    "aws:appautoscaling/policy:Policy": _scaling_policy,
    "aws:bedrock/agentcoreAgentRuntime:AgentcoreAgentRuntime": _runtime,
    "aws:bedrock/agentcoreMemory:AgentcoreMemory": _memory,
    "aws:cloudwatch/logGroup:LogGroup": _log_group,
    "aws:cloudwatch/logMetricFilter:LogMetricFilter": _metric_filter,
    "aws:cloudwatch/metricAlarm:MetricAlarm": _alarm,
    "aws:cloudwatch/dashboard:Dashboard": _dashboard,
    "aws:sns/topic:Topic": _topic,
    "aws:sns/topicSubscription:TopicSubscription": _subscription,
}
"""Every AWS resource type the program declares (a test keeps this complete)."""


def requests_for(resource: RecordedResource, default_tags: Mapping[str, str]) -> list[ApiRequest]:
    """The create-time API calls for one recorded AWS resource, default tags merged in as the provider does."""
    translate = TRANSLATORS.get(resource.type)
    if translate is None:
        raise UntranslatedInput(f"{resource.urn}: no translation for {resource.type}")
    inputs = _Inputs(resource)
    own_tags = inputs.take("tags") or {}
    calls = translate(inputs, {**default_tags, **own_tags})
    inputs.rest()
    return [ApiRequest(service, operation, params, resource.urn) for service, operation, params in calls]
