"""Turns the Pulumi program's recorded resource graph into what the policy engine sends the pack.

`tests/infra/pulumi_harness.record_program` runs the real program under mocks and records each
registration (inputs, parent, dependencies). The engine gives a policy pack the same graph: resource
policies get each resource's inputs, stack policies get all of them with their dependencies.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from tests.infra.pulumi_harness import RecordedResource
from tests.policies.policy_runner import UNKNOWN_VALUE, GraphResource


def graph_of(recorded: Iterable[RecordedResource]) -> list[GraphResource]:
    """The analyzer's view of a recorded program run."""
    return [
        GraphResource(
            type=resource.type,
            name=resource.name,
            props=resource.inputs,
            urn=resource.urn,
            parent=resource.parent or None,
            dependencies=resource.dependencies,
            property_dependencies={prop: urns for prop, urns in resource.property_dependencies.items() if urns},
        )
        for resource in recorded
    ]


def as_first_preview(graph: Sequence[GraphResource]) -> list[GraphResource]:
    """The graph as a first `pulumi preview` sees it: every property computed from another resource is
    unknown (nothing exists yet). Coarser than the engine, which keeps the known parts of an object."""
    return [
        dataclasses.replace(
            resource,
            props={
                prop: UNKNOWN_VALUE if resource.property_dependencies.get(prop) else value
                for prop, value in resource.props.items()
            },
        )
        for resource in graph
    ]


def mutated(
    graph: Sequence[GraphResource], resource_type: str, name: str, change: Callable[[dict[str, Any]], object]
) -> list[GraphResource]:
    """A copy of `graph` in which `change` edited (in place) the props of the one resource (type, name)."""
    target = find(graph, resource_type, name)
    props = copy.deepcopy(dict(target.props))
    change(props)
    return [dataclasses.replace(resource, props=props) if resource is target else resource for resource in graph]


def without_resource(graph: Sequence[GraphResource], resource_type: str) -> list[GraphResource]:
    """A copy of `graph` without the resources of one type."""
    return [resource for resource in graph if resource.type != resource_type]


def find(graph: Sequence[GraphResource], resource_type: str, name: str) -> GraphResource:
    """The one resource (type, name) of the graph."""
    matches = [resource for resource in graph if (resource.type, resource.name) == (resource_type, name)]
    assert len(matches) == 1, f"expected one {resource_type} named {name}, found {len(matches)}"
    return matches[0]
