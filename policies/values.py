"""Plain views of resource properties, with values that are unknown during preview made explicit.

The policy SDK hands rules proxies that raise `UnknownValueError` when a rule touches a value Pulumi
cannot know before the update runs (an ARN not yet allocated, a JSON document built from one). Left
alone, that error stops the whole rule. Rules here instead see plain dicts and lists in which each
unknown is the `UNKNOWN` marker, decide what they can from the known values, and stay silent on the
unknown ones: `pulumi up` runs the pack again with every value known.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from typing import Final

# The SDK keeps these in its proxy module; they are the wire encoding of unknowns, stable since 2019.
from pulumi_policy.proxy import (
    UNKNOWN_ARCHIVE_VALUE,
    UNKNOWN_ARRAY_VALUE,
    UNKNOWN_ASSET_VALUE,
    UNKNOWN_BOOLEAN_VALUE,
    UNKNOWN_NUMBER_VALUE,
    UNKNOWN_OBJECT_VALUE,
    UNKNOWN_STRING_VALUE,
    UnknownValueError,
)


class Unknown(enum.Enum):
    """A property value that is unknown until the update runs (it only occurs during preview)."""

    VALUE = "unknown"


UNKNOWN: Final = Unknown.VALUE

UNKNOWN_SENTINELS: Final = frozenset(
    {
        UNKNOWN_BOOLEAN_VALUE,
        UNKNOWN_NUMBER_VALUE,
        UNKNOWN_STRING_VALUE,
        UNKNOWN_ARRAY_VALUE,
        UNKNOWN_ASSET_VALUE,
        UNKNOWN_ARCHIVE_VALUE,
        UNKNOWN_OBJECT_VALUE,
    }
)
"""The strings the engine sends in place of unknown values."""

Props = Mapping[str, object]
"""A resource's properties as plain values (camelCase keys, as the engine sends them)."""


def plain(value: object) -> object:
    """Copies `value` into plain dicts and lists, each unknown replaced by `UNKNOWN`.

    Accepts the SDK's unknown-checking proxies as well as raw deserialized properties.
    """
    if isinstance(value, str):
        return UNKNOWN if value in UNKNOWN_SENTINELS else value
    if isinstance(value, Mapping):
        return plain_props(value)
    if isinstance(value, Sequence) and not isinstance(value, bytes | bytearray):
        return [_plain_element(value, index) for index in range(len(value))]
    return value


def plain_props(props: Mapping[str, object]) -> Props:
    """The plain copy of a resource's properties (see `plain`)."""
    return {str(key): _plain_entry(props, key) for key in props}


# One accessor per container kind: the proxies raise UnknownValueError from __getitem__.
def _plain_entry(mapping: Mapping[str, object], key: str) -> object:
    try:
        return plain(mapping[key])
    except UnknownValueError:
        return UNKNOWN


def _plain_element(sequence: Sequence[object], index: int) -> object:
    try:
        return plain(sequence[index])
    except UnknownValueError:
        return UNKNOWN


def lookup(props: object, *path: str) -> object:
    """The value at `path` in nested dicts: `None` when a step is missing, null or not a dict, `UNKNOWN`
    when a step is unknown."""
    value = props
    for key in path:
        if value is UNKNOWN:
            return UNKNOWN
        if not isinstance(value, Mapping):
            return None
        value = value.get(key)
    return value


def is_unknown(value: object) -> bool:
    """Whether `value`, or anything inside it, is unknown."""
    if value is UNKNOWN:
        return True
    if isinstance(value, Mapping):
        return any(is_unknown(item) for item in value.values())
    if isinstance(value, list):
        return any(is_unknown(item) for item in value)
    return False
