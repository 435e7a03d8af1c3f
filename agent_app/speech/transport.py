"""The one interface the agent uses to talk to the speech container, whatever carries the frames.

Two transports implement it: a direct WebSocket to a container URL (local stack) and SageMaker's
bidirectional streaming API over HTTP/2 (deployed stack). Both carry exactly the frames of
`speech_protocol`: control messages as JSON text, audio as raw PCM16 bytes.
"""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager
from enum import StrEnum
from typing import Protocol

from speech_protocol import ClientMessage, ServerEvent

SpeechFrame = ServerEvent | bytes
"""A frame from the speech container: a parsed control event, or PCM16 audio bytes."""


class SpeechErrorCode(StrEnum):
    """Why a speech session failed; surfaced to the agent's caller as the `error` event's code."""

    UNAVAILABLE = "speech_unavailable"  # could not connect, or the endpoint refused the stream
    STREAM_ERROR = "speech_stream_error"  # the stream broke or closed abnormally mid-session
    PROTOCOL_ERROR = "speech_protocol_error"  # the container sent a frame the protocol does not allow


class SpeechTransportError(Exception):
    def __init__(self, code: SpeechErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class SpeechConnection(Protocol):
    """One open session with the speech container."""

    async def send(self, message: ClientMessage) -> None:
        """Send a client message (always as UTF-8 JSON text)."""
        ...

    async def receive(self) -> SpeechFrame | None:
        """Next frame in order; None once the container ended the session normally.

        Raises SpeechTransportError when the session broke.
        """
        ...


class SpeechTransport(Protocol):
    """Opens sessions; the context manager closes the underlying stream on exit."""

    def connect(self) -> AbstractAsyncContextManager[SpeechConnection]: ...
