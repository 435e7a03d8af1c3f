"""The vocoder's measured speed (`kokoro_server.vocoder_speed`): the running average for a crowd's
chunks, the slowest recent first window planned alone (or the average, when slower) for a lone
chunk's windows, and the page's silences this removes. Pure: speeds are given, nothing is timed."""

from __future__ import annotations

import pytest

from kokoro_server.vocoder_speed import FIRST_WINDOWS, VocoderSpeed
from kokoro_server.windowed import STEP_S, WindowPlan

PLAN = WindowPlan()


def test_nothing_measured_is_no_speed() -> None:
    speed = VocoderSpeed()
    assert (speed.typical, speed.alone) == (None, None)
    speed.record(0, 0.5, first_alone=True)  # a window of no steps says nothing about the speed
    assert (speed.typical, speed.alone) == (None, None)


def test_typical_is_the_running_average_alone_the_slowest_recent_lone_first_window() -> None:
    speed = VocoderSpeed()
    speed.record(40, 0.2, first_alone=True)  # 0.005 s/step, a first window planned alone
    assert (speed.typical, speed.alone) == (0.005, 0.005)
    speed.record(100, 0.3)  # 0.003, a later window: the average halves towards it, `alone` does not
    assert (speed.typical, speed.alone) == (0.004, 0.005)
    speed.record(50, 0.1)  # 0.002
    assert (speed.typical, speed.alone) == (0.003, 0.005)
    speed.record(10, 0.09)  # 0.009: a first window beside a crowd, or a later one, is not remembered as a first
    assert (speed.typical, speed.alone) == (0.006, 0.006)  # but the average may be slower


def test_first_windows_older_than_the_memory_are_forgotten() -> None:
    speed = VocoderSpeed(first_windows=2)
    for seconds in (0.09, 0.04, 0.05):  # 0.009, 0.004, 0.005 s/step, each a first window alone
        speed.record(10, seconds, first_alone=True)
    for _ in range(2):
        speed.record(10, 0.01)  # 0.001, later windows
    assert speed.typical == pytest.approx(0.0021875, abs=1e-15)
    assert speed.alone == pytest.approx(0.005, abs=1e-15)  # 0.009 is no longer among the last 2
    assert FIRST_WINDOWS == 4
    with pytest.raises(ValueError, match=r"^first_windows must be at least 1, got 0$"):
        VocoderSpeed(first_windows=0)


PAGE_RATES = (
    (0.00510, 0.00512, 0.00418),  # the warm-up answer (stream)
    (0.00557, 0.00513, 0.00493, 0.00463),  # stream trial 1
    (0.00456, 0.00453, 0.00401, 0.00461),  # batch trial 1
    (0.00392, 0.00314, 0.00319),  # batch trial 2
)
"""Seconds per vocoded step of each window the engine decoded before a stream answer whose first
window was too short, answer by answer (the first of each its first window, planned alone), from
the server's log of `make bench-page` (2-core AMD EPYC, 2026-12-01 21:24 UTC). The running average
the server planned with then: 0.0034262 s/step."""


def test_a_lone_first_window_planned_at_the_slowest_recent_one_is_not_followed_by_silence() -> None:
    speed = VocoderSpeed()
    for answer in PAGE_RATES:
        for number, rate in enumerate(answer):
            speed.record(50, rate * 50, first_alone=number == 0)
    assert speed.typical == pytest.approx(0.0034276, abs=1e-7)  # the log's 0.0034262, from rounded rates
    assert speed.alone == pytest.approx(0.00557, abs=1e-12)
    at_average, at_first = PLAN.first_for(0, 240, speed.typical), PLAN.first_for(0, 240, speed.alone)
    assert (at_average, at_first) == (26, 42)
    # That answer's later windows ran at about 0.0050 s/step, and its second window was cut 0.098 s
    # after the first one's audio had been sent. The shortest second window then takes 0.31 s.
    handover_s, later_s_per_step = 0.098, 0.0050
    for first, silent in ((at_average, True), (at_first, False)):
        second_s = later_s_per_step * PLAN.vocoded_later(PLAN.min_window_steps, 240 - first)
        assert second_s == pytest.approx(0.31)
        # 26 steps: 0.227 s left to play, a gap of 0.083 s (the page measured 0.07 s); 42: 0.427 s.
        assert (first * STEP_S - handover_s < second_s) is silent


def test_a_lone_second_window_planned_at_the_slowest_recent_first_window_is_not_followed_by_silence() -> None:
    # Another stream answer of the page (22:42:44 UTC), its first window planned at 0.0057214 s/step
    # (43 steps), its second window planned at the running average, 0.0049391: 197 steps left, the
    # listener holding 0.4354 s; the window ran at 0.0066 s/step.
    ahead_s, ran_s_per_step = 0.4354, 0.0066
    at_average, at_alone = PLAN.next_steps(197, ahead_s, 0.0049391), PLAN.next_steps(197, ahead_s, 0.0057214)
    assert (at_average, at_alone) == (48, 40)
    took = [ran_s_per_step * PLAN.vocoded_later(size, 197) for size in (at_average, at_alone)]
    assert took == pytest.approx([0.462, 0.4092])
    assert took[0] > ahead_s > took[1]  # 0.027 s of silence (the page measured 0.03 s), then none
