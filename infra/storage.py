"""Storage: the ECR repository for both images and the S3 bucket that caches the model weights.

Both go with `pulumi destroy` unless the stack retains storage: `force_delete` empties the
repository and `force_destroy` empties the bucket before deletion. The bucket refuses every request
that does not arrive over TLS.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Final

import pulumi
import pulumi_aws as aws

KEEP_UNTAGGED_IMAGES: Final = 10
"""How many untagged images (earlier builds) the repository keeps for rollbacks."""


def image_lifecycle_policy(keep_untagged: int) -> dict[str, Any]:
    """An ECR lifecycle policy that keeps the newest `keep_untagged` untagged images and expires older ones.

    It selects untagged images only, and ECR never expires an image that no rule selects, so the
    images that carry the `speech` and `agent` tags (the ones the last deploy pinned by digest) are
    never expired. Counting instead of ageing keeps the image a failed, rolled-back deploy left running
    (untagged once a newer build took the tag) until `keep_untagged` newer builds were pushed, however
    long that takes; an age rule would expire it after a fixed time even if the endpoint still pulls it.
    """
    if keep_untagged < 1:
        raise ValueError(f"at least 1 untagged image must be kept, got {keep_untagged}")
    return {
        "rules": [
            {
                "rulePriority": 1,
                "description": f"Keep the {keep_untagged} newest untagged images (earlier builds), expire older ones",
                "selection": {
                    "tagStatus": "untagged",
                    "countType": "imageCountMoreThan",
                    "countNumber": keep_untagged,
                },
                "action": {"type": "expire"},
            }
        ]
    }


def deny_insecure_transport(bucket_arn: str) -> dict[str, Any]:
    """The statement that denies every S3 request on the bucket and its objects not made over TLS."""
    return {
        "Sid": "DenyInsecureTransport",
        "Effect": "Deny",
        "Principal": "*",
        "Action": "s3:*",
        "Resource": [bucket_arn, f"{bucket_arn}/*"],
        "Condition": {"Bool": {"aws:SecureTransport": "false"}},
    }


def tls_only_bucket_policy(bucket_arn: str) -> dict[str, Any]:
    """Denies every S3 request on the bucket and its objects that is not made over TLS."""
    return {"Version": "2012-10-17", "Statement": [deny_insecure_transport(bucket_arn)]}


def make_private(name: str, bucket: aws.s3.Bucket, opts: pulumi.ResourceOptions) -> None:
    """Default encryption (SSE-S3) and all four public access blocks on `bucket`, named `<name>-...`."""
    aws.s3.BucketServerSideEncryptionConfiguration(
        f"{name}-encryption",
        bucket=bucket.id,
        rules=[{"apply_server_side_encryption_by_default": {"sse_algorithm": "AES256"}}],
        opts=opts,
    )
    aws.s3.BucketPublicAccessBlock(
        f"{name}-public-access",
        bucket=bucket.id,
        block_public_acls=True,
        block_public_policy=True,
        ignore_public_acls=True,
        restrict_public_buckets=True,
        opts=opts,
    )


@dataclass(frozen=True)
class StorageArgs:
    """retain: keep the repository and the bucket (and their contents) when they would be deleted."""

    retain: bool


class Storage(pulumi.ComponentResource):
    """An image repository (scan on push, old untagged images expire by count) and an encrypted, private bucket."""

    repository: aws.ecr.Repository
    bucket: aws.s3.Bucket

    def __init__(self, name: str, args: StorageArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("voicestack:index:Storage", name, None, opts)
        # A retained stack keeps storage on `pulumi destroy`: Pulumi forgets the resources, AWS keeps them
        # with their encryption, public access block and lifecycle rule, contents included.
        child = pulumi.ResourceOptions(parent=self, retain_on_delete=args.retain)

        self.repository = aws.ecr.Repository(
            f"{name}-images",
            force_delete=not args.retain,
            image_scanning_configuration={"scan_on_push": True},
            # Mutable: each deploy moves the `speech` and `agent` tags; consumers pin the digest anyway.
            image_tag_mutability="MUTABLE",
            encryption_configurations=[{"encryption_type": "AES256"}],
            opts=child,
        )
        aws.ecr.LifecyclePolicy(
            f"{name}-images-lifecycle",
            repository=self.repository.name,
            policy=json.dumps(image_lifecycle_policy(KEEP_UNTAGGED_IMAGES)),
            opts=child,
        )

        self.bucket = aws.s3.Bucket(f"{name}-weights", force_destroy=not args.retain, opts=child)
        make_private(f"{name}-weights", self.bucket, child)
        aws.s3.BucketPolicy(
            f"{name}-weights-tls-only",
            bucket=self.bucket.id,
            policy=self.bucket.arn.apply(lambda arn: json.dumps(tls_only_bucket_policy(arn))),
            opts=child,
        )

        self.register_outputs(
            {
                "repository_url": self.repository.repository_url,
                "bucket_name": self.bucket.bucket,
            }
        )
