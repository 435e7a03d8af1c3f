"""Support for the stand-in tests: scriptable containers, a frozen container, the raw SDK client."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import datetime
import hashlib
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import h2.config
import h2.connection
import h2.events
from aws_sdk_sagemaker_runtime_http2.client import AsyncSageMakerRuntimeHTTP2Client  # type: ignore[import-untyped]
from aws_sdk_sagemaker_runtime_http2.config import AsyncSageMakerRuntimeHTTP2Config  # type: ignore[import-untyped]
from aws_sdk_sagemaker_runtime_http2.models import (  # type: ignore[import-untyped]
    InvokeEndpointWithBidirectionalStreamInput,
    RequestPayloadPart,
    RequestStreamEventPayloadPart,
)
from botocore.credentials import Credentials  # type: ignore[import-untyped]
from smithy_aws_event_stream.events import EventMessage
from websockets.asyncio.server import ServerConnection, serve
from websockets.exceptions import ConnectionClosed

from agent_app.speech.sagemaker import BotocoreCredentialsResolver, CrtHttp2Client, SageMakerTransport
from local.sagemaker_standin import StandInInfo

REPO_ROOT = Path(__file__).resolve().parents[2]
"""Working directory of the processes tests start, so `python -m local...` resolves like in the Makefile."""

WAIT_S = 10.0
"""Upper bound for any wait in these tests; reaching it means the test failed."""

TEST_CREDENTIALS = Credentials("AKIDSTANDINTEST", "not-a-secret")
REGION = "us-east-1"

Frame = tuple[str, Any]
"""('text', str) or ('bytes', bytes): one WebSocket message as the container saw it."""


@dataclass
class ScriptContainer:
    """A WebSocket server standing in for a model container; `script` decides what it does.

    It records the path of every connection, every message it received (by opcode, with the
    fragments of fragmented messages) and how each connection ended.
    """

    script: Callable[[ScriptContainer, ServerConnection], Awaitable[None]]
    port: int = 0
    paths: list[str] = field(default_factory=list)
    received: list[Frame] = field(default_factory=list)
    fragments: list[list[Frame]] = field(default_factory=list)
    close_codes: list[int | None] = field(default_factory=list)
    connections: int = 0

    @property
    def url(self) -> str:
        return f"ws://127.0.0.1:{self.port}"

    async def handler(self, websocket: ServerConnection) -> None:
        self.connections += 1
        assert websocket.request is not None
        self.paths.append(websocket.request.path)
        try:
            # A script ends when the connection does; the close code is what tests look at.
            with contextlib.suppress(ConnectionClosed):
                await self.script(self, websocket)
        finally:
            await websocket.wait_closed()
            self.close_codes.append(websocket.close_code)

    async def recv(self, websocket: ServerConnection) -> Frame:
        """Next message, recorded; fragments are kept separately in `fragments`."""
        parts: list[Frame] = []
        async for fragment in websocket.recv_streaming():
            parts.append(("text", fragment) if isinstance(fragment, str) else ("bytes", fragment))
        kind = parts[0][0]
        frame: Frame = (kind, "".join(p for _, p in parts) if kind == "text" else b"".join(p for _, p in parts))
        self.received.append(frame)
        if len(parts) > 1:
            self.fragments.append(parts)
        return frame


@asynccontextmanager
async def script_container(
    script: Callable[[ScriptContainer, ServerConnection], Awaitable[None]],
) -> AsyncIterator[ScriptContainer]:
    container = ScriptContainer(script)
    async with serve(container.handler, "127.0.0.1", 0, ping_interval=None, compression=None) as server:
        container.port = server.sockets[0].getsockname()[1]
        yield container


@dataclass
class FrozenContainer:
    """A TCP server that hangs: it never answers, or answers the WebSocket handshake and then
    reads without ever replying (so pings get no pong). Records the raw bytes it read."""

    complete_handshake: bool
    port: int = 0
    read: bytearray = field(default_factory=bytearray)
    writers: list[asyncio.StreamWriter] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"ws://127.0.0.1:{self.port}"

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.writers.append(writer)
        request = await reader.readuntil(b"\r\n\r\n")
        self.read += request
        if self.complete_handshake:
            key = next(
                line.split(b":", 1)[1].strip()
                for line in request.split(b"\r\n")
                if line.lower().startswith(b"sec-websocket-key:")
            )
            accept = base64.b64encode(hashlib.sha1(key + b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11").digest())
            writer.write(
                b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                b"Sec-WebSocket-Accept: " + accept + b"\r\n\r\n"
            )
            await writer.drain()
        while data := await reader.read(4096):
            self.read += data
        writer.close()

    def ping_frames(self) -> int:
        """Client-to-server ping frames (FIN + opcode 0x9, masked) after the handshake."""
        _, _, frames = bytes(self.read).partition(b"\r\n\r\n")
        count, i = 0, 0
        while i + 2 <= len(frames):
            opcode, length = frames[i] & 0x0F, frames[i + 1] & 0x7F
            count += opcode == 0x9
            i += 2 + 4 + length  # short frames only: pings carry 4 bytes
        return count


@asynccontextmanager
async def frozen_container(*, complete_handshake: bool) -> AsyncIterator[FrozenContainer]:
    container = FrozenContainer(complete_handshake)
    server = await asyncio.start_server(container.handle, "127.0.0.1", 0)
    container.port = server.sockets[0].getsockname()[1]
    try:
        yield container
    finally:
        server.close()
        for writer in container.writers:
            writer.close()
        await server.wait_closed()


def transport(info: StandInInfo, endpoint: str, **kwargs: Any) -> SageMakerTransport:
    """The agent's SageMaker transport pointed at a running stand-in."""
    return SageMakerTransport(
        endpoint,
        region=REGION,
        endpoint_url=info.url,
        ca_file=info.ca_path,
        credentials=kwargs.pop("credentials", TEST_CREDENTIALS),
        **kwargs,
    )


