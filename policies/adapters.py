"""Wraps the pure checks of each area as CrossGuard policies.

A check takes plain property dicts (see `values`) and returns violation messages; it never sees the
SDK's argument objects, so rules are tested with literal dicts. The wrappers below do the SDK side:
pick the resource types a check applies to, convert the properties, and report each message.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from pulumi_policy import (
    EnforcementLevel,
    PolicyResource,
    ReportViolation,
    ResourceValidationArgs,
    ResourceValidationPolicy,
    StackValidationArgs,
    StackValidationPolicy,
)

from policies.values import Props, plain_props

ResourceCheck = Callable[[Props], list[str]]
"""Checks one resource's properties; returns what must be true and is not (empty when compliant)."""


@dataclass(frozen=True)
class StackResource:
    """One resource of the stack as stack checks see it: plain properties, dependencies as URNs."""

    type: str
    name: str
    urn: str
    props: Props
    property_dependencies: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    """For each property, the URNs of the resources its value was computed from."""

    def depends_through(self, prop: str, urn: str) -> bool:
        """Whether this resource's `prop` was computed from the resource `urn` (e.g. `bucket=b.id`)."""
        return urn in self.property_dependencies.get(prop, ())


@dataclass(frozen=True)
class Violation:
    """A stack check's finding: what must be true, and the resource it concerns (None: the stack)."""

    message: str
    urn: str | None


StackCheck = Callable[[Sequence[StackResource]], list[Violation]]


def resource_policy(
    name: str,
    description: str,
    checks: Mapping[str, ResourceCheck],
    enforcement_level: EnforcementLevel = EnforcementLevel.MANDATORY,
) -> ResourceValidationPolicy:
    """A resource policy that runs `checks[resource type]` on each resource of those types."""

    def validate(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
        check = checks.get(args.resource_type)
        if check is None:
            return
        for message in check(plain_props(args.props)):
            report_violation(message, None)

    return ResourceValidationPolicy(
        name=name, description=description, validate=validate, enforcement_level=enforcement_level
    )


def stack_policy(
    name: str,
    description: str,
    check: StackCheck,
    enforcement_level: EnforcementLevel = EnforcementLevel.MANDATORY,
) -> StackValidationPolicy:
    """A stack policy that runs `check` on every resource of the stack at once."""

    def validate(args: StackValidationArgs, report_violation: ReportViolation) -> None:
        for violation in check([stack_resource(resource) for resource in args.resources]):
            report_violation(violation.message, violation.urn)

    return StackValidationPolicy(
        name=name, description=description, validate=validate, enforcement_level=enforcement_level
    )


def stack_resource(resource: PolicyResource) -> StackResource:
    """The plain view of one `PolicyResource` of a stack validation."""
    return StackResource(
        type=resource.resource_type,
        name=resource.name,
        urn=resource.urn,
        props=plain_props(resource.props),
        property_dependencies={
            prop: tuple(dependency.urn for dependency in dependencies)
            for prop, dependencies in resource.property_dependencies.items()
        },
    )


def of_type(resources: Sequence[StackResource], resource_type: str) -> list[StackResource]:
    """The resources of one type, in stack order."""
    return [resource for resource in resources if resource.type == resource_type]
