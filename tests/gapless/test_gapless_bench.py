"""The gapless benchmark's pieces: recording a real session over a socket, and the table."""

from __future__ import annotations

from bench.gapless import Case, Outcome, Row, gap_lines, render_table, run_sessions, serving
from bench.playback import Gap, PlaybackReport
from bench.recording import record_session
from kokoro_server.app import create_app
from kokoro_server.engine import ZeroCostEngine
from kokoro_server.settings import Settings


def report(ttfa: float, silence: float, underruns: int) -> PlaybackReport:
    return PlaybackReport(
        time_to_first_audio_s=ttfa, audio_s=10.0, silence_s=silence, underruns=underruns, gaps=(), ends_at_s=0.0
    )


async def test_a_recording_holds_every_audio_frame_of_the_request_in_order() -> None:
    engine = ZeroCostEngine()
    with serving(create_app(Settings(chunking="sentence", frame_ms=500), engine)) as url:
        recording = await record_session(url, "Hello there. How are you today, my friend?")
    # 12 characters: 17280 samples, 29: 41760 samples; frames of 500 ms (12000 samples, 24000 bytes).
    assert [call[0] for call in engine.calls] == ["Hello there.", "How are you today, my friend?"]
    assert [a.num_bytes for a in recording.arrivals] == [24000, 10560, 24000, 24000, 24000, 11520]
    assert [a.at_s for a in recording.arrivals] == sorted(a.at_s for a in recording.arrivals)
    assert recording.complete.chunks == 2
    assert recording.complete.audio_duration_s == 2.46
    playback = recording.playback()
    assert playback.audio_s == 2.46
    assert (playback.silence_s, playback.underruns) == (0.0, 0)  # a zero-cost engine never keeps a listener waiting
    assert 0 < playback.time_to_first_audio_s < 5


async def test_concurrent_sessions_are_recorded_separately() -> None:
    with serving(create_app(Settings(chunking="sentence"), ZeroCostEngine())) as url:
        outcome = await run_sessions(url, "One. Two three four five six.", 2)
    assert outcome.chunks == (2, 2)
    assert [p.audio_s for p in outcome.playbacks] == [1.68, 1.68]  # 4 + 24 characters of 0.06 s


def test_the_table_puts_both_policies_side_by_side_with_per_session_values() -> None:
    rows = [
        Row(
            Case("answer", 2, "bf16"),
            {
                "sentence": Outcome((report(0.5, 2.25, 1), report(1.0, 5.5, 2)), (5, 5)),
                "adaptive": Outcome((report(0.5, 0.0, 0), report(1.0, 0.0, 0)), (9, 8)),
            },
        )
    ]
    assert render_table(rows) == [
        "text             sessions precision | naive sentence split                            | adaptive schedule",
        "                                    |   first audio s     silence s underruns  chunks"
        " |   first audio s     silence s underruns  chunks",
        "answer                  2      bf16 |       0.50/1.00     2.25/5.50       1/2     5/5"
        " |       0.50/1.00     0.00/0.00       0/0     9/8",
    ]


def test_each_underrun_is_listed_with_the_audio_heard_before_it() -> None:
    gaps = (Gap(at_s=1.0, silence_s=0.79, audio_played_s=0.41), Gap(at_s=5.0, silence_s=0.125, audio_played_s=3.5))
    stutters = PlaybackReport(
        time_to_first_audio_s=0.5, audio_s=10.0, silence_s=0.915, underruns=2, gaps=gaps, ends_at_s=11.4
    )
    rows = [
        Row(
            Case("answer", 2, "fp32"),
            {
                "sentence": Outcome((report(0.5, 0.0, 0), stutters), (5, 5)),
                "adaptive": Outcome((report(0.5, 0.0, 0), report(1.0, 0.0, 0)), (9, 8)),
            },
        )
    ]
    assert gap_lines(rows) == [
        "answer, 2 session(s), fp32, naive sentence split, session 2: "
        "after 0.41 s of audio 0.79 s, after 3.50 s of audio 0.12 s"
    ]
    assert (
        gap_lines(
            [
                Row(
                    Case("answer", 1, "fp32"),
                    {p: Outcome((report(0.5, 0.0, 0),), (3,)) for p in ("sentence", "adaptive")},
                )
            ]
        )
        == []
    )
