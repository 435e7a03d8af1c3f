"""Builds the configured engine at start-up: picks the device, finds the weights, warms the model up."""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Final, Literal

from kokoro_server.capability import Probe, probe_bf16_cpu, require_precision
from kokoro_server.concurrency import configured_plan, use_intra_op_threads
from kokoro_server.engine import SpeechEngine, ZeroCostEngine
from kokoro_server.kokoro_engine import KokoroEngine
from kokoro_server.service import LoadedEngine
from kokoro_server.settings import SAGEMAKER_MODEL_DIR, Device, Settings
from kokoro_server.weights import resolve_model_dir

logger = logging.getLogger(__name__)

WARMUP_TEXT: Final = "Warming up, so that the first listener never waits for it."
"""Long enough to run every layer at a realistic size; the first call of a model is the slowest."""


def resolve_device(choice: Device) -> Literal["cpu", "cuda"]:
    if choice != "auto":
        return choice
    import torch  # ~2 s to import, and only the model needs it: not at module level

    return "cuda" if torch.cuda.is_available() else "cpu"


def configured_model_dir(settings: Settings) -> Path | None:
    """The model directory to insist on, or None to use the pinned hub revision.

    Only the default, SageMaker's mount point, may be absent (running outside SageMaker); a
    directory named explicitly must exist, so a typo fails instead of downloading.
    """
    if settings.model_dir == SAGEMAKER_MODEL_DIR and not SAGEMAKER_MODEL_DIR.exists():
        return None
    return settings.model_dir


def preflight(settings: Settings, probe: Probe = probe_bf16_cpu) -> None:
    """Refuse, before the server starts, a precision this host cannot run (UnsupportedPrecision).

    fp32 and the zero-cost engine need no check (and no torch import); reduced precision is probed.
    """
    if settings.engine == "zero" or settings.precision == "fp32":
        return
    require_precision(resolve_device(settings.device), settings.precision, probe=probe)


def warm_up(engine: SpeechEngine) -> float:
    """One synthesis, so that the first request does not pay for lazy initialisation; its seconds."""
    started = time.perf_counter()
    engine.synthesize(WARMUP_TEXT, engine.default_voice, 1.0)
    return time.perf_counter() - started


def load_engine(settings: Settings) -> LoadedEngine:
    """The engine `settings` ask for, ready to serve. Blocking: run it off the event loop."""
    if settings.engine == "zero":
        logger.warning("serving the zero-cost test engine: the audio is a test pattern, not speech")
        return LoadedEngine(ZeroCostEngine(), "cpu")
    device = resolve_device(settings.device)
    model_dir = resolve_model_dir(configured_model_dir(settings))
    logger.info("loading Kokoro-82M from %s on %s (%s)", model_dir, device, settings.precision)
    plan = configured_plan(settings.max_concurrent, device)
    # Loading and warm-up run alone: every core (each job then sizes its own team: `concurrency`).
    use_intra_op_threads(plan.threads_for(1))
    engine = KokoroEngine.load(model_dir, device=device, precision=settings.precision)
    logger.info("warm-up synthesis took %.2f s", warm_up(engine))
    return LoadedEngine(engine, device, use_threads=use_intra_op_threads, at_each_stage=engine.at_each_stage)
