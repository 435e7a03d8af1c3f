"""The published-vs-fused benchmark: its table and its argument refusal (the engines run in `make bench-fused`)."""

from __future__ import annotations

import pytest

from bench.fused import Round, Row, main, render


def test_the_table_gives_each_measure_s_medians_and_their_ratio() -> None:
    published = [Round(2.0, 2.0, 0.50), Round(3.0, 2.0, 0.70), Round(2.2, 2.0, 0.60)]  # rtf 1.0, 1.5, 1.1
    fused = [Round(1.8, 2.0, 0.45), Round(1.9, 2.0, 0.40), Round(2.6, 2.0, 0.65)]  # rtf 0.9, 0.95, 1.3
    rows = [Row(2, published, fused, 1), Row(1, published[:1], fused[:1], 0)]
    assert render(rows, "CPU X, 2 usable cores, 3 rounds per thread count").splitlines() == [
        "CPU X, 2 usable cores, 3 rounds per thread count",
        "",
        "| threads | measure | published | fused | fused / published |",
        "|---|---|---|---|---|",
        "| 2 | whole sentences, s per audio s | 1.100 | 0.950 | 0.864 |",
        "| 2 | first piece of a first chunk | 0.600 s | 0.450 s | 0.750 |",
        "| 1 | whole sentences, s per audio s | 1.000 | 0.900 | 0.900 |",
        "| 1 | first piece of a first chunk | 0.500 s | 0.450 s | 0.900 |",
        "",
        "largest PCM difference (int16 steps, same noise draws): 1 at 2 threads, 0 at 1 thread",
    ]


@pytest.mark.parametrize("raw", ["0", "-2", "1.5", "many"])
def test_rounds_below_one_or_not_whole_are_refused(raw: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["--rounds", raw])
    assert exited.value.code == 2
    assert f"--rounds must be a whole number from 1, got {raw!r}" in capsys.readouterr().err
