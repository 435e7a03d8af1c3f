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
from kokoro_server.windowed import Decoding, WindowPlan, decode_window
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

    def synthesize_pieces(
        self, text: str, voice: str, speed: float, *, others_waiting: Callable[[], int] | None = None
    ) -> Iterator[ChunkAudio]:
        self.piece_calls.append(text)
        self.steps.append(threading.current_thread().name)
        self.crowds.append(others_waiting() if others_waiting is not None else -1)
        whole = ZeroCostEngine().synthesize(text, voice, speed).pcm
        third = len(whole) // 6 * 2  # whole samples
        cuts = ((0, third), (third, 2 * third), (2 * third, len(whole)))
        for number, (start, end) in enumerate(cuts, start=1):
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
    with pytest.raises(ValueError, match=r"^need 1 <= min_first_steps <= first_steps$"):
        WindowPlan(first_steps=10, min_first_steps=20)


def test_a_window_past_the_prepared_prefix_is_refused() -> None:
    """The first window is vocoded from a prefix of the frame-rate layers: a later window must not
    silently read past it (its audio would be decoded from zeros)."""
    import torch

    decoding = Decoding(
        x=torch.zeros(1, 4, 40), har=torch.zeros(1, 22, 60 * 200 + 1), style=torch.zeros(1, 128), steps=200
    )
    assert decoding.ready_steps == 40
    with pytest.raises(ValueError, match=r"^window \[20, 40\) needs steps up to 56; only 40 are ready$"):
        decode_window(None, decoding, 20, 40, 16)


def test_windows_cover_the_steps_exactly_without_a_sliver() -> None:
    plan = WindowPlan(first_steps=80, window_steps=240, context_steps=16)
    assert plan.windows(50) == [(0, 50)]
    assert plan.windows(139 * 2) == [(0, 80), (80, 278)]
    assert plan.windows(1000) == [(0, 80), (80, 320), (320, 560), (560, 800), (800, 1000)]
    assert plan.windows(130) == [(0, 130)]  # 50 more steps would be a sliver (under 240 / 4)
