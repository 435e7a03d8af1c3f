"""One bidirectional-stream call bridged to one container WebSocket, the way SageMaker bridges it.

- Each request PayloadPart becomes a WebSocket frame: a text frame when its DataType is UTF8, a
  binary frame otherwise. PARTIAL parts are not reassembled: they become the fragments of one
  WebSocket message (websockets ends a fragmented message with an empty final frame).
- Each container frame becomes a response PayloadPart, UTF8 for text and BINARY for binary;
  the fragments of a fragmented message keep their order, all PARTIAL but the last.
- The client ending its input (the final empty signed event, or END_STREAM) closes the
  WebSocket normally, and the response ends when the closing handshake completes.
- The container closing normally (1000/1001) ends the response; any other close, or a dropped
  connection, sends a `ModelStreamError` (ErrorCode `StreamBroken`) and then ends it.
- The container is pinged every `ping_interval_s`; after `max_missed_pongs` consecutive pings
  without a pong the connection is closed with 1011 and the client gets a `ModelStreamError`.
- Queues are bounded: at most `FRAGMENT_QUEUE` fragments of a message wait for the container;
  beyond that the bridge stops reading the client, whose HTTP/2 flow control then holds it back.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from typing import Final

from websockets.asyncio.client import ClientConnection
from websockets.exceptions import ConnectionClosed, ConnectionClosedError, ConnectionClosedOK
from websockets.frames import CloseCode
from websockets.protocol import State

from local.standin.events import (
    MAX_PART_BYTES,
    DataType,
    EventStreamDecoder,
    FrameError,
    PayloadPart,
    encode_model_stream_error,
    encode_payload_part,
    encode_unmodeled_error,
    parse_request_part,
    unwrap_signed,
)
from local.standin.http2 import Receive, Send
from local.standin.routing import StandInConfig

logger = logging.getLogger(__name__)

FRAGMENT_QUEUE: Final = 8
"""Fragments of one message waiting for the container before the bridge stops reading the client."""
STREAM_BROKEN: Final = "StreamBroken"
"""ModelStreamError code for a container stream that broke before it completed (SageMaker's code)."""


def split_part(data: bytes, data_type: DataType, *, final: bool, limit: int = MAX_PART_BYTES) -> list[PayloadPart]:
    """One container frame as PayloadParts no larger than `limit`; only the very last may be COMPLETE."""
    if len(data) <= limit:
        return [PayloadPart(data, data_type, complete=final)]
    chunks = [data[i : i + limit] for i in range(0, len(data), limit)]
    return [PayloadPart(chunk, data_type, complete=final and i == len(chunks) - 1) for i, chunk in enumerate(chunks)]


class FragmentedMessage:
    """A WebSocket message sent fragment by fragment, as PARTIAL parts arrive."""

    def __init__(self, websocket: ClientConnection, data_type: DataType) -> None:
        self.data_type = data_type
        self._queue: asyncio.Queue[bytes | None] = asyncio.Queue(FRAGMENT_QUEUE)
        self._sending = asyncio.create_task(websocket.send(self._fragments(), text=data_type == "UTF8"))

    async def _fragments(self) -> AsyncIterator[bytes]:
        while (fragment := await self._queue.get()) is not None:
            yield fragment

    async def add(self, data: bytes) -> None:
        """Queue `data`; waits while the queue is full, raises ConnectionClosed if the container went away."""
        await self._put(data)

    async def finish(self) -> None:
        await self._put(None)
        await self._sending

    async def _put(self, item: bytes | None) -> None:
        put = asyncio.ensure_future(self._queue.put(item))
        await asyncio.wait({put, self._sending}, return_when=asyncio.FIRST_COMPLETED)
        if not put.done():
            put.cancel()
            await self._sending  # raises ConnectionClosed when the container went away
            raise FrameError("the container stopped reading a fragmented message")

    async def abandon(self) -> None:
        self._sending.cancel()
        with contextlib.suppress(asyncio.CancelledError, ConnectionClosed):
            await self._sending


class Bridge:
    """Runs one call: client events to the container, container frames to the client, keepalive."""

    def __init__(
        self, websocket: ClientConnection, receive: Receive, send: Send, config: StandInConfig, request_id: str
    ) -> None:
        self._ws = websocket
        self._receive = receive
        self._send = send
        self._config = config
        self._request_id = request_id
        self._client_gone = False
        self._ending_event: bytes | None = None
        """An event the stand-in decided to end the response with (instead of ModelStreamError)."""
        self._fragments: FragmentedMessage | None = None

    async def run(self) -> None:
        """Until the response has ended and the client has finished its input (or gone away)."""
        async with asyncio.TaskGroup() as tasks:
            keepalive = tasks.create_task(self._keepalive())
            tasks.create_task(self._client_to_container())
            await self._container_to_client()
            keepalive.cancel()

    # --- client -> container -------------------------------------------------------------------

    async def _client_to_container(self) -> None:
        decoder = EventStreamDecoder()
        input_open = True
        while True:
            message = await self._receive()
            if message["type"] == "http.disconnect":
                self._client_gone = True
                if self._ws.state is State.OPEN:
                    logger.info("request %s: client disconnected; closing the container WebSocket", self._request_id)
                await self._close_container(CloseCode.GOING_AWAY, "client disconnected")
                return
            more_body = bool(message.get("more_body", False))
            if input_open:
                input_open = await self._forward_body(decoder, bytes(message.get("body", b"")), more_body)
            # Once the WebSocket is closed, the rest of the input (normally just END_STREAM) is read
            # and dropped, so the client can finish its request side without being reset.
            if not more_body:
                return

    async def _forward_body(self, decoder: EventStreamDecoder, body: bytes, more_body: bool) -> bool:
        """Forward what `body` completes; False once the input is over (ended, refused or container gone)."""
        try:
            for envelope in decoder.feed(body):
                event = unwrap_signed(envelope)
                if event is None:
                    await self._end_input()
                    return False
                await self._forward(parse_request_part(event))
            if not more_body:
                if decoder.pending:
                    raise FrameError(f"the request ended inside an event frame ({decoder.pending} bytes left over)")
                await self._end_input()
                return False
        except FrameError as exc:
            logger.warning("request %s: refusing a request frame: %s", self._request_id, exc)
            self._ending_event = encode_unmodeled_error("SerializationException", str(exc))
            await self._close_container(CloseCode.POLICY_VIOLATION, "invalid request frame")
            return False
        except ConnectionClosed:
            # The container went away; the other direction reports how.
            return False
        return True

    async def _forward(self, part: PayloadPart) -> None:
        if self._fragments is None and part.complete:
            await self._ws.send(part.data, text=part.data_type == "UTF8")
            return
        if self._fragments is None:
            self._fragments = FragmentedMessage(self._ws, part.data_type)
        elif self._fragments.data_type != part.data_type:
            raise FrameError(
                f"DataType changed from {self._fragments.data_type} to {part.data_type} inside a fragmented message"
            )
        await self._fragments.add(part.data)
        if part.complete:
            fragments, self._fragments = self._fragments, None
            await fragments.finish()

    async def _end_input(self) -> None:
        if self._fragments is not None:
            raise FrameError("the input ended inside a fragmented message (last PayloadPart was PARTIAL)")
        if self._ws.state is State.OPEN:
            logger.info("request %s: client ended its input; closing the container WebSocket", self._request_id)
        await self._close_container(CloseCode.NORMAL_CLOSURE, "")

    async def _close_container(self, code: CloseCode, reason: str) -> None:
        if self._fragments is not None:
            fragments, self._fragments = self._fragments, None
            await fragments.abandon()
        await self._ws.close(code, reason)

    # --- container -> client -------------------------------------------------------------------

    async def _container_to_client(self) -> None:
        try:
            while True:
                await self._relay_message()
        except ConnectionClosedOK:
            logger.info("request %s: container WebSocket closed normally", self._request_id)
            await self._end_response(self._ending_event)
        except ConnectionClosedError as exc:
            if self._ending_event is None:
                logger.warning("request %s: container stream broke: %s", self._request_id, exc)
                reason = f"The model container closed the stream: {_describe_close(exc)}"
                self._ending_event = encode_model_stream_error(STREAM_BROKEN, reason)
            await self._end_response(self._ending_event)

    async def _relay_message(self) -> None:
        # A fragment is sent once the next one shows it was not the last, so only the final
        # fragment of a message is marked COMPLETE; an unfragmented message costs no wait.
        held: tuple[bytes, DataType] | None = None
        async for fragment in self._ws.recv_streaming():
            if held is not None:
                await self._emit_parts(split_part(*held, final=False))
            held = (fragment.encode(), "UTF8") if isinstance(fragment, str) else (fragment, "BINARY")
        if held is not None:
            await self._emit_parts(split_part(*held, final=True))

    async def _emit_parts(self, parts: list[PayloadPart]) -> None:
        for part in parts:
            await self._emit(encode_payload_part(part))

    async def _emit(self, frame: bytes) -> None:
        if not self._client_gone:
            await self._send({"type": "http.response.body", "body": frame, "more_body": True})

    async def _end_response(self, final_event: bytes | None) -> None:
        if self._client_gone:
            return
        if final_event is not None:
            await self._emit(final_event)
        await self._send({"type": "http.response.body", "body": b"", "more_body": False})

    # --- keepalive ---------------------------------------------------------------------------

    async def _keepalive(self) -> None:
        """Ping like SageMaker; close the container connection after too many missed pongs."""
        missed = 0
        pong: asyncio.Future[float] | None = None
        while True:
            await asyncio.sleep(self._config.ping_interval_s)
            missed = missed + 1 if pong is not None and not pong.done() else 0
            if missed >= self._config.max_missed_pongs:
                message = f"The model container did not answer {missed} consecutive WebSocket pings."
                logger.warning("request %s: %s", self._request_id, message)
                self._ending_event = encode_model_stream_error(STREAM_BROKEN, message)
                await self._close_container(CloseCode.INTERNAL_ERROR, "keepalive ping timeout")
                return
            try:
                pong = asyncio.ensure_future(await self._ws.ping())
            except ConnectionClosed:
                return


def _describe_close(exc: ConnectionClosed) -> str:
    frame = exc.rcvd or exc.sent
    if frame is None:
        return "the connection was lost without a closing handshake"
    reason = f" ({frame.reason})" if frame.reason else ""
    return f"close code {int(frame.code)}{reason}"
