"""IAM documents for the two roles of the stack, built by pure functions from plain strings.

The SageMaker execution role reads the weights under one S3 prefix, pulls the image, writes the
endpoint's logs, publishes the endpoint's instance metrics and reads its rollback alarm (the last two
are what SageMaker itself does with the role: the CreateModel execution-role policy lists
`cloudwatch:PutMetricData`, and deployment guardrails need `cloudwatch:DescribeAlarms` on the
auto-rollback alarms). The AgentCore runtime role streams to exactly one SageMaker endpoint, invokes
one Bedrock model, reads and writes one AgentCore Memory, pulls its image and writes logs; a stack open
to people runs its second, JWT-authorized runtime with the same role (infra/agent.py). No action
is a wildcard; a resource is `*` only where the service has no resource-level permissions for that
action, and a comment next to that statement says so.

Not granted: X-Ray, and `cloudwatch:PutMetricData` to the agent. Neither container sends traces, and
both publish their own metrics as Embedded Metric Format lines on stdout (speech_protocol/emf.py),
which needs no API call from the container.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

from infra.config import INFERENCE_PROFILE_GEOGRAPHIES
from infra.naming import runtime_log_group_prefix

Statement = dict[str, Any]
PolicyDocument = dict[str, Any]

VERSION: Final = "2012-10-17"
ANY_RESOURCE: Final = "*"

ECR_PULL_ACTIONS: Final = ("ecr:BatchCheckLayerAvailability", "ecr:BatchGetImage", "ecr:GetDownloadUrlForLayer")
LOG_GROUP_ACTIONS: Final = ("logs:CreateLogGroup", "logs:DescribeLogStreams")
LOG_STREAM_ACTIONS: Final = ("logs:CreateLogStream", "logs:PutLogEvents")
DESCRIBE_LOG_GROUPS_ACTION: Final = "logs:DescribeLogGroups"
MEMORY_ACTIONS: Final = (
    # What the Strands session manager of bedrock_agentcore.memory (1.25) calls: create_event,
    # list_events, get_event, delete_event and retrieve_memory_records.
    "bedrock-agentcore:CreateEvent",
    "bedrock-agentcore:DeleteEvent",
    "bedrock-agentcore:GetEvent",
    "bedrock-agentcore:ListEvents",
    "bedrock-agentcore:RetrieveMemoryRecords",
)
INVOKE_STREAM_ACTION: Final = "sagemaker:InvokeEndpointWithBidirectionalStream"
PUT_METRIC_DATA_ACTION: Final = "cloudwatch:PutMetricData"
DESCRIBE_ALARMS_ACTION: Final = "cloudwatch:DescribeAlarms"
BEDROCK_STREAM_ACTION: Final = "bedrock:InvokeModelWithResponseStream"


@dataclass(frozen=True)
class AwsScope:
    """Where ARNs point: the partition, region and account the stack deploys into."""

    partition: str
    region: str
    account_id: str

    def arn(self, service: str, resource: str, *, region: bool = True, account: bool = True) -> str:
        return ":".join(
            (
                "arn",
                self.partition,
                service,
                self.region if region else "",
                self.account_id if account else "",
                resource,
            )
        )


def document(*statements: Statement) -> PolicyDocument:
    """A policy document holding the given statements."""
    return {"Version": VERSION, "Statement": list(statements)}


def allow(sid: str, actions: Sequence[str], resources: Sequence[str], condition: Statement | None = None) -> Statement:
    """One Allow statement; actions and resources are sorted so documents compare stably."""
    statement: Statement = {
        "Sid": sid,
        "Effect": "Allow",
        "Action": sorted(actions),
        "Resource": sorted(resources),
    }
    if condition is not None:
        statement["Condition"] = condition
    return statement


# --- trust policies -------------------------------------------------------------------------------


def sagemaker_trust_policy() -> PolicyDocument:
    """Lets SageMaker assume the execution role."""
    return document(
        {
            "Sid": "SageMakerAssumesRole",
            "Effect": "Allow",
            "Principal": {"Service": "sagemaker.amazonaws.com"},
            "Action": "sts:AssumeRole",
        }
    )


def agentcore_trust_policy(scope: AwsScope) -> PolicyDocument:
    """Lets AgentCore assume the runtime role, only for runtimes of this account and region.

    The source conditions are AWS's confused-deputy guard for AgentCore.
    """
    return document(
        {
            "Sid": "AgentCoreAssumesRole",
            "Effect": "Allow",
            "Principal": {"Service": "bedrock-agentcore.amazonaws.com"},
            "Action": "sts:AssumeRole",
            "Condition": {
                "StringEquals": {"aws:SourceAccount": scope.account_id},
                "ArnLike": {"aws:SourceArn": scope.arn("bedrock-agentcore", "*")},
            },
        }
    )


# --- shared statements ----------------------------------------------------------------------------


def ecr_pull_statements(repository_arn: str) -> list[Statement]:
    """Pull from one repository; the registry token is account-wide."""
    return [
        allow("PullImage", ECR_PULL_ACTIONS, [repository_arn]),
        # ecr:GetAuthorizationToken has no resource-level permissions: AWS accepts only "*".
        allow("GetRegistryToken", ["ecr:GetAuthorizationToken"], [ANY_RESOURCE]),
    ]


def log_statements(scope: AwsScope, *log_groups: str) -> list[Statement]:
    """Create and write the given log groups (each may end in a `*` suffix pattern).

    CloudWatch Logs evaluates most log-group actions (DescribeLogStreams among them) against the
    `log-group:NAME:*` form of the ARN, which the API itself returns, and CreateLogGroup against the
    bare one: the group statement names both.
    """
    group_arns = [scope.arn("logs", f"log-group:{log_group}") for log_group in log_groups]
    return [
        allow("CreateLogGroup", LOG_GROUP_ACTIONS, [form for arn in group_arns for form in (arn, f"{arn}:*")]),
        allow("WriteLogs", LOG_STREAM_ACTIONS, [f"{arn}:log-stream:*" for arn in group_arns]),
    ]


# --- SageMaker execution role ---------------------------------------------------------------------


def sagemaker_log_group(endpoint_name: str) -> str:
    """The log group SageMaker writes an endpoint's container output to."""
    return f"/aws/sagemaker/Endpoints/{endpoint_name}"


