"""The stack rule on the AgentCore runtime's role: bidirectional invoke on its own endpoint, nothing else."""

from __future__ import annotations

import json
from collections.abc import Mapping

import pytest

from policies import iam
from tests.policies.policy_runner import (
    UNKNOWN_VALUE,
    GraphResource,
    check_stack,
    urn_of,
    with_value,
    without,
)

ROLE = "aws:iam/role:Role"
ROLE_POLICY = "aws:iam/rolePolicy:RolePolicy"
POLICY = "aws:iam/policy:Policy"
ATTACHMENT = "aws:iam/rolePolicyAttachment:RolePolicyAttachment"
RUNTIME = "aws:bedrock/agentcoreAgentRuntime:AgentcoreAgentRuntime"
ACTION = "sagemaker:InvokeEndpointWithBidirectionalStream"

ENDPOINT = "voicestack-dev-speech"
ENDPOINT_ARN = f"arn:aws:sagemaker:us-east-1:123456789012:endpoint/{ENDPOINT}"
ROLE_ARN = "arn:aws:iam::123456789012:role/agent-role-1234567"

ROLE_URN = urn_of(ROLE, "agent-role")
POLICY_URN = urn_of(ROLE_POLICY, "agent-permissions")
RUNTIME_URN = urn_of(RUNTIME, "agent")

SUBJECT = "The role of AgentCore runtime 'agent'"

STATEMENTS: list[dict[str, object]] = [
    {"Sid": "StreamToSpeechEndpoint", "Effect": "Allow", "Action": [ACTION], "Resource": [ENDPOINT_ARN]},
    {"Sid": "GetRegistryToken", "Effect": "Allow", "Action": ["ecr:GetAuthorizationToken"], "Resource": ["*"]},
]
DOCUMENT: dict[str, object] = {"Version": "2012-10-17", "Statement": STATEMENTS}


def stack(document: object = DOCUMENT, *, runtime: Mapping[str, object] | None = None) -> list[GraphResource]:
    """The known-good graph: a role, its RolePolicy (role=role.name) and the runtime (roleArn=role.arn)."""
    policy = json.dumps(document) if isinstance(document, dict) else document
    return [
        GraphResource(ROLE, "agent-role", {"assumeRolePolicy": "{}"}),
        GraphResource(
            ROLE_POLICY, "agent-permissions", {"policy": policy}, property_dependencies={"role": (ROLE_URN,)}
        ),
        GraphResource(
            RUNTIME,
            "agent",
            runtime
            if runtime is not None
            else {"roleArn": ROLE_ARN, "environmentVariables": {"SPEECH_ENDPOINT_NAME": ENDPOINT}},
            property_dependencies={"roleArn": (ROLE_URN,)},
        ),
    ]


def violations(resources: list[GraphResource]) -> list[tuple[str, str | None]]:
    return check_stack(iam.AGENT_INVOKES_ONLY_SPEECH_ENDPOINT, resources)


def widened(resource: object) -> dict[str, object]:
    return with_value(DOCUMENT, ["Statement", 0, "Resource"], [ENDPOINT_ARN, resource])


def test_known_good_stack_passes() -> None:
    assert violations(stack()) == []


def test_invoke_widened_to_any_resource_fails_on_the_policy() -> None:
    assert violations(stack(widened("*"))) == [
        (
            f"{SUBJECT} may call {ACTION} only on endpoint {ENDPOINT}; "
            'statement "StreamToSpeechEndpoint" of its policy also allows it on "*".',
            POLICY_URN,
        )
    ]


@pytest.mark.parametrize(
    "resource",
    [
        "arn:aws:sagemaker:us-east-1:123456789012:endpoint/*",
        "arn:aws:sagemaker:us-east-1:123456789012:endpoint/voicestack-*",
        "arn:aws:sagemaker:*:123456789012:endpoint/voicestack-dev-speech",
        "arn:aws:sagemaker:us-east-1:123456789012:endpoint/another-endpoint",
        "arn:aws:sagemaker:us-east-1:123456789012:inference-component/voicestack-dev-speech",
    ],
)
def test_invoke_on_anything_but_the_endpoint_fails(resource: str) -> None:
    assert violations(stack(widened(resource))) == [
        (
            f"{SUBJECT} may call {ACTION} only on endpoint {ENDPOINT}; "
            f'statement "StreamToSpeechEndpoint" of its policy also allows it on "{resource}".',
            POLICY_URN,
        )
    ]


def test_endpoint_names_compare_case_insensitively() -> None:
    runtime = {"roleArn": ROLE_ARN, "environmentVariables": {"SPEECH_ENDPOINT_NAME": "VoiceStack-Dev-Speech"}}
    assert violations(stack(runtime=runtime)) == []


