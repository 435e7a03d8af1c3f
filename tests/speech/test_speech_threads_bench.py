"""The benchmark behind the concurrency rule: its configurations, its measurement loop, its table."""

from __future__ import annotations

import pytest

from bench.threads import (
    SENTENCES,
    Config,
    Outcome,
    background_load,
    configs,
    loaded_in_a_thread_that_ends,
    main,
    measure,
    render,
)
from kokoro_server.engine import ZeroCostEngine


def test_the_sentences_are_the_benchmark_text_s_four() -> None:
    assert len(SENTENCES) == 4
    assert SENTENCES[-1] == "This is why latency matters."


@pytest.mark.parametrize(
    ("cores", "expected"),
    [
        (1, [Config(1, 1), Config(2, 1), Config(1, 1)]),
        (2, [Config(1, 2), Config(2, 1), Config(2, 2), Config(1, 1), Config(1, 2)]),
        (8, [Config(1, 8), Config(2, 4), Config(2, 8), Config(1, 1), Config(1, 8)]),
    ],
)
def test_the_lone_session_is_measured_first_and_last(cores: int, expected: list[Config]) -> None:
    assert configs(cores) == expected


def test_each_synthesis_thread_works_until_the_time_is_up() -> None:
    engine = ZeroCostEngine(compute_s_per_char=0.0005)  # ~40 ms per sentence, the sleep releases the GIL
    outcome = measure(engine, Config(2, 1), 0.3)
    assert outcome.config == Config(2, 1)
    assert outcome.wall_s >= 0.3
    assert {text for text, _, _ in engine.calls} == set(SENTENCES)  # two threads, two turns each at least
    assert outcome.audio_s == pytest.approx(sum(engine.samples_for(t) for t, _, _ in engine.calls) / 24000)


def test_the_engine_is_loaded_and_warmed_up_in_a_thread_that_ends() -> None:
    """As in the server: the loading thread's intra-op team must not outlive it (`concurrency`)."""
    import threading

    engine = ZeroCostEngine()
    loading: list[threading.Thread] = []

    def load() -> ZeroCostEngine:
        loading.append(threading.current_thread())
        return engine

    assert loaded_in_a_thread_that_ends(load) is engine
    assert loading[0] is not threading.current_thread()
    assert not loading[0].is_alive()
    assert [text for text, _, _ in engine.calls] == [SENTENCES[0]]  # the warm-up, on that thread


def test_a_failed_load_is_an_error_here_too() -> None:
    def load() -> ZeroCostEngine:
        raise OSError("no weights")

    with pytest.raises(OSError, match=r"^no weights$"):
        loaded_in_a_thread_that_ends(load)


def test_the_table_compares_every_configuration_with_the_lone_session() -> None:
    outcomes = [Outcome(Config(1, 2), 11.0, 10.0), Outcome(Config(2, 1), 14.0, 10.0), Outcome(Config(1, 2), 10.0, 10.0)]
    assert render(outcomes, "CPU X, 2 usable cores").splitlines() == [
        "CPU X, 2 usable cores",
        "",
        "| syntheses x threads | audio-s per s | vs 1 alone |",
        "|---|---|---|",
        "| 1 x 2 | 1.100 | 1.00 |",
        "| 2 x 1 | 1.400 | 1.27 |",
        "| 1 x 2 | 1.000 | 0.91 |",
    ]


def test_a_non_positive_duration_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["--seconds", "0"])
    assert exited.value.code == 2
    assert "--seconds must be positive, got 0.0" in capsys.readouterr().err


@pytest.mark.parametrize("raw", ["-0.1", "0.96", "half", "nan"])
def test_a_busy_share_outside_0_to_0_95_is_refused(raw: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["--busy", raw])
    assert exit_info.value.code == 2
    assert f"argument --busy: --busy must be a number from 0 to 0.95, got {raw!r}" in capsys.readouterr().err


def test_the_background_load_runs_while_the_block_runs_and_stops_after() -> None:
    with background_load(0.0) as none:
        assert none is None
    with background_load(0.3) as process:
        assert process is not None
        assert process.is_alive()
    assert not process.is_alive()
    assert process.exitcode is not None