def alarm_arn(scope: AwsScope, alarm_name: str) -> str:
    """The ARN of one CloudWatch alarm."""
    return scope.arn("cloudwatch", f"alarm:{alarm_name}")


def speech_execution_policy(
    scope: AwsScope,
    *,
    bucket_name: str,
    weights_prefix: str,
    repository_arn: str,
    endpoint_name: str,
    instance_metrics_namespace: str,
    rollback_alarm_names: Sequence[str],
) -> PolicyDocument:
    """The SageMaker execution role's permissions: weights (read-only, one prefix), image, logs, the
    endpoint's instance metrics (under `instance_metrics_namespace` only) and its rollback alarms."""
    bucket_arn = f"arn:{scope.partition}:s3:::{bucket_name}"
    return document(
        allow("ReadWeights", ["s3:GetObject"], [f"{bucket_arn}/{weights_prefix}/*"]),
        allow(
            "ListWeights",
            ["s3:ListBucket"],
            [bucket_arn],
            {"StringLike": {"s3:prefix": [f"{weights_prefix}/*"]}},
        ),
        *ecr_pull_statements(repository_arn),
        *log_statements(scope, sagemaker_log_group(endpoint_name)),
        # PutMetricData has no resource-level permissions (only "*"); the namespace condition is its scope.
        allow(
            "PublishInstanceMetrics",
            [PUT_METRIC_DATA_ACTION],
            [ANY_RESOURCE],
            {"StringEquals": {"cloudwatch:namespace": instance_metrics_namespace}},
        ),
        allow(
            "ReadRollbackAlarms", [DESCRIBE_ALARMS_ACTION], [alarm_arn(scope, name) for name in rollback_alarm_names]
        ),
    )


