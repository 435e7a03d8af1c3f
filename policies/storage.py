"""Rules for storage: buckets are encrypted and private, images are scanned, and a stack that does not
retain its storage takes it along when destroyed (buckets, repositories, and the sign-in pool's accounts)."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Final

import pulumi
from pulumi_policy import EnforcementLevel, Policy

from policies.adapters import StackCheck, StackResource, Violation, resource_policy, stack_policy
from policies.values import UNKNOWN, Props, is_unknown, lookup

BUCKET_TYPES: Final = ("aws:s3/bucket:Bucket", "aws:s3/bucketV2:BucketV2")
ENCRYPTION_TYPES: Final = (
    "aws:s3/bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration",
    "aws:s3/bucketServerSideEncryptionConfigurationV2:BucketServerSideEncryptionConfigurationV2",
)
PUBLIC_ACCESS_BLOCK_TYPE: Final = "aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock"
REPOSITORY_TYPE: Final = "aws:ecr/repository:Repository"
USER_POOL_TYPE: Final = "aws:cognito/userPool:UserPool"

SSE_ALGORITHMS: Final = frozenset({"AES256", "aws:kms", "aws:kms:dsse"})
PUBLIC_ACCESS_FLAGS: Final = ("blockPublicAcls", "blockPublicPolicy", "ignorePublicAcls", "restrictPublicBuckets")

RETAIN_STORAGE_KEY: Final = "voicestack:retainStorage"
"""The stack setting that keeps the bucket and repository when the stack is destroyed."""


def _shown(value: object) -> str:
    """A property value as a message shows it (JSON spelling: `false`, `"x"`)."""
    return json.dumps(value, default=str)


def _targets(config: StackResource, bucket: StackResource) -> bool | None:
    """Whether a bucket-level resource (`bucket=b.id`) belongs to `bucket`; `None` when undecidable."""
    if config.depends_through("bucket", bucket.urn):
        return True
    target, name = config.props.get("bucket"), bucket.props.get("bucket")
    if isinstance(target, str) and isinstance(name, str):
        return target == name
    if target is UNKNOWN and not config.property_dependencies.get("bucket"):
        return None
    return False


def _attached(
    resources: Sequence[StackResource], types: Sequence[str], bucket: StackResource
) -> tuple[list[StackResource], bool]:
    """The resources of `types` that configure `bucket`, and whether some other one might (unknown)."""
    attached, undecided = [], False
    for resource in resources:
        if resource.type not in types:
            continue
        belongs = _targets(resource, bucket)
        attached += [resource] if belongs else []
        undecided = undecided or belongs is None
    return attached, undecided


def _rule_algorithms(rules: object) -> list[object]:
    entries = rules if isinstance(rules, list) else [rules]
    return [lookup(rule, "applyServerSideEncryptionByDefault", "sseAlgorithm") for rule in entries if rule is not None]


def _inline_algorithms(bucket: StackResource) -> list[object]:
    inline = bucket.props.get("serverSideEncryptionConfiguration")  # Bucket: one object with one `rule`
    legacy = bucket.props.get("serverSideEncryptionConfigurations")  # BucketV2: a list with `rules`
    found: list[object] = [UNKNOWN] if inline is UNKNOWN or legacy is UNKNOWN else []
    found += _rule_algorithms(lookup(inline, "rule")) if isinstance(inline, dict) else []
    for entry in legacy if isinstance(legacy, list) else []:
        found += _rule_algorithms(lookup(entry, "rules"))
    return found


def check_buckets_encrypted(resources: Sequence[StackResource]) -> list[Violation]:
    """Every bucket has default encryption, inline or through a BucketServerSideEncryptionConfiguration."""
    violations: list[Violation] = []
    for bucket in (resource for resource in resources if resource.type in BUCKET_TYPES):
        configs, undecided = _attached(resources, ENCRYPTION_TYPES, bucket)
        algorithms = _inline_algorithms(bucket)
        for config in configs:
            rules = config.props.get("rules")
            algorithms += [UNKNOWN] if rules is UNKNOWN else _rule_algorithms(rules or [])
        if any(algorithm in SSE_ALGORITHMS for algorithm in algorithms):
            continue
        if undecided or any(is_unknown(algorithm) for algorithm in algorithms):
            continue
        algorithms_allowed = ", ".join(sorted(SSE_ALGORITHMS))
        violations.append(
            Violation(
                f"S3 bucket '{bucket.name}' must have default server-side encryption ({algorithms_allowed}), "
                "inline or through a BucketServerSideEncryptionConfiguration; it has none.",
                bucket.urn,
            )
        )
    return violations


def check_buckets_block_public_access(resources: Sequence[StackResource]) -> list[Violation]:
    """Every bucket has a BucketPublicAccessBlock with all four flags true."""
    violations: list[Violation] = []
    requirement = f"must block all public access ({', '.join(PUBLIC_ACCESS_FLAGS)} all true)"
    for bucket in (resource for resource in resources if resource.type in BUCKET_TYPES):
        blocks, undecided = _attached(resources, (PUBLIC_ACCESS_BLOCK_TYPE,), bucket)
        if not blocks:
            if not undecided:
                violations.append(
                    Violation(
                        f"S3 bucket '{bucket.name}' {requirement}; it has no BucketPublicAccessBlock.", bucket.urn
                    )
                )
            continue
        # A flag that is unknown during preview may still turn out true; one that is false or unset will not.
        gaps = {
            block.urn: [flag for flag in PUBLIC_ACCESS_FLAGS if block.props.get(flag) not in (True, UNKNOWN)]
            for block in blocks
        }
        if any(not gap for gap in gaps.values()):
            continue
        violations += [
            Violation(
                f"S3 bucket '{bucket.name}' {requirement}; its BucketPublicAccessBlock '{block.name}' "
                f"leaves {', '.join(gaps[block.urn])} not true.",
                block.urn,
            )
            for block in blocks
        ]
    return violations


def check_scan_on_push(props: Props) -> list[str]:
    """The repository scans every pushed image for vulnerabilities."""
    value = lookup(props, "imageScanningConfiguration", "scanOnPush")
    if value is UNKNOWN or value is True:
        return []
    state = "it is not set" if value is None else f"it is {_shown(value)}"
    return [f"The ECR repository must set imageScanningConfiguration.scanOnPush to true; {state}."]


def check_storage_deleted_with_stack(resources: Sequence[StackResource], retain_storage: str | None) -> list[Violation]:
    """Unless the stack retains storage, buckets set forceDestroy, repositories forceDelete, and user pools leave
    deletion protection off (Cognito refuses to delete a protected pool, so `pulumi destroy` would fail on it).

    `retain_storage` is the stack's `voicestack:retainStorage` as configured ("true"/"false"; unset = false).
    """
    if retain_storage not in (None, "true", "false"):
        return [Violation(f'{RETAIN_STORAGE_KEY} must be "true" or "false"; it is {_shown(retain_storage)}.', None)]
    if retain_storage == "true":
        return []
    violations: list[Violation] = []
    why = f"so that it is deleted with the stack ({RETAIN_STORAGE_KEY} is false)"
    for resource in resources:
        if resource.type in BUCKET_TYPES:
            subject, flag = f"S3 bucket '{resource.name}'", "forceDestroy"
        elif resource.type == REPOSITORY_TYPE:
            subject, flag = f"ECR repository '{resource.name}'", "forceDelete"
        elif resource.type == USER_POOL_TYPE:
            protection = resource.props.get("deletionProtection")
            if protection == "ACTIVE":
                violations.append(
                    Violation(
                        f"Cognito user pool '{resource.name}' must leave deletionProtection INACTIVE {why}; it is "
                        f"{_shown(protection)}.",
                        resource.urn,
                    )
                )
            continue
        else:
            continue
        value = resource.props.get(flag)
        if value is True or value is UNKNOWN:
            continue
        state = "it is not set" if value is None else f"it is {_shown(value)}"
        violations.append(Violation(f"{subject} must set {flag} to true {why}; {state}.", resource.urn))
    return violations


def stack_retain_storage() -> str | None:
    """The stack's retainStorage setting as the CLI hands it to the pack (PULUMI_CONFIG, like a program)."""
    value = pulumi.runtime.get_config(RETAIN_STORAGE_KEY)
    return value if value is None else str(value)


