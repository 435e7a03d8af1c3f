"""The stand-in's HTTP/2 side with a bare client: what the SDK never does, but a broken client might."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
from h2.errors import ErrorCodes
from websockets.asyncio.server import ServerConnection
from websockets.exceptions import ConnectionClosedError
from websockets.frames import CloseCode

from local.sagemaker_standin import run_standin
from local.standin.bridge import FRAGMENT_QUEUE, FragmentedMessage
from local.standin.events import MAX_FRAME_BYTES, EventStreamDecoder, PayloadPart, encode_payload_part
from local.standin.routing import StandInConfig
from tests.standin.standin_support import RawResponse, ScriptContainer, raw_h2, script_container, signed

HELLO = signed(encode_payload_part(PayloadPart(b"hello", "UTF8")))
END_OF_INPUT = signed(b"")


def ended(response: RawResponse) -> bool:
    return response.ended or response.reset


async def until_closed(container: ScriptContainer, ws: ServerConnection) -> None:
    while True:
        await container.recv(ws)


async def reply_then_close(container: ScriptContainer, ws: ServerConnection) -> None:
    await container.recv(ws)
    await ws.send("done")
    await ws.close()


async def test_unsigned_event_gets_an_error_event_and_the_container_a_policy_close() -> None:
    async with (
        script_container(until_closed) as container,
        run_standin({"speech": container.url}) as info,
        raw_h2(info) as client,
    ):
        stream = client.start("speech")
        client.send(stream, encode_payload_part(PayloadPart(b"hello", "UTF8")))  # not in a signed envelope
        response = await client.until(stream, ended)

    [message] = EventStreamDecoder().feed(bytes(response.body))
    assert (response.status, response.ended, response.reset) == (200, True, False)
    assert message.headers == {
        ":message-type": "error",
        ":error-code": "SerializationException",
        ":error-message": "event is not signed: the ':date' timestamp header is missing",
    }
    assert container.received == []
    assert container.close_codes == [CloseCode.POLICY_VIOLATION]


async def test_input_sent_after_the_response_ended_is_drained_and_the_connection_lives_on() -> None:
    """HTTP/2 half-close: the container ended the session, the client still finishes its request."""
    async with (
        script_container(reply_then_close) as container,
        run_standin({"speech": container.url}) as info,
        raw_h2(info) as client,
    ):
        first = client.start("speech")
        client.send(first, HELLO)
        response = await client.until(first, ended)
        client.send(first, HELLO)  # late, but legal: the request side is still open
        client.send(first, END_OF_INPUT, end_stream=True)
        # Same connection, next session: the late data broke nothing.
        second = client.start("speech")
        client.send(second, HELLO)
        again = await client.until(second, ended)

    expected_body = encode_payload_part(PayloadPart(b"done", "UTF8"))
    assert (response.status, bytes(response.body), response.ended, response.reset) == (200, expected_body, True, False)
    assert (again.status, bytes(again.body), again.ended, again.reset) == (200, expected_body, True, False)
    assert container.received == [("text", "hello"), ("text", "hello")]  # the late message went nowhere
    assert container.close_codes == [CloseCode.NORMAL_CLOSURE, CloseCode.NORMAL_CLOSURE]


async def test_client_reset_closes_the_container_socket_as_going_away() -> None:
    async with (
        script_container(until_closed) as container,
        run_standin({"speech": container.url}) as info,
        raw_h2(info) as client,
    ):
        stream = client.start("speech")
        client.send(stream, HELLO)
        await client.until(stream, lambda r: r.status is not None)
        client.reset(stream)
        probe = client.start("nope")  # a round trip, so the reset has been handled
        await client.until(probe, ended)

    assert container.received == [("text", "hello")]
    assert container.close_codes == [CloseCode.GOING_AWAY]


async def test_end_of_request_without_the_end_envelope_closes_normally() -> None:
    async with (
        script_container(until_closed) as container,
        run_standin({"speech": container.url}) as info,
        raw_h2(info) as client,
    ):
        stream = client.start("speech")
        client.send(stream, HELLO, end_stream=True)
        response = await client.until(stream, ended)

    assert (response.status, bytes(response.body), response.ended, response.reset) == (200, b"", True, False)
    assert container.received == [("text", "hello")]
    assert container.close_codes == [CloseCode.NORMAL_CLOSURE]


async def test_a_frame_declaring_more_than_16_mib_is_refused_before_it_is_buffered() -> None:
    async with (
        script_container(until_closed) as container,
        run_standin({"speech": container.url}) as info,
        raw_h2(info) as client,
    ):
        stream = client.start("speech")
        client.send(stream, (64 * 1024 * 1024).to_bytes(4, "big") + bytes(8))  # declares 64 MiB, sends 12 bytes
        response = await client.until(stream, ended)

    [message] = EventStreamDecoder().feed(bytes(response.body))
    assert (response.status, response.ended) == (200, True)
    assert message.headers == {
        ":message-type": "error",
        ":error-code": "SerializationException",
        ":error-message": f"event frame declares a total length of 67108864 bytes; the limit is {MAX_FRAME_BYTES}",
    }
    assert container.received == []
    assert container.close_codes == [CloseCode.POLICY_VIOLATION]


async def test_a_malformed_method_is_a_stream_error_and_the_connection_lives_on() -> None:
    async with (
        script_container(reply_then_close) as container,
        run_standin({"speech": container.url}) as info,
        raw_h2(info) as client,
    ):
        bad = client.start("speech", method=b"P\xffST /x")
        refused = await client.until(bad, ended)
        good = client.start("speech")
        client.send(good, HELLO)
        response = await client.until(good, ended)

    assert (refused.status, refused.reset, refused.reset_code) == (None, True, ErrorCodes.PROTOCOL_ERROR)
    assert client.terminated is None
    assert (response.status, bytes(response.body)) == (200, encode_payload_part(PayloadPart(b"done", "UTF8")))
    assert container.received == [("text", "hello")]


async def test_an_idle_connection_is_closed_with_goaway() -> None:
    config = StandInConfig(endpoints={"speech": "ws://127.0.0.1:9"}, idle_timeout_s=0.2)
    async with run_standin(config) as info, raw_h2(info) as client:
        await client.until_closed()
    assert client.terminated is not None
    assert client.terminated.error_code == ErrorCodes.NO_ERROR


async def test_a_connection_with_a_call_open_is_not_idle() -> None:
    async with (
        script_container(reply_then_close) as container,
        run_standin(StandInConfig(endpoints={"speech": container.url}, idle_timeout_s=0.2)) as info,
        raw_h2(info) as client,
    ):
        stream = client.start("speech")
        await asyncio.sleep(0.6)  # the call is open, silent, for longer than the idle timeout
        client.send(stream, HELLO)
        response = await client.until(stream, ended)
    assert (response.status, bytes(response.body)) == (200, encode_payload_part(PayloadPart(b"done", "UTF8")))
    assert client.terminated is None


class _StalledSocket:
    """A container connection that never reads a fragmented message until told to fail."""

    def __init__(self) -> None:
        self.fail = asyncio.Event()

    async def send(self, message: AsyncIterator[bytes], *, text: bool) -> None:
        await self.fail.wait()
        raise ConnectionClosedError(None, None)


async def test_fragments_for_a_container_that_does_not_read_are_bounded() -> None:
    container = _StalledSocket()
    message = FragmentedMessage(container, "BINARY")  # type: ignore[arg-type]
    for _ in range(FRAGMENT_QUEUE):
        await asyncio.wait_for(message.add(b"x"), timeout=1)
    blocked = asyncio.create_task(message.add(b"one too many"))
    done, _ = await asyncio.wait({blocked}, timeout=0.2)
    assert done == set()  # the bridge waits: it reads no more of the client, flow control holds it back
    container.fail.set()
    with pytest.raises(ConnectionClosedError):
        await blocked
