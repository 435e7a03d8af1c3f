"""The policy pack's contents: its name and every rule, gathered from the area modules."""

from __future__ import annotations

from typing import Final

from pulumi_policy import Policy

from policies import cloudfront, compute, iam, iam_database, images, storage

PACK_NAME: Final = "voicestack-guardrails"

ALL_POLICIES: Final[list[Policy]] = [
    *images.POLICIES,
    *iam.POLICIES,
    *iam_database.POLICIES,
    *storage.POLICIES,
    *cloudfront.POLICIES,
    *compute.POLICIES,
]