def storage_deleted_check(read_setting: Callable[[], str | None]) -> StackCheck:
    """The stack check of `storage-deleted-with-stack`, reading the stack setting when it runs."""
    return lambda resources: check_storage_deleted_with_stack(resources, read_setting())


S3_BUCKET_ENCRYPTED = stack_policy(
    name="s3-bucket-encrypted",
    description="Every S3 bucket has default server-side encryption.",
    check=check_buckets_encrypted,
)

S3_BUCKET_BLOCKS_PUBLIC_ACCESS = stack_policy(
    name="s3-bucket-blocks-public-access",
    description="Every S3 bucket has a public access block with all four settings on.",
    check=check_buckets_block_public_access,
)

ECR_SCAN_ON_PUSH = resource_policy(
    name="ecr-scan-on-push",
    description="ECR repositories scan each image for vulnerabilities when it is pushed.",
    checks={REPOSITORY_TYPE: check_scan_on_push},
)

STORAGE_DELETED_WITH_STACK = stack_policy(
    name="storage-deleted-with-stack",
    description="In a stack that does not retain storage, buckets, repositories and user pools go with the stack.",
    check=storage_deleted_check(stack_retain_storage),
    enforcement_level=EnforcementLevel.ADVISORY,
)

POLICIES: Final[list[Policy]] = [
    S3_BUCKET_ENCRYPTED,
    S3_BUCKET_BLOCKS_PUBLIC_ACCESS,
    ECR_SCAN_ON_PUSH,
    STORAGE_DELETED_WITH_STACK,
]
