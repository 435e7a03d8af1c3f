"""The event-stream helpers, checked against the SDK's own encoder and decoder (no sockets)."""

from __future__ import annotations

import datetime
import json
from typing import Any

import pytest
from aws_sdk_sagemaker_runtime_http2.config import _PROTOCOL_SETTINGS  # type: ignore[import-untyped]
from aws_sdk_sagemaker_runtime_http2.models import (  # type: ignore[import-untyped]
    InternalStreamFailure,
    ModelStreamError,
    RequestPayloadPart,
    RequestStreamEventPayloadPart,
    ResponsePayloadPart,
    ResponseStreamEventPayloadPart,
    _ResponseStreamEventDeserializer,
)
from aws_sdk_signers import AsyncEventSigner
from smithy_aws_core.aio.protocols import RestJsonClientProtocol
from smithy_aws_core.identity.static import StaticCredentialsResolver
from smithy_aws_event_stream.aio import AWSEventPublisher, AWSEventReceiver, SigningConfig
from smithy_aws_event_stream.events import EventHeaderEncoder, EventMessage
from smithy_aws_event_stream.exceptions import UnmodeledEventError
from smithy_core.aio.types import AsyncBytesReader

from agent_app.speech.sagemaker import BotocoreCredentialsResolver
from local.standin.bridge import split_part
from local.standin.events import (
    MAX_FRAME_BYTES,
    MAX_PART_BYTES,
    EventStreamDecoder,
    FrameError,
    PayloadPart,
    encode_internal_stream_failure,
    encode_model_stream_error,
    encode_payload_part,
    encode_unmodeled_error,
    model_error,
    parse_request_part,
    unwrap_signed,
    validation_error,
)
from tests.standin.standin_support import TEST_CREDENTIALS

CODEC = RestJsonClientProtocol(_PROTOCOL_SETTINGS).payload_codec


class _Sink:
    """What the SDK's event publisher writes into, instead of an HTTP/2 stream."""

    def __init__(self) -> None:
        self.chunks: list[bytes] = []

    async def write(self, data: bytes) -> None:
        self.chunks.append(data)


async def sdk_request_bytes(events: list[Any]) -> bytes:
    """The request body the real SDK produces for `events`, signed, then ended."""
    sink = _Sink()
    identity = await BotocoreCredentialsResolver(TEST_CREDENTIALS).get_identity(properties={})
    publisher: AWSEventPublisher[Any] = AWSEventPublisher(
        payload_codec=CODEC,
        async_writer=sink,
        signing_config=SigningConfig(
            signer=AsyncEventSigner(initial_signature=b"0" * 64, event_encoder_cls=EventHeaderEncoder),
            signing_properties={"region": "us-east-1", "service": "sagemaker"},
            identity_resolver=StaticCredentialsResolver(identity),
            identity_properties={},
        ),
    )
    for event in events:
        await publisher.send(event)
    await publisher.close()
    return b"".join(sink.chunks)


async def sdk_decode(stream: bytes) -> list[Any]:
    """Response events as the SDK's receiver reads them (it raises modeled exceptions)."""
    receiver: AWSEventReceiver[Any] = AWSEventReceiver(
        payload_codec=CODEC,
        source=AsyncBytesReader(stream),
        deserializer=_ResponseStreamEventDeserializer().deserialize,
    )
    events = []
    while (event := await receiver.receive()) is not None:
        events.append(event)
    return events


def read_request(body: bytes, chunk: int | None = None) -> tuple[list[PayloadPart], bool]:
    """Parts of a request body fed `chunk` bytes at a time, and whether the end envelope came."""
    decoder = EventStreamDecoder()
    parts: list[PayloadPart] = []
    ended = False
    step = chunk or len(body)
    for i in range(0, len(body), step):
        for envelope in decoder.feed(body[i : i + step]):
            event = unwrap_signed(envelope)
            if event is None:
                ended = True
            else:
                parts.append(parse_request_part(event))
    assert decoder.pending == 0
    return parts, ended


