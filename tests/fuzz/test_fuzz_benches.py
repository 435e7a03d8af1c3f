"""The soak and hostile-text benchmarks run end to end on a tiny load (their numbers are not asserted)."""

from __future__ import annotations

import pytest

from bench import hostile, soak
from kokoro_server.engine import ZeroCostEngine

pytestmark = pytest.mark.timeout(120)


def test_the_soak_check_knows_the_zero_cost_engines_exact_audio() -> None:
    engine = ZeroCostEngine()
    for text in soak.SOAK_TEXTS:
        assert soak.expected_pcm(text.split()) == engine.synthesize(text, "af_heart", 1.0).pcm


def test_a_short_soak_loses_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    assert soak.main(["--sessions", "4", "--messages", "4", "--cancel-rate", "0.5", "--seed", "3"]) == 0
    out = capsys.readouterr().out
    assert "requests 16:" in out
    assert "audio bytes lost: 0; frames out of order: 0" in out
    assert "problem:" not in out


def test_every_hostile_text_has_the_servers_longest_length() -> None:
    assert {len(text) for text in hostile.TEXTS.values()} == {hostile.LENGTH}