@pytest.mark.parametrize("action", ["sagemaker:*", "sagemaker:InvokeEndpoint*", "*"])
def test_an_action_pattern_that_covers_invoke_is_held_to_the_endpoint(action: str) -> None:
    statement = {"Effect": "Allow", "Action": action, "Resource": "*"}
    document = with_value(DOCUMENT, ["Statement"], [*STATEMENTS, statement])
    assert violations(stack(document)) == [
        (
            f"{SUBJECT} may call {ACTION} only on endpoint {ENDPOINT}; "
            'statement 3 of its policy also allows it on "*".',
            POLICY_URN,
        )
    ]


def test_not_action_that_leaves_invoke_allowed_is_held_to_the_endpoint() -> None:
    statement = {"Effect": "Allow", "NotAction": "iam:*", "Resource": "*"}
    document = with_value(DOCUMENT, ["Statement"], [*STATEMENTS, statement])
    assert violations(stack(document)) == [
        (
            f"{SUBJECT} may call {ACTION} only on endpoint {ENDPOINT}; "
            'statement 3 of its policy also allows it on "*".',
            POLICY_URN,
        )
    ]


def test_not_resource_fails() -> None:
    document = with_value(
        DOCUMENT, ["Statement", 0, "NotResource"], ["arn:aws:sagemaker:us-east-1:123456789012:endpoint/x"]
    )
    document = without(document, ["Statement", 0, "Resource"])
    assert violations(stack(document)) == [
        (
            f'{SUBJECT} may call {ACTION} only on endpoint {ENDPOINT}; statement "StreamToSpeechEndpoint" of its '
            'policy also allows it on NotResource "arn:aws:sagemaker:us-east-1:123456789012:endpoint/x".',
            POLICY_URN,
        ),
        (f"{SUBJECT} must allow {ACTION} on endpoint {ENDPOINT}; none of its policies does.", RUNTIME_URN),
    ]


def test_deny_statements_do_not_count() -> None:
    statement = {"Effect": "Deny", "Action": ACTION, "Resource": "*"}
    document = with_value(DOCUMENT, ["Statement"], [*STATEMENTS, statement])
    assert violations(stack(document)) == []


def test_role_without_the_invoke_permission_fails() -> None:
    document = with_value(DOCUMENT, ["Statement"], [STATEMENTS[1]])
    assert violations(stack(document)) == [
        (f"{SUBJECT} must allow {ACTION} on endpoint {ENDPOINT}; none of its policies does.", RUNTIME_URN)
    ]


def test_runtime_without_the_endpoint_variable_fails() -> None:
    expected = [
        (
            "AgentCore runtime 'agent' must name its speech endpoint in the environment variable "
            "SPEECH_ENDPOINT_NAME; it does not.",
            RUNTIME_URN,
        )
    ]
    assert (
        violations(stack(runtime={"roleArn": ROLE_ARN, "environmentVariables": {"SPEECH_MODE": "stream"}})) == expected
    )
    assert violations(stack(runtime={"roleArn": ROLE_ARN})) == expected


def test_runtime_whose_role_is_not_in_the_stack_fails() -> None:
    resources = [
        resource if resource.type != RUNTIME else GraphResource(RUNTIME, "agent", resource.props)  # no dependency
        for resource in stack()
    ]
    assert violations(resources) == [
        (
            "AgentCore runtime 'agent' must run with an IAM role defined in this stack, so that its permissions "
            f'can be checked; its roleArn is "{ROLE_ARN}".',
            RUNTIME_URN,
        )
    ]


def test_role_and_policy_linked_by_literal_names_are_found() -> None:
    role = GraphResource(ROLE, "agent-role", {"name": "agent-role-1234567", "arn": ROLE_ARN})
    policy = GraphResource(
        ROLE_POLICY, "agent-permissions", {"role": "agent-role-1234567", "policy": json.dumps(widened("*"))}
    )
    runtime = GraphResource(
        RUNTIME, "agent", {"roleArn": ROLE_ARN, "environmentVariables": {"SPEECH_ENDPOINT_NAME": ENDPOINT}}
    )
    assert [urn for _, urn in violations([role, policy, runtime])] == [POLICY_URN]


def test_inline_role_policies_are_checked() -> None:
    role = GraphResource(
        ROLE, "agent-role", {"inlinePolicies": [{"name": "runtime", "policy": json.dumps(widened("*"))}]}
    )
    resources = [role, *stack(with_value(DOCUMENT, ["Statement"], []))[1:]]
    assert violations(resources) == [
        (
            f"{SUBJECT} may call {ACTION} only on endpoint {ENDPOINT}; "
            'statement "StreamToSpeechEndpoint" of its inline policy "runtime" also allows it on "*".',
            ROLE_URN,
        )
    ]


def test_role_policies_listed_again_in_the_role_state_are_counted_once() -> None:
    document = json.dumps(widened("*"))
    role = GraphResource(ROLE, "agent-role", {"inlinePolicies": [{"name": "agent-permissions-1", "policy": document}]})
    policy = GraphResource(
        ROLE_POLICY,
        "agent-permissions",
        {"name": "agent-permissions-1", "policy": document},
        property_dependencies={"role": (ROLE_URN,)},
    )
    assert [urn for _, urn in violations([role, policy, stack()[2]])] == [POLICY_URN]


