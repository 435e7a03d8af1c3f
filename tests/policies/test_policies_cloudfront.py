"""The hosted page's rules: HTTPS only on every cache behavior, and origin access scoped to one distribution
(known-good properties, one change, the exact message)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from policies import cloudfront
from tests.policies.policy_runner import UNKNOWN_VALUE, check_resource, with_value

DISTRIBUTION = "aws:cloudfront/distribution:Distribution"
BUCKET_POLICY = "aws:s3/bucketPolicy:BucketPolicy"
DISTRIBUTION_ARN = "arn:aws:cloudfront::123456789012:distribution/E6B2ABCDEF1234"

DISTRIBUTION_PROPS: dict[str, object] = {
    "enabled": True,
    "defaultCacheBehavior": {"targetOriginId": "page-bucket", "viewerProtocolPolicy": "redirect-to-https"},
    "orderedCacheBehaviors": [{"pathPattern": "/api/*", "viewerProtocolPolicy": "https-only"}],
}
DENY_HTTP: dict[str, Any] = {
    "Sid": "DenyInsecureTransport",
    "Effect": "Deny",
    "Principal": "*",
    "Action": "s3:*",
    "Resource": ["arn:aws:s3:::page-bucket-1", "arn:aws:s3:::page-bucket-1/*"],
    "Condition": {"Bool": {"aws:SecureTransport": "false"}},
}
READ: dict[str, Any] = {
    "Sid": "CloudFrontReadsThePage",
    "Effect": "Allow",
    "Principal": {"Service": "cloudfront.amazonaws.com"},
    "Action": "s3:GetObject",
    "Resource": "arn:aws:s3:::page-bucket-1/*",
    "Condition": {"StringEquals": {"AWS:SourceArn": DISTRIBUTION_ARN}},
}


def https_messages(props: dict[str, object]) -> list[str]:
    return check_resource(cloudfront.CLOUDFRONT_HTTPS_ONLY, DISTRIBUTION, props)


def policy(*statements: dict[str, Any]) -> dict[str, object]:
    return {"bucket": "page-bucket-1", "policy": json.dumps({"Version": "2012-10-17", "Statement": list(statements)})}


def scope_messages(props: dict[str, object]) -> list[str]:
    return check_resource(cloudfront.CLOUDFRONT_ORIGIN_ACCESS_SCOPED, BUCKET_POLICY, props)


# --- cloudfront-https-only ---------------------------------------------------------------------------


def test_a_distribution_that_sends_viewers_to_https_passes() -> None:
    assert https_messages(DISTRIBUTION_PROPS) == []


def test_allow_all_on_the_default_behavior_fails() -> None:
    props = with_value(DISTRIBUTION_PROPS, ["defaultCacheBehavior", "viewerProtocolPolicy"], "allow-all")
    assert https_messages(props) == [
        "The CloudFront distribution's defaultCacheBehavior.viewerProtocolPolicy must be redirect-to-https or "
        'https-only; it is "allow-all".'
    ]


def test_an_ordered_behavior_without_a_viewer_policy_fails() -> None:
    props = with_value(DISTRIBUTION_PROPS, ["orderedCacheBehaviors", 0], {"pathPattern": "/x/*"})
    assert https_messages(props) == [
        "The CloudFront distribution's orderedCacheBehaviors[0].viewerProtocolPolicy must be redirect-to-https or "
        "https-only; it is not set."
    ]


@pytest.mark.parametrize(
    "path", [["defaultCacheBehavior"], ["defaultCacheBehavior", "viewerProtocolPolicy"], ["orderedCacheBehaviors"]]
)
def test_unknown_behaviors_report_nothing(path: list[str | int]) -> None:
    assert https_messages(with_value(DISTRIBUTION_PROPS, path, UNKNOWN_VALUE)) == []


# --- cloudfront-origin-access-scoped ----------------------------------------------------------------


def test_a_bucket_read_by_one_distribution_passes() -> None:
    assert scope_messages(policy(DENY_HTTP, READ)) == []
    lower_case_key = {**READ, "Condition": {"ArnEquals": {"aws:SourceArn": [DISTRIBUTION_ARN]}}}
    assert scope_messages(policy(lower_case_key)) == []


def test_statements_for_other_principals_are_not_this_rules_concern() -> None:
    other = {**READ, "Principal": {"AWS": "arn:aws:iam::123456789012:role/reader"}}
    del other["Condition"]
    assert scope_messages(policy(DENY_HTTP, other)) == []


EXPECTATION = (
    'Statement "CloudFrontReadsThePage" of the bucket policy lets CloudFront read the bucket; it must be conditioned '
    "on AWS:SourceArn equal to one distribution's ARN (StringEquals or ArnEquals), so that no other distribution "
    "reads it through origin access control; "
)


@pytest.mark.parametrize(
    ("condition", "problem"),
    [
        (None, "it has no Condition"),
        ({"StringEquals": {"AWS:SourceAccount": "123456789012"}}, "it has no AWS:SourceArn condition"),
        ({"StringLike": {"AWS:SourceArn": DISTRIBUTION_ARN}}, "it tests AWS:SourceArn with StringLike"),
        (
            {"StringEquals": {"AWS:SourceArn": "arn:aws:cloudfront::123456789012:distribution/*"}},
            'its AWS:SourceArn is "arn:aws:cloudfront::123456789012:distribution/*"',
        ),
        (
            {"StringEquals": {"AWS:SourceArn": "arn:aws:cloudfront::123456789012:origin-access-control/E1"}},
            'its AWS:SourceArn is "arn:aws:cloudfront::123456789012:origin-access-control/E1"',
        ),
    ],
)
def test_cloudfront_reading_without_one_distributions_arn_fails(condition: object, problem: str) -> None:
    statement = {key: value for key, value in READ.items() if key != "Condition"}
    if condition is not None:
        statement["Condition"] = condition
    assert scope_messages(policy(DENY_HTTP, statement)) == [EXPECTATION + problem + "."]


def test_a_list_of_services_naming_cloudfront_counts() -> None:
    statement = {**READ, "Principal": {"Service": ["logging.s3.amazonaws.com", "cloudfront.amazonaws.com"]}}
    del statement["Condition"]
    assert scope_messages(policy(statement)) == [EXPECTATION + "it has no Condition."]


def test_unknown_documents_and_values_report_nothing() -> None:
    assert scope_messages({"bucket": "b", "policy": UNKNOWN_VALUE}) == []
    pending = {**READ, "Condition": {"StringEquals": {"AWS:SourceArn": UNKNOWN_VALUE}}}
    assert scope_messages({"bucket": "b", "policy": {"Version": "2012-10-17", "Statement": [pending]}}) == []


def test_a_document_that_is_not_json_is_named() -> None:
    assert scope_messages({"bucket": "b", "policy": "{"}) == [
        "The bucket policy must be a JSON policy document; it is not JSON (Expecting property name enclosed in "
        "double quotes at character 1)."
    ]
