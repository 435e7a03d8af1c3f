"""Plain property views: unknowns (sentinels or proxies that raise) become the UNKNOWN marker."""

from __future__ import annotations

import pulumi
from pulumi_policy.proxy import (
    UNKNOWN_BOOLEAN_VALUE,
    UNKNOWN_NUMBER_VALUE,
    UNKNOWN_OBJECT_VALUE,
    unknown_checking_proxy,
)

from policies.values import UNKNOWN, is_unknown, lookup, plain, plain_props
from tests.policies.policy_runner import UNKNOWN_VALUE

RAW: dict[str, object] = {
    "name": "speech",
    "count": 1.0,
    "flag": UNKNOWN_BOOLEAN_VALUE,
    "nested": {"inner": UNKNOWN_NUMBER_VALUE, "list": ["a", UNKNOWN_VALUE, {"deep": UNKNOWN_OBJECT_VALUE}]},
    "empty": None,
}
PLAIN: dict[str, object] = {
    "name": "speech",
    "count": 1.0,
    "flag": UNKNOWN,
    "nested": {"inner": UNKNOWN, "list": ["a", UNKNOWN, {"deep": UNKNOWN}]},
    "empty": None,
}


def test_sdk_proxies_become_plain_values_with_unknown_markers() -> None:
    assert plain_props(unknown_checking_proxy(RAW)) == PLAIN


def test_raw_sentinels_become_unknown_markers_too() -> None:
    assert plain_props(RAW) == PLAIN


def test_a_whole_unknown_property_is_one_marker() -> None:
    assert plain_props(unknown_checking_proxy({"labels": UNKNOWN_OBJECT_VALUE})) == {"labels": UNKNOWN}


def test_other_values_pass_through_untouched() -> None:
    asset = pulumi.FileAsset("/dev/null")
    assert plain(asset) is asset
    assert plain(b"bytes") == b"bytes"
    assert plain(True) is True


def test_lookup_tells_missing_from_unknown() -> None:
    assert lookup(PLAIN, "nested", "list") == ["a", UNKNOWN, {"deep": UNKNOWN}]
    assert lookup(PLAIN, "nested", "inner") is UNKNOWN
    assert lookup(PLAIN, "flag", "below") is UNKNOWN
    assert lookup(PLAIN, "nested", "absent") is None
    assert lookup(PLAIN, "name", "below") is None
    assert lookup(PLAIN, "empty", "below") is None


def test_is_unknown_looks_inside_containers() -> None:
    assert is_unknown(PLAIN["nested"])
    assert is_unknown(UNKNOWN)
    assert not is_unknown({"name": "speech", "list": ["a", {"b": None}]})
