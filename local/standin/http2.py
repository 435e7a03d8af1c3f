"""A minimal HTTP/2 server (TLS, ALPN h2) running one ASGI application with true full duplex.

Each HTTP/2 stream is one ASGI `http` call whose request body and response body flow at the
same time, in both directions, with flow control; the response may end while the request is
still open (HTTP/2 half-close), and the request keeps flowing until the client ends it.
hypercorn 0.18 cannot do the latter: it forgets a stream once its response is complete and the
next DATA frame from the client crashes the whole connection (KeyError in
`H2Protocol._handle_events`), which is exactly what happens when a SageMaker container ends a
session before the client has closed its input.

Only what the stand-in needs: HTTP/2 over TLS only (a client that does not negotiate h2 gets an
HTTP/1.1 505 and is disconnected), the ASGI `http` scope (no lifespan, no WebSocket), no push.

Bounds: a request whose `:method` is not an HTTP token is refused with a stream error
(RST_STREAM PROTOCOL_ERROR), the connection goes on; a connection with no open stream and no
traffic for `idle_timeout_s` is closed with GOAWAY; each stream's inbox holds at most one flow
control window (65,535 bytes, HTTP/2's default, never raised): data is acknowledged only once the
app has taken it, so a client cannot make the server buffer more.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable, MutableMapping
from contextlib import asynccontextmanager
from socket import socket
from typing import Any, Final

import h2.config
import h2.connection
import h2.events
import h2.exceptions
from h2.errors import ErrorCodes
from h2.settings import SettingCodes

logger = logging.getLogger(__name__)

Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Message, Receive, Send], Awaitable[None]]

_READ_SIZE: Final = 65_536
_TLS_HANDSHAKE_TIMEOUT_S: Final = 5.0
"""A client that rejects the certificate (s2n in the CRT waits 10-30 s before saying so) is dropped."""
_SHUTDOWN_GRACE_S: Final = 1.0
_MAX_CONCURRENT_STREAMS: Final = 100
_TOKEN: Final = re.compile(rb"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
"""An HTTP method is a token (RFC 9110 section 9.1); anything else is a malformed request."""
DEFAULT_IDLE_TIMEOUT_S: Final = 300.0
_HTTP11_REFUSAL: Final = (
    b"HTTP/1.1 505 HTTP Version Not Supported\r\ncontent-type: text/plain\r\nconnection: close\r\n"
    b"content-length: 44\r\n\r\nthis endpoint only speaks HTTP/2 (ALPN h2)\r\n"
)


def _setting_name(code: int) -> str:
    try:
        return SettingCodes(code).name
    except ValueError:
        return str(code)


def server_ssl_context(cert_path: str, key_path: str) -> ssl.SSLContext:
    """TLS 1.2+ with ALPN `h2` only, as HTTP/2 requires (RFC 9113 section 9.2)."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.options |= ssl.OP_NO_COMPRESSION
    context.set_alpn_protocols(["h2"])
    context.load_cert_chain(cert_path, key_path)
    return context


class _Stream:
    """One request/response exchange, seen by the app through ASGI `receive` and `send`."""

    def __init__(self, connection: _Connection, stream_id: int) -> None:
        self._connection = connection
        self.stream_id = stream_id
        self._inbox: asyncio.Queue[tuple[Message, int]] = asyncio.Queue()
        self._window = asyncio.Event()
        self.request_complete = False
        self.response_started = False
        self.response_complete = False
        self.reset = False

    # Called by the connection's read loop.
    def on_data(self, data: bytes, flow_controlled_length: int) -> None:
        self._inbox.put_nowait(({"type": "http.request", "body": data, "more_body": True}, flow_controlled_length))

    def on_end(self) -> None:
        self.request_complete = True
        self._inbox.put_nowait(({"type": "http.request", "body": b"", "more_body": False}, 0))

    def on_reset(self) -> None:
        self.reset = True
        self._inbox.put_nowait(({"type": "http.disconnect"}, 0))
        self._window.set()

    def on_window_update(self) -> None:
        self._window.set()

    # The ASGI interface.
    async def receive(self) -> Message:
        message, flow_controlled_length = await self._inbox.get()
        if flow_controlled_length:
            # Acknowledged only once the app has taken the data: that is the backpressure.
            await self._connection.acknowledge(self.stream_id, flow_controlled_length)
        return message

    async def send(self, message: Message) -> None:
        if self.reset:
            return  # the client is gone; like other ASGI servers, drop what the app still sends
        if message["type"] == "http.response.start":
            headers = [(b":status", str(message["status"]).encode()), *message.get("headers", [])]
            self.response_started = True
            await self._connection.send_headers(self.stream_id, headers)
        elif message["type"] == "http.response.body":
            end = not message.get("more_body", False)
            await self._connection.send_body(self, bytes(message.get("body", b"")), end_stream=end)
            self.response_complete = end
        else:
            raise ValueError(f"unsupported ASGI message type {message['type']!r}")

    async def wait_for_window(self) -> None:
        self._window.clear()
        await self._window.wait()


