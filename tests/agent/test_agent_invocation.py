"""The invocation payload: what is accepted, the defaults it takes, and what is refused."""

from __future__ import annotations

import pytest

from agent_app.invocation import MAX_PROMPT_CHARS, BadRequest, InvocationRequest, parse_invocation

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
        ({"prompt": "Hi", "mod": "batch"}, "unknown field(s) mod; allowed: prompt, mode, voice, speed"),
        ({"prompt": "Hi", "voice": "zz_nobody"}, "'voice' must be one of af_heart, am_michael; got 'zz_nobody'"),
        ({"prompt": "Hi", "speed": 0.49}, "'speed' must be a number from 0.5 to 2; got 0.49"),
        ({"prompt": "Hi", "speed": 2.01}, "'speed' must be a number from 0.5 to 2; got 2.01"),
        ({"prompt": "Hi", "speed": True}, "'speed' must be a number from 0.5 to 2; got True"),
        ({"prompt": "Hi", "speed": "1.0"}, "'speed' must be a number from 0.5 to 2; got '1.0'"),
        ({"prompt": "Hi", "speed": None}, "'speed' must be a number from 0.5 to 2; got None"),
        ({"prompt": "Hi", "speed": float("nan")}, "'speed' must be a number from 0.5 to 2; got nan"),
        ({"prompt": "Hi", "speed": 10**400}, "'speed' must be a number from 0.5 to 2; got 1000"),
    ],
)
def test_bad_payloads_are_refused_with_the_field_named(payload: object, message: str) -> None:
    with pytest.raises(BadRequest) as caught:
        parse(payload)
    assert str(caught.value).startswith(message)
