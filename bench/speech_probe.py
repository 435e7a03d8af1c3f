"""Watches a speech server from the inside: its sessions, the client frames it got, its engine jobs.

For the barge-in benchmark and tests: `ProbedEngine` wraps a `SpeechEngine` and records every
synthesis job (start and end, on the clock `time.perf_counter`); `SessionProbe` wraps the speech
server's ASGI app and records, per WebSocket session, when it opened and closed and every text
frame the client sent. "The speech server has no work left for a session" is then exact: the
session has closed and no engine job that started before that is still running.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from kokoro_server.engine import ChunkAudio, SpeechEngine


@dataclass
class Job:
    text: str
    started: float
    ended: float | None = None


class ProbedEngine:
    """A `SpeechEngine` that records its jobs; thread-safe (jobs run on worker threads)."""

    def __init__(self, inner: SpeechEngine) -> None:
        self._inner = inner
        self._lock = threading.Lock()
        self.jobs: list[Job] = []

    @property
    def voices(self) -> frozenset[str]:
        return self._inner.voices

    @property
    def default_voice(self) -> str:
        return self._inner.default_voice

    def synthesize(self, text: str, voice: str, speed: float) -> ChunkAudio:
        job = Job(text, time.perf_counter())
        with self._lock:
            self.jobs.append(job)
        try:
            return self._inner.synthesize(text, voice, speed)
        finally:
            job.ended = time.perf_counter()

    def running(self) -> int:
        with self._lock:
            return sum(job.ended is None for job in self.jobs)

    def idle_since(self) -> float | None:
        """When the last job ended (None: a job is running, or none ran)."""
        with self._lock:
            if not self.jobs or any(job.ended is None for job in self.jobs):
                return None
            return max(job.ended for job in self.jobs if job.ended is not None)


@dataclass
class SessionRecord:
    opened: float
    closed: float | None = None
    client_messages: list[dict[str, Any]] = field(default_factory=list)
    """Every text frame the client sent, parsed (the speech protocol's messages)."""

    def kinds(self) -> list[str]:
        return [str(message.get("type", "synthesize")) for message in self.client_messages]


class SessionProbe:
    """ASGI wrapper recording each WebSocket session of the wrapped app, in the order they opened."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self._lock = threading.Lock()
        self.sessions: list[SessionRecord] = []

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "websocket":
            await self.app(scope, receive, send)
            return
        record = SessionRecord(opened=time.perf_counter())
        with self._lock:
            self.sessions.append(record)

        async def recording_receive() -> Message:
            message = await receive()
            text = message.get("text")
            if message["type"] == "websocket.receive" and isinstance(text, str):
                try:
                    record.client_messages.append(json.loads(text))
                except ValueError:
                    record.client_messages.append({"type": "<not json>"})
            return message

        try:
            await self.app(scope, recording_receive, send)
        finally:
            record.closed = time.perf_counter()

    def open_sessions(self) -> int:
        with self._lock:
            return sum(record.closed is None for record in self.sessions)
