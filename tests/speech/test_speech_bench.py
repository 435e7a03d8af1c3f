"""The benchmark's pure parts (the benchmark itself is a command, not a test)."""

from __future__ import annotations

import pytest

from bench.speech import LoadResult, Results, Trial, main, percentile, render


def test_nearest_rank_percentiles() -> None:
    values = [float(v) for v in range(100, 0, -1)]
    assert (percentile(values, 50), percentile(values, 99), percentile(values, 100)) == (50.0, 99.0, 100.0)
    assert percentile([7.0], 99) == 7.0


def test_the_table_compares_the_modes_with_the_reference_numbers() -> None:
    results = Results(
        whole=[Trial(1000.0, 5000.0, 10.0), Trial(1200.0, 5000.0, 10.0), Trial(1100.0, 5000.0, 10.0)],
        streamed=[Trial(200.0, 5000.0, 10.0), Trial(250.0, 5000.0, 10.0), Trial(300.0, 5000.0, 10.0)],
        load=LoadResult(pings_ms=[1.0, 2.0, 3.0, 40.0], first_audio_s=[2.0, 1.0], total_s=9.0),
        sessions=2,
        overhead_ms=[0.5, 0.7],
        setup="unit test",
    )
    table = render(results)
    assert "  whole text (one chunk)                1100.0    1000.0    1200.0" in table
    assert "  streamed by sentence                   250.0     200.0     300.0" in table
    assert "  change                                -77.3%   (AWS sample, g5 GPU: 329.3 -> 156.7 ms, -52.4 %)" in table
    assert "  streamed / whole                       22.7%   (target <= 25 %)" in table
    assert "whole 0.50, streamed 0.50; audio 10.00 s" in table
    assert "(4 pings): p50 2.0 ms, p99 40.0 ms, max 40.0 ms" in table
    assert "first audio per session (s): 1.00, 2.00; all done after 9.0 s" in table


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--trials", "0"], "argument --trials: must be at least 1, got 0"),
        (["--sessions", "-2"], "argument --sessions: must be at least 1, got -2"),
        (["--messages", "0"], "argument --messages: must be at least 1, got 0"),
        (["--trials", "two"], "argument --trials: invalid positive_int value: 'two'"),
    ],
)
def test_a_count_under_one_is_refused_before_anything_starts(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # A benchmark of 0 trials would run for minutes and then fail on an empty median.
    with pytest.raises(SystemExit) as exited:
        main(argv)
    assert exited.value.code == 2
    assert message in capsys.readouterr().err
