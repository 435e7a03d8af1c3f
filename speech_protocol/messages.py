"""Messages of the speech session: client requests, server control events, audio format.

Pure functions only: parsing and encoding are tested without sockets or models. Control frames
are JSON text frames; audio is raw PCM16 little-endian in binary frames, so no side ever has to
guess a frame's kind by trying to parse it.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Final, Literal

WS_PATH: Final = "/invocations-bidirectional-stream"
"""The container route SageMaker bridges its bidirectional stream to."""

BIDIRECTIONAL_LABEL: Final = "com.amazonaws.sagemaker.capabilities.bidirectional-streaming"
"""Image label without which SageMaker refuses bidirectional streams (its value must be "true")."""

SAMPLE_RATE: Final = 24_000
SAMPLE_WIDTH: Final = 2
AUDIO_CHANNELS: Final = 1
AUDIO_FORMAT: Final = "pcm_s16le"

SPEED_MIN: Final = 0.5
SPEED_MAX: Final = 2.0

MAX_REQUEST_ID_CHARS: Final = 128

_QUOTE_CHARS: Final = 40
"""Longest piece of a client's value quoted back in an error message (a bad value may be huge)."""


class ErrorCode(StrEnum):
    """Stable codes of `error` frames; clients branch on these, never on the message text."""

    INVALID_UTF8 = "invalid_utf8"
    INVALID_JSON = "invalid_json"
    NOT_AN_OBJECT = "not_an_object"
    UNKNOWN_TYPE = "unknown_type"
    INVALID_FIELD = "invalid_field"
    MISSING_TEXT = "missing_text"
    EMPTY_TEXT = "empty_text"
    TEXT_TOO_LONG = "text_too_long"
    UNKNOWN_VOICE = "unknown_voice"
    SPEED_OUT_OF_RANGE = "speed_out_of_range"
    DUPLICATE_REQUEST_ID = "duplicate_request_id"
    UNKNOWN_REQUEST = "unknown_request"
    SESSION_CLOSING = "session_closing"
    QUEUE_FULL = "queue_full"
    SYNTHESIS_FAILED = "synthesis_failed"


