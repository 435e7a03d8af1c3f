"""IAM documents, built by pure functions and checked without Pulumi: exact statements, no wildcard
action anywhere, and `*` resources only for the actions AWS cannot scope."""

from typing import Any

import pytest

from infra.iam import (
    AwsScope,
    BedrockModel,
    agent_runtime_policy,
    agentcore_trust_policy,
    bedrock_model,
    sagemaker_trust_policy,
    speech_execution_policy,
)

SCOPE = AwsScope(partition="aws", region="eu-west-1", account_id="111122223333")
REPOSITORY = "arn:aws:ecr:eu-west-1:111122223333:repository/storage-images-abc"
ENDPOINT = "arn:aws:sagemaker:eu-west-1:111122223333:endpoint/voicestack-dev-speech"
MEMORY_ID = "voicestack_dev_memory-AbCdE12345"
PREFIX = "hexgrad/Kokoro-82M/f3ff3571791e39611d31c381e3a41a3af07b4987"
ROLLBACK_ALARM = "speech-5xx-abc1234"
WILDCARD_SIDS = {"GetRegistryToken", "DescribeLogGroups", "PublishInstanceMetrics"}
"""The statements whose actions have no resource-level permissions in AWS."""


def speech_policy() -> dict[str, Any]:
    return speech_execution_policy(
        SCOPE,
        bucket_name="storage-weights-abc",
        weights_prefix=PREFIX,
        repository_arn=REPOSITORY,
        endpoint_name="voicestack-dev-speech",
        instance_metrics_namespace="/aws/sagemaker/Endpoints",
        rollback_alarm_names=[ROLLBACK_ALARM],
    )


def agent_policy(model_id: str = "us.anthropic.claude-haiku-4-5-20251001-v1:0") -> dict[str, Any]:
    return agent_runtime_policy(
        SCOPE,
        endpoint_arn=ENDPOINT,
        model_id=model_id,
        repository_arn=REPOSITORY,
        runtime_names=["voicestack_dev_agent"],
        memory_id=MEMORY_ID,
    )


def statement(document: dict[str, Any], sid: str) -> dict[str, Any]:
    matches: list[dict[str, Any]] = [entry for entry in document["Statement"] if entry["Sid"] == sid]
    assert len(matches) == 1, f"{sid}: {document}"
    return matches[0]


def test_speech_execution_policy_reads_only_the_weight_prefix_pulls_and_logs() -> None:
    group = "arn:aws:logs:eu-west-1:111122223333:log-group:/aws/sagemaker/Endpoints/voicestack-dev-speech"
    assert speech_policy() == {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Sid": "ReadWeights",
                "Effect": "Allow",
                "Action": ["s3:GetObject"],
                "Resource": [f"arn:aws:s3:::storage-weights-abc/{PREFIX}/*"],
            },
            {
                "Sid": "ListWeights",
                "Effect": "Allow",
                "Action": ["s3:ListBucket"],
                "Resource": ["arn:aws:s3:::storage-weights-abc"],
                "Condition": {"StringLike": {"s3:prefix": [f"{PREFIX}/*"]}},
            },
            {
                "Sid": "PullImage",
                "Effect": "Allow",
                "Action": ["ecr:BatchCheckLayerAvailability", "ecr:BatchGetImage", "ecr:GetDownloadUrlForLayer"],
                "Resource": [REPOSITORY],
            },
            {"Sid": "GetRegistryToken", "Effect": "Allow", "Action": ["ecr:GetAuthorizationToken"], "Resource": ["*"]},
            {
                "Sid": "CreateLogGroup",
                "Effect": "Allow",
                "Action": ["logs:CreateLogGroup", "logs:DescribeLogStreams"],
                # CloudWatch Logs checks most actions (DescribeLogStreams among them) against NAME:*.
                "Resource": [group, f"{group}:*"],
            },
            {
                "Sid": "WriteLogs",
                "Effect": "Allow",
                "Action": ["logs:CreateLogStream", "logs:PutLogEvents"],
                "Resource": [f"{group}:log-stream:*"],
            },
            {
                # The endpoint's instance metrics (MemoryUtilization, GPUMemoryUtilization), and nothing else.
                "Sid": "PublishInstanceMetrics",
                "Effect": "Allow",
                "Action": ["cloudwatch:PutMetricData"],
                "Resource": ["*"],
                "Condition": {"StringEquals": {"cloudwatch:namespace": "/aws/sagemaker/Endpoints"}},
            },
            {
                # Blue/green auto-rollback reads its alarm with the execution role.
                "Sid": "ReadRollbackAlarms",
                "Effect": "Allow",
                "Action": ["cloudwatch:DescribeAlarms"],
                "Resource": [f"arn:aws:cloudwatch:eu-west-1:111122223333:alarm:{ROLLBACK_ALARM}"],
            },
        ],
    }


