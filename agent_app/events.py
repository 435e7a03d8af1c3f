"""The agent's server-sent events: pure builders, one per event type, and the stable error codes.

AgentCore turns each dict yielded by the entrypoint into `data: <json>\\n\\n`. An invocation yields,
in order: `agent_start`; `text_delta` (many); `audio_start`; `audio_chunk` (many, `seq` 0, 1, 2, ...;
in `stream` mode interleaved with `text_delta`); `audio_end`; `metrics`; `agent_end`. A `words`
event (word timings for captions) comes right before the audio it describes. On failure it
yields one `error` event instead of the rest and ends; the one exception is `speech_unavailable`
before any audio: the answer then goes on as text (no audio) and ends normally.

Every builder keeps its event within one AgentCore WebSocket frame (`agent_app.frames`): strings
are made UTF-8-safe and cut where they could be long; `words` returns as many events as its words
need. An `audio_chunk` or `text_delta` longer than its bound is the caller's to cut
(`frames.pcm_pieces`, `frames.text_pieces`), since their pieces need their own sequence.
"""

from __future__ import annotations

import base64
from enum import StrEnum
from typing import Literal, TypedDict

from agent_app.frames import (
    AUDIO_CHUNK_PCM_BYTES,
    MAX_ERROR_MESSAGE_CHARS,
    MAX_MODEL_NAME_CHARS,
    MAX_TEXT_DELTA_CHARS,
    MAX_WORD_CHARS,
    shorten,
    utf8_safe,
    word_groups,
)
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
    BODY_TOO_LARGE = "body_too_large"
    """The request body is over the agent's limit (HTTP 413; the local web server's code too)."""
    NOT_JSON = "not_json"
    """The request's content type is not JSON (HTTP 415; the local web server's code too)."""
    NOT_FOUND = "not_found"
    METHOD_NOT_ALLOWED = "method_not_allowed"
    MEMORY_UNAVAILABLE = "memory_unavailable"
    """The conversation store could not be read (HTTP 503)."""
    # A signed-in user's token (AGENT_AUTH=jwt), refused before any model or speech work: HTTP 401,
    # or over WS /ws an `error` event and close 1008 (`agent_app.auth` says when each applies).
    TOKEN_MISSING = "token_missing"
    TOKEN_MALFORMED = "token_malformed"
    TOKEN_TOO_LARGE = "token_too_large"
    TOKEN_ALGORITHM_NOT_ALLOWED = "token_algorithm_not_allowed"
    TOKEN_UNKNOWN_KEY = "token_unknown_key"
    TOKEN_BAD_SIGNATURE = "token_bad_signature"
    TOKEN_EXPIRED = "token_expired"
    TOKEN_NOT_YET_VALID = "token_not_yet_valid"
    TOKEN_WRONG_ISSUER = "token_wrong_issuer"
    TOKEN_WRONG_CLIENT = "token_wrong_client"
    TOKEN_WRONG_USE = "token_wrong_use"
    TOKEN_NO_SUBJECT = "token_no_subject"
    TOKEN_BAD_SUBJECT = "token_bad_subject"
    AUTH_UNAVAILABLE = "auth_unavailable"
    """The issuer's signing keys (JWKS) could not be fetched (HTTP 503; WS close 1013)."""
    TOO_MANY_SESSIONS = "too_many_sessions"
    """The user already has AGENT_MAX_SESSIONS_PER_USER sessions open (HTTP 429; WS close 1013)."""


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
    return {"type": "agent_start", "mode": mode, "model": shorten(utf8_safe(model), MAX_MODEL_NAME_CHARS), "demo": demo}


def text_delta(text: str) -> TextDeltaEvent:
    """Text of at most `MAX_TEXT_DELTA_CHARS` (cut a longer one with `frames.text_pieces`)."""
    if len(text) > MAX_TEXT_DELTA_CHARS:
        raise ValueError(f"a text_delta carries at most {MAX_TEXT_DELTA_CHARS} characters, got {len(text)}")
    return {"type": "text_delta", "text": utf8_safe(text)}


def audio_start() -> AudioStartEvent:
    return {"type": "audio_start", "format": AUDIO_FORMAT, "sample_rate": SAMPLE_RATE, "channels": AUDIO_CHANNELS}


def audio_chunk(seq: int, pcm: bytes) -> AudioChunkEvent:
    """PCM16 LE audio of at most `AUDIO_CHUNK_PCM_BYTES` (cut longer with `frames.pcm_pieces`), base64."""
    if seq < 0:
        raise ValueError(f"seq must be >= 0, got {seq}")
    if len(pcm) > AUDIO_CHUNK_PCM_BYTES:
        raise ValueError(f"an audio_chunk carries at most {AUDIO_CHUNK_PCM_BYTES} bytes of PCM, got {len(pcm)}")
    return {"type": "audio_chunk", "seq": seq, "audio": base64.b64encode(pcm).decode("ascii")}


def words(timings: list[tuple[str, float, float]], *, offset_s: float) -> list[WordsEvent]:
    """Word timings of the audio that follows, in as many consecutive events as one frame each
    allows (usually one); `offset_s` moves them from the request's first sample to the answer's
    (the audio already sent before the request), rounded to milliseconds."""
    entries: list[WordTiming] = [
        {
            "word": shorten(utf8_safe(word), MAX_WORD_CHARS),
            "start_s": round(offset_s + start, 3),
            "end_s": round(offset_s + end, 3),
        }
        for word, start, end in timings
    ]
    return [{"type": "words", "words": group} for group in word_groups(entries)]


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
    """The message is cut to `MAX_ERROR_MESSAGE_CHARS`: it may quote a caller's value or an exception."""
    return {"type": "error", "code": code.value, "message": shorten(utf8_safe(message), MAX_ERROR_MESSAGE_CHARS)}