SDK_EVENTS = [
    RequestStreamEventPayloadPart(value=RequestPayloadPart(bytes_=b'{"type":"close"}', data_type="UTF8")),
    RequestStreamEventPayloadPart(value=RequestPayloadPart(bytes_=b"\x00\xff\x10")),
    RequestStreamEventPayloadPart(
        value=RequestPayloadPart(bytes_="héllo".encode(), data_type="UTF8", completion_state="PARTIAL")
    ),
]
EXPECTED_PARTS = [
    PayloadPart(b'{"type":"close"}', "UTF8", complete=True),
    PayloadPart(b"\x00\xff\x10", "BINARY", complete=True),  # no DataType header: SageMaker's default
    PayloadPart("héllo".encode(), "UTF8", complete=False),
]


async def test_sdk_signed_request_events_are_read_exactly() -> None:
    body = await sdk_request_bytes(SDK_EVENTS)
    assert read_request(body) == (EXPECTED_PARTS, True)


@pytest.mark.parametrize("chunk", [1, 7, 64])
async def test_decoder_is_independent_of_how_the_stream_is_cut(chunk: int) -> None:
    body = await sdk_request_bytes(SDK_EVENTS)
    assert read_request(body, chunk) == (EXPECTED_PARTS, True)


def test_decoder_keeps_an_incomplete_frame_pending() -> None:
    frame = encode_payload_part(PayloadPart(b"abc"))
    decoder = EventStreamDecoder()
    assert decoder.feed(frame[:-1]) == []
    assert decoder.pending == len(frame) - 1
    [message] = decoder.feed(frame[-1:])
    assert (message.payload, decoder.pending) == (b"abc", 0)


def test_decoder_rejects_a_corrupt_frame() -> None:
    frame = bytearray(encode_payload_part(PayloadPart(b"abc")))
    frame[-5] ^= 0xFF  # a payload byte: the message CRC no longer matches
    with pytest.raises(FrameError, match="corrupt event frame"):
        EventStreamDecoder().feed(bytes(frame))


def test_decoder_rejects_a_length_shorter_than_the_prelude() -> None:
    with pytest.raises(FrameError, match="total length of 8 bytes"):
        EventStreamDecoder().feed((8).to_bytes(4, "big") + bytes(8))


def test_decoder_refuses_an_oversized_declared_length_from_its_first_four_bytes() -> None:
    decoder = EventStreamDecoder()
    with pytest.raises(FrameError) as info:
        decoder.feed(b"\xff\xff\xff\xff")  # 4 GiB declared; nothing else has arrived
    assert str(info.value) == (
        f"event frame declares a total length of 4294967295 bytes; the limit is {MAX_FRAME_BYTES}"
    )
    assert MAX_FRAME_BYTES == 12 + 128 * 1024 + 16 * 1024 * 1024 + 4


def test_decoder_buffers_a_frame_of_exactly_the_limit() -> None:
    decoder = EventStreamDecoder(max_frame_bytes=1000)
    assert decoder.feed((1000).to_bytes(4, "big") + bytes(20)) == []
    assert decoder.pending == 24
    with pytest.raises(FrameError, match="declares a total length of 1001 bytes; the limit is 1000"):
        EventStreamDecoder(max_frame_bytes=1000).feed((1001).to_bytes(4, "big"))


def test_unsigned_event_is_refused() -> None:
    message = EventMessage(headers={":message-type": "event", ":event-type": "PayloadPart"}, payload=b"x")
    with pytest.raises(FrameError, match="':date' timestamp header is missing"):
        unwrap_signed(message)


def test_envelope_with_a_short_signature_is_refused() -> None:
    envelope = EventMessage(headers={":date": datetime.datetime.now(datetime.UTC), ":chunk-signature": b"\x01" * 31})
    with pytest.raises(FrameError, match="':chunk-signature' must be 32 bytes"):
        unwrap_signed(envelope)


