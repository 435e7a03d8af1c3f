"""The time-to-first-audio measurement runs end to end and prints its table (numbers, no thresholds)."""

from __future__ import annotations

import pytest

from kokoro_server.engine import ZeroCostEngine
from tests.agent.agent_ttfa import measure, report


async def test_ttfa_measurement_prints_both_modes(capsys: pytest.CaptureFixture[str]) -> None:
    results = await measure(ZeroCostEngine(), trials=1)
    assert [trial.mode for trial in results] == ["stream", "batch"]
    for trial in results:
        assert 0 < trial.first_text_ms <= trial.first_audio_ms <= trial.total_ms
    table = report(results, "zero")
    with capsys.disabled():
        print("\n" + table)
    assert table.splitlines()[-1].startswith("median first audio: stream ")
