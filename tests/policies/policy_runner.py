"""Runs the pack's policies in-process, the way the policy SDK's analyzer server does, without the CLI.

Properties go through the SDK's own `unknown_checking_proxy`, so rules see exactly what they see under
`pulumi preview`: unknown values are the engine's sentinel strings behind a proxy that raises on access.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pulumi_policy import (
    EnforcementLevel,
    Policy,
    PolicyCustomTimeouts,
    PolicyResource,
    PolicyResourceOptions,
    ResourceValidationArgs,
    ResourceValidationPolicy,
    StackValidationArgs,
    StackValidationPolicy,
)
from pulumi_policy.proxy import UNKNOWN_STRING_VALUE, unknown_checking_proxy

UNKNOWN_VALUE = UNKNOWN_STRING_VALUE
"""What the engine sends for a value that is unknown during preview (strings, objects alike for rules)."""


@dataclass(frozen=True)
class GraphResource:
    """One resource of a stack graph: what the engine sends an analyzer for it."""

    type: str
    name: str
    props: Mapping[str, object]
    urn: str = ""
    parent: str | None = None
    dependencies: tuple[str, ...] = ()
    property_dependencies: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    """Property name -> URNs of the resources its value was computed from."""

    @property
    def resource_urn(self) -> str:
        return self.urn or urn_of(self.type, self.name)


@dataclass(frozen=True)
class Finding:
    """One reported violation: the policy, its level, the message and the resource it concerns."""

    policy: str
    message: str
    urn: str | None
    enforcement_level: EnforcementLevel


def urn_of(resource_type: str, name: str) -> str:
    return f"urn:pulumi:test::voicestack::{resource_type}::{name}"


def _options(parent: str | None = None) -> PolicyResourceOptions:
    return PolicyResourceOptions(
        protect=False,
        ignore_changes=[],
        delete_before_replace=None,
        aliases=[],
        custom_timeouts=PolicyCustomTimeouts(0, 0, 0),
        additional_secret_outputs=[],
        parent=parent,
    )


def resource_args(resource_type: str, props: Mapping[str, object], *, name: str = "subject") -> ResourceValidationArgs:
    """The arguments the analyzer builds for one resource (the props deep-copied, then proxied)."""
    return ResourceValidationArgs(
        resource_type=resource_type,
        props=unknown_checking_proxy(copy.deepcopy(dict(props))),
        urn=urn_of(resource_type, name),
        name=name,
        opts=_options(),
        provider=None,
    )


def stack_args(resources: Sequence[GraphResource]) -> StackValidationArgs:
    """The arguments the analyzer builds for a whole stack, parents and dependencies linked by URN."""
    built = {
        resource.resource_urn: PolicyResource(
            resource_type=resource.type,
            props=unknown_checking_proxy(copy.deepcopy(dict(resource.props))),
            urn=resource.resource_urn,
            name=resource.name,
            opts=_options(resource.parent),
            provider=None,
            parent=None,
            dependencies=[],
            property_dependencies={},
        )
        for resource in resources
    }
    for resource in resources:
        target = built[resource.resource_urn]
        target.parent = built.get(resource.parent) if resource.parent else None
        target.dependencies = [built[urn] for urn in resource.dependencies if urn in built]
        target.property_dependencies = {
            prop: [built[urn] for urn in urns if urn in built] for prop, urns in resource.property_dependencies.items()
        }
    return StackValidationArgs(list(built.values()))


def check_resource(
    policy: Policy, resource_type: str, props: Mapping[str, object], *, name: str = "subject"
) -> list[str]:
    """The messages one resource policy reports for one resource."""
    assert isinstance(policy, ResourceValidationPolicy)
    messages: list[str] = []

    def report(message: str, urn: str | None = None) -> None:
        messages.append(message)

    policy.validate(resource_args(resource_type, props, name=name), report)
    return messages


def check_stack(policy: Policy, resources: Sequence[GraphResource]) -> list[tuple[str, str | None]]:
    """The (message, urn) pairs one stack policy reports for a stack."""
    assert isinstance(policy, StackValidationPolicy)
    reported: list[tuple[str, str | None]] = []

    def report(message: str, urn: str | None = None) -> None:
        reported.append((message, urn))

    policy.validate(stack_args(resources), report)
    return reported


def run_pack(policies: Sequence[Policy], resources: Sequence[GraphResource]) -> list[Finding]:
    """Every violation the pack reports for a stack: resource policies per resource, then stack policies."""
    findings: list[Finding] = []
    for policy in policies:
        level = policy.enforcement_level or EnforcementLevel.ADVISORY
        if isinstance(policy, ResourceValidationPolicy):
            for resource in resources:
                messages = check_resource(policy, resource.type, resource.props, name=resource.name)
                findings += [Finding(policy.name, message, resource.resource_urn, level) for message in messages]
        elif isinstance(policy, StackValidationPolicy):
            findings += [Finding(policy.name, message, urn, level) for message, urn in check_stack(policy, resources)]
    return findings


def with_value(props: Mapping[str, object], path: Sequence[str | int], value: object) -> dict[str, object]:
    """A deep copy of `props` with the value at `path` (dict keys, list indexes) replaced or added."""
    changed = copy.deepcopy(dict(props))
    target: Any = changed
    for step in path[:-1]:
        target = target[step]
    target[path[-1]] = value
    return changed


def without(props: Mapping[str, object], path: Sequence[str | int]) -> dict[str, object]:
    """A deep copy of `props` with the value at `path` removed."""
    changed = copy.deepcopy(dict(props))
    target: Any = changed
    for step in path[:-1]:
        target = target[step]
    del target[path[-1]]
    return changed
