"""IAM policy documents as the rules read them: statements with normalized actions and resources."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Final

from policies.values import UNKNOWN, Props, Unknown, is_unknown, lookup

ROLE_TYPE: Final = "aws:iam/role:Role"
ROLE_POLICY_TYPE: Final = "aws:iam/rolePolicy:RolePolicy"
POLICY_TYPE: Final = "aws:iam/policy:Policy"
USER_POLICY_TYPE: Final = "aws:iam/userPolicy:UserPolicy"
GROUP_POLICY_TYPE: Final = "aws:iam/groupPolicy:GroupPolicy"

DOCUMENT_TYPES: Final = (ROLE_TYPE, ROLE_POLICY_TYPE, POLICY_TYPE, USER_POLICY_TYPE, GROUP_POLICY_TYPE)
"""Resource types that carry IAM policy documents."""


class PolicyDocumentError(ValueError):
    """A policy document that is not a JSON IAM policy (the message says what is wrong)."""


@dataclass(frozen=True)
class Statement:
    """One statement; `label` names it for messages (its Sid, else its 1-based position)."""

    label: str
    effect: str
    actions: tuple[str, ...]
    not_actions: tuple[str, ...] | None
    resources: tuple[str, ...]
    not_resources: tuple[str, ...] | None

    @property
    def allows(self) -> bool:
        return self.effect == "Allow"

    def covers_action(self, action: str) -> bool:
        """Whether the statement applies to `action` (through Action patterns, or outside NotAction)."""
        if self.not_actions is not None:
            return not any(action_matches(pattern, action) for pattern in self.not_actions)
        return any(action_matches(pattern, action) for pattern in self.actions)


@dataclass(frozen=True)
class Document:
    """A policy document found on a resource; `where` names it for messages (e.g. `inline policy "x"`)."""

    where: str
    source: object
    """The document as the resource holds it: a JSON string, a dict, `UNKNOWN` or `None`."""
    name: str | None = None
    """An inline policy's name (a role's inline policies are named)."""


def documents_of(resource_type: str, props: Props, *, trust: bool = True) -> list[Document]:
    """The policy documents a resource of one of `DOCUMENT_TYPES` carries (a role's trust policy unless
    `trust` is false: it says who may assume the role, not what the role may do)."""
    if resource_type != ROLE_TYPE:
        return [Document("policy", props.get("policy"))]
    found = [Document("trust policy", props.get("assumeRolePolicy"))] if trust else []
    inline = props.get("inlinePolicies")
    if inline is UNKNOWN:
        found.append(Document("inline policies", UNKNOWN))
    elif isinstance(inline, list):
        for index, entry in enumerate(inline, start=1):
            name = lookup(entry, "name") if isinstance(entry, Mapping) else None
            label = f'inline policy "{name}"' if isinstance(name, str) else f"inline policy {index}"
            source = lookup(entry, "policy") if isinstance(entry, Mapping) else entry
            found.append(Document(label, source, name if isinstance(name, str) else None))
    return found


def parse_statements(source: object) -> list[Statement] | Unknown:
    """The statements of a policy document given as a JSON string or a dict.

    Returns `UNKNOWN` when the document (or any part of it) is unknown; raises `PolicyDocumentError`.
    """
    entries = raw_statements(source)
    if entries is UNKNOWN:
        return UNKNOWN
    statements: list[Statement] = []
    for index, entry in enumerate(entries, start=1):
        statement = _statement(entry, index)
        if statement is UNKNOWN:
            return UNKNOWN
        statements.append(statement)
    return statements


def raw_statements(source: object) -> list[Mapping[str, object]] | Unknown:
    """The statements of a policy document (JSON string or dict) as plain objects, for rules that read more of a
    statement than `Statement` holds (principals, conditions); `UNKNOWN` or `PolicyDocumentError` as above."""
    if source is UNKNOWN:
        return UNKNOWN
    document: object = source
    if isinstance(source, str):
        try:
            document = json.loads(source)
        except json.JSONDecodeError as error:
            raise PolicyDocumentError(f"it is not JSON ({error.msg} at character {error.pos})") from error
    if not isinstance(document, Mapping):
        raise PolicyDocumentError("it is not a JSON object")
    raw: object = document.get("Statement")
    if raw is UNKNOWN:
        return UNKNOWN
    entries: Sequence[object] = raw if isinstance(raw, list) else [raw] if raw is not None else []
    statements: list[Mapping[str, object]] = []
    for index, entry in enumerate(entries, start=1):
        if entry is UNKNOWN:
            return UNKNOWN
        if not isinstance(entry, Mapping):
            raise PolicyDocumentError(f"statement {index} is not a JSON object")
        statements.append(entry)
    return statements


def statement_label(entry: Mapping[str, object], index: int) -> str:
    """How messages name a statement: its Sid, else its 1-based position."""
    sid = entry.get("Sid")
    return f'statement "{sid}"' if isinstance(sid, str) and sid else f"statement {index}"


def _statement(entry: Mapping[str, object], index: int) -> Statement | Unknown:
    label = statement_label(entry, index)
    fields: dict[str, tuple[str, ...] | None] = {}
    for key in ("Action", "NotAction", "Resource", "NotResource"):
        value = entry.get(key)
        if is_unknown(value):
            return UNKNOWN
        fields[key] = _strings(value, f"{label}: {key}")
    effect = entry.get("Effect")
    if effect is UNKNOWN:
        return UNKNOWN
    return Statement(
        label=label,
        effect=effect if isinstance(effect, str) else "",
        actions=fields["Action"] or (),
        not_actions=fields["NotAction"],
        resources=fields["Resource"] or (),
        not_resources=fields["NotResource"],
    )


def _strings(value: object, what: str) -> tuple[str, ...] | None:
    if value is None:
        return None
    if isinstance(value, str):
        return (value,)
    if isinstance(value, list) and all(isinstance(item, str) for item in value):
        return tuple(str(item) for item in value)
    raise PolicyDocumentError(f"{what} must be a string or a list of strings")


def action_matches(pattern: str, action: str) -> bool:
    """Whether an IAM action pattern (`*` and `?` wildcards, case-insensitive) covers `action`."""
    return _action_regex(pattern).fullmatch(action) is not None


@cache
def _action_regex(pattern: str) -> re.Pattern[str]:
    translated = "".join(".*" if char == "*" else "." if char == "?" else re.escape(char) for char in pattern)
    return re.compile(translated, re.IGNORECASE)


def has_wildcard(text: str) -> bool:
    """Whether an action or resource contains an IAM wildcard."""
    return "*" in text or "?" in text
