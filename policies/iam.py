"""Rules for IAM: no wildcard actions, `*` resources only where AWS offers nothing narrower, and the
agent runtime's role may stream to its own speech endpoint and to no other."""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import partial
from typing import Final

from pulumi_policy import Policy

from policies.adapters import StackResource, Violation, of_type, resource_policy, stack_policy
from policies.iam_documents import (
    DOCUMENT_TYPES,
    Document,
    PolicyDocumentError,
    Statement,
    documents_of,
    has_wildcard,
    parse_statements,
)
from policies.roles import role_of, role_permissions
from policies.values import UNKNOWN, Props, Unknown, is_unknown, lookup

UNSCOPABLE_ACTIONS: Final = frozenset(
    {
        # The IAM service reference lists no resource type for these: only "*" works.
        "ecr:getauthorizationtoken",  # registry login token, account-wide
        "xray:puttracesegments",
        "xray:puttelemetryrecords",
        "xray:getsamplingrules",
        "xray:getsamplingtargets",
        "xray:getsamplingstatisticsummaries",
        "cloudwatch:putmetricdata",  # narrowed with the cloudwatch:namespace condition instead
        "logs:describeloggroups",  # lists groups; the AgentCore runtime role needs it
        "sts:getcalleridentity",
    }
)
"""Actions (lower case) that may be allowed on Resource "*"."""

AGENT_RUNTIME_TYPE: Final = "aws:bedrock/agentcoreAgentRuntime:AgentcoreAgentRuntime"
SPEECH_ENDPOINT_ENV: Final = "SPEECH_ENDPOINT_NAME"
INVOKE_ACTION: Final = "sagemaker:InvokeEndpointWithBidirectionalStream"

_ENDPOINT_ARN = re.compile(r"arn:aws[a-z-]*:sagemaker:[a-z0-9-]+:\d{12}:endpoint/(?P<name>[^/]+)")


def _sentence(label: str) -> str:
    return label[:1].upper() + label[1:]


def _document_findings(
    resource_type: str, props: Props
) -> list[tuple[Document, list[Statement] | Unknown | PolicyDocumentError]]:
    findings: list[tuple[Document, list[Statement] | Unknown | PolicyDocumentError]] = []
    for document in documents_of(resource_type, props):
        if document.source is None:
            continue
        try:
            findings.append((document, parse_statements(document.source)))
        except PolicyDocumentError as error:
            findings.append((document, error))
    return findings


def check_wildcard_actions(resource_type: str, props: Props) -> list[str]:
    """Allow statements name every action; Deny statements may use wildcards (they only narrow access)."""
    messages: list[str] = []
    for document, parsed in _document_findings(resource_type, props):
        if isinstance(parsed, PolicyDocumentError):
            messages.append(f"The {document.where} must be a JSON IAM policy document; {parsed}.")
            continue
        if parsed is UNKNOWN:
            continue
        for statement in parsed:
            if not statement.allows:
                continue
            where = f"{_sentence(statement.label)} of the {document.where} must name each action it allows"
            if statement.not_actions is not None:
                messages.append(f"{where}; it allows every action outside NotAction.")
            wildcards = [action for action in statement.actions if has_wildcard(action)]
            if wildcards:
                listed = ", ".join(f'"{action}"' for action in wildcards)
                messages.append(f"{where}; it allows {listed}.")
    return messages


def check_scoped_resources(resource_type: str, props: Props) -> list[str]:
    """Allow statements use Resource "*" only for `UNSCOPABLE_ACTIONS`, and never NotResource."""
    messages: list[str] = []
    for document, parsed in _document_findings(resource_type, props):
        if isinstance(parsed, PolicyDocumentError) or parsed is UNKNOWN:
            continue  # an unparsable document is reported once, by the wildcard-action rule
        for statement in parsed:
            if not statement.allows:
                continue
            where = f"{_sentence(statement.label)} of the {document.where}"
            if statement.not_resources is not None:
                messages.append(f"{where} must name its resources in Resource; NotResource allows every other one.")
            if "*" not in statement.resources:
                continue
            if statement.not_actions is not None:
                unscoped = ["every action outside NotAction"]
            else:
                unscoped = [action for action in statement.actions if action.lower() not in UNSCOPABLE_ACTIONS]
            if unscoped:
                messages.append(
                    f"{where} must name the resources of {', '.join(unscoped)}; "
                    'Resource "*" is allowed only for actions AWS cannot scope to a resource.'
                )
    return messages


