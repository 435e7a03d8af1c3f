"""The IAM resource rules: no wildcard actions, and Resource "*" only for actions AWS cannot scope."""

from __future__ import annotations

import json
from collections.abc import Mapping

import pytest

from policies import iam
from tests.policies.policy_runner import UNKNOWN_VALUE, check_resource, with_value, without

ROLE = "aws:iam/role:Role"
ROLE_POLICY = "aws:iam/rolePolicy:RolePolicy"
ENDPOINT_ARN = "arn:aws:sagemaker:us-east-1:123456789012:endpoint/voicestack-dev-speech"
LOG_STREAMS_ARN = "arn:aws:logs:us-east-1:123456789012:log-group:/aws/bedrock-agentcore/runtimes/agent-*:log-stream:*"

DOCUMENT: dict[str, object] = {
    "Version": "2012-10-17",
    "Statement": [
        {
            "Sid": "StreamToSpeechEndpoint",
            "Effect": "Allow",
            "Action": ["sagemaker:InvokeEndpointWithBidirectionalStream"],
            "Resource": [ENDPOINT_ARN],
        },
        {"Sid": "GetRegistryToken", "Effect": "Allow", "Action": ["ecr:GetAuthorizationToken"], "Resource": ["*"]},
        {
            "Sid": "WriteTraces",
            "Effect": "Allow",
            "Action": [
                "xray:GetSamplingRules",
                "xray:GetSamplingTargets",
                "xray:PutTelemetryRecords",
                "xray:PutTraceSegments",
            ],
            "Resource": ["*"],
        },
        {
            "Sid": "WriteMetrics",
            "Effect": "Allow",
            "Action": "cloudwatch:PutMetricData",
            "Resource": "*",
            "Condition": {"StringEquals": {"cloudwatch:namespace": "bedrock-agentcore"}},
        },
        {"Effect": "Allow", "Action": ["logs:CreateLogStream", "logs:PutLogEvents"], "Resource": [LOG_STREAMS_ARN]},
        # Deny statements only take access away: wildcards there are fine.
        {"Sid": "NeverDeleteWeights", "Effect": "Deny", "Action": "s3:Delete*", "Resource": "*"},
    ],
}
TRUST_POLICY = {
    "Version": "2012-10-17",
    "Statement": [
        {"Effect": "Allow", "Principal": {"Service": "bedrock-agentcore.amazonaws.com"}, "Action": "sts:AssumeRole"}
    ],
}


def role_policy(document: Mapping[str, object]) -> dict[str, object]:
    return {"role": "agent-role", "policy": json.dumps(document)}


def wildcard_messages(props: Mapping[str, object], resource_type: str = ROLE_POLICY) -> list[str]:
    return check_resource(iam.IAM_NO_WILDCARD_ACTIONS, resource_type, props)


def scope_messages(props: Mapping[str, object], resource_type: str = ROLE_POLICY) -> list[str]:
    return check_resource(iam.IAM_SCOPED_RESOURCES, resource_type, props)


# --- iam-no-wildcard-actions ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "resource_type",
    [ROLE_POLICY, "aws:iam/policy:Policy", "aws:iam/userPolicy:UserPolicy", "aws:iam/groupPolicy:GroupPolicy"],
)
def test_known_good_document_passes_both_rules(resource_type: str) -> None:
    assert wildcard_messages(role_policy(DOCUMENT), resource_type) == []
    assert scope_messages(role_policy(DOCUMENT), resource_type) == []


@pytest.mark.parametrize("action", ["*", "s3:*", "sagemaker:Invoke*", "sagemaker:InvokeEndpoint?"])
def test_wildcard_action_fails(action: str) -> None:
    document = with_value(
        DOCUMENT, ["Statement", 0, "Action"], ["sagemaker:InvokeEndpointWithBidirectionalStream", action]
    )
    assert wildcard_messages(role_policy(document)) == [
        f'Statement "StreamToSpeechEndpoint" of the policy must name each action it allows; it allows "{action}".'
    ]


def test_statement_without_sid_is_named_by_position() -> None:
    document = with_value(DOCUMENT, ["Statement", 4, "Action"], "logs:*")
    assert wildcard_messages(role_policy(document)) == [
        'Statement 5 of the policy must name each action it allows; it allows "logs:*".'
    ]


def test_not_action_in_an_allow_statement_fails() -> None:
    statement = {"Sid": "Broad", "Effect": "Allow", "NotAction": ["iam:*"], "Resource": [ENDPOINT_ARN]}
    document = with_value(DOCUMENT, ["Statement"], [statement])
    assert wildcard_messages(role_policy(document)) == [
        'Statement "Broad" of the policy must name each action it allows; it allows every action outside NotAction.'
    ]


def test_unparsable_document_fails_once() -> None:
    props = with_value(role_policy(DOCUMENT), ["policy"], "{not json")
    assert wildcard_messages(props) == [
        "The policy must be a JSON IAM policy document; it is not JSON (Expecting property name enclosed in double "
        "quotes at character 1)."
    ]
    assert scope_messages(props) == []


def test_document_given_as_an_object_is_checked_too() -> None:
    props = {"policy": with_value(DOCUMENT, ["Statement", 0, "Action"], "*")}
    assert wildcard_messages(props) == [
        'Statement "StreamToSpeechEndpoint" of the policy must name each action it allows; it allows "*".'
    ]


def test_missing_policy_property_reports_nothing() -> None:
    assert wildcard_messages({"role": "agent-role"}) == []
    assert scope_messages({"role": "agent-role"}) == []


