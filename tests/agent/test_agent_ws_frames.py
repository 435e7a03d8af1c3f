"""WS /ws against AgentCore's frame limits, through the real speech server (zero-cost engine).

Measured where AgentCore would measure them, at the agent's own `websocket.send` calls: the size of
every frame at the speech server's largest `frame_ms`, and the frames in any second at its smallest
frame and fastest output. The audio a client reassembles is exactly what the server synthesized.
"""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Callable
from typing import Any

import pytest
from starlette.types import ASGIApp, Message, Receive, Scope, Send
from websockets.asyncio.client import connect

from agent_app.app import AppDependencies, create_app
from agent_app.frames import AGENTCORE_FRAMES_PER_S, FRAME_BURST, FRAMES_PER_S, MAX_EVENT_BYTES
from kokoro_server.app import create_app as create_speech_app
from kokoro_server.engine import ZeroCostEngine
from kokoro_server.settings import Settings
from speech_protocol import WS_PATH
from tests.agent.agent_support import FOUR_SENTENCES, Event, most_in_any_second, scripted
from tests.agent.conftest import LiveServer
from tests.agent.test_agent_app import fixed_model, websocket_config

ANSWER = FOUR_SENTENCES * 3
"""About 900 characters: a minute of the zero-cost engine's audio."""


class SendLog:
    """ASGI wrapper recording every text frame the app sends on a WebSocket: (time, bytes)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self.frames: list[tuple[float, int]] = []

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        async def logged(message: Message) -> None:
            if message["type"] == "websocket.send" and message.get("text") is not None:
                self.frames.append((time.monotonic(), len(message["text"].encode("utf-8"))))
            await send(message)

        await self.app(scope, receive, logged)


async def one_turn(
    serve_asgi: Callable[[Any], LiveServer], *, frame_ms: int, mode: str
) -> tuple[list[Event], SendLog, ZeroCostEngine]:
    engine = ZeroCostEngine()  # no compute: the fastest output the server has
    speech = serve_asgi(create_speech_app(Settings(frame_ms=frame_ms), engine)).ws_url(WS_PATH)
    agent = SendLog(create_app(websocket_config(speech), AppDependencies(model=fixed_model(scripted(ANSWER)))))
    received: list[Event] = []
    async with connect(serve_asgi(agent).ws_url("/ws"), max_size=None) as socket:
        await socket.send(json.dumps({"type": "prompt", "prompt": "Go.", "mode": mode}))
        while not received or received[-1]["type"] not in ("agent_end", "error"):
            received.append(json.loads(await socket.recv()))
    return received, agent, engine


def report(frame_ms: int, mode: str, log: SendLog) -> None:
    """The figures agent_app/README.md cites (`pytest -s` shows them)."""
    times = [t for t, _ in log.frames]
    print(
        f"\nframe_ms={frame_ms} {mode}: {len(log.frames)} frames, largest {max(s for _, s in log.frames)} bytes, "
        f"at most {most_in_any_second(times)} in one second"
    )


def audio_of(received: list[Event]) -> bytes:
    chunks = [e for e in received if e["type"] == "audio_chunk"]
    assert [e["seq"] for e in chunks] == list(range(len(chunks)))
    assert received[-3] == {
        "type": "audio_end",
        "chunks": len(chunks),
        "bytes": sum(len(base64.b64decode(e["audio"])) for e in chunks),
        "turn": 1,
    }
    return b"".join(base64.b64decode(e["audio"]) for e in chunks)


def synthesized(engine: ZeroCostEngine) -> bytes:
    twin = ZeroCostEngine(seconds_per_char=engine.seconds_per_char)
    return b"".join(twin.synthesize(text, voice, speed).pcm for text, voice, speed in list(engine.calls))


@pytest.mark.parametrize("mode", ["stream", "batch"])
async def test_no_frame_is_over_the_limit_at_the_largest_frame_ms(serve_asgi, mode: str) -> None:
    received, log, engine = await one_turn(serve_asgi, frame_ms=10_000, mode=mode)  # 480,000-byte frames
    assert received[-1] == {"type": "agent_end", "turn": 1}
    assert audio_of(received) == synthesized(engine)
    largest = max(size for _, size in log.frames)
    report(10_000, mode, log)
    assert largest <= MAX_EVENT_BYTES
    assert largest > 16_000  # full chunks: the container's frames were cut, not shrunk


async def test_the_frame_rate_stays_under_agentcores_quota_at_the_smallest_frame(serve_asgi) -> None:
    # 20 ms frames with no compute: 2,929 frames in under a second before the pacer (issue #29).
    received, log, engine = await one_turn(serve_asgi, frame_ms=20, mode="batch")
    report(20, "batch", log)
    assert received[-1] == {"type": "agent_end", "turn": 1}
    assert audio_of(received) == synthesized(engine)
    assert most_in_any_second([t for t, _ in log.frames]) <= FRAMES_PER_S + FRAME_BURST + 1 < AGENTCORE_FRAMES_PER_S
    # Held back by the pacer, the 960-byte frames were merged into fuller chunks meanwhile.
    sizes = [len(base64.b64decode(e["audio"])) for e in received if e["type"] == "audio_chunk"]
    assert max(sizes) == 12_000
    assert len(sizes) < len(synthesized(engine)) // 960 // 4
