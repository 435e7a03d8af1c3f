"""The barge-in benchmark's table and its argument checks (the benchmark itself is run by hand)."""

from __future__ import annotations

import pytest

from bench.bargein import Trial, main, report


def trial(path: str, transport: str, silent: float | None, closed: float, idle: float) -> Trial:
    return Trial(
        path=path,  # type: ignore[arg-type]
        transport=transport,  # type: ignore[arg-type]
        page_silent_ms=silent,
        session_closed_ms=closed,
        speech_idle_ms=idle,
        agent_stopped_ms=closed + 1,
        agent_outcome="hung_up",
        cancels=3,
    )


def test_report_gives_median_and_max_per_path_and_connection() -> None:
    trials = [
        trial("stop", "sse", 40.0, 50.0, 700.0),
        trial("stop", "sse", 60.0, 70.0, 900.0),
        trial("stop", "sse", 50.0, 60.0, 800.0),
        trial("hang_up", "websocket", None, 200.0, 1200.0),
    ]
    assert report(trials).splitlines() == [
        "| path | connection | page silent ms | speech session closed ms | speech idle ms"
        " | agent stopped ms | cancels |",
        "|---|---|---|---|---|---|---|",
        "| stop | sse | 50 / 60 | 60 / 70 | 800 / 900 | 61 / 71 | 3 |",
        "| hang_up | websocket | n/a | 200 / 200 | 1200 / 1200 | 201 / 201 | 3 |",
        "",
        "(median / max over the trials; times from the action)",
        "page silent, worst: 60 ms (goal <= 300 ms)",
        "speech session closed, worst: 200 ms (goal <= 1000 ms)",
        "speech idle incl. the running chunk, worst: 1200 ms (goal <= 1000 ms)",
    ]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--paths", "stop,shout"], "--paths: unknown shout; allowed: stop, new_question, hang_up"),
        (["--transports", "carrier-pigeon"], "--transports: allowed: sse, websocket; got 'carrier-pigeon'"),
        (["--trials", "0"], "--trials must be at least 1, got 0"),
        (["--rtf", "0"], "--rtf must be > 0, got 0.0"),
    ],
)
def test_bad_arguments_are_refused_before_anything_starts(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err