def test_unknown_policy_during_preview_reports_nothing() -> None:
    props = with_value(role_policy(DOCUMENT), ["policy"], UNKNOWN_VALUE)
    assert wildcard_messages(props) == []
    assert scope_messages(props) == []


def test_role_trust_policy_and_inline_policies_are_checked() -> None:
    trust = with_value(TRUST_POLICY, ["Statement", 0, "Action"], "sts:*")
    inline = with_value(DOCUMENT, ["Statement", 0, "Action"], "sagemaker:*")
    props = {
        "assumeRolePolicy": json.dumps(trust),
        "inlinePolicies": [{"name": "runtime", "policy": json.dumps(inline)}, {"policy": json.dumps(DOCUMENT)}],
    }
    assert wildcard_messages(props, ROLE) == [
        'Statement 1 of the trust policy must name each action it allows; it allows "sts:*".',
        'Statement "StreamToSpeechEndpoint" of the inline policy "runtime" must name each action it allows; '
        'it allows "sagemaker:*".',
    ]


def test_role_with_known_good_policies_passes() -> None:
    props = {
        "assumeRolePolicy": json.dumps(TRUST_POLICY),
        "inlinePolicies": [{"name": "runtime", "policy": json.dumps(DOCUMENT)}],
    }
    assert wildcard_messages(props, ROLE) == []
    assert scope_messages(props, ROLE) == []


def test_role_with_unknown_inline_policies_reports_only_what_is_known() -> None:
    trust = with_value(TRUST_POLICY, ["Statement", 0, "Action"], "sts:*")
    props = {"assumeRolePolicy": json.dumps(trust), "inlinePolicies": UNKNOWN_VALUE}
    assert wildcard_messages(props, ROLE) == [
        'Statement 1 of the trust policy must name each action it allows; it allows "sts:*".'
    ]


def test_other_resource_types_are_not_checked() -> None:
    props = role_policy(with_value(DOCUMENT, ["Statement", 0, "Action"], "*"))
    assert wildcard_messages(props, "aws:s3/bucketPolicy:BucketPolicy") == []


# --- iam-scoped-resources ---------------------------------------------------------------------------


def test_scopable_action_on_any_resource_fails() -> None:
    document = with_value(DOCUMENT, ["Statement", 0, "Resource"], "*")
    assert scope_messages(role_policy(document)) == [
        'Statement "StreamToSpeechEndpoint" of the policy must name the resources of '
        'sagemaker:InvokeEndpointWithBidirectionalStream; Resource "*" is allowed only for actions AWS cannot '
        "scope to a resource."
    ]


def test_any_resource_next_to_an_arn_still_fails() -> None:
    document = with_value(DOCUMENT, ["Statement", 0, "Resource"], [ENDPOINT_ARN, "*"])
    assert len(scope_messages(role_policy(document))) == 1


def test_only_the_scopable_actions_of_a_mixed_statement_are_named() -> None:
    document = with_value(
        DOCUMENT, ["Statement", 1, "Action"], ["ecr:GetAuthorizationToken", "ecr:BatchGetImage", "s3:GetObject"]
    )
    assert scope_messages(role_policy(document)) == [
        'Statement "GetRegistryToken" of the policy must name the resources of ecr:BatchGetImage, s3:GetObject; '
        'Resource "*" is allowed only for actions AWS cannot scope to a resource.'
    ]


def test_unscopable_actions_match_case_insensitively() -> None:
    document = with_value(DOCUMENT, ["Statement", 1, "Action"], "ECR:getAuthorizationToken")
    assert scope_messages(role_policy(document)) == []


def test_arn_patterns_are_scoped_resources() -> None:
    document = with_value(DOCUMENT, ["Statement", 0, "Resource"], "arn:aws:sagemaker:us-east-1:123456789012:endpoint/*")
    assert scope_messages(role_policy(document)) == []


def test_not_resource_in_an_allow_statement_fails() -> None:
    document = with_value(
        without(DOCUMENT, ["Statement", 0, "Resource"]), ["Statement", 0, "NotResource"], [ENDPOINT_ARN]
    )
    assert scope_messages(role_policy(document)) == [
        'Statement "StreamToSpeechEndpoint" of the policy must name its resources in Resource; '
        "NotResource allows every other one."
    ]


def test_not_action_on_any_resource_fails() -> None:
    statement = {"Sid": "Broad", "Effect": "Allow", "NotAction": "iam:*", "Resource": "*"}
    assert scope_messages(role_policy(with_value(DOCUMENT, ["Statement"], [statement]))) == [
        'Statement "Broad" of the policy must name the resources of every action outside NotAction; '
        'Resource "*" is allowed only for actions AWS cannot scope to a resource.'
    ]


def test_statements_without_resources_are_not_judged() -> None:
    assert scope_messages({"assumeRolePolicy": json.dumps(TRUST_POLICY)}, ROLE) == []


def test_the_unscopable_list_holds_what_the_runtime_roles_need() -> None:
    assert {
        "ecr:getauthorizationtoken",
        "xray:puttracesegments",
        "xray:puttelemetryrecords",
        "xray:getsamplingrules",
        "xray:getsamplingtargets",
        "logs:describeloggroups",
        "cloudwatch:putmetricdata",
    } <= iam.UNSCOPABLE_ACTIONS
    assert "s3:getobject" not in iam.UNSCOPABLE_ACTIONS
    assert "sagemaker:invokeendpointwithbidirectionalstream" not in iam.UNSCOPABLE_ACTIONS
