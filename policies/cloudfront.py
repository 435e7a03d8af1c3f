"""Rules for the hosted page: CloudFront serves it over HTTPS only, and a bucket that lets CloudFront read it
through origin access control names the one distribution that may (the confused-deputy guard)."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Final

from pulumi_policy import Policy

from policies.adapters import resource_policy
from policies.iam_documents import PolicyDocumentError, raw_statements, statement_label
from policies.values import UNKNOWN, Props, is_unknown, lookup

DISTRIBUTION_TYPE: Final = "aws:cloudfront/distribution:Distribution"
BUCKET_POLICY_TYPE: Final = "aws:s3/bucketPolicy:BucketPolicy"
HTTPS_VIEWER_POLICIES: Final = ("redirect-to-https", "https-only")
CLOUDFRONT_SERVICE: Final = "cloudfront.amazonaws.com"
SOURCE_ARN_KEY: Final = "aws:sourcearn"
"""Condition keys are case-insensitive; AWS's origin access control example writes `AWS:SourceArn`."""
EXACT_OPERATORS: Final = ("StringEquals", "ArnEquals")
_DISTRIBUTION_ARN: Final = re.compile(r"arn:aws[a-z-]*:cloudfront::\d{12}:distribution/[A-Z0-9]+")


def _shown(value: object) -> str:
    return json.dumps(value, default=str)


def check_https_only(props: Props) -> list[str]:
    """Every cache behavior of a distribution sends viewers to HTTPS (redirect-to-https or https-only)."""
    behaviors: list[tuple[str, object]] = [("defaultCacheBehavior", props.get("defaultCacheBehavior"))]
    ordered = props.get("orderedCacheBehaviors")
    if isinstance(ordered, list):
        behaviors += [(f"orderedCacheBehaviors[{index}]", entry) for index, entry in enumerate(ordered)]
    messages: list[str] = []
    allowed = " or ".join(HTTPS_VIEWER_POLICIES)
    for where, behavior in behaviors:
        if behavior is UNKNOWN:
            continue
        value = lookup(behavior, "viewerProtocolPolicy")
        if is_unknown(value) or value in HTTPS_VIEWER_POLICIES:
            continue
        state = "it is not set" if value is None else f"it is {_shown(value)}"
        messages.append(f"The CloudFront distribution's {where}.viewerProtocolPolicy must be {allowed}; {state}.")
    return messages


def _names_cloudfront(principal: object) -> bool:
    service = lookup(principal, "Service")
    services = service if isinstance(service, list) else [service]
    return CLOUDFRONT_SERVICE in services


def _source_arn_problem(condition: object) -> str | None:
    """What is wrong with a statement's AWS:SourceArn condition (None: it names exactly one distribution)."""
    if not isinstance(condition, Mapping):
        return "it has no Condition"
    tests = [
        (operator, value)
        for operator, keys in condition.items()
        if isinstance(keys, Mapping)
        for key, value in keys.items()
        if key.lower() == SOURCE_ARN_KEY
    ]
    if not tests:
        return "it has no AWS:SourceArn condition"
    for operator, value in tests:
        if operator not in EXACT_OPERATORS:
            return f"it tests AWS:SourceArn with {operator}"
        arns = value if isinstance(value, list) else [value]
        if any(is_unknown(arn) for arn in arns):
            return None
        wrong = [arn for arn in arns if not isinstance(arn, str) or _DISTRIBUTION_ARN.fullmatch(arn) is None]
        if wrong:
            return f"its AWS:SourceArn is {_shown(wrong[0])}"
    return None


def check_origin_access_scoped(props: Props) -> list[str]:
    """A bucket policy statement that allows the CloudFront service is conditioned on one distribution's ARN."""
    try:
        entries = raw_statements(props.get("policy"))
    except PolicyDocumentError as error:
        return [f"The bucket policy must be a JSON policy document; {error}."]
    if entries is UNKNOWN:
        return []
    messages: list[str] = []
    for index, entry in enumerate(entries, start=1):
        if entry.get("Effect") != "Allow" or not _names_cloudfront(entry.get("Principal")):
            continue
        if is_unknown(entry.get("Condition")):
            continue
        problem = _source_arn_problem(entry.get("Condition"))
        if problem is not None:
            label = statement_label(entry, index)
            messages.append(
                f"{label[:1].upper()}{label[1:]} of the bucket policy lets CloudFront read the bucket; it must be "
                f"conditioned on AWS:SourceArn equal to one distribution's ARN ({' or '.join(EXACT_OPERATORS)}), "
                f"so that no other distribution reads it through origin access control; {problem}."
            )
    return messages


CLOUDFRONT_HTTPS_ONLY = resource_policy(
    name="cloudfront-https-only",
    description="CloudFront distributions send viewers to HTTPS on every cache behavior.",
    checks={DISTRIBUTION_TYPE: check_https_only},
)

CLOUDFRONT_ORIGIN_ACCESS_SCOPED = resource_policy(
    name="cloudfront-origin-access-scoped",
    description="A bucket that CloudFront reads through origin access control names the one distribution that may.",
    checks={BUCKET_POLICY_TYPE: check_origin_access_scoped},
)

POLICIES: Final[list[Policy]] = [CLOUDFRONT_HTTPS_ONLY, CLOUDFRONT_ORIGIN_ACCESS_SCOPED]
