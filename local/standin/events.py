"""The wire format of InvokeEndpointWithBidirectionalStream, as the SageMaker runtime reads and writes it.

Pure functions over bytes, no sockets. The framing is AWS event stream
(`application/vnd.amazon.eventstream`), encoded and decoded with the codec that ships with the
SDK's dependencies (`smithy_aws_event_stream`), so the stand-in and the real client agree on
every byte:

- request: each event arrives inside a SigV4 envelope (headers `:date` and `:chunk-signature`,
  payload = the encoded event); an envelope with an empty payload ends the input. The event is
  `:event-type` `PayloadPart` with headers `DataType` (UTF8 | BINARY, default BINARY) and
  `CompletionState` (PARTIAL | COMPLETE, default COMPLETE), the bytes as payload.
- response: unsigned `PayloadPart` events of the same shape, or the modeled exceptions
  `ModelStreamError` / `InternalStreamFailure` (JSON payload), after which the stream ends.
- errors before the stream starts are plain HTTP responses: status, `x-amzn-errortype`, JSON body.
"""

from __future__ import annotations

import datetime
import io
import json
from dataclasses import dataclass
from typing import Final, Literal

from smithy_aws_event_stream.events import MAX_HEADERS_LENGTH, MAX_PAYLOAD_LENGTH, Event, EventMessage
from smithy_aws_event_stream.exceptions import EventError

DataType = Literal["UTF8", "BINARY"]

EVENTSTREAM_CONTENT_TYPE: Final = "application/vnd.amazon.eventstream"
STREAMING_PAYLOAD_HASH: Final = "STREAMING-AWS4-HMAC-SHA256-EVENTS"
"""`x-amz-content-sha256` of a request whose body is a stream of signed events."""

_PRELUDE_LENGTH: Final = 12
_SIGNATURE_LENGTH: Final = 32  # SHA-256
_BINARY_CONTENT_TYPE: Final = "application/octet-stream"
_JSON_CONTENT_TYPE: Final = "application/json"

MAX_PART_BYTES: Final = MAX_PAYLOAD_LENGTH - 1024
"""Largest payload one PayloadPart may carry (the codec's limit, less room for headers)."""
MAX_FRAME_BYTES: Final = _PRELUDE_LENGTH + MAX_HEADERS_LENGTH + MAX_PAYLOAD_LENGTH + 4
"""Largest event frame the codec can hold: prelude, 128 KiB of headers, 16 MiB of payload, CRC."""


class FrameError(Exception):
    """A request frame that is not a valid event of this operation."""


@dataclass(frozen=True, slots=True)
class PayloadPart:
    """One PayloadPart: bytes, how to read them, and whether more of the same message follows."""

    data: bytes
    data_type: DataType = "BINARY"
    complete: bool = True


class EventStreamDecoder:
    """Splits a byte stream into event-stream messages, whatever the chunking of the stream.

    A frame's declared length is checked against `max_frame_bytes` as soon as its first four bytes
    arrive, so a frame that declares 4 GiB is refused at once instead of being buffered.
    """

    def __init__(self, max_frame_bytes: int = MAX_FRAME_BYTES) -> None:
        self._buffer = bytearray()
        self._max_frame_bytes = max_frame_bytes

    def feed(self, data: bytes) -> list[EventMessage]:
        """Messages completed by `data`, in order. Raises FrameError on a corrupt or oversized frame."""
        self._buffer += data
        messages: list[EventMessage] = []
        while len(self._buffer) >= 4:
            total = int.from_bytes(self._buffer[:4], "big")
            if total > self._max_frame_bytes:
                raise FrameError(
                    f"event frame declares a total length of {total} bytes; the limit is {self._max_frame_bytes}"
                )
            if len(self._buffer) < _PRELUDE_LENGTH:
                break
            if total < _PRELUDE_LENGTH + 4:
                raise FrameError(f"event frame declares a total length of {total} bytes, shorter than its prelude")
            if len(self._buffer) < total:
                break
            frame = bytes(self._buffer[:total])
            del self._buffer[:total]
            try:
                event = Event.decode(io.BytesIO(frame))
            except EventError as exc:
                raise FrameError(f"corrupt event frame: {exc}") from exc
            if event is None:  # unreachable: the frame is not empty
                raise FrameError("empty event frame")
            messages.append(event.message)
        return messages

    @property
    def pending(self) -> int:
        """Bytes of an incomplete frame still buffered (non-zero at end of input = truncated stream)."""
        return len(self._buffer)


def unwrap_signed(envelope: EventMessage) -> EventMessage | None:
    """The event inside a SigV4 event envelope, or None for the final empty envelope (end of input).

    The signature chain is checked for shape only, not verified: the stand-in has no secret key.
    """
    date = envelope.headers.get(":date")
    signature = envelope.headers.get(":chunk-signature")
    if not isinstance(date, datetime.datetime):
        raise FrameError("event is not signed: the ':date' timestamp header is missing")
    if not isinstance(signature, bytes) or len(signature) != _SIGNATURE_LENGTH:
        raise FrameError(f"event is not signed: ':chunk-signature' must be {_SIGNATURE_LENGTH} bytes")
    if not envelope.payload:
        return None
    try:
        event = Event.decode(io.BytesIO(envelope.payload))
    except EventError as exc:
        raise FrameError(f"corrupt event inside a signed envelope: {exc}") from exc
    if event is None:  # unreachable: the payload is not empty
        raise FrameError("empty event inside a signed envelope")
    return event.message


