"""Helpers of the speech container tests: controllable engines, expected frames, frame readers, servers."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.testclient import TestClient
from websockets.asyncio.client import ClientConnection
from websockets.exceptions import ConnectionClosed

from kokoro_server.__main__ import server_config
from kokoro_server.app import create_app
from kokoro_server.audio import frame_bytes, split_frames
from kokoro_server.chunking import SentenceChunker
from kokoro_server.engine import ChunkAudio, SpeechEngine, ZeroCostEngine
from kokoro_server.service import EngineLoader, SpeechService
from kokoro_server.settings import Settings
from local.threaded_server import serve_in_thread
from speech_protocol import WS_PATH, pcm_duration_s

WAIT_S = 10.0
"""Upper bound for waiting on the server in tests; reaching it means the test failed."""


def wait_until(condition: Callable[[], bool], what: str, timeout_s: float = WAIT_S) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.002)


class GatedEngine:
    """A ZeroCostEngine whose calls each wait for the test to release them (or fail on request).

    Records every call when it starts, and the most calls ever running at once, so tests can
    assert exactly which chunks were synthesized, in which order, and that work stopped.
    """

    def __init__(self, *, gated: bool = True, fail_on: str | None = None) -> None:
        self.inner = ZeroCostEngine()
        self.calls: list[tuple[str, str, float]] = []
        self.finished = 0
        self.max_in_flight = 0
        self._in_flight = 0
        self._gate = threading.Semaphore(0)
        self._gated = gated
        self._fail_on = fail_on
        self._lock = threading.Lock()

    @property
    def voices(self) -> frozenset[str]:
        return self.inner.voices

    @property
    def default_voice(self) -> str:
        return self.inner.default_voice

    @property
    def texts(self) -> list[str]:
        return [text for text, _, _ in self.calls]

    @property
    def in_flight(self) -> int:
        return self._in_flight

    def synthesize(self, text: str, voice: str, speed: float) -> ChunkAudio:
        with self._lock:
            self.calls.append((text, voice, speed))
            self._in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self._in_flight)
        try:
            if self._gated and not self._gate.acquire(timeout=WAIT_S):
                raise TimeoutError(f"test never released the synthesis of {text!r}")
            if self._fail_on is not None and self._fail_on in text:
                raise RuntimeError(f"engine failure on {text!r}")
            return self.inner.synthesize(text, voice, speed)
        finally:
            with self._lock:
                self._in_flight -= 1
                self.finished += 1

    def release(self, n: int = 1) -> None:
        self._gate.release(n)

    def open(self) -> None:
        """Let every call through from now on."""
        self._gated = False
        self._gate.release(1000)

    def wait_calls(self, n: int) -> None:
        wait_until(lambda: len(self.calls) >= n, f"{n} engine calls (got {self.texts})")

    def wait_finished(self, n: int) -> None:
        wait_until(lambda: self.finished >= n, f"{n} finished engine calls")


# --- expected frames -------------------------------------------------------------------------

Frame = tuple[str, Any]
"""('text', parsed JSON object) or ('bytes', payload): what a client received, in order."""

TIMING_FIELDS = ("time_to_first_audio_ms", "elapsed_ms")


def chunks_of(text: str) -> list[str]:
    """The server's default chunking of `text` (what the engine is asked to synthesize)."""
    policy, out, rest, first = SentenceChunker(), [], text, True
    while (chunk := policy.next_chunk(rest, first=first, buffered_audio_s=0.0)) is not None:
        out.append(chunk.text)
        rest, first = chunk.rest, False
    return out


def audio_frames(text: str, *, frame_ms: int = 1000, speed: float = 1.0) -> list[Frame]:
    """The binary frames of one chunk under ZeroCostEngine."""
    pcm = ZeroCostEngine().synthesize(text, "af_heart", speed).pcm
    return [("bytes", f) for f in split_frames(pcm, frame_bytes(frame_ms))]


def expected_request(request_id: str, text: str, *, frame_ms: int = 1000, speed: float = 1.0) -> list[Frame]:
    """Every frame of one completed request, timing fields of synthesis_complete left out."""
    frames: list[Frame] = [
        (
            "text",
            {
                "type": "synthesis_start",
                "request_id": request_id,
                "sample_rate": 24000,
                "format": "pcm_s16le",
                "channels": 1,
            },
        )
    ]
    total = 0
    for chunk in chunks_of(text):
        audio = audio_frames(chunk, frame_ms=frame_ms, speed=speed)
        frames += audio
        total += sum(len(payload) for _, payload in audio)
    frames.append(
        (
            "text",
            {
                "type": "synthesis_complete",
                "request_id": request_id,
                "audio_duration_s": round(pcm_duration_s(total), 3),
                "chunks": len(chunks_of(text)),
            },
        )
    )
    return frames