# --- AgentCore runtime role -----------------------------------------------------------------------


def agentcore_log_group_pattern(runtime_name: str) -> str:
    """The runtime's log groups: AgentCore names them after the runtime id, `<name>-<suffix>`.

    The suffix is chosen by AWS when the runtime is created, after this role must already exist,
    hence the trailing wildcard.
    """
    return f"{runtime_log_group_prefix(runtime_name)}*"


@dataclass(frozen=True)
class BedrockModel:
    """The ARNs a model id resolves to: the profile (if any) and the foundation model(s) behind it."""

    inference_profile_arn: str | None
    foundation_model_arns: tuple[str, ...]


def bedrock_model(model_id: str, scope: AwsScope) -> BedrockModel:
    """Resolves a foundation model id or a system cross-region inference profile id to ARNs.

    A cross-region profile (`us.anthropic...`) routes each request to the foundation model in any
    region of its geography, so the foundation-model ARN must name every such region: the region
    field is `*`, and the statement is conditioned on calls made through this very profile.
    A global profile additionally needs the region-less foundation-model ARN.
    """
    geography, _, base_id = model_id.partition(".")
    if geography not in INFERENCE_PROFILE_GEOGRAPHIES:
        return BedrockModel(None, (scope.arn("bedrock", f"foundation-model/{model_id}", account=False),))
    profile_arn = scope.arn("bedrock", f"inference-profile/{model_id}")
    any_region = f"arn:{scope.partition}:bedrock:*::foundation-model/{base_id}"
    if geography == "global":
        return BedrockModel(profile_arn, (any_region, f"arn:{scope.partition}:bedrock:::foundation-model/{base_id}"))
    return BedrockModel(profile_arn, (any_region,))


def bedrock_statements(model: BedrockModel) -> list[Statement]:
    """Streamed invocation of exactly the configured model."""
    if model.inference_profile_arn is None:
        return [allow("InvokeModel", [BEDROCK_STREAM_ACTION], model.foundation_model_arns)]
    return [
        allow("InvokeInferenceProfile", [BEDROCK_STREAM_ACTION], [model.inference_profile_arn]),
        allow(
            "InvokeModelThroughProfile",
            [BEDROCK_STREAM_ACTION],
            model.foundation_model_arns,
            {"StringEquals": {"bedrock:InferenceProfileArn": model.inference_profile_arn}},
        ),
    ]


def memory_arn(scope: AwsScope, memory_id: str) -> str:
    """The ARN of one AgentCore Memory."""
    return scope.arn("bedrock-agentcore", f"memory/{memory_id}")


def agent_runtime_policy(
    scope: AwsScope,
    *,
    endpoint_arn: str,
    model_id: str,
    repository_arn: str,
    runtime_names: Sequence[str],
    memory_id: str,
) -> PolicyDocument:
    """The AgentCore runtime role's permissions: one endpoint, one model, one memory, image, the logs of the
    runtimes that run with it (the IAM one, and the public one on a stack open to people)."""
    return document(
        allow("StreamToSpeechEndpoint", [INVOKE_STREAM_ACTION], [endpoint_arn]),
        *bedrock_statements(bedrock_model(model_id, scope)),
        allow("UseConversationMemory", MEMORY_ACTIONS, [memory_arn(scope, memory_id)]),
        *ecr_pull_statements(repository_arn),
        *log_statements(scope, *(agentcore_log_group_pattern(name) for name in runtime_names)),
        # What AWS's own AgentCore Runtime construct grants (there on `log-group:*`): the runtime lists log
        # groups. The Service Authorization Reference lists no resource type for DescribeLogGroups, so only
        # "*" is certain to match; it is no wider, the action lists the whole account's groups either way.
        allow("DescribeLogGroups", [DESCRIBE_LOG_GROUPS_ACTION], [ANY_RESOURCE]),
    )
