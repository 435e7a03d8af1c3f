"""End to end, offline: scripted model -> Strands agent -> WebSocket client -> the real speech server.

The speech server is `kokoro_server.app.create_app` under uvicorn, serving `ZeroCostEngine` (fast,
deterministic audio) for most checks, and the real Kokoro-82M engine (random-weight checkpoint)
for the two `model` tests.
"""

from __future__ import annotations

import asyncio
import base64
from collections.abc import Callable
from typing import Any

import pytest

from agent_app.frames import AUDIO_CHUNK_PCM_BYTES
from agent_app.pipeline import Outcome
from agent_app.speech.websocket import WebSocketTransport
from kokoro_server.app import create_app
from kokoro_server.engine import SpeechEngine, ZeroCostEngine
from kokoro_server.settings import Settings
from speech_protocol import WS_PATH
from tests.agent.agent_support import (
    FOUR_SENTENCES,
    Event,
    GatedModel,
    RecordingTransport,
    collect,
    decoded_audio,
    make_invocation,
    run_releasing_on_first_audio,
    scripted,
    sentence_start_token,
    types,
)
from tests.agent.conftest import LiveServer

LAST_SENTENCE = "On a clear day you can see for about seventy kilometers from the top."
SpeechServer = Callable[..., tuple[LiveServer, str]]


@pytest.fixture
def speech_server(serve_asgi: Callable[[Any], LiveServer]) -> SpeechServer:
    """Start the real speech server app serving `engine`; returns it and its session URL."""

    def start(engine: SpeechEngine, **settings: Any) -> tuple[LiveServer, str]:
        live = serve_asgi(create_app(Settings(**settings), engine))
        return live, f"ws://127.0.0.1:{live.port}{WS_PATH}"

    return start


def recording(url: str) -> RecordingTransport:
    return RecordingTransport(WebSocketTransport(url, open_timeout_s=5, close_timeout_s=2))


def expected_pcm(engine: ZeroCostEngine) -> bytes:
    """The audio of every synthesis the server ran, in order (ZeroCostEngine is deterministic)."""
    twin = ZeroCostEngine(seconds_per_char=engine.seconds_per_char)
    return b"".join(twin.synthesize(text, voice, speed).pcm for text, voice, speed in list(engine.calls))


def assert_well_formed(events: list[Event]) -> None:
    kinds = types(events)
    assert kinds[0] == "agent_start"
    assert kinds[-3:] == ["audio_end", "metrics", "agent_end"]
    assert kinds.count("audio_start") == 1
    assert "error" not in kinds
    assert kinds.index("audio_start") < kinds.index("audio_chunk")
    seqs = [e["seq"] for e in events if e["type"] == "audio_chunk"]
    assert seqs == list(range(len(seqs)))
    assert events[-3] == {"type": "audio_end", "chunks": len(seqs), "bytes": len(decoded_audio(events))}


def last_index(kinds: list[str], kind: str) -> int:
    return len(kinds) - 1 - kinds[::-1].index(kind)


async def test_stream_mode_speaks_while_the_model_generates(speech_server: SpeechServer) -> None:
    engine = ZeroCostEngine()
    _, url = speech_server(engine)
    transport = recording(url)
    # The model holds its last sentence until audio has arrived: only streaming can get there.
    model = GatedModel(hold_at=sentence_start_token(FOUR_SENTENCES, LAST_SENTENCE))
    invocation = make_invocation(model, transport, mode="stream", deadline_s=15)
    events, model_finished_at_first_audio = await run_releasing_on_first_audio(invocation, model)

    assert_well_formed(events)
    assert model_finished_at_first_audio is False
    kinds = types(events)
    assert kinds.index("audio_chunk") < last_index(kinds, "text_delta")
    assert decoded_audio(events) == b"".join(transport.frames)  # exactly what the server sent
    assert decoded_audio(events) == expected_pcm(engine)
    # The server's 1 s frames are cut to fit AgentCore's WebSocket frames (agent_app/frames.py).
    assert max(len(frame) for frame in transport.frames) > AUDIO_CHUNK_PCM_BYTES
    assert max(len(base64.b64decode(e["audio"])) for e in events if e["type"] == "audio_chunk") == AUDIO_CHUNK_PCM_BYTES
    spoken = " ".join(text for text, _, _ in engine.calls)
    assert spoken.split() == FOUR_SENTENCES.split()
    # Word timings for captions: every word, in order, in the answer's audio time, never backwards.
    timings = [word for event in events if event["type"] == "words" for word in event["words"]]
    assert [word["word"] for word in timings] == FOUR_SENTENCES.split()  # the zero-cost engine's words
    starts = [word["start_s"] for word in timings]
    assert starts == sorted(starts)
    assert timings[-1]["end_s"] <= len(decoded_audio(events)) / 48_000 + 0.001
    assert await invocation.wait_finished() is Outcome.COMPLETED