def test_agent_policy_streams_to_exactly_one_endpoint() -> None:
    document = agent_policy()
    assert statement(document, "StreamToSpeechEndpoint") == {
        "Sid": "StreamToSpeechEndpoint",
        "Effect": "Allow",
        "Action": ["sagemaker:InvokeEndpointWithBidirectionalStream"],
        "Resource": [ENDPOINT],
    }
    sagemaker = [entry for entry in document["Statement"] if any(a.startswith("sagemaker:") for a in entry["Action"])]
    assert sagemaker == [statement(document, "StreamToSpeechEndpoint")]


def test_agent_policy_sids_pull_from_the_repository_and_write_its_own_log_groups() -> None:
    document = agent_policy()
    assert [entry["Sid"] for entry in document["Statement"]] == [
        "StreamToSpeechEndpoint",
        "InvokeInferenceProfile",
        "InvokeModelThroughProfile",
        "UseConversationMemory",
        "PullImage",
        "GetRegistryToken",
        "CreateLogGroup",
        "WriteLogs",
        "DescribeLogGroups",
    ]
    assert statement(document, "PullImage")["Resource"] == [REPOSITORY]
    assert statement(document, "WriteLogs")["Resource"] == [
        "arn:aws:logs:eu-west-1:111122223333:log-group:/aws/bedrock-agentcore/runtimes/voicestack_dev_agent-*:log-stream:*"
    ]


def test_agent_policy_describes_log_groups_as_aws_own_agentcore_construct_does() -> None:
    assert statement(agent_policy(), "DescribeLogGroups") == {
        "Sid": "DescribeLogGroups",
        "Effect": "Allow",
        "Action": ["logs:DescribeLogGroups"],
        "Resource": ["*"],
    }


def test_agent_policy_uses_exactly_its_own_memory_with_what_the_session_manager_calls() -> None:
    assert statement(agent_policy(), "UseConversationMemory") == {
        "Sid": "UseConversationMemory",
        "Effect": "Allow",
        "Action": [
            "bedrock-agentcore:CreateEvent",
            "bedrock-agentcore:DeleteEvent",
            "bedrock-agentcore:GetEvent",
            "bedrock-agentcore:ListEvents",
            "bedrock-agentcore:RetrieveMemoryRecords",
        ],
        "Resource": [f"arn:aws:bedrock-agentcore:eu-west-1:111122223333:memory/{MEMORY_ID}"],
    }


def test_agent_log_groups_include_the_colon_star_form_by_their_pattern() -> None:
    assert statement(agent_policy(), "CreateLogGroup")["Resource"] == [
        "arn:aws:logs:eu-west-1:111122223333:log-group:/aws/bedrock-agentcore/runtimes/voicestack_dev_agent-*",
        "arn:aws:logs:eu-west-1:111122223333:log-group:/aws/bedrock-agentcore/runtimes/voicestack_dev_agent-*:*",
    ]


def test_agent_policy_grants_no_traces_and_no_metric_api() -> None:
    # The containers print EMF lines on stdout and send no traces: nothing may call X-Ray or PutMetricData.
    actions = [action for entry in agent_policy()["Statement"] for action in entry["Action"]]
    assert [action for action in actions if action.startswith(("xray:", "cloudwatch:"))] == []


def test_foundation_model_id_resolves_to_one_regional_arn_without_profile() -> None:
    model = bedrock_model("amazon.nova-lite-v1:0", SCOPE)
    assert model == BedrockModel(None, ("arn:aws:bedrock:eu-west-1::foundation-model/amazon.nova-lite-v1:0",))
    assert [
        entry for entry in agent_policy("amazon.nova-lite-v1:0")["Statement"] if entry["Sid"].startswith("Invoke")
    ] == [
        {
            "Sid": "InvokeModel",
            "Effect": "Allow",
            "Action": ["bedrock:InvokeModelWithResponseStream"],
            "Resource": ["arn:aws:bedrock:eu-west-1::foundation-model/amazon.nova-lite-v1:0"],
        }
    ]


