"""Which policy documents give an IAM role its permissions, found in the stack's resource graph."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Final

from policies.adapters import StackResource, of_type
from policies.iam_documents import POLICY_TYPE, ROLE_POLICY_TYPE, ROLE_TYPE, Document, documents_of
from policies.values import UNKNOWN

ROLE_POLICY_ATTACHMENT_TYPE: Final = "aws:iam/rolePolicyAttachment:RolePolicyAttachment"


@dataclass(frozen=True)
class HeldDocument:
    """A permission document and the URN of the resource that holds it (for reporting)."""

    document: Document
    holder: str


@dataclass
class RolePermissions:
    """Everything the stack says about what a role may do."""

    documents: list[HeldDocument] = field(default_factory=list)
    outside: list[HeldDocument] = field(default_factory=list)
    """Attached managed policies whose documents are not in the stack (AWS managed ones, say)."""
    complete: bool = True
    """False when some resource might grant the role permissions but cannot be tied to it yet (preview)."""


def _held(resource: StackResource, *, trust: bool = True) -> list[HeldDocument]:
    documents = documents_of(resource.type, resource.props, trust=trust)
    return [HeldDocument(document, resource.urn) for document in documents]


def role_permissions(role: StackResource, resources: Sequence[StackResource]) -> RolePermissions:
    """The permission documents of `role`: inline, RolePolicy, attached or managed-ARN policies.

    A RolePolicy or attachment belongs to the role when its `role` was computed from the role (the usual
    `role=role.name`) or names the role literally.
    """
    permissions = RolePermissions()
    names = {value for value in (role.props.get("name"), role.props.get("arn")) if isinstance(value, str)}

    def targets_role(resource: StackResource) -> bool:
        if resource.depends_through("role", role.urn) or resource.props.get("role") in names:
            return True
        if resource.props.get("role") is UNKNOWN and not resource.property_dependencies.get("role"):
            permissions.complete = False
        return False

    role_policies = [policy for policy in of_type(resources, ROLE_POLICY_TYPE) if targets_role(policy)]
    # After an update the role's state lists its RolePolicies again as inline policies: count each once.
    separate = {policy.props.get("name") for policy in role_policies} - {None}
    permissions.documents += [held for held in _held(role, trust=False) if held.document.name not in separate]
    for policy in role_policies:
        permissions.documents += _held(policy)

    attached = [
        (attachment.props.get("policyArn"), attachment.property_dependencies.get("policyArn", ()), attachment.urn)
        for attachment in of_type(resources, ROLE_POLICY_ATTACHMENT_TYPE)
        if targets_role(attachment)
    ]
    arns = role.props.get("managedPolicyArns")
    arn_dependencies = role.property_dependencies.get("managedPolicyArns", ())
    if isinstance(arns, list):
        attached += [(arn, arn_dependencies, role.urn) for arn in arns]
    elif arns is UNKNOWN:
        attached.append((UNKNOWN, arn_dependencies, role.urn))

    for arn, dependencies, holder in attached:
        policies = [
            policy
            for policy in of_type(resources, POLICY_TYPE)
            if policy.urn in dependencies or (isinstance(arn, str) and policy.props.get("arn") == arn)
        ]
        for policy in policies:
            permissions.documents += _held(policy)
        if not policies and isinstance(arn, str):
            permissions.outside.append(HeldDocument(Document(f'managed policy "{arn}"', arn), holder))
        elif not policies:
            permissions.complete = False
    return permissions


def role_of(resource: StackResource, resources: Sequence[StackResource], prop: str) -> StackResource | None:
    """The stack's Role whose ARN `resource.props[prop]` was computed from, or equals; None if none."""
    roles = of_type(resources, ROLE_TYPE)
    for role in roles:
        if resource.depends_through(prop, role.urn):
            return role
    role_arn = resource.props.get(prop)
    return next((role for role in roles if isinstance(role_arn, str) and role.props.get("arn") == role_arn), None)
