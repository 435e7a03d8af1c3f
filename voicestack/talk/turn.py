"""One turn of a conversation, seen from the caller: its events checked and timed (pure).

The agent's events (agent_app/events.py, the same over SSE and the WebSocket route):
`agent_start`, `text_delta`*, `audio_start`, `audio_chunk`* (`seq` 0, 1, 2, ...), `words`*,
`audio_end` (its totals must match what arrived), `metrics`, `agent_end`; or an `error` event that
ends the turn. Over the WebSocket each carries `turn`, and `turn_stopped` ends a stopped turn: one
the caller stopped, or one the agent stopped because another connection of the same session asked
a question (`TurnResult.stopped_by`).
`TurnRecorder` applies them in order and hands back what to show (text) and play (PCM); anything
else (a gap in `seq`, base64 that does not decode, totals that do not add up, an unknown event)
is a `TurnProtocolError`.

Times are milliseconds from the moment the question was sent (`started`), on the recorder's
clock: first text, first audio, end. `TurnResult.json_line()` is `voicestack talk --json`'s line,
and what the latency lab records.
"""

from __future__ import annotations

import base64
import binascii
import json
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from speech_protocol import AUDIO_CHANNELS, AUDIO_FORMAT, SAMPLE_RATE

Outcome = Literal["ok", "stopped", "error"]
Transport = Literal["websocket", "sse"]
StoppedBy = Literal["caller", "agent"]

PROTOCOL_ERROR: Final = "protocol_error"
"""The error code of a turn whose events broke the contract above."""
CONNECTION_CLOSED: Final = "connection_closed"
"""The error code of a turn whose connection closed before it ended."""
_IGNORED: Final = frozenset({"agent_start", "words"})


class TurnProtocolError(ValueError):
    """The agent's events broke the contract (the message says how)."""


@dataclass(frozen=True, slots=True)
class TurnUpdate:
    """What one event changes for the listener."""

    text: str = ""
    pcm: bytes = b""
    done: bool = False


@dataclass(frozen=True)
class TurnResult:
    """One turn, finished: what was said, heard, and when."""

    turn: int
    session_id: str
    transport: Transport
    target: str
    mode: str | None
    outcome: Outcome
    error_code: str | None
    error_message: str | None
    text: str
    first_text_ms: float | None
    first_audio_ms: float | None
    end_ms: float
    connect_ms: float | None
    """Opening the connection this turn needed (None: it reused one, or SSE, where it is part of the turn)."""
    audio_bytes: int
    audio_chunks: int
    sample_rate: int
    channels: int
    agent_metrics: Mapping[str, Any] | None
    audio_events: tuple[tuple[int, int], ...] = field(default=(), repr=False)
    """(raw PCM bytes, bytes on the wire) of each audio event, for the latency lab's size figures."""
    pcm: bytes = field(default=b"", repr=False)
    """The audio itself, when the recorder kept it (`--out`)."""
    stopped_by: StoppedBy | None = None
    """Who stopped a stopped turn: the caller (Ctrl-C, `stop`), or the agent (`turn_stopped` the caller
    did not ask for: another connection of the session asked a question); None otherwise."""

    def json_line(self) -> str:
        """The turn as one JSON line (`--json`): everything above but the audio itself."""
        return json.dumps(
            {
                "turn": self.turn,
                "session_id": self.session_id,
                "transport": self.transport,
                "target": self.target,
                "mode": self.mode,
                "outcome": self.outcome,
                "error": None if self.error_code is None else {"code": self.error_code, "message": self.error_message},
                "text": self.text,
                "first_text_ms": self.first_text_ms,
                "first_audio_ms": self.first_audio_ms,
                "end_ms": self.end_ms,
                "connect_ms": self.connect_ms,
                "audio_bytes": self.audio_bytes,
                "audio_chunks": self.audio_chunks,
                "sample_rate": self.sample_rate,
                "channels": self.channels,
                "agent_metrics": self.agent_metrics,
                "stopped_by": self.stopped_by,
            },
            ensure_ascii=False,
        )

    def summary(self) -> str:
        """The human line printed after a turn."""

        def seconds(value: float | None) -> str:
            return "none" if value is None else f"{value / 1000:.2f} s"

        parts = [
            f"first text {seconds(self.first_text_ms)}",
            f"first audio {seconds(self.first_audio_ms)}",
            f"end {seconds(self.end_ms)}",
            f"{self.audio_bytes / (2 * self.sample_rate * self.channels):.1f} s of audio",
        ]
        if self.connect_ms is not None:
            parts.append(f"connected in {seconds(self.connect_ms)}")
        return f"({', '.join(parts)}; {self.mode or 'default'} mode, {self.transport})"


def _ms(seconds: float) -> float:
    return round(seconds * 1000.0, 1)