class _Connection:
    """One TLS connection: the HTTP/2 state machine, a read loop, one task per stream."""

    def __init__(
        self,
        app: ASGIApp,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        idle_timeout_s: float = DEFAULT_IDLE_TIMEOUT_S,
    ) -> None:
        self._app = app
        self._idle_timeout_s = idle_timeout_s
        self._reader = reader
        self._writer = writer
        self._h2 = h2.connection.H2Connection(h2.config.H2Configuration(client_side=False, header_encoding=None))
        self._streams: dict[int, _Stream] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._write_lock = asyncio.Lock()
        peer = writer.get_extra_info("peername")
        self._client = (str(peer[0]), int(peer[1])) if isinstance(peer, tuple) else None
        server = writer.get_extra_info("sockname")
        self._server = (str(server[0]), int(server[1])) if isinstance(server, tuple) else None

    async def run(self) -> None:
        self._h2.initiate_connection()
        self._h2.update_settings({SettingCodes.MAX_CONCURRENT_STREAMS: _MAX_CONCURRENT_STREAMS})
        await self._flush()
        try:
            while data := await self._read():
                try:
                    events = self._h2.receive_data(data)
                except h2.exceptions.ProtocolError as exc:
                    logger.warning("HTTP/2 protocol error from %s: %s", self._client, exc)
                    await self._flush()  # h2 has queued a GOAWAY
                    break
                for event in events:
                    self._handle(event)
                await self._flush()
        except (ConnectionError, ssl.SSLError) as exc:
            logger.info("connection from %s lost: %s", self._client, exc)
        except _IdleError:
            logger.info("connection from %s idle for %.1f s; closing it", self._client, self._idle_timeout_s)
            with contextlib.suppress(h2.exceptions.ProtocolError):
                self._h2.close_connection()
            await self._flush()
        finally:
            for stream in self._streams.values():
                stream.on_reset()
            if self._tasks:
                await asyncio.gather(*self._tasks)
            self._writer.close()
            with contextlib.suppress(ConnectionError, ssl.SSLError):
                await self._writer.wait_closed()

    async def _read(self) -> bytes:
        """The next bytes from the client; raises _IdleError after the idle timeout with no stream open."""
        if self._streams:
            return await self._reader.read(_READ_SIZE)
        try:
            return await asyncio.wait_for(self._reader.read(_READ_SIZE), self._idle_timeout_s)
        except TimeoutError:
            raise _IdleError from None

    def _handle(self, event: h2.events.Event) -> None:
        if isinstance(event, h2.events.RequestReceived):
            self._start_stream(event.stream_id, event.headers)
        elif isinstance(event, h2.events.DataReceived):
            stream = self._streams.get(event.stream_id)
            if stream is not None:
                stream.on_data(event.data, event.flow_controlled_length)
            else:
                # The app has finished with this stream (or it was refused): drop the data, keep the
                # connection's window open.
                with contextlib.suppress(h2.exceptions.StreamClosedError):
                    self._h2.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
        elif isinstance(event, h2.events.StreamEnded):
            if (stream := self._streams.get(event.stream_id)) is not None:
                stream.on_end()
        elif isinstance(event, h2.events.StreamReset):
            if (stream := self._streams.get(event.stream_id)) is not None:
                stream.on_reset()
        elif isinstance(event, h2.events.WindowUpdated):
            for stream_id, stream in self._streams.items():
                if event.stream_id in (0, stream_id):
                    stream.on_window_update()
        elif isinstance(event, h2.events.RemoteSettingsChanged):
            settings = {_setting_name(code): change.new_value for code, change in event.changed_settings.items()}
            logger.debug("HTTP/2 settings from %s: %s", self._client, settings)
            for stream in self._streams.values():
                stream.on_window_update()  # a new initial window size changes every stream's window

    def _start_stream(self, stream_id: int, raw_headers: list[Any]) -> None:
        pseudo: dict[bytes, bytes] = {}
        headers: list[tuple[bytes, bytes]] = []
        for name, value in raw_headers:
            if name.startswith(b":"):
                pseudo[bytes(name)] = bytes(value)
            else:
                headers.append((bytes(name), bytes(value)))
        raw_path = pseudo.get(b":path", b"/")
        path, _, query = raw_path.partition(b"?")
        method = pseudo.get(b":method", b"")
        if not _TOKEN.fullmatch(method):
            # A malformed request is a stream error (RFC 9113 section 8.1.1): this stream is reset,
            # the connection and its other streams go on.
            logger.warning("stream %s from %s refused: malformed :method %r", stream_id, self._client, method[:40])
            self._h2.reset_stream(stream_id, ErrorCodes.PROTOCOL_ERROR)
            return
        scope: Message = {
            "type": "http",
            "asgi": {"version": "3.0", "spec_version": "2.3"},
            "http_version": "2",
            "method": method.decode("ascii"),
            "scheme": "https",
            "path": path.decode("utf-8", "replace"),
            "raw_path": path,
            "query_string": query,
            "root_path": "",
            "headers": headers,
            "client": self._client,
            "server": self._server,
        }
        stream = _Stream(self, stream_id)
        self._streams[stream_id] = stream
        task = asyncio.create_task(self._run_app(stream, scope))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _run_app(self, stream: _Stream, scope: Message) -> None:
        try:
            await self._app(scope, stream.receive, stream.send)
        except Exception:
            # The server boundary: one failed call must not take the connection down.
            logger.exception("request on stream %s failed", stream.stream_id)
        finally:
            del self._streams[stream.stream_id]
            if not stream.reset:
                await self._finish(stream)

    async def _finish(self, stream: _Stream) -> None:
        try:
            if not stream.response_complete:
                if stream.response_started:
                    self._h2.reset_stream(stream.stream_id, ErrorCodes.INTERNAL_ERROR)
                else:
                    self._h2.send_headers(stream.stream_id, [(b":status", b"500")], end_stream=True)
            elif not stream.request_complete:
                # A complete response before the whole request: ask the client to stop sending
                # (RFC 9113 section 8.1). Apps that want the rest read it before returning.
                self._h2.reset_stream(stream.stream_id, ErrorCodes.NO_ERROR)
        except h2.exceptions.StreamClosedError:
            return
        await self._flush()

    # Used by streams.
    async def acknowledge(self, stream_id: int, length: int) -> None:
        with contextlib.suppress(h2.exceptions.StreamClosedError):
            self._h2.acknowledge_received_data(length, stream_id)
            await self._flush()

    async def send_headers(self, stream_id: int, headers: list[tuple[bytes, bytes]]) -> None:
        self._h2.send_headers(stream_id, headers)
        await self._flush()

    async def send_body(self, stream: _Stream, data: bytes, *, end_stream: bool) -> None:
        view = memoryview(data)
        try:
            while view:
                if stream.reset:
                    return
                size = min(self._h2.local_flow_control_window(stream.stream_id), self._h2.max_outbound_frame_size)
                if size <= 0:
                    await stream.wait_for_window()
                    continue
                self._h2.send_data(stream.stream_id, bytes(view[:size]))
                view = view[size:]
                await self._flush()
            if end_stream:
                self._h2.end_stream(stream.stream_id)
                await self._flush()
        except h2.exceptions.StreamClosedError:
            stream.on_reset()

    async def _flush(self) -> None:
        async with self._write_lock:
            data = self._h2.data_to_send()
            if data and not self._writer.is_closing():
                self._writer.write(data)
                with contextlib.suppress(ConnectionError):
                    await self._writer.drain()

    def abort(self) -> None:
        """Shut down: tell the client (GOAWAY) and end every call as if the client had left."""
        if not self._writer.is_closing():
            with contextlib.suppress(h2.exceptions.ProtocolError):
                self._h2.close_connection()
                self._writer.write(self._h2.data_to_send())
        self._writer.close()


