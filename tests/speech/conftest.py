"""Fixtures of the speech container tests (helpers live in speech_support.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.speech.speech_support import GatedEngine


@pytest.fixture
def gated() -> Iterator[GatedEngine]:
    engine = GatedEngine()
    yield engine
    engine.open()  # never leave a pool thread blocked on the gate