@dataclass
class TurnRecorder:
    """Applies one turn's events in order; `finish` turns them into a `TurnResult`."""

    started: float
    clock: Callable[[], float] = time.perf_counter
    keep_audio: bool = False
    mode: str | None = None
    text: list[str] = field(default_factory=list)
    first_text_s: float | None = None
    first_audio_s: float | None = None
    sample_rate: int = SAMPLE_RATE
    channels: int = AUDIO_CHANNELS
    audio_bytes: int = 0
    audio_chunks: int = 0
    audio_events: list[tuple[int, int]] = field(default_factory=list)
    pcm: bytearray = field(default_factory=bytearray)
    agent_metrics: dict[str, Any] | None = None
    error: tuple[str, str] | None = None
    ended: bool = False
    stop_confirmed: bool = False
    """A `turn_stopped` ended the turn: the caller's stop confirmed, or the agent's own (`finish` is told
    whether the caller stopped it)."""

    def apply(self, event: Mapping[str, Any], wire_bytes: int) -> TurnUpdate:
        """One event; raises TurnProtocolError when it breaks the contract."""
        if self.ended:
            raise TurnProtocolError(f"an event after the end of the turn: {str(event)[:120]}")
        kind = event.get("type")
        now = self.clock() - self.started
        if kind == "text_delta":
            text = event.get("text")
            if not isinstance(text, str):
                raise TurnProtocolError("a text_delta without a string 'text'")
            if self.first_text_s is None and text:
                self.first_text_s = now
            self.text.append(text)
            return TurnUpdate(text=text)
        if kind == "audio_chunk":
            return TurnUpdate(pcm=self._audio(event, wire_bytes, now))
        if kind == "audio_start":
            self._audio_start(event)
            return TurnUpdate()
        if kind == "audio_end":
            if (event.get("chunks"), event.get("bytes")) != (self.audio_chunks, self.audio_bytes):
                raise TurnProtocolError(
                    f"audio_end says {event.get('chunks')} chunks, {event.get('bytes')} bytes; "
                    f"{self.audio_chunks} chunks, {self.audio_bytes} bytes arrived"
                )
            return TurnUpdate()
        if kind == "metrics":
            self.agent_metrics = {k: v for k, v in event.items() if k not in ("type", "turn")}
            if isinstance(event.get("mode"), str):
                self.mode = str(event["mode"])
            return TurnUpdate()
        if kind == "agent_end":
            self.ended = True
            return TurnUpdate(done=True)
        if kind == "turn_stopped":
            self.ended, self.stop_confirmed = True, True
            return TurnUpdate(done=True)
        if kind == "error" or (kind is None and "error" in event):
            # The SDK reports an exception mid-stream as {"error": ...} without a type.
            code = str(event.get("code", event.get("error_type", "agent_error")))
            self.error = (code, str(event.get("message", event.get("error", ""))))
            self.ended = True
            return TurnUpdate(done=True)
        if kind in _IGNORED:
            if kind == "agent_start" and isinstance(event.get("mode"), str):
                self.mode = str(event["mode"])
            return TurnUpdate()
        raise TurnProtocolError(f"unknown event type {kind!r}")

    def _audio_start(self, event: Mapping[str, Any]) -> None:
        if event.get("format") != AUDIO_FORMAT:
            raise TurnProtocolError(f"audio format {event.get('format')!r}; this client plays {AUDIO_FORMAT}")
        rate, channels = event.get("sample_rate"), event.get("channels")
        if not isinstance(rate, int) or not isinstance(channels, int) or rate <= 0 or channels <= 0:
            raise TurnProtocolError(f"audio_start with sample_rate {rate!r} and channels {channels!r}")
        self.sample_rate, self.channels = rate, channels

    def _audio(self, event: Mapping[str, Any], wire_bytes: int, now: float) -> bytes:
        if event.get("seq") != self.audio_chunks:
            raise TurnProtocolError(f"audio_chunk seq {event.get('seq')!r} where {self.audio_chunks} was due")
        encoded = event.get("audio")
        if not isinstance(encoded, str):
            raise TurnProtocolError("an audio_chunk without a string 'audio'")
        try:
            pcm = base64.b64decode(encoded, validate=True)
        except (binascii.Error, ValueError) as exc:
            raise TurnProtocolError(f"audio_chunk {self.audio_chunks} is not base64: {exc}") from None
        if self.first_audio_s is None and pcm:
            self.first_audio_s = now
        self.audio_chunks += 1
        self.audio_bytes += len(pcm)
        self.audio_events.append((len(pcm), wire_bytes))
        if self.keep_audio:
            self.pcm += pcm
        return pcm

    def fail(self, code: str, message: str) -> None:
        """End the turn with an error found by the caller (a broken connection, a protocol error)."""
        self.error = (code, message)
        self.ended = True

    def finish(
        self,
        *,
        turn: int,
        session_id: str,
        transport: Transport,
        target: str,
        stopped: bool,
        connect_ms: float | None = None,
    ) -> TurnResult:
        error = self.error
        if error is None and not stopped and not self.ended:
            error = (CONNECTION_CLOSED, "the answer ended before agent_end")
        stopped_by: StoppedBy | None = "caller" if stopped else "agent" if self.stop_confirmed else None
        outcome: Outcome = "error" if error is not None else "stopped" if stopped_by is not None else "ok"
        return TurnResult(
            turn=turn,
            session_id=session_id,
            transport=transport,
            target=target,
            mode=self.mode,
            outcome=outcome,
            error_code=None if error is None else error[0],
            error_message=None if error is None else error[1],
            text="".join(self.text),
            first_text_ms=None if self.first_text_s is None else _ms(self.first_text_s),
            first_audio_ms=None if self.first_audio_s is None else _ms(self.first_audio_s),
            end_ms=_ms(self.clock() - self.started),
            connect_ms=connect_ms,
            audio_bytes=self.audio_bytes,
            audio_chunks=self.audio_chunks,
            sample_rate=self.sample_rate,
            channels=self.channels,
            agent_metrics=self.agent_metrics,
            audio_events=tuple(self.audio_events),
            pcm=bytes(self.pcm),
            stopped_by=None if outcome != "stopped" else stopped_by,
        )
