"""Finding the model directory: SageMaker's mount, a configured path, or the pinned hub revision."""

from __future__ import annotations

import logging
import os
from pathlib import Path

from kokoro_server import model_pin

logger = logging.getLogger(__name__)


class WeightsNotFound(RuntimeError):
    """No usable model directory, and downloading the pinned revision is not possible."""


def missing_files(model_dir: Path) -> list[str]:
    """Files of the published layout absent from `model_dir` (empty when it is complete)."""
    missing = [name for name in (model_pin.CONFIG_FILE, model_pin.CHECKPOINT_FILE) if not (model_dir / name).is_file()]
    if not any((model_dir / model_pin.VOICES_DIR).glob("*.pt")):
        missing.append(f"{model_pin.VOICES_DIR}/*.pt")
    return missing


def voice_files(model_dir: Path) -> dict[str, Path]:
    """Voice name -> pack file, for every `voices/<name>.pt` in the directory."""
    return {path.stem: path for path in sorted((model_dir / model_pin.VOICES_DIR).glob("*.pt"))}


def resolve_model_dir(configured: Path | None) -> Path:
    """The directory to load weights from.

    A configured directory (SageMaker mounts the S3 weight cache at /opt/ml/model) must hold the
    published layout. With none configured, the pinned revision of hexgrad/Kokoro-82M is downloaded
    (or found in the Hugging Face cache) unless HF_HUB_OFFLINE forbids it.
    """
    if configured is not None:
        missing = missing_files(configured)
        if missing:
            raise WeightsNotFound(f"model directory {configured} is missing: {', '.join(missing)}")
        return configured
    if os.environ.get("HF_HUB_OFFLINE", "0") not in ("", "0"):
        raise WeightsNotFound(
            "no model directory configured and HF_HUB_OFFLINE is set; "
            "set KOKORO_MODEL_DIR (or --model-dir) to a directory with "
            f"{model_pin.CONFIG_FILE}, {model_pin.CHECKPOINT_FILE} and {model_pin.VOICES_DIR}/<name>.pt"
        )
    from huggingface_hub import snapshot_download

    patterns = [
        model_pin.CONFIG_FILE,
        model_pin.CHECKPOINT_FILE,
        *(f"{model_pin.VOICES_DIR}/{voice}.pt" for voice in model_pin.DEFAULT_VOICES),
    ]
    logger.info("downloading %s@%s", model_pin.REPO_ID, model_pin.REVISION)
    return Path(snapshot_download(model_pin.REPO_ID, revision=model_pin.REVISION, allow_patterns=patterns))
