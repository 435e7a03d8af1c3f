"""Test doubles for the local tooling: scripted agent SSE streams and servers on free ports."""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import AbstractContextManager, ExitStack, contextmanager
from dataclasses import dataclass, field
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from local.threaded_server import serve_in_thread
from local.webserver import WebServerConfig, create_app

SAMPLE_RATE = 24_000

# Text with 2-, 3- and 4-byte UTF-8 characters (the emoji is a surrogate pair in JavaScript), so
# that byte splits land inside characters.
ANSWER_PIECES: tuple[str, ...] = (
    "Hello! ",
    "Streaming speech ",
    "starts sooner — ",
    "café, naïve, 日本語 ",
    "and 😀 too. ",
    "The second sentence ",
    "arrives while the first ",
    "one is already playing.",
)
ANSWER_TEXT = "".join(ANSWER_PIECES)


def pcm_samples(count: int, *, offset: int = 0) -> list[int]:
    """Deterministic PCM16 samples covering the extremes and both signs."""
    pattern = (0, 1, -1, 255, 256, -256, -257, 32767, -32768, 12345, -12345)
    return [pattern[(offset + i) % len(pattern)] for i in range(count)]


def pcm_bytes(samples: list[int]) -> bytes:
    return b"".join(s.to_bytes(2, "little", signed=True) for s in samples)


def split_bytes(data: bytes, sizes: list[int]) -> list[bytes]:
    """Cut `data` into pieces of the given sizes, cycling through them (odd sizes split samples)."""
    pieces: list[bytes] = []
    pos = 0
    i = 0
    while pos < len(data):
        size = sizes[i % len(sizes)]
        pieces.append(data[pos : pos + size])
        pos += size
        i += 1
    return pieces


def agent_events(mode: str, pcm: bytes, *, chunk_sizes: list[int], demo: bool = True) -> list[dict[str, Any]]:
    """A complete answer in the agent's SSE schema; audio chunks of odd sizes (sample splits)."""
    chunks = split_bytes(pcm, chunk_sizes)
    audio = [
        {"type": "audio_chunk", "seq": seq, "audio": base64.b64encode(chunk).decode("ascii")}
        for seq, chunk in enumerate(chunks)
    ]
    texts = [{"type": "text_delta", "text": piece} for piece in ANSWER_PIECES]
    audio_start = {"type": "audio_start", "format": "pcm_s16le", "sample_rate": SAMPLE_RATE, "channels": 1}
    body: list[dict[str, Any]] = []
    if mode == "stream":
        # The first sentence's audio starts after its text; the rest interleaves.
        body = [*texts[:3], audio_start]
        rest_text = texts[3:]
        for i, chunk_event in enumerate(audio):
            body.append(chunk_event)
            if i < len(rest_text):
                body.append(rest_text[i])
        body.extend(rest_text[len(audio) :])
    else:
        body = [*texts, audio_start, *audio]
    return [
        {"type": "agent_start", "mode": mode, "model": "demo", "demo": demo},
        *body,
        {"type": "audio_end", "chunks": len(chunks), "bytes": len(pcm)},
        {
            "type": "metrics",
            "mode": mode,
            "time_to_first_text_ms": 12.5,
            "time_to_first_audio_ms": 80.25,
            "total_ms": 400.0,
        },
        {"type": "agent_end"},
    ]


def sse_bytes(events: list[dict[str, Any]]) -> bytes:
    """Frame events exactly as AgentCore does: `data: <json>\\n\\n`, JSON with non-ASCII kept."""
    return b"".join(f"data: {json.dumps(event, ensure_ascii=False)}\n\n".encode() for event in events)


Script = Callable[[dict[str, Any]], AsyncIterator[bytes]]


@dataclass
class FakeAgent:
    """An AgentCore-shaped app (`POST /invocations`, `GET /ping`) that plays a scripted stream.

    `script(request_json)` yields the raw body pieces, each written as it is yielded.
    """

    script: Script
    requests: list[dict[str, Any]] = field(default_factory=list)
    session_ids: list[str | None] = field(default_factory=list)
    healthy: bool = True

    def app(self) -> Starlette:
        async def invocations(request: Request) -> Response:
            payload = await request.json()
            self.requests.append(payload)
            self.session_ids.append(request.headers.get("x-amzn-bedrock-agentcore-runtime-session-id"))
            return StreamingResponse(self.script(payload), media_type="text/event-stream")

        async def ping(_: Request) -> Response:
            if not self.healthy:
                return JSONResponse({"status": "Unhealthy"}, status_code=503)
            return JSONResponse({"status": "Healthy"})

        return Starlette(routes=[Route("/invocations", invocations, methods=["POST"]), Route("/ping", ping)])


def paced_script(pieces_for: Callable[[dict[str, Any]], list[bytes]], delay_s: float = 0.0) -> Script:
    """A script that writes each piece in turn, sleeping `delay_s` between them."""

    async def script(payload: dict[str, Any]) -> AsyncIterator[bytes]:
        for piece in pieces_for(payload):
            yield piece
            if delay_s:
                await asyncio.sleep(delay_s)

    return script


@contextmanager
def serve(app: Any) -> Iterator[str]:
    """Run `app` with uvicorn on a free 127.0.0.1 port in a thread; yields its base URL."""
    with serve_in_thread(app) as server:
        yield server.http_url


@dataclass
class WebStack:
    """The page's web server in front of a fake agent."""

    url: str
    agent: FakeAgent
    agent_url: str


class WebStacks:
    """Starts web stacks for a test and stops them all at its end."""

    def __init__(self) -> None:
        self._exit = ExitStack()

    def start(self, script: Script) -> WebStack:
        agent = FakeAgent(script)
        agent_url = self.enter(serve(agent.app()))
        return WebStack(url=self.start_web(agent_url), agent=agent, agent_url=agent_url)

    def enter(self, server: AbstractContextManager[str]) -> str:
        """Keep another server (from `serve`) running until the end of the test."""
        return self._exit.enter_context(server)

    def start_web(self, agent_url: str) -> str:
        """Only the web server, in front of whatever listens (or not) at `agent_url`."""
        return self._exit.enter_context(serve(create_app(WebServerConfig(agent_url=agent_url))))

    def close(self) -> None:
        self._exit.close()
