"""The playback simulator on synthetic frame timelines: exact silence, underruns and first audio. Pure."""

from __future__ import annotations

import pytest

from bench.playback import Arrival, Gap, bytes_to_seconds, simulate_playback

SECOND = 48_000
"""Bytes of one second of PCM16 mono 24 kHz."""


def test_a_second_of_audio_is_48000_bytes() -> None:
    assert bytes_to_seconds(SECOND) == 1.0
    assert bytes_to_seconds(2) == 1 / 24_000


def test_frames_arriving_before_the_player_runs_dry_play_without_a_gap() -> None:
    report = simulate_playback(
        [Arrival(0.5, SECOND), Arrival(1.0, SECOND), Arrival(2.5, SECOND // 2)],
        sent_at_s=0.25,
    )
    assert report.time_to_first_audio_s == 0.25
    assert report.audio_s == 2.5
    assert (report.silence_s, report.underruns, report.gaps) == (0.0, 0, ())
    assert report.ends_at_s == 3.0


def test_a_frame_arriving_exactly_when_the_audio_runs_out_is_not_an_underrun() -> None:
    report = simulate_playback([Arrival(1.0, SECOND), Arrival(2.0, SECOND)])
    assert (report.silence_s, report.underruns) == (0.0, 0)


def test_late_frames_insert_silence_once_per_gap() -> None:
    # Playback starts at 1.0: 1 s of audio until 2.0; the next frame comes at 2.5 (0.5 s of
    # silence), plays to 3.0 with the frame that arrived meanwhile, then 3.0 -> 3.25 is silent.
    report = simulate_playback(
        [
            Arrival(1.0, SECOND),
            Arrival(2.5, SECOND // 4),
            Arrival(2.625, SECOND // 4),
            Arrival(3.25, SECOND),
        ]
    )
    assert report.time_to_first_audio_s == 1.0
    assert report.underruns == 2
    assert report.silence_s == 0.75
    assert report.gaps == (
        Gap(at_s=2.0, silence_s=0.5, audio_played_s=1.0),
        Gap(at_s=3.0, silence_s=0.25, audio_played_s=1.5),
    )
    assert report.ends_at_s == 4.25
    assert report.audio_s == 2.5


def test_silence_before_the_first_audio_is_latency_not_an_underrun() -> None:
    report = simulate_playback([Arrival(3.0, SECOND)], sent_at_s=0.0)
    assert (report.time_to_first_audio_s, report.silence_s, report.underruns) == (3.0, 0.0, 0)


def test_a_tolerance_forgives_small_late_arrivals_but_still_delays_the_end() -> None:
    frames = [Arrival(0.0, SECOND), Arrival(1.0625, SECOND), Arrival(2.5625, SECOND)]
    strict = simulate_playback(frames)
    assert (strict.underruns, strict.silence_s) == (2, 0.5625)
    tolerant = simulate_playback(frames, tolerance_s=0.125)
    assert (tolerant.underruns, tolerant.silence_s) == (1, 0.5)
    assert tolerant.ends_at_s == strict.ends_at_s == 3.5625


@pytest.mark.parametrize(
    ("frames", "message"),
    [
        ([], "no audio frames"),
        ([Arrival(1.0, SECOND), Arrival(0.5, SECOND)], "out of order"),
        ([Arrival(1.0, 0)], "without audio"),
    ],
)
def test_impossible_timelines_are_rejected(frames: list[Arrival], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        simulate_playback(frames)
