"""The vocoder's measured speed: the running average for later windows, the slowest recent window for
a first one (`kokoro_server.vocoder_speed`). Pure: speeds are given, nothing is timed."""

from __future__ import annotations

import pytest

from kokoro_server.vocoder_speed import HISTORY, VocoderSpeed
from kokoro_server.windowed import STEP_S, WindowPlan

PLAN = WindowPlan()

PAGE_RATES = (
    (0.00510, 0.00512, 0.00418),  # the warm-up answer (stream)
    (0.00557, 0.00513, 0.00493, 0.00463),  # stream trial 1
    (0.00456, 0.00453, 0.00401, 0.00461),  # batch trial 1
    (0.00392, 0.00314, 0.00319),  # batch trial 2
)
"""Seconds per vocoded step of each window the engine decoded before the answer that stuttered, in
order, from the server's log of `make bench-page` (2-core AMD EPYC, 21:24 UTC, 2026-12-01)."""


def test_nothing_measured_is_no_speed() -> None:
    speed = VocoderSpeed()
    assert (speed.typical, speed.cautious) == (None, None)
    speed.record(0, 0.5)  # a window of no steps says nothing about the speed
    assert (speed.typical, speed.cautious) == (None, None)


def test_typical_halves_towards_each_window_and_cautious_is_the_slowest_recent_one() -> None:
    speed = VocoderSpeed()
    speed.record(40, 0.2)  # 0.005 s/step
    assert (speed.typical, speed.cautious) == (0.005, 0.005)
    speed.record(100, 0.3)  # 0.003
    assert (speed.typical, speed.cautious) == (0.004, 0.005)
    speed.record(50, 0.1)  # 0.002
    assert (speed.typical, speed.cautious) == (0.003, 0.005)


def test_cautious_forgets_windows_older_than_its_history() -> None:
    speed = VocoderSpeed(history=2)
    for steps, seconds in ((10, 0.09), (10, 0.01), (10, 0.02)):
        speed.record(steps, seconds)
    assert speed.cautious == pytest.approx(0.002, abs=1e-15)  # 0.009 s/step is no longer among the last 2
    assert HISTORY == 16
    with pytest.raises(ValueError, match=r"^history must be at least 1 window, got 0$"):
        VocoderSpeed(history=0)


def test_a_stream_answer_after_batch_ones_is_planned_at_the_slowest_recent_window() -> None:
    speed = VocoderSpeed()
    for rate in (rate for answer in PAGE_RATES for rate in answer):
        speed.record(50, rate * 50)
    typical, cautious = speed.typical, speed.cautious
    assert typical == pytest.approx(0.0034276, abs=1e-7)  # the server logged 0.0034262 (rates rounded here)
    assert cautious == pytest.approx(0.00557, abs=1e-12)
    at_typical, at_cautious = PLAN.first_for(0, 240, typical), PLAN.first_for(0, 240, cautious)
    assert (at_typical, at_cautious) == (26, 42)
    # That answer's later windows ran at about 0.0050 s/step, and its second window was cut 0.098 s
    # after the first one's audio had been sent. The shortest second window then takes 0.31 s.
    handover_s, later_s_per_step = 0.098, 0.0050
    for first, silent in ((at_typical, True), (at_cautious, False)):
        second_s = later_s_per_step * PLAN.vocoded_later(PLAN.min_window_steps, 240 - first)
        assert second_s == pytest.approx(0.31)
        # 26 steps: 0.227 s left to play, a gap of 0.083 s (the page measured 0.07 s); 42: 0.427 s.
        assert (first * STEP_S - handover_s < second_s) is silent
