"""What the stand-in does on the wire, driven by the bare SDK client against scripted containers."""

from __future__ import annotations

import asyncio
import socket
import ssl
from typing import Any

import pytest
from aws_sdk_sagemaker_runtime_http2.models import (  # type: ignore[import-untyped]
    InputValidationError,
    ModelError,
    ModelStreamError,
    ResponseStreamEventPayloadPart,
)
from websockets.asyncio.server import ServerConnection, serve
from websockets.frames import CloseCode

from local.sagemaker_standin import run_standin
from local.standin.routing import StandInConfig
from tests.standin.standin_support import (
    WAIT_S,
    ScriptContainer,
    frozen_container,
    invoke_input,
    part,
    receive_all,
    script_container,
    sdk_client,
)


def values(events: list[Any]) -> list[tuple[bytes | None, str, str]]:
    assert all(isinstance(e, ResponseStreamEventPayloadPart) for e in events), events
    return [(e.value.bytes_, e.value.data_type, e.value.completion_state) for e in events]


async def echo_twice(container: ScriptContainer, ws: ServerConnection) -> None:
    """Answer each message with a text frame and a binary frame naming it, until closed."""
    while True:
        kind, data = await container.recv(ws)
        size = len(data)
        await ws.send(f'{{"got":"{kind}","size":{size}}}')
        await ws.send(bytes([size]) * 3)


async def until_closed(container: ScriptContainer, ws: ServerConnection) -> None:
    while True:
        await container.recv(ws)


async def test_payload_parts_become_frames_in_both_directions_at_once() -> None:
    async with (
        script_container(echo_twice) as container,
        run_standin({"speech": container.url}) as info,
        sdk_client(info) as client,
    ):
        stream = await client.invoke_endpoint_with_bidirectional_stream(invoke_input("speech"))
        await stream.input_stream.send(part(b'{"n":1}', "UTF8"))
        output, receiver = await stream.await_output()
        assert output.invoked_production_variant == "AllTraffic"
        # Full duplex: each reply arrives while the request stream is still open.
        first = [await receiver.receive(), await receiver.receive()]
        await stream.input_stream.send(part(b"\x00\x01", "BINARY"))
        second = [await receiver.receive(), await receiver.receive()]
        await stream.input_stream.send(part(b"raw"))  # no DataType: SageMaker's default is BINARY
        third = [await receiver.receive(), await receiver.receive()]
        await stream.input_stream.close()
        rest = await receive_all(receiver)

    assert container.received == [("text", '{"n":1}'), ("bytes", b"\x00\x01"), ("bytes", b"raw")]
    assert values(first + second + third) == [
        (b'{"got":"text","size":7}', "UTF8", "COMPLETE"),
        (b"\x07\x07\x07", "BINARY", "COMPLETE"),
        (b'{"got":"bytes","size":2}', "UTF8", "COMPLETE"),
        (b"\x02\x02\x02", "BINARY", "COMPLETE"),
        (b'{"got":"bytes","size":3}', "UTF8", "COMPLETE"),
        (b"\x03\x03\x03", "BINARY", "COMPLETE"),
    ]
    assert rest == []
    assert container.close_codes == [CloseCode.NORMAL_CLOSURE]  # the client ending its input closes normally
    assert container.paths == ["/invocations-bidirectional-stream"]


async def test_partial_parts_are_passed_as_fragments_both_ways() -> None:
    async def fragments_back(container: ScriptContainer, ws: ServerConnection) -> None:
        await container.recv(ws)
        await ws.send(["ab", "cé"])  # one text message in fragments
        await ws.send([b"\x01", b"\x02\x03"])
        await until_closed(container, ws)

    async with (
        script_container(fragments_back) as container,
        run_standin({"speech": container.url}) as info,
        sdk_client(info) as client,
    ):
        stream = await client.invoke_endpoint_with_bidirectional_stream(invoke_input("speech"))
        await stream.input_stream.send(part(b"he", "UTF8", "PARTIAL"))
        await stream.input_stream.send(part(b"llo", "UTF8", "PARTIAL"))
        await stream.input_stream.send(part(b" world", "UTF8", "COMPLETE"))
        _, receiver = await stream.await_output()
        events = [await receiver.receive() for _ in range(6)]
        await stream.input_stream.close()
        assert await receive_all(receiver) == []

    # SageMaker does not reassemble: the parts are the fragments of one message (websockets
    # ends a fragmented message with an empty final frame, and so does the container's reply).
    assert container.received == [("text", "hello world")]
    assert container.fragments == [[("text", "he"), ("text", "llo"), ("text", " world"), ("text", "")]]
    assert values(events) == [
        (b"ab", "UTF8", "PARTIAL"),
        ("cé".encode(), "UTF8", "PARTIAL"),
        (None, "UTF8", "COMPLETE"),
        (b"\x01", "BINARY", "PARTIAL"),
        (b"\x02\x03", "BINARY", "PARTIAL"),
        (None, "BINARY", "COMPLETE"),
    ]


