"""A chunk's audio in pieces: the session sends each piece as it is made, for the first chunk only.

The engine here is the zero-cost one with a piece stream (its chunk audio in three pieces), so the
frames can be asserted exactly; the real windowed decoder is tested against whole-chunk decoding
in tests/model/test_model_windowed.py.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from kokoro_server.engine import ChunkAudio, PieceStreamingEngine, ZeroCostEngine
from kokoro_server.windowed import WindowPlan
from speech_protocol import WordTiming
from tests.speech.speech_support import is_event, receive_until, serve_in_process

TEXT = "Streaming speech lets a voice agent start talking, even before the whole answer is complete."
FIRST_CLAUSE = "Streaming speech lets a voice agent start talking,"


class PieceEngine(ZeroCostEngine):
    """The zero-cost engine whose `synthesize_pieces` cuts a chunk's audio into three pieces."""

    def __init__(self) -> None:
        super().__init__()
        self.piece_calls: list[str] = []

    def synthesize_pieces(
        self, text: str, voice: str, speed: float, *, others_waiting: Callable[[], int] | None = None
    ) -> Iterator[ChunkAudio]:
        self.piece_calls.append(text)
        whole = ZeroCostEngine().synthesize(text, voice, speed).pcm
        third = len(whole) // 6 * 2  # whole samples
        for start, end in ((0, third), (third, 2 * third), (2 * third, len(whole))):
            yield ChunkAudio(pcm=whole[start:end], words=(WordTiming(f"piece@{start}", 0.0, 0.1),))


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


def test_windows_cover_the_steps_exactly_without_a_sliver() -> None:
    plan = WindowPlan(first_steps=80, window_steps=240, context_steps=16)
    assert plan.windows(50) == [(0, 50)]
    assert plan.windows(139 * 2) == [(0, 80), (80, 278)]
    assert plan.windows(1000) == [(0, 80), (80, 320), (320, 560), (560, 800), (800, 1000)]
    assert plan.windows(130) == [(0, 130)]  # 50 more steps would be a sliver (under 240 / 4)
