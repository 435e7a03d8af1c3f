"""`bench.windows`: a first chunk's windows played through the session's clock at a given speed."""

from __future__ import annotations

import argparse

import pytest

from bench.windows import Played, main, play, positive_floats, render
from kokoro_server.windowed import WindowPlan

PLAN = WindowPlan()


def test_the_fixed_plan_stutters_where_the_sized_one_plays_through() -> None:
    # 0.004 s per vocoded step: 3 s of audio (240 steps + 11 of context on each side) take 1.05 s,
    # after the handover's 16 x 0.004 s, while the 0.9 s first window plays: a 0.214 s gap.
    fixed = play(PLAN, "fixed", 400, 0.004)
    assert (fixed.windows, fixed.underruns) == ((72, 240, 88), 1)
    assert fixed.first_work_s == pytest.approx(0.004 * 88)  # 16 steps of context after a first window
    assert fixed.silence_s == pytest.approx(0.004 * (16 + 262) - 0.9)
    assert isinstance(fixed, Played)
    sized = play(PLAN, "sized", 400, 0.004)
    assert sized.windows == (30, 40, 90, 240)  # each as long as the buffer then allows
    assert sum(sized.windows) == 400
    assert sized.underruns == 0
    assert sized.silence_s == 0.0
    assert sized.first_work_s == pytest.approx(0.004 * (30 + 16))  # the first window: right context only


def test_a_longer_first_window_buys_a_gapless_chunk_within_its_limit() -> None:
    # 0.0095 s per step (a 2-core AVX2 EPYC): 1.15 s of first audio, then 0.5 s windows keep up.
    assert play(PLAN, "sized", 400, 0.0095).windows == (92, 62, 60, 57, 54, 75)
    assert play(PLAN, "sized", 400, 0.0095).underruns == 0
    assert play(PLAN, "fixed", 400, 0.0095).underruns == 1
    # Past what 1.2 s of first audio can buy: the default first window, then one gap (a window
    # from whose audio the rest plays out), against the fixed plan's 3 s window.
    slow = play(PLAN, "sized", 400, 0.011)
    assert (slow.windows, slow.underruns) == ((72, 106, 74, 64, 84), 1)
    assert slow.silence_s == pytest.approx(0.011 * (16 + 11 + 106 + 11) - 0.9)
    assert play(PLAN, "fixed", 400, 0.011).silence_s == pytest.approx(0.011 * (16 + 262) - 0.9)  # 2.158 s


def test_the_table_has_one_row_per_speed_chunk_and_plan() -> None:
    lines = render(PLAN, [0.004], [5.0], "measured here: 0.0095")
    assert lines[1] == "measured here: 0.0095"
    rows = [line for line in lines if line.startswith("| 0.004 ")]
    assert rows == [
        "| 0.004 | 0.32 | 5 | fixed | 0.90 | 0.35 | 72 240 88 | 1 | 0.21 |",
        "| 0.004 | 0.32 | 5 | sized | 0.38 | 0.18 | 30 40 90 240 | 0 | 0.00 |",
    ]


def test_speeds_must_be_positive_numbers() -> None:
    assert positive_floats("0.5,2") == (0.5, 2.0)
    with pytest.raises(argparse.ArgumentTypeError, match=r"^every value must be > 0, got '0,1'$"):
        positive_floats("0,1")
    with pytest.raises(argparse.ArgumentTypeError, match=r"^expected comma-separated numbers, got 'x'$"):
        positive_floats("x")


def test_main_prints_the_table(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--speeds", "0.02", "--chunks", "3"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[-2:] == [
        "| 0.02 | 1.60 | 3 | fixed | 0.90 | 1.76 | 72 168 | 1 | 3.00 |",
        "| 0.02 | 1.60 | 3 | sized | 0.90 | 1.76 | 72 168 | 1 | 3.00 |",
    ]