def test_attached_managed_policies_of_the_stack_are_checked() -> None:
    policy_urn = urn_of(POLICY, "agent-managed")
    resources = [
        *stack(with_value(DOCUMENT, ["Statement"], [])),
        GraphResource(POLICY, "agent-managed", {"policy": json.dumps(widened("*"))}),
        GraphResource(
            ATTACHMENT, "agent-attach", {}, property_dependencies={"role": (ROLE_URN,), "policyArn": (policy_urn,)}
        ),
    ]
    assert violations(resources) == [
        (
            f"{SUBJECT} may call {ACTION} only on endpoint {ENDPOINT}; "
            'statement "StreamToSpeechEndpoint" of its policy also allows it on "*".',
            policy_urn,
        )
    ]


def test_attached_policy_from_outside_the_stack_fails() -> None:
    attachment = GraphResource(
        ATTACHMENT,
        "agent-attach",
        {"policyArn": "arn:aws:iam::aws:policy/AmazonSageMakerFullAccess"},
        property_dependencies={"role": (ROLE_URN,)},
    )
    assert violations([*stack(), attachment]) == [
        (
            f"{SUBJECT} must take its permissions from policies defined in this stack, so that its SageMaker "
            'access can be checked; managed policy "arn:aws:iam::aws:policy/AmazonSageMakerFullAccess" is not one.',
            urn_of(ATTACHMENT, "agent-attach"),
        )
    ]


def test_other_roles_may_hold_other_permissions() -> None:
    other_role_urn = urn_of(ROLE, "speech-execution-role")
    resources = [
        *stack(),
        GraphResource(ROLE, "speech-execution-role", {}),
        GraphResource(
            ROLE_POLICY,
            "speech-permissions",
            {"policy": json.dumps(widened("*"))},
            property_dependencies={"role": (other_role_urn,)},
        ),
    ]
    assert violations(resources) == []


def test_stack_without_a_runtime_has_nothing_to_check() -> None:
    assert violations([resource for resource in stack() if resource.type != RUNTIME]) == []


# --- unknown values during preview ------------------------------------------------------------------


def test_unknown_endpoint_name_reports_nothing() -> None:
    runtime = {"roleArn": ROLE_ARN, "environmentVariables": {"SPEECH_ENDPOINT_NAME": UNKNOWN_VALUE}}
    assert violations(stack(widened("*"), runtime=runtime)) == []
    assert violations(stack(widened("*"), runtime={"roleArn": ROLE_ARN, "environmentVariables": UNKNOWN_VALUE})) == []


def test_unknown_policy_document_is_not_a_missing_grant() -> None:
    assert violations(stack(UNKNOWN_VALUE)) == []


def test_unknown_role_arn_without_dependencies_reports_nothing() -> None:
    resources = [
        resource
        if resource.type != RUNTIME
        else GraphResource(
            RUNTIME, "agent", {"roleArn": UNKNOWN_VALUE, "environmentVariables": {"SPEECH_ENDPOINT_NAME": ENDPOINT}}
        )
        for resource in stack(widened("*"))
    ]
    assert violations(resources) == []


def test_unknown_role_arn_with_its_dependency_is_still_checked() -> None:
    runtime = {"roleArn": UNKNOWN_VALUE, "environmentVariables": {"SPEECH_ENDPOINT_NAME": ENDPOINT}}
    assert [urn for _, urn in violations(stack(widened("*"), runtime=runtime))] == [POLICY_URN]


def test_runtime_without_a_role_arn_fails() -> None:
    resources = [
        resource
        if resource.type != RUNTIME
        else GraphResource(RUNTIME, "agent", {"environmentVariables": {"SPEECH_ENDPOINT_NAME": ENDPOINT}})
        for resource in stack()
    ]
    assert violations(resources) == [
        (
            "AgentCore runtime 'agent' must run with an IAM role defined in this stack, so that its permissions "
            "can be checked; it sets no roleArn.",
            RUNTIME_URN,
        )
    ]


def test_a_role_policy_for_an_unknown_role_is_not_a_missing_grant() -> None:
    no_grant = with_value(DOCUMENT, ["Statement"], [STATEMENTS[1]])
    pending = GraphResource(ROLE_POLICY, "pending", {"role": UNKNOWN_VALUE, "policy": json.dumps(DOCUMENT)})
    assert violations([*stack(no_grant), pending]) == []


def test_an_attachment_of_an_unknown_policy_is_not_a_missing_grant() -> None:
    no_grant = with_value(DOCUMENT, ["Statement"], [STATEMENTS[1]])
    attachment = GraphResource(
        ATTACHMENT, "agent-attach", {"policyArn": UNKNOWN_VALUE}, property_dependencies={"role": (ROLE_URN,)}
    )
    assert violations([*stack(no_grant), attachment]) == []
