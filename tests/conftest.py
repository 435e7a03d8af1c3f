"""Shared fixtures: the full-size random-weight Kokoro checkpoint and one engine loaded from it.

Area fixtures live in tests/<area>/conftest.py.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

# Tests never reach a model hub: a failed hub lookup retries for ~23 s before failing.
os.environ.setdefault("HF_HUB_OFFLINE", "1")


@pytest.fixture(scope="session")
def kokoro_model_dir() -> Path:
    """Full-size Kokoro-82M layout with random weights, generated once into the shared cache."""
    from kokoro_server.fake_weights import ensure_random_weights

    return ensure_random_weights()


@pytest.fixture(scope="session")
def kokoro_engine(kokoro_model_dir: Path):
    """One real KokoroEngine for the whole run (loading costs seconds and ~1.2 GiB)."""
    from kokoro_server.kokoro_engine import KokoroEngine

    return KokoroEngine.load(kokoro_model_dir)