class ProtocolError(Exception):
    """A client message the server rejects; becomes an `error` frame and the session goes on."""

    def __init__(self, code: ErrorCode, message: str, request_id: str | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.request_id = request_id

    def to_event(self) -> ErrorEvent:
        return ErrorEvent(request_id=self.request_id, code=self.code.value, message=self.message)


# --- client -> server ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Synthesize:
    """Speak `text`. Fields left as None take the server's defaults."""

    text: str
    request_id: str | None = None
    voice: str | None = None
    speed: float | None = None
    timestamps: bool = False


@dataclass(frozen=True, slots=True)
class Cancel:
    """Barge-in: stop the named request, or the one being synthesized when None."""

    request_id: str | None = None


@dataclass(frozen=True, slots=True)
class Close:
    """Finish every accepted request, then close the session normally."""


ClientMessage = Synthesize | Cancel | Close


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def _decode(data: str | bytes) -> str:
    if isinstance(data, str):
        return data
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ProtocolError(
            ErrorCode.INVALID_UTF8, f"message is not valid UTF-8: {exc.reason} at byte {exc.start}"
        ) from exc


def quote(value: object) -> str:
    """`repr(value)` cut to a few dozen characters, for error messages that quote a client's value.

    Never raises: Python refuses to print an integer of more than 4,300 digits, and a value may be
    a list nested hundreds of levels deep.
    """
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 128:
        return f"<integer of {value.bit_length()} bits>"
    if not isinstance(value, str | int | float | bool) and value is not None:
        return f"<{type(value).__name__}>"
    text = repr(value)
    return text if len(text) <= _QUOTE_CHARS else text[: _QUOTE_CHARS - 3] + "..."


def lone_surrogate_at(text: str) -> int | None:
    """Index of the first lone UTF-16 surrogate in `text` (JSON allows the escape `\\ud800`), or None.

    Such a string has no UTF-8 form: echoing it back in a frame would fail when the frame is sent.
    """
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        return exc.start
    return None


def _check_encodable(key: str, value: str, request_id: str | None) -> None:
    if (at := lone_surrogate_at(value)) is not None:
        raise ProtocolError(
            ErrorCode.INVALID_FIELD,
            f"'{key}' contains a lone UTF-16 surrogate (U+{ord(value[at]):04X}) at character {at}; "
            "it has no UTF-8 form",
            request_id,
        )


def _optional_str(obj: dict[str, Any], key: str, request_id: str | None) -> str | None:
    value = obj.get(key)
    if value is None:
        return None
    if not isinstance(value, str) or not value:
        raise ProtocolError(ErrorCode.INVALID_FIELD, f"'{key}' must be a non-empty string", request_id)
    _check_encodable(key, value, request_id)
    return value


def _parse_speed(value: object, request_id: str | None) -> float:
    # Compared as it came: int against float is exact in Python, whereas float() or math.isfinite()
    # of a 400-digit integer raises OverflowError.
    not_a_number = isinstance(value, bool) or not isinstance(value, int | float)
    if not_a_number or (isinstance(value, float) and not math.isfinite(value)):
        raise ProtocolError(ErrorCode.INVALID_FIELD, "'speed' must be a number", request_id)
    assert isinstance(value, int | float)
    if not SPEED_MIN <= value <= SPEED_MAX:
        raise ProtocolError(
            ErrorCode.SPEED_OUT_OF_RANGE,
            f"'speed' must be between {SPEED_MIN} and {SPEED_MAX}, got {quote(value)}",
            request_id,
        )
    return float(value)


def parse_client_message(data: str | bytes) -> ClientMessage:
    """Parse one client frame, text or binary (binary is decoded as UTF-8).

    Raises ProtocolError with the request id when the message carried a valid one, so that the
    error frame can name the request it refuses.
    """
    text = _decode(data)
    try:
        obj = json.loads(text, parse_constant=_reject_constant)
    except ValueError as exc:
        raise ProtocolError(ErrorCode.INVALID_JSON, f"message is not valid JSON: {exc}") from exc
    except RecursionError as exc:
        # The C parser recurses per nesting level and stops at the interpreter's limit (about 1,000).
        raise ProtocolError(ErrorCode.INVALID_JSON, "message is not valid JSON: nested too deeply") from exc
    if not isinstance(obj, dict):
        raise ProtocolError(ErrorCode.NOT_AN_OBJECT, f"message must be a JSON object, got {type(obj).__name__}")

    request_id = obj.get("request_id")
    if request_id is not None and (
        not isinstance(request_id, str) or not request_id or len(request_id) > MAX_REQUEST_ID_CHARS
    ):
        raise ProtocolError(
            ErrorCode.INVALID_FIELD, f"'request_id' must be a string of 1 to {MAX_REQUEST_ID_CHARS} characters"
        )
    if request_id is not None:
        _check_encodable("request_id", request_id, None)

    kind = obj.get("type", "synthesize")
    if kind == "close":
        return Close()
    if kind == "cancel":
        return Cancel(request_id=request_id)
    if kind != "synthesize":
        raise ProtocolError(
            ErrorCode.UNKNOWN_TYPE,
            f"unknown message type {quote(kind)}; allowed: 'synthesize', 'cancel', 'close'",
            request_id,
        )

    if "text" not in obj:
        raise ProtocolError(ErrorCode.MISSING_TEXT, "'text' is required", request_id)
    text_value = obj["text"]
    if not isinstance(text_value, str):
        raise ProtocolError(ErrorCode.INVALID_FIELD, "'text' must be a string", request_id)
    if not text_value.strip():
        raise ProtocolError(ErrorCode.EMPTY_TEXT, "'text' is empty", request_id)
    _check_encodable("text", text_value, request_id)

    raw_speed = obj.get("speed")
    speed = None if raw_speed is None else _parse_speed(raw_speed, request_id)

    timestamps = obj.get("timestamps", False)
    if not isinstance(timestamps, bool):
        raise ProtocolError(ErrorCode.INVALID_FIELD, "'timestamps' must be true or false", request_id)

    return Synthesize(
        text=text_value,
        request_id=request_id,
        voice=_optional_str(obj, "voice", request_id),
        speed=speed,
        timestamps=timestamps,
    )


def check_synthesis(msg: Synthesize, *, max_text_chars: int, voices: frozenset[str]) -> None:
    """Server-side limits that depend on its configuration (text length, installed voices)."""
    if len(msg.text) > max_text_chars:
        raise ProtocolError(
            ErrorCode.TEXT_TOO_LONG,
            f"'text' has {len(msg.text)} characters; the limit is {max_text_chars}",
            msg.request_id,
        )
    if msg.voice is not None and msg.voice not in voices:
        raise ProtocolError(
            ErrorCode.UNKNOWN_VOICE,
            f"unknown voice {quote(msg.voice)}; available: {', '.join(sorted(voices))}",
            msg.request_id,
        )


def encode_client_message(msg: ClientMessage) -> str:
    """The JSON text a client sends for `msg` (fields at their default are left out)."""
    if isinstance(msg, Close):
        return json.dumps({"type": "close"})
    if isinstance(msg, Cancel):
        body: dict[str, Any] = {"type": "cancel"}
        if msg.request_id is not None:
            body["request_id"] = msg.request_id
        return json.dumps(body)
    body = {"type": "synthesize", "text": msg.text}
    if msg.request_id is not None:
        body["request_id"] = msg.request_id
    if msg.voice is not None:
        body["voice"] = msg.voice
    if msg.speed is not None:
        body["speed"] = msg.speed
    if msg.timestamps:
        body["timestamps"] = True
    return json.dumps(body, ensure_ascii=False)


# --- server -> client ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SynthesisStart:
    request_id: str
    sample_rate: int = SAMPLE_RATE
    format: str = AUDIO_FORMAT
    channels: int = AUDIO_CHANNELS
    type: Literal["synthesis_start"] = "synthesis_start"


@dataclass(frozen=True, slots=True)
class WordTiming:
    word: str
    start_s: float
    end_s: float


@dataclass(frozen=True, slots=True)
class Timestamps:
    """Word timings of the chunk whose audio follows, in seconds from the request's first sample."""

    request_id: str
    chunk: int
    words: tuple[WordTiming, ...]
    type: Literal["timestamps"] = "timestamps"


@dataclass(frozen=True, slots=True)
class SynthesisComplete:
    request_id: str
    audio_duration_s: float
    time_to_first_audio_ms: float
    elapsed_ms: float
    chunks: int
    type: Literal["synthesis_complete"] = "synthesis_complete"


@dataclass(frozen=True, slots=True)
class Cancelled:
    request_id: str
    type: Literal["cancelled"] = "cancelled"


@dataclass(frozen=True, slots=True)
class ErrorEvent:
    request_id: str | None
    code: str
    message: str
    type: Literal["error"] = "error"


ServerEvent = SynthesisStart | Timestamps | SynthesisComplete | Cancelled | ErrorEvent


def encode_server_event(event: ServerEvent) -> str:
    """The JSON text of a control frame; `type` comes first for readable logs."""
    if isinstance(event, Timestamps):
        body: dict[str, Any] = {
            "type": event.type,
            "request_id": event.request_id,
            "chunk": event.chunk,
            "words": [
                {"word": w.word, "start_s": round(w.start_s, 3), "end_s": round(w.end_s, 3)} for w in event.words
            ],
        }
        return json.dumps(body, ensure_ascii=False)
    fields = {name: getattr(event, name) for name in event.__slots__ if name != "type"}
    for key, value in fields.items():
        if isinstance(value, float):
            fields[key] = round(value, 3)
    return json.dumps({"type": event.type, **fields}, ensure_ascii=False)


def _field(obj: dict[str, Any], key: str, kind: type | tuple[type, ...]) -> Any:
    value = obj.get(key)
    if not isinstance(value, kind) or (isinstance(value, bool) and kind is not bool):
        raise ValueError(f"control frame {obj.get('type')!r}: field {key!r} must be {kind}, got {value!r}")
    return value


def parse_server_event(text: str) -> ServerEvent:
    """Parse a control (text) frame from the server. Raises ValueError on anything malformed."""
    try:
        obj = json.loads(text)
    except RecursionError as exc:
        raise ValueError("control frame is nested too deeply") from exc
    if not isinstance(obj, dict):
        raise ValueError("control frame is not a JSON object")
    kind = obj.get("type")
    num = (int, float)
    if kind == "synthesis_start":
        return SynthesisStart(
            request_id=_field(obj, "request_id", str),
            sample_rate=_field(obj, "sample_rate", int),
            format=_field(obj, "format", str),
            channels=_field(obj, "channels", int),
        )
    if kind == "timestamps":
        if not all(isinstance(w, dict) for w in _field(obj, "words", list)):
            raise ValueError("control frame 'timestamps': every entry of 'words' must be an object")
        words = tuple(
            WordTiming(
                word=_field(w, "word", str),
                start_s=float(_field(w, "start_s", num)),
                end_s=float(_field(w, "end_s", num)),
            )
            for w in _field(obj, "words", list)
        )
        return Timestamps(request_id=_field(obj, "request_id", str), chunk=_field(obj, "chunk", int), words=words)
    if kind == "synthesis_complete":
        return SynthesisComplete(
            request_id=_field(obj, "request_id", str),
            audio_duration_s=float(_field(obj, "audio_duration_s", num)),
            time_to_first_audio_ms=float(_field(obj, "time_to_first_audio_ms", num)),
            elapsed_ms=float(_field(obj, "elapsed_ms", num)),
            chunks=_field(obj, "chunks", int),
        )
    if kind == "cancelled":
        return Cancelled(request_id=_field(obj, "request_id", str))
    if kind == "error":
        rid = obj.get("request_id")
        if rid is not None and not isinstance(rid, str):
            raise ValueError("control frame 'error': field 'request_id' must be a string or null")
        return ErrorEvent(request_id=rid, code=_field(obj, "code", str), message=_field(obj, "message", str))
    raise ValueError(f"unknown control frame type {kind!r}")


def pcm_duration_s(num_bytes: int) -> float:
    """Seconds of audio in `num_bytes` of the session's PCM format."""
    return num_bytes / (SAMPLE_RATE * SAMPLE_WIDTH * AUDIO_CHANNELS)