def test_regional_profile_allows_the_profile_and_its_model_only_through_that_profile() -> None:
    profile = "arn:aws:bedrock:eu-west-1:111122223333:inference-profile/eu.anthropic.claude-sonnet-4-20250514-v1:0"
    document = agent_policy("eu.anthropic.claude-sonnet-4-20250514-v1:0")
    assert statement(document, "InvokeInferenceProfile")["Resource"] == [profile]
    assert statement(document, "InvokeModelThroughProfile") == {
        "Sid": "InvokeModelThroughProfile",
        "Effect": "Allow",
        "Action": ["bedrock:InvokeModelWithResponseStream"],
        "Resource": ["arn:aws:bedrock:*::foundation-model/anthropic.claude-sonnet-4-20250514-v1:0"],
        "Condition": {"StringEquals": {"bedrock:InferenceProfileArn": profile}},
    }


def test_global_profile_also_allows_the_region_less_model_arn() -> None:
    model = bedrock_model("global.anthropic.claude-haiku-4-5-20251001-v1:0", SCOPE)
    assert model == BedrockModel(
        "arn:aws:bedrock:eu-west-1:111122223333:inference-profile/global.anthropic.claude-haiku-4-5-20251001-v1:0",
        (
            "arn:aws:bedrock:*::foundation-model/anthropic.claude-haiku-4-5-20251001-v1:0",
            "arn:aws:bedrock:::foundation-model/anthropic.claude-haiku-4-5-20251001-v1:0",
        ),
    )


def test_partition_reaches_every_arn() -> None:
    china = AwsScope(partition="aws-cn", region="cn-north-1", account_id="111122223333")
    document = agent_runtime_policy(
        china,
        endpoint_arn="arn:aws-cn:sagemaker:cn-north-1:111122223333:endpoint/e",
        model_id="amazon.nova-lite-v1:0",
        repository_arn="arn:aws-cn:ecr:cn-north-1:111122223333:repository/r",
        runtime_names=["r"],
        memory_id="m-1",
    )
    arns = [arn for entry in document["Statement"] for arn in entry["Resource"] if arn != "*"]
    assert len(arns) == 7, arns
    assert all(arn.startswith("arn:aws-cn:") for arn in arns), arns


@pytest.mark.parametrize(
    "document",
    [
        speech_policy(),
        agent_policy(),
        agent_policy("amazon.nova-lite-v1:0"),
        agent_policy("global.anthropic.claude-haiku-4-5-20251001-v1:0"),
    ],
)
def test_no_wildcard_action_and_star_resources_only_where_aws_cannot_scope(document: dict[str, Any]) -> None:
    for entry in document["Statement"]:
        assert entry["Effect"] == "Allow", entry
        assert all("*" not in action and action.count(":") == 1 for action in entry["Action"]), entry
        if "*" in entry["Resource"]:
            assert entry["Sid"] in WILDCARD_SIDS, entry
            assert entry["Resource"] == ["*"], entry


def test_sagemaker_trust_policy_trusts_only_sagemaker() -> None:
    assert sagemaker_trust_policy() == {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Sid": "SageMakerAssumesRole",
                "Effect": "Allow",
                "Principal": {"Service": "sagemaker.amazonaws.com"},
                "Action": "sts:AssumeRole",
            }
        ],
    }


def test_agentcore_trust_policy_is_limited_to_this_account_and_region() -> None:
    assert agentcore_trust_policy(SCOPE) == {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Sid": "AgentCoreAssumesRole",
                "Effect": "Allow",
                "Principal": {"Service": "bedrock-agentcore.amazonaws.com"},
                "Action": "sts:AssumeRole",
                "Condition": {
                    "StringEquals": {"aws:SourceAccount": "111122223333"},
                    "ArnLike": {"aws:SourceArn": "arn:aws:bedrock-agentcore:eu-west-1:111122223333:*"},
                },
            }
        ],
    }