def parse_request_part(message: EventMessage) -> PayloadPart:
    """Read a request `PayloadPart` event, applying SageMaker's defaults (BINARY, COMPLETE)."""
    headers = message.headers
    if headers.get(":message-type") != "event":
        raise FrameError(f"expected ':message-type' 'event', got {headers.get(':message-type')!r}")
    if headers.get(":event-type") != "PayloadPart":
        raise FrameError(f"unknown request event type {headers.get(':event-type')!r}; allowed: 'PayloadPart'")
    raw_type = headers.get("DataType", "BINARY")
    if raw_type == "UTF8":
        data_type: DataType = "UTF8"
    elif raw_type == "BINARY":
        data_type = "BINARY"
    else:
        raise FrameError(f"DataType must be 'UTF8' or 'BINARY', got {raw_type!r}")
    completion = headers.get("CompletionState", "COMPLETE")
    if completion not in ("PARTIAL", "COMPLETE"):
        raise FrameError(f"CompletionState must be 'PARTIAL' or 'COMPLETE', got {completion!r}")
    return PayloadPart(data=message.payload, data_type=data_type, complete=completion == "COMPLETE")


def encode_payload_part(part: PayloadPart) -> bytes:
    """A `PayloadPart` event; the same shape in both directions (requests are then signed and wrapped)."""
    if len(part.data) > MAX_PART_BYTES:
        raise ValueError(f"a PayloadPart carries at most {MAX_PART_BYTES} bytes, got {len(part.data)}")
    headers: dict[str, str] = {
        ":message-type": "event",
        ":event-type": "PayloadPart",
        "DataType": part.data_type,
        "CompletionState": "COMPLETE" if part.complete else "PARTIAL",
    }
    if part.data:
        headers[":content-type"] = _BINARY_CONTENT_TYPE
    return EventMessage(headers=headers, payload=part.data).encode()


def encode_model_stream_error(error_code: str, message: str) -> bytes:
    """The `ModelStreamError` exception event: the model container broke the stream."""
    return _exception_event("ModelStreamError", {"Message": message, "ErrorCode": error_code})


def encode_internal_stream_failure(message: str) -> bytes:
    """The `InternalStreamFailure` exception event: the platform itself failed mid-stream."""
    return _exception_event("InternalStreamFailure", {"Message": message})


def _exception_event(kind: str, body: dict[str, str]) -> bytes:
    headers = {":message-type": "exception", ":exception-type": kind, ":content-type": _JSON_CONTENT_TYPE}
    return EventMessage(headers=headers, payload=json.dumps(body).encode()).encode()


def encode_unmodeled_error(code: str, message: str) -> bytes:
    """An event-stream `error` message (not in the service model), for a request frame the stand-in rejects."""
    headers = {":message-type": "error", ":error-code": code, ":error-message": message}
    return EventMessage(headers=headers).encode()


@dataclass(frozen=True, slots=True)
class ErrorResponse:
    """An HTTP error response, sent instead of the event stream when the call cannot start."""

    status: int
    error_type: str
    body: dict[str, str | int]

    def headers(self, request_id: str) -> list[tuple[bytes, bytes]]:
        return [
            (b"content-type", _JSON_CONTENT_TYPE.encode()),
            (b"x-amzn-errortype", self.error_type.encode()),
            (b"x-amzn-requestid", request_id.encode()),
        ]

    def encode_body(self) -> bytes:
        return json.dumps(self.body).encode()

    @property
    def message(self) -> str:
        # Service errors say "Message"; AWS's front door (authentication, routing) says "message".
        return str(self.body.get("Message", self.body.get("message", "")))


def validation_error(message: str) -> ErrorResponse:
    """400 `InputValidationError`: the request names something that does not exist or is malformed."""
    return ErrorResponse(400, "InputValidationError", {"Message": message, "ErrorCode": "ValidationError"})


def model_error(
    message: str, *, original_status_code: int | None = None, original_message: str | None = None
) -> ErrorResponse:
    """424 `ModelError`: the model container could not be reached or refused the WebSocket."""
    body: dict[str, str | int] = {"Message": message, "ErrorCode": "ModelError"}
    if original_status_code is not None:
        body["OriginalStatusCode"] = original_status_code
    if original_message is not None:
        body["OriginalMessage"] = original_message
    return ErrorResponse(424, "ModelError", body)


def auth_error(message: str) -> ErrorResponse:
    """403: the request is not SigV4-signed (what any AWS endpoint answers before looking further)."""
    return ErrorResponse(403, "MissingAuthenticationTokenException", {"message": message})


def not_found_error(message: str) -> ErrorResponse:
    """404: a path that is not an operation of this service."""
    return ErrorResponse(404, "UnknownOperationException", {"message": message})
