"""A chunk's audio in pieces: the session sends each piece as it is made, for the first chunk only.

The engine here is the zero-cost one with a piece stream (its chunk audio in three pieces), so the
frames can be asserted exactly; the real windowed decoder is tested against whole-chunk decoding
in tests/model/test_model_windowed.py.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator

import pytest

from kokoro_server.engine import ChunkAudio, PieceStreamingEngine, ZeroCostEngine
from kokoro_server.schedule import PlaybackClock
from kokoro_server.windowed import STEP_S, Decoding, WindowPlan, decode_window
from speech_protocol import WordTiming
from tests.speech.speech_support import is_event, receive_until, serve_in_process

TEXT = "Streaming speech lets a voice agent start talking, even before the whole answer is complete."
FIRST_CLAUSE = "Streaming speech lets a voice agent start talking,"


class PieceEngine(ZeroCostEngine):
    """The zero-cost engine whose `synthesize_pieces` cuts a chunk's audio into three pieces, marks
    the last one `ends_chunk` when `marks_end`, and records the threads its steps ran on."""

    def __init__(self, *, marks_end: bool = True) -> None:
        super().__init__()
        self.piece_calls: list[str] = []
        self.marks_end = marks_end
        self.steps: list[str] = []
        """One entry per resumption of the iterator (the name of the thread it ran on)."""
        self.crowds: list[int] = []
        self.aheads: list[float] = []
        """`ahead_s()` as asked before each piece after the first (the listener's buffered audio)."""

    def synthesize_pieces(
        self,
        text: str,
        voice: str,
        speed: float,
        *,
        others_waiting: Callable[[], int] | None = None,
        ahead_s: Callable[[], float] | None = None,
    ) -> Iterator[ChunkAudio]:
        self.piece_calls.append(text)
        self.steps.append(threading.current_thread().name)
        self.crowds.append(others_waiting() if others_waiting is not None else -1)
        whole = ZeroCostEngine().synthesize(text, voice, speed).pcm
        third = len(whole) // 6 * 2  # whole samples
        cuts = ((0, third), (third, 2 * third), (2 * third, len(whole)))
        for number, (start, end) in enumerate(cuts, start=1):
            if number > 1:
                self.aheads.append(ahead_s() if ahead_s is not None else -1.0)
            last = self.marks_end and number == len(cuts)
            yield ChunkAudio(pcm=whole[start:end], words=(WordTiming(f"piece@{start}", 0.0, 0.1),), ends_chunk=last)
            self.steps.append(threading.current_thread().name)


def test_the_piece_engine_is_a_piece_streaming_engine_and_the_plain_one_is_not() -> None:
    assert isinstance(PieceEngine(), PieceStreamingEngine)
    assert not isinstance(ZeroCostEngine(), PieceStreamingEngine)


def test_the_first_chunk_goes_out_piece_by_piece_and_later_chunks_whole() -> None:
    engine = PieceEngine()
    with (
        serve_in_process(engine, chunking="adaptive") as (client, _),
        client.websocket_connect("/invocations-bidirectional-stream") as ws,
    ):
        ws.send_json({"text": TEXT, "request_id": "r", "timestamps": True})
        frames = receive_until(ws, is_event("synthesis_complete", "r"))
    assert engine.piece_calls == [FIRST_CLAUSE]
    assert [text for text, _, _ in engine.calls] == [TEXT[len(FIRST_CLAUSE) + 1 :]]
    whole_first = ZeroCostEngine().synthesize(FIRST_CLAUSE, "af_heart", 1.0).pcm
    audio = [payload for kind, payload in frames if kind == "bytes"]
    third = len(whole_first) // 6 * 2
    assert audio[:3] == [whole_first[:third], whole_first[third : 2 * third], whole_first[2 * third :]]
    stamps = [payload for kind, payload in frames if kind == "text" and payload["type"] == "timestamps"]
    assert [s["chunk"] for s in stamps] == [0, 1, 2, 3]
    # Each piece's words are shifted by the audio before it, as chunks' are.
    assert stamps[1]["words"][0]["word"] == f"piece@{third}"
    assert stamps[1]["words"][0]["start_s"] == round(third / 2 / 24000, 3)
    complete = frames[-1][1]
    assert complete["chunks"] == 4
    # Before each later piece the engine was told what the listener holds: the pieces delivered
    # so far (1 s each), less the moments it took (a zero-cost engine: far under 0.5 s).
    assert len(engine.aheads) == 2
    assert 0.5 < engine.aheads[0] <= 1.0
    assert 1.5 < engine.aheads[1] <= 2.0


@pytest.mark.parametrize(("marks_end", "steps"), [(True, 3), (False, 4)])
def test_each_piece_is_its_own_engine_job_and_a_marked_last_piece_ends_them(marks_end: bool, steps: int) -> None:
    """Every piece runs as one scheduler job (on a synthesis pool thread, not the event loop); the
    last piece marked `ends_chunk` saves the job that would only find the iterator's end."""
    engine = PieceEngine(marks_end=marks_end)
    with (
        serve_in_process(engine, chunking="adaptive") as (client, _),
        client.websocket_connect("/invocations-bidirectional-stream") as ws,
    ):
        ws.send_json({"text": TEXT, "request_id": "r"})
        frames = receive_until(ws, is_event("synthesis_complete", "r"))
    assert len(engine.steps) == steps
    assert all(name.startswith("synthesis") for name in engine.steps)
    assert engine.crowds == [0]  # asked once, when the first piece is cut: nobody else waits
    assert frames[-1][1]["chunks"] == 4  # 3 pieces, then the rest whole


def test_the_first_window_shrinks_with_the_crowd_waiting_in_silence() -> None:
    plan = WindowPlan(first_steps=80, min_first_steps=20)
    assert [plan.first_for(n) for n in (0, 1, 2, 3, 4, 10)] == [80, 40, 26, 20, 20, 20]
    assert plan.first_for(-1) == 80
    assert plan.windows(400, plan.first_for(3)) == [(0, 20), (20, 260), (260, 400)]
    with pytest.raises(ValueError, match=r"^need 1 <= min_first_steps <= first_steps <= max_first_steps$"):
        WindowPlan(first_steps=10, min_first_steps=20)
    with pytest.raises(ValueError, match=r"^need 1 <= min_window_steps <= window_steps and min_tail_steps >= 0$"):
        WindowPlan(min_window_steps=241)
    with pytest.raises(ValueError, match=r"^need 0 < margin <= 1, got 0.0$"):
        WindowPlan(margin=0.0)


def test_a_window_past_the_prepared_prefix_is_refused() -> None:
    """The first window is vocoded from a prefix of the frame-rate layers: a later window must not
    silently read past it (its audio would be decoded from zeros)."""
    import torch

    decoding = Decoding(
        x=torch.zeros(1, 4, 40), har=torch.zeros(1, 22, 60 * 200 + 1), style=torch.zeros(1, 128), steps=200
    )
    assert decoding.ready_steps == 40
    with pytest.raises(ValueError, match=r"^window \[20, 40\) needs steps up to 56; only 40 are ready$"):
        decode_window(None, decoding, 20, 40, (4, 56))
    with pytest.raises(ValueError, match=r"^window \[20, 40\) is not inside its span \[25, 56\) of 200 steps$"):
        decode_window(None, decoding, 20, 40, (25, 56))
    with pytest.raises(ValueError, match=r"^window \[20, 40\) is not inside its span \[4, 201\) of 200 steps$"):
        decode_window(None, decoding, 20, 40, (4, 201))


def test_windows_cover_the_steps_exactly_without_a_sliver() -> None:
    plan = WindowPlan(first_steps=80, window_steps=240, context_steps=16)
    assert plan.windows(50) == [(0, 50)]
    assert plan.windows(139 * 2) == [(0, 80), (80, 278)]
    assert plan.windows(1000) == [(0, 80), (80, 320), (320, 560), (560, 800), (800, 1000)]
    assert plan.windows(80 + 59) == [(0, 139)]  # 59 more would be a sliver (under min_tail_steps, 60)
    assert plan.windows(80 + 60) == [(0, 80), (80, 140)]
    assert plan.windows(80 + 240 + 59) == [(0, 80), (80, 379)]


# Window sizes at a known speed. Defaults: first 72 (20 to 96), longest 240, shortest fitted 40,
# remainders under 60 join, context 11 each side of a later window (16 after a first one), 16 steps
# of work between a first window and the second, margin 0.8; a step is 12.5 ms of audio. The
# vocoder's speed in seconds per vocoded step: 0.0095 measured in the server on a 2-core AVX2 EPYC
# (vocoder real-time factor 0.76), 0.004 a machine about twice as fast, 0.0005 a GPU-like one.
PLAN = WindowPlan()
CPU, MID, GPU = 0.0095, 0.004, 0.0005


@pytest.mark.parametrize(
    ("remaining", "ahead_s", "s_per_step", "expected"),
    [
        (1000, None, None, 240),  # unknown speed: the longest window
        (1000, 0.9, None, 240),
        (1000, 0.9, MID, 158),  # int(0.72 / 0.004) = 180 vocoded steps, less 2 x 11 of context
        (1000, 0.7, MID, 117),  # int(0.56 / 0.004) - 22 = 117 (float: 139.99...)
        (1000, 1.5, MID, 240),  # int(1.2 / 0.004) - 22 = 278: capped at the longest
        (1000, 0.9, GPU, 240),
        (200, 0.9, MID, 200),  # 158 would leave 42, a sliver: it joins (and still fits: 211 x 0.004 < 0.9)
        (300, 0.9, MID, 158),  # 158 leaves 142: no sliver
        (50, None, None, 50),  # never past the chunk's end
        (1000, 0.9, 0.0, 240),  # a speed that is not one: as unknown
    ],
)
def test_a_later_window_is_as_long_as_the_listeners_audio_lets_the_vocoder_make_it(
    remaining: int, ahead_s: float | None, s_per_step: float | None, expected: int
) -> None:
    assert PLAN.next_steps(remaining, ahead_s, s_per_step) == expected


@pytest.mark.parametrize(
    ("remaining", "ahead_s", "s_per_step", "expected"),
    [
        # Measured in the server (0.0054 s/step): a 0.41 s first window left 0.33 s of audio when
        # the second was cut; int(0.264 / 0.0054) - 22 = 26 < 40 fits. The shortest window after
        # which the rest plays out: 40 (a 5 ms gap: 62 x 0.0054 = 0.335 s of work). It used to be
        # all 267 steps at once, a 0.79 s gap.
        (267, 0.33, 0.0054, 40),
        (1000, 0.0, MID, 40),  # the listener hears nothing: a 0.25 s gap, then no other
        (1000, 0.9, CPU, 89),  # int(0.72 / 0.0095) - 22 = 53 fits, but the rest would not play out from it
        (1000, 0.0, CPU, 89),
        (1000, 0.0, 0.02, 240),  # slower than real time: no window recovers, as few as possible
        (60, 0.0, CPU, 60),  # what is left is one window anyway
    ],
)
def test_a_buffer_thinner_than_planned_costs_one_short_gap_not_a_long_one(
    remaining: int, ahead_s: float, s_per_step: float, expected: int
) -> None:
    size = PLAN.next_steps(remaining, ahead_s, s_per_step)
    assert size == expected
    if size < remaining and size < PLAN.window_steps:
        # From its audio alone the rest plays out, and from no shorter window's.
        assert PLAN.plays_out(remaining - size, size * STEP_S, s_per_step)
        shorter = range(PLAN.min_window_steps, size)
        assert not any(PLAN.plays_out(remaining - s, s * STEP_S, s_per_step) for s in shorter)
    assert PLAN.recovers_from(remaining, s_per_step) == (None if expected == 240 else expected)


def test_the_first_window_alone_is_the_shortest_that_plays_gapless_at_the_measured_speed() -> None:
    # Unknown speed, or a crowd waiting in silence: as before (the crowd rule ignores the speed).
    assert PLAN.first_for(0) == PLAN.first_for(0, 400, None) == PLAN.first_for(0, 400, 0.0) == 72
    assert PLAN.first_for(2, 400, GPU) == 24
    # A GPU-like engine: the shortest first window, and it plays gapless.
    assert PLAN.first_for(0, 400, GPU) == 20
    assert PLAN.plays_gapless(20, 400, GPU)
    # Slower than real time (RTF 1.6): nothing plays gapless, so the default.
    assert not any(PLAN.plays_gapless(first, 400, 0.02) for first in range(20, 97))
    assert PLAN.first_for(0, 400, 0.02) == 72
    # Twice as fast as that CPU: 0.375 s, after which the second window may take 0.8 x (0.375 s less
    # the handover's 16 x 0.004 s) = int(0.249 / 0.004) - 22 = 40 steps; every shorter one has a gap.
    assert PLAN.first_for(0, 400, MID) == 30
    assert PLAN.plays_gapless(30, 400, MID)
    assert not any(PLAN.plays_gapless(f, 400, MID) for f in range(20, 30))
    # Without the handover the plan would take 25, and leave the second window 0.064 s short.
    assert WindowPlan(handover_steps=0).first_for(0, 400, MID) == 25
    # The fixed plan would stutter there: 0.9 s, then 3 s of audio in one window (1.05 s of work).
    assert MID * PLAN.vocoded_steps(72, 72 + 240, 400) > 72 * STEP_S
    # That CPU: 0.5 s later windows keep up from a 1.15 s first window (92 steps), within its limit.
    assert PLAN.first_for(0, 400, CPU) == 92
    assert not any(PLAN.plays_gapless(f, 400, CPU) for f in range(20, 92))
    assert PLAN.first_for(0, 400, 0.006) == 45
    assert PLAN.first_for(0, 400, 0.011) == 72  # gapless only past 96 steps (1.2 s): not bought
    assert PLAN.plays_gapless(124, 400, 0.011)
    assert not any(PLAN.plays_gapless(f, 400, 0.011) for f in range(20, 124))
    # A chunk that fits in the first window is one window, at any speed.
    assert PLAN.plays_gapless(40, 40 + 59, 1.0)
    with pytest.raises(ValueError, match=r"^need handover_steps >= 0, got -1$"):
        WindowPlan(handover_steps=-1)


@pytest.mark.parametrize("s_per_step", [GPU, 0.002, MID, 0.0047, 0.0075, CPU, 0.011])
@pytest.mark.parametrize("steps", [60, 240, 400, 1000])
def test_windows_cut_by_next_steps_never_run_a_playback_clock_dry_at_the_measured_speed(
    s_per_step: float, steps: int
) -> None:
    """Play the windows through the session's own `PlaybackClock` on a simulated clock: each window
    vocoded at `s_per_step` (both contexts included) after the one before was delivered, the second
    after the handover's work too. From the first window `first_for` chose (when it reports a
    gapless plan), the listener never waits."""
    first = PLAN.first_for(0, steps, s_per_step)
    if not PLAN.plays_gapless(first, steps, s_per_step):
        assert first == PLAN.first_steps  # no gapless plan: the default, never a shorter one
        return
    clock, now = PlaybackClock(), 0.0
    clock.delivered(now, first * STEP_S)
    now += s_per_step * PLAN.handover_steps
    position = first if steps - first >= PLAN.min_tail_steps else steps
    while position < steps:
        size = PLAN.next_steps(steps - position, clock.ahead_s(now), s_per_step)
        now += s_per_step * PLAN.vocoded_steps(position, position + size, steps)
        assert clock.ahead_s(now) > 0.0, f"underrun before window [{position}, {position + size})"
        clock.delivered(now, size * STEP_S)
        position += size
    assert position == steps


def test_a_first_window_that_leaves_a_gap_ends_between_two_words() -> None:
    """Unknown speed, or too slow for any gapless first window: the default 72 steps moves back to
    the last word end within 24 steps (0.3 s), never later (first audio never waits longer)."""
    assert PLAN.at_word_end(72, [15, 51, 87, 126]) == 51  # 87 is nearer, but later
    assert PLAN.at_word_end(72, [40, 55, 63, 81]) == 63  # the last one before
    assert PLAN.at_word_end(72, [72, 80]) == 72
    assert PLAN.at_word_end(72, [47, 73]) == 72  # 25 back is past the slack, 73 is later: none
    assert PLAN.at_word_end(30, [5, 19]) == 30  # under `min_first_steps` (20): not taken
    assert PLAN.at_word_end(30, [20]) == 20
    assert PLAN.at_word_end(72, []) == 72
    assert WindowPlan(word_slack_steps=0).at_word_end(72, [71]) == 72
    ends = [15, 51, 87, 126]
    assert PLAN.first_for(0, 400, None, ends) == PLAN.first_for(0, 400, 0.0, ends) == 51
    assert PLAN.first_for(0, 400, 0.011, ends) == 51  # too slow for a gapless plan: a gap is coming
    assert PLAN.first_for(0, 400, GPU, ends) == 20  # a gapless plan: the shortest first window as before
    assert PLAN.first_for(0, 400, MID, ends) == 30
    assert PLAN.first_for(2, 400, CPU, ends) == 24  # a crowd: as short as the crowd rule says
    with pytest.raises(ValueError, match=r"^need word_slack_steps >= 0, got -1$"):
        WindowPlan(word_slack_steps=-1)
