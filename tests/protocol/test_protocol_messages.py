"""The wire protocol's pure parsing and encoding, shared by the speech container and the agent."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from speech_protocol import (
    Cancel,
    Cancelled,
    Close,
    ErrorCode,
    ErrorEvent,
    ProtocolError,
    SynthesisComplete,
    SynthesisStart,
    Synthesize,
    Timestamps,
    WordTiming,
    check_synthesis,
    encode_client_message,
    encode_server_event,
    parse_client_message,
    parse_server_event,
    pcm_duration_s,
)


def test_sample_form_without_type_is_a_synthesis_request() -> None:
    assert parse_client_message('{"text": "Hello."}') == Synthesize(text="Hello.")


def test_binary_frames_are_decoded_as_utf8() -> None:
    data = json.dumps({"text": "Café, naïve.", "request_id": "r1"}, ensure_ascii=False).encode()
    assert parse_client_message(data) == Synthesize(text="Café, naïve.", request_id="r1")


def test_all_synthesis_fields() -> None:
    msg = parse_client_message(
        '{"type": "synthesize", "text": "Hi.", "voice": "am_michael", "speed": 1, '
        '"request_id": "a", "timestamps": true}'
    )
    assert msg == Synthesize(text="Hi.", request_id="a", voice="am_michael", speed=1.0, timestamps=True)
    assert isinstance(msg.speed, float)


def test_cancel_and_close() -> None:
    assert parse_client_message('{"type": "cancel"}') == Cancel()
    assert parse_client_message(b'{"type": "cancel", "request_id": "r9"}') == Cancel(request_id="r9")
    assert parse_client_message('{"type": "close"}') == Close()


@pytest.mark.parametrize(
    ("data", "code", "message", "request_id"),
    [
        (b"\xff\xfe{}", ErrorCode.INVALID_UTF8, "message is not valid UTF-8: invalid start byte at byte 0", None),
        ("{not json", ErrorCode.INVALID_JSON, None, None),
        ('{"text": NaN}', ErrorCode.INVALID_JSON, None, None),
        ('["text"]', ErrorCode.NOT_AN_OBJECT, "message must be a JSON object, got list", None),
        ('"hello"', ErrorCode.NOT_AN_OBJECT, "message must be a JSON object, got str", None),
        (
            '{"type": "dance", "request_id": "r"}',
            ErrorCode.UNKNOWN_TYPE,
            "unknown message type 'dance'; allowed: 'synthesize', 'cancel', 'close'",
            "r",
        ),
        ('{"request_id": "r2"}', ErrorCode.MISSING_TEXT, "'text' is required", "r2"),
        ('{"text": 5}', ErrorCode.INVALID_FIELD, "'text' must be a string", None),
        ('{"text": "  \\n "}', ErrorCode.EMPTY_TEXT, "'text' is empty", None),
        (
            '{"text": "x", "speed": 3, "request_id": "s"}',
            ErrorCode.SPEED_OUT_OF_RANGE,
            "'speed' must be between 0.5 and 2.0, got 3",
            "s",
        ),
        ('{"text": "x", "speed": "fast"}', ErrorCode.INVALID_FIELD, "'speed' must be a number", None),
        ('{"text": "x", "speed": true}', ErrorCode.INVALID_FIELD, "'speed' must be a number", None),
        ('{"text": "x", "voice": ""}', ErrorCode.INVALID_FIELD, "'voice' must be a non-empty string", None),
        ('{"text": "x", "timestamps": "yes"}', ErrorCode.INVALID_FIELD, "'timestamps' must be true or false", None),
        (
            '{"text": "x", "request_id": 7}',
            ErrorCode.INVALID_FIELD,
            "'request_id' must be a string of 1 to 128 characters",
            None,
        ),
    ],
)
def test_bad_messages_get_a_stable_code(
    data: str | bytes, code: ErrorCode, message: str | None, request_id: str | None
) -> None:
    with pytest.raises(ProtocolError) as info:
        parse_client_message(data)
    assert info.value.code == code
    assert info.value.request_id == request_id
    if message is not None:
        assert info.value.message == message


def test_server_limits() -> None:
    voices = frozenset({"af_heart", "am_michael"})
    check_synthesis(Synthesize(text="x" * 10, voice="af_heart"), max_text_chars=10, voices=voices)
    with pytest.raises(ProtocolError) as info:
        check_synthesis(Synthesize(text="x" * 11, request_id="r"), max_text_chars=10, voices=voices)
    assert (info.value.code, info.value.message, info.value.request_id) == (
        ErrorCode.TEXT_TOO_LONG,
        "'text' has 11 characters; the limit is 10",
        "r",
    )
    with pytest.raises(ProtocolError) as info:
        check_synthesis(Synthesize(text="x", voice="zz"), max_text_chars=10, voices=voices)
    assert info.value.code == ErrorCode.UNKNOWN_VOICE
    assert info.value.message == "unknown voice 'zz'; available: af_heart, am_michael"


def test_error_event_from_protocol_error() -> None:
    event = ProtocolError(ErrorCode.EMPTY_TEXT, "'text' is empty", "r1").to_event()
    assert encode_server_event(event) == (
        '{"type": "error", "request_id": "r1", "code": "empty_text", "message": "\'text\' is empty"}'
    )


def test_server_event_encoding_is_exact() -> None:
    assert encode_server_event(SynthesisStart(request_id="r1")) == (
        '{"type": "synthesis_start", "request_id": "r1", "sample_rate": 24000, "format": "pcm_s16le", "channels": 1}'
    )
    assert encode_server_event(
        SynthesisComplete(
            request_id="r1", audio_duration_s=1.23456, time_to_first_audio_ms=12.3456, elapsed_ms=99.0, chunks=2
        )
    ) == (
        '{"type": "synthesis_complete", "request_id": "r1", "audio_duration_s": 1.235, '
        '"time_to_first_audio_ms": 12.346, "elapsed_ms": 99.0, "chunks": 2}'
    )
    assert encode_server_event(Cancelled(request_id="r2")) == '{"type": "cancelled", "request_id": "r2"}'


_events = st.one_of(
    st.builds(SynthesisStart, request_id=st.text(min_size=1, max_size=8)),
    st.builds(
        SynthesisComplete,
        request_id=st.text(min_size=1, max_size=8),
        audio_duration_s=st.integers(0, 10**6).map(lambda n: n / 1000),
        time_to_first_audio_ms=st.integers(0, 10**6).map(lambda n: n / 1000),
        elapsed_ms=st.integers(0, 10**6).map(lambda n: n / 1000),
        chunks=st.integers(0, 100),
    ),
    st.builds(Cancelled, request_id=st.text(min_size=1, max_size=8)),
    st.builds(
        ErrorEvent,
        request_id=st.none() | st.text(max_size=8),
        code=st.sampled_from(list(ErrorCode)),
        message=st.text(max_size=20),
    ),
    st.builds(
        Timestamps,
        request_id=st.text(min_size=1, max_size=8),
        chunk=st.integers(0, 50),
        words=st.lists(
            st.builds(
                WordTiming,
                word=st.text(min_size=1, max_size=6),
                start_s=st.integers(0, 9999).map(lambda n: n / 1000),
                end_s=st.integers(0, 9999).map(lambda n: n / 1000),
            ),
            max_size=4,
        ).map(tuple),
    ),
)


@given(_events)
def test_server_events_round_trip(event: object) -> None:
    assert parse_server_event(encode_server_event(event)) == event  # type: ignore[arg-type]


_client = st.one_of(
    st.builds(
        Synthesize,
        text=st.text(min_size=1).filter(str.strip),
        request_id=st.none() | st.text(min_size=1, max_size=128),
        voice=st.none() | st.text(min_size=1, max_size=10),
        speed=st.none() | st.sampled_from([0.5, 1.0, 1.25, 2.0]),
        timestamps=st.booleans(),
    ),
    st.builds(Cancel, request_id=st.none() | st.text(min_size=1, max_size=128)),
    st.just(Close()),
)


@given(_client)
def test_client_messages_round_trip_as_text_and_bytes(msg: object) -> None:
    text = encode_client_message(msg)  # type: ignore[arg-type]
    assert parse_client_message(text) == msg
    assert parse_client_message(text.encode()) == msg


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{"type": "mystery"}', "unknown control frame type 'mystery'"),
        ('{"type": "synthesis_start", "request_id": 3}', "field 'request_id' must be"),
        ("[]", "control frame is not a JSON object"),
        ('{"type": "timestamps", "request_id": "r", "chunk": 0, "words": [1]}', "every entry of 'words' must be"),
        ('{"type": "error", "request_id": 1, "code": "x", "message": "m"}', "'request_id' must be a string or null"),
        (
            '{"type": "synthesis_start", "request_id": "r", "sample_rate": true, "format": "f", "channels": 1}',
            "field 'sample_rate' must be",
        ),
    ],
)
def test_malformed_server_events_are_rejected(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_server_event(text)


def test_pcm_duration() -> None:
    assert pcm_duration_s(48_000) == 1.0
    assert pcm_duration_s(0) == 0.0


# --- hostile input: every one of these once killed a session (issue 12) ----------------------


def test_json_nested_too_deeply_is_invalid_json_not_a_recursion_error() -> None:
    with pytest.raises(ProtocolError) as info:
        parse_client_message("[" * 100_000 + "]" * 100_000)
    assert (info.value.code, info.value.message, info.value.request_id) == (
        ErrorCode.INVALID_JSON,
        "message is not valid JSON: nested too deeply",
        None,
    )


def test_deep_nesting_inside_an_object_is_invalid_json() -> None:
    with pytest.raises(ProtocolError) as info:
        parse_client_message('{"text": "x", "voice": ' + "{" * 5000 + "}" * 5000 + "}")
    assert info.value.code == ErrorCode.INVALID_JSON


@pytest.mark.parametrize("sign", ["", "-"])
def test_a_400_digit_speed_is_out_of_range_and_quoted_briefly(sign: str) -> None:
    with pytest.raises(ProtocolError) as info:
        parse_client_message('{"text": "x", "request_id": "r", "speed": ' + sign + "9" * 400 + "}")
    assert (info.value.code, info.value.request_id) == (ErrorCode.SPEED_OUT_OF_RANGE, "r")
    assert info.value.message == "'speed' must be between 0.5 and 2.0, got <integer of 1329 bits>"


def test_an_integer_speed_in_range_is_accepted_as_a_float() -> None:
    msg = parse_client_message('{"text": "x", "speed": 2}')
    assert isinstance(msg, Synthesize)
    assert msg.speed == 2.0
    assert isinstance(msg.speed, float)


def test_a_float_overflowing_to_infinity_is_not_a_number() -> None:
    with pytest.raises(ProtocolError) as info:
        parse_client_message('{"text": "x", "speed": 1e400}')
    assert (info.value.code, info.value.message) == (ErrorCode.INVALID_FIELD, "'speed' must be a number")


def test_a_lone_surrogate_in_the_request_id_is_refused_without_echoing_it() -> None:
    with pytest.raises(ProtocolError) as info:
        parse_client_message('{"text": "x", "request_id": "ab\\ud800"}')
    assert (info.value.code, info.value.request_id) == (ErrorCode.INVALID_FIELD, None)
    assert info.value.message == (
        "'request_id' contains a lone UTF-16 surrogate (U+D800) at character 2; it has no UTF-8 form"
    )
    # The error frame itself can be sent: it encodes to UTF-8.
    encode_server_event(info.value.to_event()).encode("utf-8")


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (
            '{"text": "Hi \\udc00 there.", "request_id": "r", "timestamps": true}',
            "'text' contains a lone UTF-16 surrogate (U+DC00) at character 3; it has no UTF-8 form",
        ),
        (
            '{"text": "Hi.", "request_id": "r", "voice": "\\ud83d"}',
            "'voice' contains a lone UTF-16 surrogate (U+D83D) at character 0; it has no UTF-8 form",
        ),
    ],
)
def test_a_lone_surrogate_in_text_or_voice_is_refused(data: str, message: str) -> None:
    with pytest.raises(ProtocolError) as info:
        parse_client_message(data)
    assert (info.value.code, info.value.message, info.value.request_id) == (ErrorCode.INVALID_FIELD, message, "r")


def test_a_surrogate_pair_escape_is_a_valid_character() -> None:
    assert parse_client_message('{"text": "\\ud83d\\ude00 yes", "request_id": "\\ud83d\\ude00"}') == Synthesize(
        text="\U0001f600 yes", request_id="\U0001f600"
    )


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (
            '{"type": ' + "[" * 50 + "]" * 50 + "}",
            "unknown message type <list>; allowed: 'synthesize', 'cancel', 'close'",
        ),
        (
            '{"type": "' + "x" * 5000 + '"}',
            "unknown message type 'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx...; allowed: 'synthesize', 'cancel', 'close'",
        ),
        (
            '{"type": ' + "7" * 4000 + "}",
            "unknown message type <integer of 13288 bits>; allowed: 'synthesize', 'cancel', 'close'",
        ),
    ],
)
def test_a_huge_unknown_type_is_quoted_briefly(data: str, message: str) -> None:
    with pytest.raises(ProtocolError) as info:
        parse_client_message(data)
    assert (info.value.code, info.value.message) == (ErrorCode.UNKNOWN_TYPE, message)


def test_an_integer_beyond_pythons_digit_limit_is_invalid_json() -> None:
    with pytest.raises(ProtocolError) as info:
        parse_client_message('{"text": "x", "speed": ' + "1" * 5000 + "}")
    assert info.value.code == ErrorCode.INVALID_JSON


def test_unknown_voice_is_quoted_briefly() -> None:
    with pytest.raises(ProtocolError) as info:
        check_synthesis(Synthesize(text="x", voice="v" * 1000), max_text_chars=10, voices=frozenset({"af_heart"}))
    assert info.value.message == "unknown voice 'vvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvv...; available: af_heart"


def test_a_deeply_nested_server_frame_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="control frame is nested too deeply"):
        parse_server_event("[" * 100_000 + "]" * 100_000)
