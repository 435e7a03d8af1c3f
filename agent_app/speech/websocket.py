"""Direct WebSocket transport to the speech container (the local stack, or any container URL).

Frames are exactly the container's: client messages go out as JSON text frames; text frames that
come back are control events, binary frames are PCM16 audio. A frame's kind is told by its opcode
(websockets returns `str` for text and `bytes` for binary), never by trying to parse it.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Final

from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosedError, ConnectionClosedOK, InvalidHandshake, InvalidURI

from agent_app.speech.transport import SpeechConnection, SpeechErrorCode, SpeechFrame, SpeechTransportError
from speech_protocol import ClientMessage, encode_client_message, parse_server_event

logger = logging.getLogger(__name__)

EARLY_CLOSE_TIMEOUT_S: Final = 0.5
"""How long a session left early waits for the container's close reply before dropping the socket."""
MAX_FRAME_BYTES: Final = 16 * 2**20
"""Largest frame accepted: one audio frame of a long chunk (24 kHz PCM16 is 48 kB per second)."""


class WebSocketConnection:
    """One session over an open WebSocket."""

    def __init__(self, websocket: ClientConnection) -> None:
        self._websocket = websocket

    async def send(self, message: ClientMessage) -> None:
        try:
            await self._websocket.send(encode_client_message(message))
        except ConnectionClosedOK as exc:
            raise SpeechTransportError(
                SpeechErrorCode.STREAM_ERROR, f"the speech session was closed before a message could be sent: {exc}"
            ) from exc
        except ConnectionClosedError as exc:
            raise SpeechTransportError(SpeechErrorCode.STREAM_ERROR, f"the speech session broke: {exc}") from exc

    async def receive(self) -> SpeechFrame | None:
        try:
            data = await self._websocket.recv()
        except ConnectionClosedOK:
            return None
        except ConnectionClosedError as exc:
            raise SpeechTransportError(SpeechErrorCode.STREAM_ERROR, f"the speech session broke: {exc}") from exc
        if isinstance(data, bytes):
            return data
        try:
            return parse_server_event(data)
        except ValueError as exc:
            raise SpeechTransportError(
                SpeechErrorCode.PROTOCOL_ERROR, f"malformed control frame from the speech container: {exc}"
            ) from exc


class WebSocketTransport:
    """Opens sessions on `url`, the container's `/invocations-bidirectional-stream` route."""

    def __init__(self, url: str, *, open_timeout_s: float = 10.0, close_timeout_s: float = 5.0) -> None:
        self.url = url
        self._open_timeout_s = open_timeout_s
        self._close_timeout_s = close_timeout_s

    @asynccontextmanager
    async def connect(self) -> AsyncIterator[SpeechConnection]:
        try:
            websocket = await connect(
                self.url,
                open_timeout=self._open_timeout_s,
                close_timeout=self._close_timeout_s,
                max_size=MAX_FRAME_BYTES,
                # PCM does not compress with deflate; compressing would only cost CPU on both sides.
                compression=None,
            )
        except (OSError, TimeoutError, InvalidHandshake, InvalidURI) as exc:
            raise SpeechTransportError(
                SpeechErrorCode.UNAVAILABLE, f"cannot open a speech session at {self.url}: {exc!r}"
            ) from exc
        try:
            yield WebSocketConnection(websocket)
        except BaseException:
            # Leaving early (error, cancellation) closes the socket: the container cancels the
            # session's work. Its audio may still fill the socket, so its close reply can be stuck
            # behind audio nobody reads: wait for it briefly, then drop the connection.
            websocket.close_timeout = min(self._close_timeout_s, EARLY_CLOSE_TIMEOUT_S)
            await websocket.close()
            raise
        await websocket.close()
