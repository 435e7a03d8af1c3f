"""Storage: the ECR repository for both images and the S3 bucket that caches the model weights.

Both go with `pulumi destroy` unless the stack retains storage: `force_delete` empties the
repository and `force_destroy` empties the bucket before deletion.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Final

import pulumi
import pulumi_aws as aws

UNTAGGED_IMAGE_EXPIRY_DAYS: Final = 7
"""Each push moves the `speech`/`agent` tag; the image it leaves untagged stays this long for rollbacks."""


def untagged_image_expiry_policy(days: int) -> dict[str, Any]:
    """An ECR lifecycle policy that expires images `days` after they were pushed once they carry no tag."""
    if days < 1:
        raise ValueError(f"untagged images must be kept for at least 1 day, got {days}")
    return {
        "rules": [
            {
                "rulePriority": 1,
                "description": f"Expire untagged images {days} days after push",
                "selection": {
                    "tagStatus": "untagged",
                    "countType": "sinceImagePushed",
                    "countUnit": "days",
                    "countNumber": days,
                },
                "action": {"type": "expire"},
            }
        ]
    }


@dataclass(frozen=True)
class StorageArgs:
    """retain: keep the repository and the bucket (and their contents) when they would be deleted."""

    retain: bool


class Storage(pulumi.ComponentResource):
    """An image repository (scan on push, untagged images expire) and an encrypted, private bucket."""

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
            policy=json.dumps(untagged_image_expiry_policy(UNTAGGED_IMAGE_EXPIRY_DAYS)),
            opts=child,
        )

        self.bucket = aws.s3.Bucket(f"{name}-weights", force_destroy=not args.retain, opts=child)
        aws.s3.BucketServerSideEncryptionConfiguration(
            f"{name}-weights-encryption",
            bucket=self.bucket.id,
            rules=[{"apply_server_side_encryption_by_default": {"sse_algorithm": "AES256"}}],
            opts=child,
        )
        aws.s3.BucketPublicAccessBlock(
            f"{name}-weights-public-access",
            bucket=self.bucket.id,
            block_public_acls=True,
            block_public_policy=True,
            ignore_public_acls=True,
            restrict_public_buckets=True,
            opts=child,
        )

        self.register_outputs(
            {
                "repository_url": self.repository.repository_url,
                "bucket_name": self.bucket.bucket,
            }
        )