async def test_container_closing_with_an_error_becomes_a_model_stream_error() -> None:
    async def crash(container: ScriptContainer, ws: ServerConnection) -> None:
        await container.recv(ws)
        await ws.send(b"\x01\x02")
        await ws.close(CloseCode.INTERNAL_ERROR, "engine crashed")

    async with (
        script_container(crash) as container,
        run_standin({"speech": container.url}) as info,
        sdk_client(info) as client,
    ):
        stream = await client.invoke_endpoint_with_bidirectional_stream(invoke_input("speech"))
        await stream.input_stream.send(part(b"{}", "UTF8"))
        _, receiver = await stream.await_output()
        assert values([await receiver.receive()]) == [(b"\x01\x02", "BINARY", "COMPLETE")]
        with pytest.raises(ModelStreamError) as raised:
            await receiver.receive()
        await stream.input_stream.close()

    assert raised.value.error_code == "StreamBroken"
    assert raised.value.message == "The model container closed the stream: close code 1011 (engine crashed)"


async def test_container_ending_normally_ends_the_response_while_input_is_open() -> None:
    async def one_reply(container: ScriptContainer, ws: ServerConnection) -> None:
        await container.recv(ws)
        await ws.send("bye")
        await ws.close()

    async with (
        script_container(one_reply) as container,
        run_standin({"speech": container.url}) as info,
        sdk_client(info) as client,
    ):
        stream = await client.invoke_endpoint_with_bidirectional_stream(invoke_input("speech"))
        await stream.input_stream.send(part(b"hi", "UTF8"))
        _, receiver = await stream.await_output()
        assert values(await receive_all(receiver)) == [(b"bye", "UTF8", "COMPLETE")]

    assert container.close_codes == [CloseCode.NORMAL_CLOSURE]


@pytest.mark.parametrize(
    ("endpoint", "headers", "message"),
    [
        ("nope", {}, "Endpoint nope of account 000000000000 not found."),
        ("speech", {"target_variant": "Blue"}, "Variant Blue not found for Endpoint speech of account 000000000000."),
    ],
)
async def test_unknown_endpoint_or_variant_is_an_input_validation_error(
    endpoint: str, headers: dict[str, str], message: str
) -> None:
    async with (
        script_container(until_closed) as container,
        run_standin({"speech": container.url}) as info,
        sdk_client(info) as client,
    ):
        stream = await client.invoke_endpoint_with_bidirectional_stream(invoke_input(endpoint, **headers))
        with pytest.raises(InputValidationError) as raised:
            await asyncio.wait_for(stream.await_output(), WAIT_S)

    assert (raised.value.message, raised.value.error_code) == (message, "ValidationError")
    assert container.connections == 0


async def test_invocation_path_and_query_string_reach_the_container() -> None:
    async with (
        script_container(until_closed) as container,
        run_standin({"speech": container.url}) as info,
        sdk_client(info) as client,
    ):
        request = invoke_input("speech", model_invocation_path="v2/stream", model_query_string="voice=af_heart")
        stream = await client.invoke_endpoint_with_bidirectional_stream(request)
        _, receiver = await stream.await_output()
        await stream.input_stream.close()
        assert await receive_all(receiver) == []

    assert container.paths == ["/v2/stream?voice=af_heart"]


async def test_unreachable_container_is_a_model_error() -> None:
    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        url = f"ws://127.0.0.1:{unused.getsockname()[1]}"  # nothing listens there
    async with run_standin({"speech": url}) as info, sdk_client(info) as client:
        stream = await client.invoke_endpoint_with_bidirectional_stream(invoke_input("speech"))
        with pytest.raises(ModelError) as raised:
            await asyncio.wait_for(stream.await_output(), WAIT_S)

    assert raised.value.error_code == "ModelError"
    assert raised.value.original_status_code is None
    assert raised.value.message.startswith(
        f"Could not connect to the model container at {url}/invocations-bidirectional-stream"
    )