@asynccontextmanager
async def sdk_client(info: StandInInfo, ca_path: Path | None = None) -> AsyncIterator[Any]:
    """The bare SDK client (no transport wrapper), for tests of what the stand-in does on the wire."""
    config = await AsyncSageMakerRuntimeHTTP2Config.resolve(
        region=REGION,
        endpoint_uri=info.url,
        transport=CrtHttp2Client(ca_path or info.ca_path),
        aws_credentials_identity_resolver=BotocoreCredentialsResolver(TEST_CREDENTIALS),
    )
    client = AsyncSageMakerRuntimeHTTP2Client(config=config)
    try:
        yield client
    finally:
        await client.close()


def part(data: bytes, data_type: str | None = None, completion_state: str | None = None) -> Any:
    return RequestStreamEventPayloadPart(
        value=RequestPayloadPart(bytes_=data, data_type=data_type, completion_state=completion_state)
    )


def invoke_input(endpoint: str, **kwargs: Any) -> Any:
    return InvokeEndpointWithBidirectionalStreamInput(endpoint_name=endpoint, **kwargs)


async def receive_all(receiver: Any) -> list[Any]:
    """Every response event until the end of the stream."""
    events: list[Any] = []
    async with asyncio.timeout(WAIT_S):
        while (event := await receiver.receive()) is not None:
            events.append(event)
    return events


# --- a bare HTTP/2 client, for what the SDK never does --------------------------------------------

SIGNED_HEADERS = [
    (
        b"authorization",
        b"AWS4-HMAC-SHA256 Credential=AKID/20261129/us-east-1/sagemaker/aws4_request, "
        b"SignedHeaders=host;x-amz-date, Signature=0123",
    ),
    (b"x-amz-date", b"20261129T120000Z"),
    (b"content-type", b"application/vnd.amazon.eventstream"),
]


def signed(event: bytes) -> bytes:
    """`event` in a SigV4 event envelope with a dummy signature (the stand-in checks shape, not value)."""
    return EventMessage(
        headers={":date": datetime.datetime.now(datetime.UTC), ":chunk-signature": bytes(32)}, payload=event
    ).encode()


@dataclass
class RawResponse:
    status: int | None = None
    body: bytearray = field(default_factory=bytearray)
    ended: bool = False
    reset: bool = False
    reset_code: int | None = None


class RawH2:
    """HTTP/2 over TLS with the `h2` library: malformed input, resets, data after the response."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._reader = reader
        self._writer = writer
        # Outbound validation off: tests send malformed requests on purpose.
        config = h2.config.H2Configuration(client_side=True, header_encoding=None, validate_outbound_headers=False)
        self._h2 = h2.connection.H2Connection(config)
        self.responses: dict[int, RawResponse] = {}
        self.terminated: h2.events.ConnectionTerminated | None = None
        self._h2.initiate_connection()
        self._flush()

    def start(self, endpoint: str, *, method: bytes = b"POST") -> int:
        stream_id = self._h2.get_next_available_stream_id()
        headers = [
            (b":method", method),
            (b":scheme", b"https"),
            (b":authority", b"127.0.0.1"),
            (b":path", f"/endpoints/{endpoint}/invocations-bidirectional-stream".encode()),
            *SIGNED_HEADERS,
        ]
        self._h2.send_headers(stream_id, headers)
        self.responses[stream_id] = RawResponse()
        self._flush()
        return stream_id

    def send(self, stream_id: int, data: bytes, *, end_stream: bool = False) -> None:
        self._h2.send_data(stream_id, data, end_stream=end_stream)
        self._flush()

    def reset(self, stream_id: int) -> None:
        self._h2.reset_stream(stream_id)
        self._flush()

    async def until(self, stream_id: int, done: Callable[[RawResponse], bool]) -> RawResponse:
        response = self.responses[stream_id]
        async with asyncio.timeout(WAIT_S):
            while not done(response):
                data = await self._reader.read(65_536)
                assert data, "the stand-in closed the connection"
                for event in self._h2.receive_data(data):
                    self._on_event(event)
                self._flush()
        return response

    def _on_event(self, event: h2.events.Event) -> None:
        if isinstance(event, h2.events.ResponseReceived):
            self.responses[event.stream_id].status = int(dict(event.headers)[b":status"])
        elif isinstance(event, h2.events.DataReceived):
            self.responses[event.stream_id].body += event.data
            self._h2.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
        elif isinstance(event, h2.events.StreamEnded):
            self.responses[event.stream_id].ended = True
        elif isinstance(event, h2.events.StreamReset):
            self.responses[event.stream_id].reset = True
            self.responses[event.stream_id].reset_code = int(event.error_code)
        elif isinstance(event, h2.events.ConnectionTerminated):
            self.terminated = event

    async def until_closed(self) -> None:
        """Read until the server closes the connection."""
        async with asyncio.timeout(WAIT_S):
            while data := await self._reader.read(65_536):
                for event in self._h2.receive_data(data):
                    self._on_event(event)

    def _flush(self) -> None:
        self._writer.write(self._h2.data_to_send())


@asynccontextmanager
async def raw_h2(info: StandInInfo) -> AsyncIterator[RawH2]:
    context = ssl.create_default_context(cafile=str(info.ca_path))
    context.set_alpn_protocols(["h2"])
    reader, writer = await asyncio.open_connection("127.0.0.1", info.port, ssl=context)
    client = RawH2(reader, writer)
    try:
        yield client
    finally:
        writer.close()
        with contextlib.suppress(ConnectionError, ssl.SSLError):
            await writer.wait_closed()
