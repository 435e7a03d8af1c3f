"""The stand-in's HTTP/2 side with a bare client: what the SDK never does, but a broken client might."""

from __future__ import annotations

from websockets.asyncio.server import ServerConnection
from websockets.frames import CloseCode

from local.sagemaker_standin import run_standin
from local.standin_events import EventStreamDecoder, PayloadPart, encode_payload_part
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