async def test_container_refusing_the_websocket_is_a_model_error_with_its_status() -> None:
    async def refuse(connection: ServerConnection, request: Any) -> Any:
        return connection.respond(404, "no such route\n")

    async def never_reached(ws: ServerConnection) -> None:
        pytest.fail("the container accepted a WebSocket it should refuse")

    async with serve(never_reached, "127.0.0.1", 0, process_request=refuse) as server:
        url = f"ws://127.0.0.1:{server.sockets[0].getsockname()[1]}"
        async with run_standin({"speech": url}) as info, sdk_client(info) as client:
            stream = await client.invoke_endpoint_with_bidirectional_stream(invoke_input("speech"))
            with pytest.raises(ModelError) as raised:
                await asyncio.wait_for(stream.await_output(), WAIT_S)

    assert (raised.value.original_status_code, raised.value.original_message) == (404, "no such route\n")


async def test_container_that_never_accepts_is_a_model_error() -> None:
    async with frozen_container(complete_handshake=False) as frozen:
        config = StandInConfig(endpoints={"speech": frozen.url}, connect_timeout_s=0.2)
        async with run_standin(config) as info, sdk_client(info) as client:
            stream = await client.invoke_endpoint_with_bidirectional_stream(invoke_input("speech"))
            with pytest.raises(ModelError) as raised:
                await asyncio.wait_for(stream.await_output(), WAIT_S)

    assert raised.value.message == (
        f"The model container did not accept the WebSocket at {frozen.url}/invocations-bidirectional-stream "
        "within 0.2 s."
    )


async def test_container_that_stops_answering_pings_is_closed() -> None:
    async with frozen_container(complete_handshake=True) as frozen:
        config = StandInConfig(
            endpoints={"speech": frozen.url}, ping_interval_s=0.05, max_missed_pongs=2, close_timeout_s=0.2
        )
        async with run_standin(config) as info, sdk_client(info) as client:
            stream = await client.invoke_endpoint_with_bidirectional_stream(invoke_input("speech"))
            _, receiver = await asyncio.wait_for(stream.await_output(), WAIT_S)
            with pytest.raises(ModelStreamError) as raised:
                await asyncio.wait_for(receiver.receive(), WAIT_S)
            await stream.input_stream.close()

    assert raised.value.error_code == "StreamBroken"
    assert raised.value.message == "The model container did not answer 2 consecutive WebSocket pings."
    assert frozen.ping_frames() == 2  # a ping per interval, the connection closed at the next tick


async def test_container_answering_pings_stays_open() -> None:
    async with script_container(echo_twice) as container:
        config = StandInConfig(endpoints={"speech": container.url}, ping_interval_s=0.05, max_missed_pongs=3)
        async with run_standin(config) as info, sdk_client(info) as client:
            stream = await client.invoke_endpoint_with_bidirectional_stream(invoke_input("speech"))
            _, receiver = await stream.await_output()
            await asyncio.sleep(0.5)  # ten ping intervals, every ping answered
            await stream.input_stream.send(part(b"x", "UTF8"))
            replies = [await receiver.receive(), await receiver.receive()]
            await stream.input_stream.close()
            assert await receive_all(receiver) == []

    assert values(replies) == [
        (b'{"got":"text","size":1}', "UTF8", "COMPLETE"),
        (b"\x01\x01\x01", "BINARY", "COMPLETE"),
    ]
    assert container.close_codes == [CloseCode.NORMAL_CLOSURE]


async def test_client_without_http2_is_refused() -> None:
    async with script_container(until_closed) as container, run_standin({"speech": container.url}) as info:
        context = ssl.create_default_context(cafile=str(info.ca_path))
        context.set_alpn_protocols(["http/1.1"])
        reader, writer = await asyncio.open_connection("127.0.0.1", info.port, ssl=context)
        writer.write(b"POST /endpoints/speech/invocations-bidirectional-stream HTTP/1.1\r\nhost: x\r\n\r\n")
        response = await asyncio.wait_for(reader.read(), WAIT_S)
        writer.close()

    assert response.startswith(b"HTTP/1.1 505 HTTP Version Not Supported\r\n")
    assert container.connections == 0
