"""The storage rules: encrypted, private buckets; scanned images; storage deleted with a non-retaining stack."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping

import pulumi
import pytest

from policies import storage
from tests.policies.policy_runner import (
    UNKNOWN_VALUE,
    GraphResource,
    check_resource,
    check_stack,
    urn_of,
    with_value,
    without,
)

BUCKET = "aws:s3/bucket:Bucket"
ENCRYPTION = "aws:s3/bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration"
PUBLIC_ACCESS = "aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock"
REPOSITORY = "aws:ecr/repository:Repository"

BUCKET_URN = urn_of(BUCKET, "storage-weights")
BLOCK_URN = urn_of(PUBLIC_ACCESS, "storage-weights-public-access")
REPOSITORY_URN = urn_of(REPOSITORY, "storage-images")

BUCKET_PROPS: dict[str, object] = {"forceDestroy": True}
ENCRYPTION_PROPS: dict[str, object] = {
    "bucket": "storage-weights-4c1a2b",
    "rules": [{"applyServerSideEncryptionByDefault": {"sseAlgorithm": "AES256"}}],
}
BLOCK_PROPS: dict[str, object] = {
    "bucket": "storage-weights-4c1a2b",
    "blockPublicAcls": True,
    "blockPublicPolicy": True,
    "ignorePublicAcls": True,
    "restrictPublicBuckets": True,
}
REPOSITORY_PROPS: dict[str, object] = {"forceDelete": True, "imageScanningConfiguration": {"scanOnPush": True}}

ENCRYPTION_REQUIRED = (
    "S3 bucket 'storage-weights' must have default server-side encryption (AES256, aws:kms, aws:kms:dsse), "
    "inline or through a BucketServerSideEncryptionConfiguration; it has none."
)
BLOCK_REQUIRED = (
    "S3 bucket 'storage-weights' must block all public access "
    "(blockPublicAcls, blockPublicPolicy, ignorePublicAcls, restrictPublicBuckets all true)"
)


def graph(
    *,
    bucket: Mapping[str, object] = BUCKET_PROPS,
    encryption: Mapping[str, object] | None = ENCRYPTION_PROPS,
    block: Mapping[str, object] | None = BLOCK_PROPS,
    repository: Mapping[str, object] = REPOSITORY_PROPS,
    linked: bool = True,
) -> list[GraphResource]:
    """The known-good storage graph: `bucket=bucket.id` links (property dependencies) unless not `linked`."""
    dependencies = {"bucket": (BUCKET_URN,)} if linked else {}
    resources = [
        GraphResource(BUCKET, "storage-weights", bucket),
        GraphResource(REPOSITORY, "storage-images", repository),
    ]
    if encryption is not None:
        resources.append(
            GraphResource(ENCRYPTION, "storage-weights-encryption", encryption, property_dependencies=dependencies)
        )
    if block is not None:
        resources.append(
            GraphResource(PUBLIC_ACCESS, "storage-weights-public-access", block, property_dependencies=dependencies)
        )
    return resources


def encryption_violations(resources: list[GraphResource]) -> list[tuple[str, str | None]]:
    return check_stack(storage.S3_BUCKET_ENCRYPTED, resources)


def block_violations(resources: list[GraphResource]) -> list[tuple[str, str | None]]:
    return check_stack(storage.S3_BUCKET_BLOCKS_PUBLIC_ACCESS, resources)


# --- s3-bucket-encrypted ----------------------------------------------------------------------------


def test_bucket_with_an_encryption_configuration_passes() -> None:
    assert encryption_violations(graph()) == []


def test_bucket_with_inline_encryption_passes() -> None:
    inline = {"rule": {"applyServerSideEncryptionByDefault": {"sseAlgorithm": "aws:kms"}, "bucketKeyEnabled": True}}
    assert encryption_violations(graph(bucket={"serverSideEncryptionConfiguration": inline}, encryption=None)) == []


def test_legacy_bucket_v2_with_inline_encryption_passes() -> None:
    inline = [{"rules": [{"applyServerSideEncryptionByDefault": {"sseAlgorithm": "AES256"}}]}]
    bucket = GraphResource(
        "aws:s3/bucketV2:BucketV2", "storage-weights", {"serverSideEncryptionConfigurations": inline}
    )
    assert encryption_violations([bucket]) == []


def test_bucket_without_encryption_fails() -> None:
    assert encryption_violations(graph(encryption=None)) == [(ENCRYPTION_REQUIRED, BUCKET_URN)]


def test_encryption_configuration_of_another_bucket_does_not_count() -> None:
    other = GraphResource(BUCKET, "logs", {})
    resources = [*graph(encryption=None), other]
    resources.append(
        GraphResource(
            ENCRYPTION, "logs-encryption", ENCRYPTION_PROPS, property_dependencies={"bucket": (other.resource_urn,)}
        )
    )
    assert encryption_violations(resources) == [(ENCRYPTION_REQUIRED, BUCKET_URN)]


def test_encryption_configuration_naming_the_bucket_literally_counts() -> None:
    assert encryption_violations(graph(bucket={"bucket": "storage-weights-4c1a2b"}, linked=False)) == []


def test_encryption_configuration_naming_another_bucket_does_not_count() -> None:
    assert encryption_violations(graph(bucket={"bucket": "storage-weights-9f9f9f"}, linked=False)) == [
        (ENCRYPTION_REQUIRED, BUCKET_URN)
    ]


def test_encryption_configuration_without_rules_fails() -> None:
    assert encryption_violations(graph(encryption=without(ENCRYPTION_PROPS, ["rules"]))) == [
        (ENCRYPTION_REQUIRED, BUCKET_URN)
    ]


@pytest.mark.parametrize(
    "encryption",
    [
        with_value(ENCRYPTION_PROPS, ["rules"], UNKNOWN_VALUE),
        with_value(ENCRYPTION_PROPS, ["rules", 0, "applyServerSideEncryptionByDefault", "sseAlgorithm"], UNKNOWN_VALUE),
    ],
    ids=["rules", "algorithm"],
)
def test_unknown_encryption_settings_report_nothing(encryption: dict[str, object]) -> None:
    assert encryption_violations(graph(encryption=encryption)) == []


def test_unknown_inline_encryption_reports_nothing() -> None:
    assert (
        encryption_violations(graph(bucket={"serverSideEncryptionConfiguration": UNKNOWN_VALUE}, encryption=None)) == []
    )


def test_configuration_for_an_unknown_bucket_reports_nothing() -> None:
    encryption = with_value(ENCRYPTION_PROPS, ["bucket"], UNKNOWN_VALUE)
    assert encryption_violations(graph(encryption=encryption, linked=False)) == []


# --- s3-bucket-blocks-public-access -----------------------------------------------------------------


def test_bucket_with_a_complete_public_access_block_passes() -> None:
    assert block_violations(graph()) == []


def test_bucket_without_a_public_access_block_fails() -> None:
    assert block_violations(graph(block=None)) == [
        (f"{BLOCK_REQUIRED}; it has no BucketPublicAccessBlock.", BUCKET_URN)
    ]


def test_public_access_block_with_a_flag_off_fails() -> None:
    assert block_violations(graph(block=with_value(BLOCK_PROPS, ["blockPublicPolicy"], False))) == [
        (
            f"{BLOCK_REQUIRED}; its BucketPublicAccessBlock 'storage-weights-public-access' leaves blockPublicPolicy "
            "not true.",
            BLOCK_URN,
        )
    ]


def test_public_access_block_with_flags_missing_fails() -> None:
    block = without(without(BLOCK_PROPS, ["ignorePublicAcls"]), ["restrictPublicBuckets"])
    assert block_violations(graph(block=block)) == [
        (
            f"{BLOCK_REQUIRED}; its BucketPublicAccessBlock 'storage-weights-public-access' leaves ignorePublicAcls, "
            "restrictPublicBuckets not true.",
            BLOCK_URN,
        )
    ]


def test_every_bucket_needs_its_own_block() -> None:
    other = GraphResource(BUCKET, "logs", {})
    assert block_violations([*graph(), other]) == [
        (
            "S3 bucket 'logs' must block all public access (blockPublicAcls, blockPublicPolicy, ignorePublicAcls, "
            "restrictPublicBuckets all true); it has no BucketPublicAccessBlock.",
            other.resource_urn,
        )
    ]


def test_unknown_flag_reports_nothing() -> None:
    assert block_violations(graph(block=with_value(BLOCK_PROPS, ["blockPublicPolicy"], UNKNOWN_VALUE))) == []


def test_a_flag_that_is_off_is_reported_even_when_another_is_unknown() -> None:
    block = with_value(with_value(BLOCK_PROPS, ["blockPublicPolicy"], False), ["ignorePublicAcls"], UNKNOWN_VALUE)
    assert block_violations(graph(block=block)) == [
        (
            f"{BLOCK_REQUIRED}; its BucketPublicAccessBlock 'storage-weights-public-access' leaves blockPublicPolicy "
            "not true.",
            BLOCK_URN,
        )
    ]


def test_block_for_an_unknown_bucket_reports_nothing() -> None:
    assert block_violations(graph(block=with_value(BLOCK_PROPS, ["bucket"], UNKNOWN_VALUE), linked=False)) == []


# --- ecr-scan-on-push -------------------------------------------------------------------------------


def scan_messages(props: Mapping[str, object]) -> list[str]:
    return check_resource(storage.ECR_SCAN_ON_PUSH, REPOSITORY, props)


def test_repository_scanning_on_push_passes() -> None:
    assert scan_messages(REPOSITORY_PROPS) == []


def test_repository_not_scanning_on_push_fails() -> None:
    assert scan_messages(with_value(REPOSITORY_PROPS, ["imageScanningConfiguration", "scanOnPush"], False)) == [
        "The ECR repository must set imageScanningConfiguration.scanOnPush to true; it is false."
    ]


def test_repository_without_scanning_configuration_fails() -> None:
    assert scan_messages(without(REPOSITORY_PROPS, ["imageScanningConfiguration"])) == [
        "The ECR repository must set imageScanningConfiguration.scanOnPush to true; it is not set."
    ]


def test_unknown_scanning_configuration_reports_nothing() -> None:
    assert scan_messages(with_value(REPOSITORY_PROPS, ["imageScanningConfiguration"], UNKNOWN_VALUE)) == []
    assert (
        scan_messages(with_value(REPOSITORY_PROPS, ["imageScanningConfiguration", "scanOnPush"], UNKNOWN_VALUE)) == []
    )


# --- storage-deleted-with-stack (advisory) ----------------------------------------------------------


StackConfig = Callable[[str | None], None]


@pytest.fixture
def retain_storage() -> Iterator[StackConfig]:
    """Sets voicestack:retainStorage as the pack sees it (the SDK loads PULUMI_CONFIG into the runtime
    config before each analysis; None: unset). The previous runtime config is restored afterwards."""
    previous = dict(pulumi.runtime.config.CONFIG.get())

    def configure(value: str | None) -> None:
        pulumi.runtime.set_all_config({} if value is None else {"voicestack:retainStorage": value})

    configure(None)
    yield configure
    pulumi.runtime.set_all_config(previous)


def deletion_violations(resources: list[GraphResource]) -> list[tuple[str, str | None]]:
    return check_stack(storage.STORAGE_DELETED_WITH_STACK, resources)


def test_the_deletion_rule_is_advisory_and_every_other_storage_rule_mandatory() -> None:
    assert storage.STORAGE_DELETED_WITH_STACK.enforcement_level is not None
    assert storage.STORAGE_DELETED_WITH_STACK.enforcement_level.value == "advisory"
    others = [storage.S3_BUCKET_ENCRYPTED, storage.S3_BUCKET_BLOCKS_PUBLIC_ACCESS, storage.ECR_SCAN_ON_PUSH]
    assert [policy.enforcement_level.value for policy in others if policy.enforcement_level] == ["mandatory"] * 3


@pytest.mark.parametrize("retain", ["false", None])
def test_storage_set_to_be_deleted_passes_when_not_retained(retain_storage: StackConfig, retain: str | None) -> None:
    retain_storage(retain)
    assert deletion_violations(graph()) == []


def test_storage_left_behind_fails_when_not_retained(retain_storage: StackConfig) -> None:
    retain_storage("false")
    resources = graph(bucket={"forceDestroy": False}, repository=without(REPOSITORY_PROPS, ["forceDelete"]))
    assert deletion_violations(resources) == [
        (
            "S3 bucket 'storage-weights' must set forceDestroy to true so that it is deleted with the stack "
            "(voicestack:retainStorage is false); it is false.",
            BUCKET_URN,
        ),
        (
            "ECR repository 'storage-images' must set forceDelete to true so that it is deleted with the stack "
            "(voicestack:retainStorage is false); it is not set.",
            REPOSITORY_URN,
        ),
    ]


def test_unset_setting_means_storage_is_not_retained(retain_storage: StackConfig) -> None:
    assert [urn for _, urn in deletion_violations(graph(bucket={}))] == [BUCKET_URN]


def test_retained_storage_may_stay(retain_storage: StackConfig) -> None:
    retain_storage("true")
    resources = graph(bucket={"forceDestroy": False}, repository=without(REPOSITORY_PROPS, ["forceDelete"]))
    assert deletion_violations(resources) == []


def test_invalid_setting_fails(retain_storage: StackConfig) -> None:
    retain_storage("yes")
    assert deletion_violations(graph()) == [('voicestack:retainStorage must be "true" or "false"; it is "yes".', None)]


def test_unknown_force_flags_report_nothing(retain_storage: StackConfig) -> None:
    resources = graph(bucket={"forceDestroy": UNKNOWN_VALUE}, repository={"forceDelete": UNKNOWN_VALUE})
    assert deletion_violations(resources) == []


def test_setting_comes_from_the_pulumi_config_environment(
    monkeypatch: pytest.MonkeyPatch, retain_storage: StackConfig
) -> None:
    monkeypatch.setenv("PULUMI_CONFIG", '{"voicestack:retainStorage": "true"}')
    assert deletion_violations(graph(bucket={"forceDestroy": False})) == []
    monkeypatch.setenv("PULUMI_CONFIG", '{"voicestack:retainStorage": "false"}')
    assert [urn for _, urn in deletion_violations(graph(bucket={"forceDestroy": False}))] == [BUCKET_URN]


POOL = "aws:cognito/userPool:UserPool"
POOL_URN = urn_of(POOL, "signin-users")


@pytest.mark.parametrize("protection", ["INACTIVE", None, UNKNOWN_VALUE])
def test_a_user_pool_without_deletion_protection_passes(retain_storage: StackConfig, protection: object) -> None:
    retain_storage("false")
    props = {} if protection is None else {"deletionProtection": protection}
    assert deletion_violations([*graph(), GraphResource(POOL, "signin-users", props)]) == []


def test_a_protected_user_pool_fails_when_not_retained_and_may_stay_when_retained(
    retain_storage: StackConfig,
) -> None:
    resources = [*graph(), GraphResource(POOL, "signin-users", {"deletionProtection": "ACTIVE"})]
    retain_storage("false")
    assert deletion_violations(resources) == [
        (
            "Cognito user pool 'signin-users' must leave deletionProtection INACTIVE so that it is deleted with the "
            'stack (voicestack:retainStorage is false); it is "ACTIVE".',
            POOL_URN,
        )
    ]
    retain_storage("true")
    assert deletion_violations(resources) == []