def without_timing(frames: list[Frame]) -> list[Frame]:
    """Frames with synthesis_complete's timing fields removed, after checking they are sane."""
    out: list[Frame] = []
    for kind, payload in frames:
        if kind == "text" and payload.get("type") == "synthesis_complete":
            ttfa, elapsed = payload["time_to_first_audio_ms"], payload["elapsed_ms"]
            assert 0 <= ttfa <= elapsed, payload
            out.append((kind, {k: v for k, v in payload.items() if k not in TIMING_FIELDS}))
        else:
            out.append((kind, payload))
    return out


def message_to_frame(message: Mapping[str, Any]) -> Frame:
    """A TestClient websocket message as a Frame; ('close', code) for a close."""
    if message["type"] == "websocket.close":
        return ("close", message.get("code", 1000))
    if message.get("text") is not None:
        return ("text", json.loads(message["text"]))
    return ("bytes", message["bytes"])


def receive_until(ws: Any, stop: Callable[[Frame], bool]) -> list[Frame]:
    """TestClient frames up to and including the first for which `stop` is true."""
    frames: list[Frame] = []
    while True:
        frame = message_to_frame(ws.receive())
        frames.append(frame)
        if stop(frame) or frame[0] == "close":
            return frames


def is_event(event_type: str, request_id: str | None = None) -> Callable[[Frame], bool]:
    def check(frame: Frame) -> bool:
        return (
            frame[0] == "text"
            and frame[1].get("type") == event_type
            and (request_id is None or frame[1].get("request_id") == request_id)
        )

    return check


# --- apps and servers ------------------------------------------------------------------------


@dataclass
class Served:
    """An app under test, its shared state, and its engine."""

    app: Starlette
    engine: Any

    @property
    def service(self) -> SpeechService:
        service: SpeechService = self.app.state.speech
        return service


def make_app(engine: SpeechEngine | EngineLoader, **settings: Any) -> Starlette:
    """The app with `settings`; chunking defaults to the sentence split, whose chunks tests can predict.

    The server's default, the adaptive schedule, sizes chunks from measured timings; it is tested
    in tests/gapless.
    """
    settings.setdefault("chunking", "sentence")
    return create_app(Settings(**settings), engine)


@contextmanager
def serve_in_process(engine: SpeechEngine | EngineLoader, **settings: Any) -> Iterator[tuple[TestClient, Served]]:
    app = make_app(engine, **settings)
    with TestClient(app) as client:
        yield client, Served(app, engine)


@dataclass(frozen=True)
class LiveServer:
    """A real uvicorn server on 127.0.0.1 and a free port, in a thread."""

    app: Starlette
    port: int

    @property
    def http_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def ws_url(self) -> str:
        return f"ws://127.0.0.1:{self.port}{WS_PATH}"

    @property
    def service(self) -> SpeechService:
        service: SpeechService = self.app.state.speech
        return service


@contextmanager
def live_server(app: Starlette) -> Iterator[LiveServer]:
    with serve_in_thread(app, ws="websockets-sansio") as server:
        yield LiveServer(app=app, port=server.port)


@contextmanager
def production_server(engine: SpeechEngine, **settings: Any) -> Iterator[LiveServer]:
    """`engine` served by uvicorn exactly as `python -m kokoro_server` configures it (keepalive
    pings, the 1009 frame-size limit), on a free port, in a thread. Chunking defaults to `sentence`."""
    settings.setdefault("chunking", "sentence")
    config = server_config(Settings(**settings), engine)
    config.log_level = "warning"
    app = config.app
    assert isinstance(app, Starlette)
    server = uvicorn.Server(config)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, name="uvicorn", daemon=True)
    thread.start()
    try:
        wait_until(lambda: server.started, "uvicorn to start", timeout_s=30)
        yield LiveServer(app=app, port=sock.getsockname()[1])
    finally:
        server.should_exit = True
        thread.join(WAIT_S)
        sock.close()


REPO_ROOT = Path(__file__).resolve().parents[2]


def subprocess_env(**extra: str) -> dict[str, str]:
    """The environment for `python -m kokoro_server` in a child process (imports from this checkout)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO_ROOT), str(REPO_ROOT / "images" / "kokoro")])
    env["HF_HUB_OFFLINE"] = "1"
    env.update(extra)
    return env


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


async def recv_frame(ws: ClientConnection) -> Frame:
    """The next frame a `websockets` client receives; ('close', code) once the server closed."""
    try:
        message = await asyncio.wait_for(ws.recv(), timeout=WAIT_S)
    except ConnectionClosed as closed:
        return ("close", closed.rcvd.code if closed.rcvd is not None else None)
    return ("text", json.loads(message)) if isinstance(message, str) else ("bytes", message)


async def recv_until(ws: ClientConnection, stop: Callable[[Frame], bool]) -> list[Frame]:
    """`websockets` client frames up to and including the first for which `stop` is true."""
    frames: list[Frame] = []
    while True:
        frame = await recv_frame(ws)
        frames.append(frame)
        if stop(frame) or frame[0] == "close":
            return frames