@pytest.mark.parametrize(
    ("headers", "error"),
    [
        ({":message-type": "error", ":event-type": "PayloadPart"}, "expected ':message-type' 'event', got 'error'"),
        ({":message-type": "event", ":event-type": "Chunk"}, "unknown request event type 'Chunk'"),
        ({":message-type": "event", ":event-type": "PayloadPart", "DataType": "TEXT"}, "got 'TEXT'"),
        ({":message-type": "event", ":event-type": "PayloadPart", "CompletionState": "DONE"}, "got 'DONE'"),
    ],
)
def test_request_part_with_bad_headers_is_refused(headers: dict[str, str], error: str) -> None:
    with pytest.raises(FrameError, match=error):
        parse_request_part(EventMessage(headers=headers, payload=b"x"))


async def test_response_parts_read_by_the_sdk() -> None:
    stream = b"".join(
        encode_payload_part(p)
        for p in [PayloadPart(b'{"a":1}', "UTF8"), PayloadPart(b"\x01\x02", "BINARY", complete=False), PayloadPart(b"")]
    )
    events = await sdk_decode(stream)
    assert [type(e) for e in events] == [ResponseStreamEventPayloadPart] * 3
    values: list[ResponsePayloadPart] = [e.value for e in events]
    assert [(v.bytes_, v.data_type, v.completion_state) for v in values] == [
        (b'{"a":1}', "UTF8", "COMPLETE"),
        (b"\x01\x02", "BINARY", "PARTIAL"),
        (None, "BINARY", "COMPLETE"),  # the SDK reads an empty payload as None, not b""
    ]


async def test_model_stream_error_read_by_the_sdk() -> None:
    stream = encode_payload_part(PayloadPart(b"\x01")) + encode_model_stream_error("StreamBroken", "closed with 1011")
    with pytest.raises(ModelStreamError) as raised:
        await sdk_decode(stream)
    assert (raised.value.error_code, raised.value.message) == ("StreamBroken", "closed with 1011")


async def test_internal_stream_failure_read_by_the_sdk() -> None:
    with pytest.raises(InternalStreamFailure) as raised:
        await sdk_decode(encode_internal_stream_failure("platform fault"))
    assert raised.value.message == "platform fault"


async def test_unmodeled_error_read_by_the_sdk() -> None:
    with pytest.raises(UnmodeledEventError) as raised:
        await sdk_decode(encode_unmodeled_error("SerializationException", "bad frame"))
    assert (raised.value.code, raised.value.message) == ("SerializationException", "bad frame")


def test_payload_part_size_limit() -> None:
    with pytest.raises(ValueError, match=f"at most {MAX_PART_BYTES} bytes"):
        encode_payload_part(PayloadPart(bytes(MAX_PART_BYTES + 1)))


def test_split_part_keeps_only_the_last_piece_complete() -> None:
    assert split_part(b"abcdefg", "UTF8", final=True, limit=3) == [
        PayloadPart(b"abc", "UTF8", complete=False),
        PayloadPart(b"def", "UTF8", complete=False),
        PayloadPart(b"g", "UTF8", complete=True),
    ]
    assert split_part(b"abcdef", "BINARY", final=False, limit=3) == [
        PayloadPart(b"abc", "BINARY", complete=False),
        PayloadPart(b"def", "BINARY", complete=False),
    ]
    assert split_part(b"", "BINARY", final=True, limit=3) == [PayloadPart(b"", "BINARY", complete=True)]


def test_error_responses() -> None:
    error = validation_error("Endpoint x of account 000000000000 not found.")
    assert (error.status, error.error_type) == (400, "InputValidationError")
    assert json.loads(error.encode_body()) == {
        "Message": "Endpoint x of account 000000000000 not found.",
        "ErrorCode": "ValidationError",
    }
    assert error.headers("rid") == [
        (b"content-type", b"application/json"),
        (b"x-amzn-errortype", b"InputValidationError"),
        (b"x-amzn-requestid", b"rid"),
    ]
    refused = model_error("refused", original_status_code=404, original_message="no route")
    assert (refused.status, refused.error_type) == (424, "ModelError")
    assert json.loads(refused.encode_body()) == {
        "Message": "refused",
        "ErrorCode": "ModelError",
        "OriginalStatusCode": 404,
        "OriginalMessage": "no route",
    }
