"""The direct WebSocket transport against a tiny in-test server, and the transport factory."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest
from websockets.asyncio.server import ServerConnection, serve
from websockets.http11 import Request, Response

from agent_app.config import load_config
from agent_app.speech.factory import build_transport
from agent_app.speech.sagemaker import SageMakerTransport
from agent_app.speech.transport import SpeechErrorCode, SpeechTransportError
from agent_app.speech.websocket import WebSocketTransport
from speech_protocol import WS_PATH, Close, SynthesisStart, Synthesize, encode_server_event

Handler = Callable[[ServerConnection], Awaitable[None]]


@pytest.fixture
async def ws_server() -> AsyncIterator[Callable[[Handler], Awaitable[str]]]:
    servers = []

    async def start(handler: Handler) -> str:
        server = await serve(handler, "127.0.0.1", 0)
        servers.append(server)
        return f"ws://127.0.0.1:{server.sockets[0].getsockname()[1]}{WS_PATH}"

    yield start
    for server in servers:
        server.close()
        await server.wait_closed()


async def test_messages_go_out_as_text_frames_and_frames_come_back_by_kind(ws_server) -> None:
    received: list[str | bytes] = []

    async def handler(ws: ServerConnection) -> None:
        received.append(await ws.recv())
        await ws.send(encode_server_event(SynthesisStart("r1")))
        await ws.send(b"\x01\x00\x02\x00")
        await ws.send(b"{}")  # binary, so audio, even though it would parse as JSON
        received.append(await ws.recv())
        await ws.close()

    transport = WebSocketTransport(await ws_server(handler))
    async with transport.connect() as connection:
        await connection.send(Synthesize(text="Hi there.", request_id="r1"))
        assert await connection.receive() == SynthesisStart("r1")
        assert await connection.receive() == b"\x01\x00\x02\x00"
        assert await connection.receive() == b"{}"
        await connection.send(Close())
        assert await connection.receive() is None
    assert received == ['{"type": "synthesize", "text": "Hi there.", "request_id": "r1"}', '{"type": "close"}']


async def test_a_refused_connection_is_unavailable(free_port: int) -> None:
    transport = WebSocketTransport(f"ws://127.0.0.1:{free_port}{WS_PATH}")
    with pytest.raises(SpeechTransportError) as caught:
        async with transport.connect():
            pytest.fail("connected to a closed port")
    assert caught.value.code is SpeechErrorCode.UNAVAILABLE
    assert f"127.0.0.1:{free_port}" in caught.value.message


async def test_a_refused_handshake_is_unavailable() -> None:
    def refuse(connection: ServerConnection, request: Request) -> Response:
        return connection.respond(503, "model loading\n")

    async with serve(lambda ws: asyncio.sleep(0), "127.0.0.1", 0, process_request=refuse) as server:
        url = f"ws://127.0.0.1:{server.sockets[0].getsockname()[1]}{WS_PATH}"
        with pytest.raises(SpeechTransportError) as caught:
            async with WebSocketTransport(url).connect():
                pytest.fail("handshake accepted")
    assert caught.value.code is SpeechErrorCode.UNAVAILABLE
    assert "503" in caught.value.message


async def test_a_server_that_never_answers_the_handshake_times_out_as_unavailable() -> None:
    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read()  # never answers; returns once the client gives up and closes
        writer.close()
        await writer.wait_closed()

    server = await asyncio.start_server(silent, "127.0.0.1", 0)
    async with server:
        url = f"ws://127.0.0.1:{server.sockets[0].getsockname()[1]}{WS_PATH}"
        with pytest.raises(SpeechTransportError) as caught:
            async with WebSocketTransport(url, open_timeout_s=0.2).connect():
                pytest.fail("handshake accepted")
    assert caught.value.code is SpeechErrorCode.UNAVAILABLE


async def test_an_abnormal_close_is_a_stream_error(ws_server) -> None:
    async def handler(ws: ServerConnection) -> None:
        await ws.recv()
        await ws.close(code=1011, reason="engine crashed")

    async with WebSocketTransport(await ws_server(handler)).connect() as connection:
        await connection.send(Synthesize(text="Hi."))
        with pytest.raises(SpeechTransportError) as caught:
            await connection.receive()
    assert caught.value.code is SpeechErrorCode.STREAM_ERROR
    assert "1011" in caught.value.message
    assert "engine crashed" in caught.value.message


async def test_a_dropped_connection_is_a_stream_error(ws_server) -> None:
    async def handler(ws: ServerConnection) -> None:
        await ws.recv()
        ws.transport.abort()

    async with WebSocketTransport(await ws_server(handler)).connect() as connection:
        await connection.send(Synthesize(text="Hi."))
        with pytest.raises(SpeechTransportError) as caught:
            await connection.receive()
    assert caught.value.code is SpeechErrorCode.STREAM_ERROR


async def test_sending_on_a_closed_session_is_a_stream_error(ws_server) -> None:
    async def handler(ws: ServerConnection) -> None:
        await ws.close()

    async with WebSocketTransport(await ws_server(handler)).connect() as connection:
        assert await connection.receive() is None
        with pytest.raises(SpeechTransportError) as caught:
            await connection.send(Synthesize(text="Hi."))
    assert caught.value.code is SpeechErrorCode.STREAM_ERROR


@pytest.mark.parametrize(
    "frame",
    ["not json", "[1, 2]", '{"type": "synthesis_start"}', '{"type": "surprise", "request_id": "r"}'],
    ids=["not json", "not an object", "missing fields", "unknown type"],
)
async def test_a_malformed_control_frame_is_a_protocol_error(ws_server, frame: str) -> None:
    async def handler(ws: ServerConnection) -> None:
        await ws.send(frame)
        await ws.wait_closed()

    async with WebSocketTransport(await ws_server(handler)).connect() as connection:
        with pytest.raises(SpeechTransportError) as caught:
            await connection.receive()
    assert caught.value.code is SpeechErrorCode.PROTOCOL_ERROR
    assert caught.value.message.startswith("malformed control frame from the speech container")


async def test_leaving_the_session_closes_the_socket(ws_server) -> None:
    closed = asyncio.Event()

    async def handler(ws: ServerConnection) -> None:
        await ws.wait_closed()
        closed.set()

    async with WebSocketTransport(await ws_server(handler)).connect():
        pass
    await asyncio.wait_for(closed.wait(), 2)


async def test_audio_frames_beyond_the_default_1_mib_limit_are_accepted(ws_server) -> None:
    big = b"\x01\x00" * (1_500_000 // 2)

    async def handler(ws: ServerConnection) -> None:
        await ws.send(big)
        await ws.wait_closed()

    async with WebSocketTransport(await ws_server(handler)).connect() as connection:
        assert await connection.receive() == big


def test_factory_builds_the_websocket_transport() -> None:
    url = "ws://127.0.0.1:9/invocations-bidirectional-stream"
    transport = build_transport(load_config({"SPEECH_TRANSPORT": "websocket", "SPEECH_WS_URL": url}))
    assert isinstance(transport, WebSocketTransport)
    assert transport.url == url


def test_factory_builds_the_sagemaker_transport_from_the_config(tmp_path: Path) -> None:
    ca = tmp_path / "ca.pem"
    ca.write_text("-----BEGIN CERTIFICATE-----\n")
    config = load_config(
        {
            "SPEECH_ENDPOINT_NAME": "voicestack-kokoro",
            "AWS_REGION": "eu-west-1",
            "AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME_HTTP2": "https://127.0.0.1:8443",
            "SAGEMAKER_CA_FILE": str(ca),
        }
    )
    transport = build_transport(config)
    assert isinstance(transport, SageMakerTransport)
    assert transport.endpoint_name == "voicestack-kokoro"
    assert transport.region == "eu-west-1"
    assert transport.endpoint_url == "https://127.0.0.1:8443"
    assert transport.ca_file == ca
