"""The vocoder speed the window plan counts on: the slowest of the last windows
(`kokoro_server.vocoder_speed`), and the two silences of the page it removes. Pure: speeds are
given, nothing is timed."""

from __future__ import annotations

import pytest

from kokoro_server.vocoder_speed import HISTORY, VocoderSpeed
from kokoro_server.windowed import STEP_S, WindowPlan

PLAN = WindowPlan()


def test_nothing_measured_is_no_speed() -> None:
    speed = VocoderSpeed()
    assert speed.s_per_step is None
    speed.record(0, 0.5)  # a window of no steps says nothing about the speed
    assert speed.s_per_step is None


def test_the_speed_is_the_slowest_recent_window() -> None:
    speed = VocoderSpeed()
    speed.record(40, 0.2)  # 0.005 s/step
    assert speed.s_per_step == 0.005
    speed.record(100, 0.3)  # 0.003: faster, the slowest stays
    assert speed.s_per_step == 0.005
    speed.record(10, 0.06)  # 0.006: slower
    assert speed.s_per_step == 0.006


def test_windows_older_than_the_history_are_forgotten() -> None:
    speed = VocoderSpeed(history=2)
    for steps, seconds in ((10, 0.09), (10, 0.01), (10, 0.02)):
        speed.record(steps, seconds)
    assert speed.s_per_step == pytest.approx(0.002, abs=1e-15)  # 0.009 s/step is no longer among the last 2
    assert HISTORY == 16
    with pytest.raises(ValueError, match=r"^history must be at least 1 window, got 0$"):
        VocoderSpeed(history=0)


PAGE_RATES = (
    (0.00510, 0.00512, 0.00418),  # the warm-up answer (stream)
    (0.00557, 0.00513, 0.00493, 0.00463),  # stream trial 1
    (0.00456, 0.00453, 0.00401, 0.00461),  # batch trial 1
    (0.00392, 0.00314, 0.00319),  # batch trial 2
)
"""Seconds per vocoded step of each window the engine decoded before a stream answer whose first
window was too short, in order, from the server's log of `make bench-page` (2-core AMD EPYC,
2026-12-01 21:24 UTC). The running average the server planned with then: 0.0034262 s/step."""


def test_a_first_window_planned_at_the_slowest_recent_window_is_not_followed_by_silence() -> None:
    speed = VocoderSpeed()
    for rate in (rate for answer in PAGE_RATES for rate in answer):
        speed.record(50, rate * 50)
    assert speed.s_per_step == pytest.approx(0.00557, abs=1e-12)
    at_average, at_slowest = PLAN.first_for(0, 240, 0.0034262), PLAN.first_for(0, 240, speed.s_per_step)
    assert (at_average, at_slowest) == (26, 42)
    # That answer's later windows ran at about 0.0050 s/step, and its second window was cut 0.098 s
    # after the first one's audio had been sent. The shortest second window then takes 0.31 s.
    handover_s, later_s_per_step = 0.098, 0.0050
    for first, silent in ((at_average, True), (at_slowest, False)):
        second_s = later_s_per_step * PLAN.vocoded_later(PLAN.min_window_steps, 240 - first)
        assert second_s == pytest.approx(0.31)
        # 26 steps: 0.227 s left to play, a gap of 0.083 s (the page measured 0.07 s); 42: 0.427 s.
        assert (first * STEP_S - handover_s < second_s) is silent


def test_a_second_window_planned_at_the_slowest_recent_window_is_not_followed_by_silence() -> None:
    # Another stream answer of the page (21:41:32 UTC): 201 steps left after a 39-step first window,
    # the listener holding 0.4119 s; the running average said 0.0037647 s/step, the slowest of the
    # last windows 0.0052081; the window ran at 0.00491.
    ahead_s, ran_s_per_step = 0.4119, 0.00491
    at_average, at_slowest = PLAN.next_steps(201, ahead_s, 0.0037647), PLAN.next_steps(201, ahead_s, 0.0052081)
    assert (at_average, at_slowest) == (65, 41)
    took = [ran_s_per_step * PLAN.vocoded_later(size, 201) for size in (at_average, at_slowest)]
    assert took == pytest.approx([0.42717, 0.30933])
    assert took[0] > ahead_s > took[1]  # 0.015 s of silence (the page measured 0.05 s), then none
