"""The agent's server-sent events: pure builders, one per event type, and the stable error codes.

AgentCore turns each dict yielded by the entrypoint into `data: <json>\\n\\n`. An invocation yields,
in order: `agent_start`; `text_delta` (many); `audio_start`; `audio_chunk` (many, `seq` 0, 1, 2, ...;
in `stream` mode interleaved with `text_delta`); `audio_end`; `metrics`; `agent_end`. A `words`
event (word timings for captions) comes right before the audio it describes. On failure it
yields one `error` event instead of the rest and ends; the one exception is `speech_unavailable`
before any audio: the answer then goes on as text (no audio) and ends normally.
"""

from __future__ import annotations

import base64
from enum import StrEnum
from typing import Literal, TypedDict

from agent_app.speech.transport import SpeechErrorCode
from speech_protocol import AUDIO_CHANNELS, AUDIO_FORMAT, SAMPLE_RATE

Mode = Literal["stream", "batch"]
MODES: tuple[Mode, ...] = ("stream", "batch")


class AgentErrorCode(StrEnum):
    """Codes of `error` events; clients branch on these, never on the message text."""

    BAD_REQUEST = "bad_request"
    MODEL_ERROR = "model_error"
    DEADLINE_EXCEEDED = "deadline_exceeded"
    SPEECH_UNAVAILABLE = SpeechErrorCode.UNAVAILABLE.value
    SPEECH_STREAM_ERROR = SpeechErrorCode.STREAM_ERROR.value
    SPEECH_PROTOCOL_ERROR = SpeechErrorCode.PROTOCOL_ERROR.value
    SPEECH_REJECTED = "speech_rejected"
    """The speech container refused a request with an `error` frame (its code is in the message)."""
    CALLER_TOO_SLOW = "caller_too_slow"
    """The caller read nothing for a long time and the answer was stopped (seen only if it reads again)."""
    INTERNAL_ERROR = "internal_error"
    SESSION_BUSY = "session_busy"
    """Another call of the same conversation (session id) is still running (HTTP 409)."""
    MEMORY_UNAVAILABLE = "memory_unavailable"
    """The conversation store could not be read (HTTP 503)."""


class AgentStartEvent(TypedDict):
    type: Literal["agent_start"]
    mode: Mode
    model: str
    demo: bool


class TextDeltaEvent(TypedDict):
    type: Literal["text_delta"]
    text: str


class AudioStartEvent(TypedDict):
    type: Literal["audio_start"]
    format: str
    sample_rate: int
    channels: int


class AudioChunkEvent(TypedDict):
    type: Literal["audio_chunk"]
    seq: int
    audio: str


class WordTiming(TypedDict):
    word: str
    start_s: float
    """Seconds from the first sample of the answer's audio (`audio_chunk` seq 0)."""
    end_s: float


class WordsEvent(TypedDict):
    type: Literal["words"]
    words: list[WordTiming]


class AudioEndEvent(TypedDict):
    type: Literal["audio_end"]
    chunks: int
    bytes: int


class MetricsEvent(TypedDict):
    type: Literal["metrics"]
    mode: Mode
    time_to_first_text_ms: float | None
    time_to_first_audio_ms: float | None
    total_ms: float


class AgentEndEvent(TypedDict):
    type: Literal["agent_end"]


class ErrorEvent(TypedDict):
    type: Literal["error"]
    code: str
    message: str


AgentEvent = (
    AgentStartEvent
    | TextDeltaEvent
    | AudioStartEvent
    | AudioChunkEvent
    | WordsEvent
    | AudioEndEvent
    | MetricsEvent
    | AgentEndEvent
    | ErrorEvent
)


def agent_start(mode: Mode, model: str, *, demo: bool) -> AgentStartEvent:
    return {"type": "agent_start", "mode": mode, "model": model, "demo": demo}


def text_delta(text: str) -> TextDeltaEvent:
    return {"type": "text_delta", "text": text}


def audio_start() -> AudioStartEvent:
    return {"type": "audio_start", "format": AUDIO_FORMAT, "sample_rate": SAMPLE_RATE, "channels": AUDIO_CHANNELS}


def audio_chunk(seq: int, pcm: bytes) -> AudioChunkEvent:
    """One audio frame from the speech container, PCM16 LE, base64-encoded as it arrived."""
    if seq < 0:
        raise ValueError(f"seq must be >= 0, got {seq}")
    return {"type": "audio_chunk", "seq": seq, "audio": base64.b64encode(pcm).decode("ascii")}


def words(timings: list[tuple[str, float, float]], *, offset_s: float) -> WordsEvent:
    """Word timings of the audio that follows; `offset_s` moves them from the request's first sample
    to the answer's (the audio already sent before the request), rounded to milliseconds."""
    return {
        "type": "words",
        "words": [
            {"word": word, "start_s": round(offset_s + start, 3), "end_s": round(offset_s + end, 3)}
            for word, start, end in timings
        ],
    }


def audio_end(chunks: int, num_bytes: int) -> AudioEndEvent:
    return {"type": "audio_end", "chunks": chunks, "bytes": num_bytes}


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else round(seconds * 1000.0, 1)


def metrics(mode: Mode, *, first_text_s: float | None, first_audio_s: float | None, total_s: float) -> MetricsEvent:
    """Latencies measured from the start of the invocation; None when the answer had no text/audio."""
    return {
        "type": "metrics",
        "mode": mode,
        "time_to_first_text_ms": _ms(first_text_s),
        "time_to_first_audio_ms": _ms(first_audio_s),
        "total_ms": round(total_s * 1000.0, 1),
    }


def agent_end() -> AgentEndEvent:
    return {"type": "agent_end"}


def error(code: AgentErrorCode, message: str) -> ErrorEvent:
    return {"type": "error", "code": code.value, "message": message}