class _IdleError(Exception):
    """A connection had no stream open and no traffic for its idle timeout."""


@asynccontextmanager
async def serve_http2(
    app: ASGIApp, sock: socket, ssl_context: ssl.SSLContext, *, idle_timeout_s: float = DEFAULT_IDLE_TIMEOUT_S
) -> AsyncIterator[None]:
    """Serve `app` on the listening socket `sock` until the context exits, then close every connection."""
    connections: set[_Connection] = set()
    handlers: set[asyncio.Task[Any]] = set()

    async def on_connect(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        ssl_object = writer.get_extra_info("ssl_object")
        if ssl_object is None or ssl_object.selected_alpn_protocol() != "h2":
            writer.write(_HTTP11_REFUSAL)
            writer.close()
            return
        connection = _Connection(app, reader, writer, idle_timeout_s)
        connections.add(connection)
        task = asyncio.current_task()
        if task is not None:
            handlers.add(task)
        try:
            await connection.run()
        finally:
            connections.discard(connection)
            if task is not None:
                handlers.discard(task)

    server = await asyncio.start_server(
        on_connect, sock=sock, ssl=ssl_context, ssl_handshake_timeout=_TLS_HANDSHAKE_TIMEOUT_S
    )
    try:
        yield
    finally:
        server.close()
        for connection in list(connections):
            connection.abort()
        if handlers:
            await asyncio.wait(handlers)
        try:
            # A client stuck in the TLS handshake would hold this for up to the handshake timeout.
            async with asyncio.timeout(_SHUTDOWN_GRACE_S):
                await server.wait_closed()
        except TimeoutError:
            logger.info("stopped with TLS handshakes still pending")
