"""The weight cache: the pinned Kokoro-82M files as Pulumi-managed S3 objects under a revision prefix.

The files come from a local directory: the one named by `weightsDir`, or else the Hugging Face
snapshot of the pinned revision (downloaded once into the Hugging Face cache). Each object carries
the SHA-256 of its file, so an unchanged file is never uploaded again and a changed one is updated
in place. SageMaker mounts the prefix, uncompressed, at /opt/ml/model.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import pulumi
import pulumi_aws as aws
from huggingface_hub import snapshot_download

from infra.config import ConfigError
from kokoro_server import model_pin

_HASH_BLOCK: Final = 1 << 20


def weight_files(voices: Sequence[str] = model_pin.DEFAULT_VOICES) -> tuple[str, ...]:
    """Paths, relative to the model directory, of every file the speech server loads."""
    return (
        model_pin.CONFIG_FILE,
        model_pin.CHECKPOINT_FILE,
        *(f"{model_pin.VOICES_DIR}/{voice}.pt" for voice in voices),
    )


def weights_prefix(repo_id: str = model_pin.REPO_ID, revision: str = model_pin.REVISION) -> str:
    """The S3 prefix (no trailing slash) of one pinned revision: a new pin never overwrites the old one."""
    return f"{repo_id}/{revision}"


def s3_prefix_uri(bucket: str, prefix: str) -> str:
    """The `S3Prefix` URI SageMaker mounts; it must end with a slash."""
    return f"s3://{bucket}/{prefix}/"


def content_type(relative: str) -> str:
    """The object's Content-Type: JSON for the config, opaque bytes for tensors."""
    return "application/json" if relative.endswith(".json") else "application/octet-stream"


def file_sha256(path: Path) -> str:
    """Hex SHA-256 of a file, read in blocks (the checkpoint is ~330 MB)."""
    digest = hashlib.sha256()
    with path.open("rb") as stream:
        while block := stream.read(_HASH_BLOCK):
            digest.update(block)
    return digest.hexdigest()


def download_pinned_snapshot() -> Path:
    """Downloads (or finds in the Hugging Face cache) exactly the pinned files; returns the snapshot dir."""
    snapshot = snapshot_download(
        model_pin.REPO_ID,
        revision=model_pin.REVISION,
        allow_patterns=list(weight_files()),
    )
    if not isinstance(snapshot, str):
        raise TypeError(f"snapshot_download returned {type(snapshot).__name__}, expected a directory path")
    return Path(snapshot)


def resolve_weights_dir(
    configured: Path | None,
    *,
    download: Callable[[], Path] = download_pinned_snapshot,
    config_key: str = "voicestack:weightsDir",
) -> Path:
    """The directory to upload from; every required file must be present (checked before any resource)."""
    directory = download() if configured is None else configured
    source = f"{config_key} {directory}" if configured is not None else f"Hugging Face snapshot {directory}"
    if not directory.is_dir():
        raise ConfigError(f"{source} is not a directory")
    missing = [name for name in weight_files() if not (directory / name).is_file()]
    if missing:
        raise ConfigError(f"{source} lacks required weight files: {', '.join(missing)}")
    return directory


@dataclass(frozen=True)
class WeightCacheArgs:
    """Upload `files` (relative paths) from `source_dir` into `bucket` under `prefix`."""

    bucket: pulumi.Input[str]
    source_dir: Path
    prefix: str
    files: tuple[str, ...]
    retain: bool


class WeightCache(pulumi.ComponentResource):
    """One S3 object per weight file; `s3_uri` resolves only once every object is uploaded."""

    prefix: str
    objects: tuple[aws.s3.BucketObjectv2, ...]
    s3_uri: pulumi.Output[str]

    def __init__(self, name: str, args: WeightCacheArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("voicestack:index:WeightCache", name, None, opts)
        child = pulumi.ResourceOptions(parent=self, retain_on_delete=args.retain)
        self.prefix = args.prefix
        self.objects = tuple(
            aws.s3.BucketObjectv2(
                f"{name}-{relative.replace('/', '-')}",
                bucket=args.bucket,
                key=f"{args.prefix}/{relative}",
                source=pulumi.FileAsset(args.source_dir / relative),
                # The content hash is the update trigger: same bytes, no upload, whatever the file's path.
                source_hash=file_sha256(args.source_dir / relative),
                content_type=content_type(relative),
                opts=child,
            )
            for relative in args.files
        )
        # Built from every object's key so that whatever mounts the prefix waits for the uploads.
        self.s3_uri = pulumi.Output.all(args.bucket, *(obj.key for obj in self.objects)).apply(
            lambda values: s3_prefix_uri(values[0], args.prefix)
        )
        self.register_outputs({"prefix": self.prefix, "s3_uri": self.s3_uri})
