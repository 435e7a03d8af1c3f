"""The invocation payload: what is accepted, the defaults it takes, and what is refused."""

from __future__ import annotations

import pytest

from agent_app.invocation import MAX_PROMPT_CHARS, BadRequest, InvocationRequest, parse_invocation, parse_json_object

VOICES = ("af_heart", "am_michael")


def parse(payload: object) -> InvocationRequest:
    return parse_invocation(payload, default_mode="stream", default_voice="af_heart", voices=VOICES)


def test_prompt_alone_takes_the_defaults() -> None:
    assert parse({"prompt": "Hi"}) == InvocationRequest(prompt="Hi", mode="stream", voice="af_heart")


def test_mode_and_voice_override_the_defaults() -> None:
    assert parse({"prompt": "Hi", "mode": "batch", "voice": "am_michael"}) == InvocationRequest(
        prompt="Hi", mode="batch", voice="am_michael"
    )


def test_no_default_voice_means_the_containers_default() -> None:
    assert parse_invocation({"prompt": "Hi"}, default_mode="batch", default_voice=None, voices=VOICES).voice is None


@pytest.mark.parametrize(("raw", "speed"), [(0.5, 0.5), (1, 1.0), (1.25, 1.25), (2, 2.0)])
def test_a_speed_in_range_is_taken(raw: object, speed: float) -> None:
    assert parse({"prompt": "Hi", "speed": raw}) == InvocationRequest(
        prompt="Hi", mode="stream", voice="af_heart", speed=speed
    )


def test_no_speed_means_the_containers_default() -> None:
    assert parse({"prompt": "Hi"}).speed is None


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        (["prompt"], "the payload must be a JSON object, got list"),
        ("Hi", "the payload must be a JSON object, got str"),
        ({}, "'prompt' is required and must be a string"),
        ({"prompt": 42}, "'prompt' is required and must be a string"),
        ({"prompt": "  \n"}, "'prompt' is empty"),
        ({"prompt": "x" * (MAX_PROMPT_CHARS + 1)}, f"'prompt' has {MAX_PROMPT_CHARS + 1} characters; the limit is"),
        ({"prompt": "Hi", "mode": "fast"}, "'mode' must be one of stream, batch; got 'fast'"),
        ({"prompt": "Hi", "mode": None}, "'mode' must be one of stream, batch; got None"),
        ({"prompt": "Hi", "voice": ""}, "'voice' must be a non-empty string"),
        ({"prompt": "Hi", "voice": 3}, "'voice' must be a non-empty string"),
        ({"prompt": "Hi", "mod": "batch"}, "unknown field(s) 'mod'; allowed: prompt, mode, voice, speed"),
        (
            {"prompt": "Hi", **{f"k{i}": i for i in range(7)}},
            "unknown field(s) 'k0', 'k1', 'k2', 'k3', 'k4' and 2 more; allowed: prompt, mode, voice, speed",
        ),
        ({"prompt": "Hi", "\ud800": 1}, "unknown field(s) '\\ud800'; allowed:"),
        (
            {"prompt": "Hi \ud800"},
            "'prompt' contains a lone UTF-16 surrogate (U+D800) at character 3; it has no UTF-8 form",
        ),
        ({"prompt": "Hi", "mode": [[[]]]}, "'mode' must be one of stream, batch; got <list>"),
        ({"prompt": "Hi", "mode": 10**5000}, "'mode' must be one of stream, batch; got <integer of 16610 bits>"),
        ({"prompt": "Hi", "voice": "zz_nobody"}, "'voice' must be one of af_heart, am_michael; got 'zz_nobody'"),
        ({"prompt": "Hi", "speed": 0.49}, "'speed' must be a number from 0.5 to 2; got 0.49"),
        ({"prompt": "Hi", "speed": 2.01}, "'speed' must be a number from 0.5 to 2; got 2.01"),
        ({"prompt": "Hi", "speed": True}, "'speed' must be a number from 0.5 to 2; got True"),
        ({"prompt": "Hi", "speed": "1.0"}, "'speed' must be a number from 0.5 to 2; got '1.0'"),
        ({"prompt": "Hi", "speed": None}, "'speed' must be a number from 0.5 to 2; got None"),
        ({"prompt": "Hi", "speed": float("nan")}, "'speed' must be a number from 0.5 to 2; got nan"),
        ({"prompt": "Hi", "speed": 10**400}, "'speed' must be a number from 0.5 to 2; got <integer of 1329 bits>"),
    ],
)
def test_bad_payloads_are_refused_with_the_field_named(payload: object, message: str) -> None:
    with pytest.raises(BadRequest) as caught:
        parse(payload)
    assert str(caught.value).startswith(message)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[" * 5_000 + "]" * 5_000, "the body is not valid JSON: nested too deeply"),
        ('{"a":' * 5_000 + "1" + "}" * 5_000, "the body is not valid JSON: nested too deeply"),
        ('{"speed": ' + "9" * 5_000 + "}", "the body is not valid JSON: an integer of 5,000 digits"),
        ('{"speed": -' + "9" * 4_301 + "}", "the body is not valid JSON: an integer of 4,301 digits"),
        ('{"speed": NaN}', "the body is not valid JSON: NaN is not valid JSON"),
        ('{"speed": -Infinity}', "the body is not valid JSON: -Infinity is not valid JSON"),
        ("", "the body is not valid JSON: Expecting value: line 1 column 1 (char 0)"),
        ('["prompt"]', "the body must be a JSON object, got list"),
        ("null", "the body must be a JSON object, got NoneType"),
        ('"\\ud800"', "the body must be a JSON object, got str"),
    ],
)
def test_json_the_parser_itself_chokes_on_is_a_bad_request(text: str, message: str) -> None:
    with pytest.raises(BadRequest) as caught:
        parse_json_object(text, what="the body")
    assert str(caught.value) == message


def test_a_json_object_is_read_as_is() -> None:
    assert parse_json_object('{"prompt": "Hi", "speed": 1.5, "n": ' + "9" * 4_300 + "}", what="x") == {
        "prompt": "Hi",
        "speed": 1.5,
        "n": int("9" * 4_300),
    }
