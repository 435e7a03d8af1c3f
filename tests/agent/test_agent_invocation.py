"""The invocation payload: what is accepted, the defaults it takes, and what is refused."""

from __future__ import annotations

import pytest

from agent_app.invocation import MAX_PROMPT_CHARS, BadRequest, InvocationRequest, parse_invocation


def parse(payload: object) -> InvocationRequest:
    return parse_invocation(payload, default_mode="stream", default_voice="af_heart")


def test_prompt_alone_takes_the_defaults() -> None:
    assert parse({"prompt": "Hi"}) == InvocationRequest(prompt="Hi", mode="stream", voice="af_heart")


def test_mode_and_voice_override_the_defaults() -> None:
    assert parse({"prompt": "Hi", "mode": "batch", "voice": "am_michael"}) == InvocationRequest(
        prompt="Hi", mode="batch", voice="am_michael"
    )


def test_no_default_voice_means_the_containers_default() -> None:
    assert parse_invocation({"prompt": "Hi"}, default_mode="batch", default_voice=None).voice is None


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
        ({"prompt": "Hi", "mod": "batch"}, "unknown field(s) mod; allowed: prompt, mode, voice"),
    ],
)
def test_bad_payloads_are_refused_with_the_field_named(payload: object, message: str) -> None:
    with pytest.raises(BadRequest) as caught:
        parse(payload)
    assert str(caught.value).startswith(message)