def _invoke_scope_violations(
    runtime: StackResource, endpoint: str, role: StackResource, resources: Sequence[StackResource]
) -> list[Violation]:
    subject = f"The role of AgentCore runtime '{runtime.name}'"
    permissions = role_permissions(role, resources)
    violations = [
        Violation(
            f"{subject} must take its permissions from policies defined in this stack, so that its SageMaker "
            f"access can be checked; {held.document.where} is not one.",
            held.holder,
        )
        for held in permissions.outside
    ]
    granted = False
    complete = permissions.complete
    for held in permissions.documents:
        try:
            parsed = parse_statements(held.document.source) if held.document.source is not None else []
        except PolicyDocumentError:
            continue  # reported by iam-no-wildcard-actions
        if parsed is UNKNOWN:
            complete = False
            continue
        for statement in parsed:
            if not statement.allows or not statement.covers_action(INVOKE_ACTION):
                continue
            wider = [f'NotResource "{resource}"' for resource in statement.not_resources or ()]
            wider += [f'"{resource}"' for resource in statement.resources if not _is_endpoint(resource, endpoint)]
            granted = granted or any(_is_endpoint(resource, endpoint) for resource in statement.resources)
            if wider:
                violations.append(
                    Violation(
                        f"{subject} may call {INVOKE_ACTION} only on endpoint {endpoint}; "
                        f"{statement.label} of its {held.document.where} also allows it on {', '.join(wider)}.",
                        held.holder,
                    )
                )
    if not granted and complete:
        violations.append(
            Violation(
                f"{subject} must allow {INVOKE_ACTION} on endpoint {endpoint}; none of its policies does.",
                runtime.urn,
            )
        )
    return violations


def _is_endpoint(resource: str, endpoint: str) -> bool:
    """Whether `resource` is exactly the ARN of `endpoint` (SageMaker lowercases endpoint names in ARNs)."""
    match = _ENDPOINT_ARN.fullmatch(resource)
    return match is not None and not has_wildcard(resource) and match["name"].lower() == endpoint.lower()


def check_invoke_scope(resources: Sequence[StackResource]) -> list[Violation]:
    """Each AgentCore runtime's role allows the bidirectional invoke on its own endpoint and nothing else."""
    violations: list[Violation] = []
    for runtime in of_type(resources, AGENT_RUNTIME_TYPE):
        endpoint = lookup(runtime.props, "environmentVariables", SPEECH_ENDPOINT_ENV)
        if is_unknown(endpoint):
            continue
        if not isinstance(endpoint, str) or not endpoint:
            violations.append(
                Violation(
                    f"AgentCore runtime '{runtime.name}' must name its speech endpoint in the environment "
                    f"variable {SPEECH_ENDPOINT_ENV}; it does not.",
                    runtime.urn,
                )
            )
            continue
        role = role_of(runtime, resources, "roleArn")
        role_arn = runtime.props.get("roleArn")
        if role is None and role_arn is UNKNOWN:
            continue
        if role is None:
            shown = f'its roleArn is "{role_arn}"' if isinstance(role_arn, str) else "it sets no roleArn"
            violations.append(
                Violation(
                    f"AgentCore runtime '{runtime.name}' must run with an IAM role defined in this stack, so "
                    f"that its permissions can be checked; {shown}.",
                    runtime.urn,
                )
            )
            continue
        violations.extend(_invoke_scope_violations(runtime, endpoint, role, resources))
    return violations


IAM_NO_WILDCARD_ACTIONS = resource_policy(
    name="iam-no-wildcard-actions",
    description="IAM policy statements that allow access name every action, without wildcards.",
    checks={resource_type: partial(check_wildcard_actions, resource_type) for resource_type in DOCUMENT_TYPES},
)

IAM_SCOPED_RESOURCES = resource_policy(
    name="iam-scoped-resources",
    description='IAM policy statements allow Resource "*" only for actions AWS cannot scope to a resource.',
    checks={resource_type: partial(check_scoped_resources, resource_type) for resource_type in DOCUMENT_TYPES},
)

AGENT_INVOKES_ONLY_SPEECH_ENDPOINT = stack_policy(
    name="agent-invokes-only-speech-endpoint",
    description=(
        f"The AgentCore runtime's role may call {INVOKE_ACTION} on the endpoint named in its "
        f"{SPEECH_ENDPOINT_ENV} and on nothing else."
    ),
    check=check_invoke_scope,
)

POLICIES: Final[list[Policy]] = [IAM_NO_WILDCARD_ACTIONS, IAM_SCOPED_RESOURCES, AGENT_INVOKES_ONLY_SPEECH_ENDPOINT]
