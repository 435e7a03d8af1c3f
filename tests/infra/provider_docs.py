"""The numeric ranges the AWS provider itself documents for its inputs, checked against the recorded graph.

botocore's models give the API's limits; the provider (pulumi_aws, bridged from the Terraform AWS
provider) validates some inputs more tightly before it ever calls AWS: AgentcoreMemory's
`event_expiry_duration` is 7..365 days (the Terraform resource's `int32validator.Between(7, 365)`),
where CreateMemory's model says 3..3650. Those rules are written in the docstrings of the installed
`pulumi_aws` argument classes (`:param ... event_expiry_duration: ... in the range of 7 to 365.`), so
they are read from there, not copied: an upgrade of pulumi_aws brings its new ranges with it.

`documented_ranges(args_class)` reads one class; `range_problems(resource)` walks a recorded
resource's inputs (camelCase, nested objects and lists) through the argument classes of its type.
"""

from __future__ import annotations

import importlib
import inspect
import re
from collections.abc import Mapping
from functools import cache
from typing import Any, Final

from tests.infra.pulumi_harness import RecordedResource

_PARAM: Final = re.compile(r"^\s*:param (?P<type>.+?) (?P<name>\w+): (?P<doc>.*)$", re.MULTILINE)
_RANGE: Final = re.compile(
    # Numbers, not lengths: "between 1 and 255 characters" is a string rule, not a numeric range.
    r"(?:range of|between)\s+`?(?P<low>-?\d+)`?\s+(?:to|and)\s+`?(?P<high>-?\d+)(?!\d)`?(?!\s*char)"
)
_NESTED: Final = re.compile(r"'(?P<name>\w+Args)'")
_TOKEN: Final = re.compile(r"aws:(?P<module>[a-zA-Z0-9]+)/\w+:(?P<name>\w+)")


@cache
def documented_ranges(args_class: type) -> dict[str, tuple[int, int]]:
    """snake_case input -> (low, high) for every numeric range the class's docstring states."""
    ranges: dict[str, tuple[int, int]] = {}
    for param in _PARAM.finditer(_init_doc(args_class)):
        match = _RANGE.search(param["doc"])
        if match is not None:
            ranges[param["name"]] = (int(match["low"]), int(match["high"]))
    return ranges


@cache
def nested_classes(args_class: type) -> dict[str, type]:
    """snake_case input -> the argument class of its objects (list items included), when it has one."""
    module = importlib.import_module(args_class.__module__.rsplit(".", 1)[0])
    nested: dict[str, type] = {}
    for param in _PARAM.finditer(_init_doc(args_class)):
        match = _NESTED.search(param["type"])
        if match is not None and hasattr(module, match["name"]):
            nested[param["name"]] = getattr(module, match["name"])
    return nested


def _init_doc(args_class: type) -> str:
    # The `:param` lines live in the constructor's docstring of each pulumi_aws argument class.
    return inspect.getdoc(vars(args_class)["__init__"]) or ""


def args_class_of(resource_type: str) -> type | None:
    """`aws:bedrock/agentcoreMemory:AgentcoreMemory` -> `pulumi_aws.bedrock.AgentcoreMemoryArgs`."""
    match = _TOKEN.fullmatch(resource_type)
    if match is None:
        return None
    module = importlib.import_module(f"pulumi_aws.{match['module']}")
    found = getattr(module, f"{match['name']}Args", None)
    return found if isinstance(found, type) else None


def range_problems(resource: RecordedResource) -> list[str]:
    """Every numeric input outside the range the provider documents for it (empty: all within)."""
    args_class = args_class_of(resource.type)
    if args_class is None:
        return []
    problems: list[str] = []
    _walk(args_class, resource.inputs, resource.type.rsplit(":", 1)[-1], problems)
    return problems


def _walk(args_class: type, inputs: Mapping[str, Any], path: str, problems: list[str]) -> None:
    ranges, nested = documented_ranges(args_class), nested_classes(args_class)
    for key, value in inputs.items():
        name = _snake(key)
        where = f"{path}.{key}"
        if name in ranges and isinstance(value, int | float) and not isinstance(value, bool):
            low, high = ranges[name]
            if not low <= value <= high:
                problems.append(f"{where}: {value:g} outside {low}..{high} ({args_class.__name__} documents it)")
        if name in nested:
            for index, item in enumerate(value if isinstance(value, list) else [value]):
                if isinstance(item, Mapping):
                    _walk(nested[name], item, f"{where}[{index}]" if isinstance(value, list) else where, problems)


def _snake(camel: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", camel).lower()