async def test_batch_mode_speaks_only_after_the_model_finished(speech_server: SpeechServer) -> None:
    engine = ZeroCostEngine()
    _, url = speech_server(engine)
    transport = recording(url)
    model = scripted(tokens_per_s=400)
    events = await collect(make_invocation(model, transport, mode="batch"))

    assert_well_formed(events)
    kinds = types(events)
    assert last_index(kinds, "text_delta") < kinds.index("audio_start")
    assert decoded_audio(events) == b"".join(transport.frames) == expected_pcm(engine)
    assert " ".join(text for text, _, _ in engine.calls).split() == FOUR_SENTENCES.split()
    metrics = events[-2]
    assert metrics["mode"] == "batch"
    assert metrics["time_to_first_audio_ms"] > metrics["time_to_first_text_ms"]


async def test_a_voice_the_server_does_not_have_is_a_rejection(speech_server: SpeechServer) -> None:
    _, url = speech_server(ZeroCostEngine())
    events = await collect(make_invocation(scripted(), recording(url), voice="zz_nobody"))
    assert types(events)[-1] == "error"
    assert events[-1]["code"] == "speech_rejected"
    assert "unknown_voice" in events[-1]["message"]


async def test_a_speech_server_that_goes_away_mid_answer(speech_server: SpeechServer) -> None:
    # About 0.1 s of compute per sentence, so that the server stops while the answer is spoken.
    live, url = speech_server(ZeroCostEngine(compute_s_per_char=0.002))
    model = scripted(tokens_per_s=40)  # 1.5 s of answer: far longer than the server takes to stop
    invocation = make_invocation(model, recording(url))
    events: list[Event] = []
    async for event in invocation.events():
        events.append(dict(event))
        if event["type"] == "audio_chunk" and event["seq"] == 0:
            await asyncio.to_thread(live.stop)
    kinds = types(events)
    assert kinds[-1] == "error"
    assert events[-1]["code"] == "speech_stream_error"
    assert "agent_end" not in kinds
    assert await invocation.wait_finished() is Outcome.FAILED
    assert model.stopped_early is True


async def test_a_speech_server_that_is_down(free_port: int) -> None:
    events = await collect(make_invocation(scripted(), recording(f"ws://127.0.0.1:{free_port}{WS_PATH}")))
    assert types(events)[-1] == "agent_end"  # the answer went on as text
    assert [e["code"] for e in events if e["type"] == "error"] == ["speech_unavailable"]
    assert "audio_chunk" not in types(events)


# --- the real Kokoro-82M engine (full-size architecture, random weights) ------------------------------

TWO_SENTENCES = "The tower is in Paris, the capital of France. It is three hundred meters tall."


@pytest.mark.model
@pytest.mark.timeout(180)
@pytest.mark.parametrize("mode", ["stream", "batch"])
async def test_both_modes_with_the_real_engine(speech_server: SpeechServer, kokoro_engine: Any, mode) -> None:
    _, url = speech_server(kokoro_engine)
    transport = recording(url)
    if mode == "stream":
        # The model holds its second sentence after its first three words until the first audio has
        # arrived; without streaming, the deadline ends it. Three: the spoken-text stage releases a word
        # once the next one starts, and the segmenter confirms a sentence's end once the word after it is
        # complete ("France. It is" ends at "France.").
        model = GatedModel(TWO_SENTENCES, tokens_per_s=40, hold_at=sentence_start_token(TWO_SENTENCES, "It is") + 3)
    else:
        model = GatedModel(TWO_SENTENCES, tokens_per_s=40)
    invocation = make_invocation(model, transport, mode=mode, deadline_s=90)
    events, model_finished_at_first_audio = await run_releasing_on_first_audio(invocation, model)
    assert_well_formed(events)
    kinds = types(events)
    if mode == "stream":
        assert model_finished_at_first_audio is False
        assert kinds.index("audio_chunk") < last_index(kinds, "text_delta")
    else:
        assert model_finished_at_first_audio is True
        assert last_index(kinds, "text_delta") < kinds.index("audio_start")
    audio = decoded_audio(events)
    assert audio == b"".join(transport.frames)
    assert len(audio) > 2 * 24_000  # over a second of speech for two sentences
    assert events[-2]["time_to_first_audio_ms"] is not None
