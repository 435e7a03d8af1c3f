"""The invocation payload: `{"prompt": str, "mode"?: "stream"|"batch", "voice"?: str, "speed"?: number}`.

Pure: a JSON value in, an `InvocationRequest` or a `BadRequest` naming the field out. Everything
the speech container would refuse later (an unknown voice, a speed out of range) is refused here,
before the model has said a word, and the prompt is held to the container's text rules (a string
with something in it and a UTF-8 form: no lone UTF-16 surrogate, which JSON's `"\ud800"` can
smuggle in and which would fail the model's request mid-answer). Values quoted back in a message
are cut (`speech_protocol.quote`): a bad value may be huge or nested deep.

`parse_json_object` is the JSON reading of both routes (an HTTP body, a WebSocket message): the
parser's own failures on hostile input (nesting deeper than its recursion limit, an integer of
more than 4,300 digits, `NaN`) are a `BadRequest` like any other malformed JSON.
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

from agent_app.events import MODES, Mode
from speech_protocol import SPEED_MAX, SPEED_MIN, lone_surrogate_at, quote

MAX_PROMPT_CHARS: Final = 8_000
MAX_VOICE_CHARS: Final = 64
MAX_REQUEST_BYTES: Final = 64 * 1024
"""The largest HTTP body or WebSocket message read: a prompt of `MAX_PROMPT_CHARS` fits even when
JSON writes each of its characters in 6 bytes (48,000), with the other fields."""
FIELDS: Final = ("prompt", "mode", "voice", "speed")
_UNKNOWN_FIELDS_NAMED: Final = 5
"""How many unknown fields a message names (a hostile body may have thousands)."""


class BadRequest(ValueError):
    """The payload cannot be served; the message says which field and what is allowed."""


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def _parse_int(digits: str) -> int:
    # Python refuses to read an integer of more than 4,300 digits with advice meant for programmers.
    if len(digits.lstrip("-")) > sys.get_int_max_str_digits():
        raise ValueError(f"an integer of {len(digits.lstrip('-')):,} digits")
    return int(digits)


def parse_json_object(text: str, *, what: str) -> dict[str, Any]:
    """One JSON object; BadRequest says what is wrong with anything else (`what`: "the body", ...)."""
    try:
        obj = json.loads(text, parse_constant=_reject_constant, parse_int=_parse_int)
    except RecursionError:
        # The C parser recurses per nesting level and stops at the interpreter's limit (about 1,000).
        raise BadRequest(f"{what} is not valid JSON: nested too deeply") from None
    except ValueError as exc:  # JSONDecodeError, NaN/Infinity, an integer of over 4,300 digits
        raise BadRequest(f"{what} is not valid JSON: {exc}") from None
    if not isinstance(obj, dict):
        raise BadRequest(f"{what} must be a JSON object, got {type(obj).__name__}")
    return obj


@dataclass(frozen=True, slots=True)
class InvocationRequest:
    prompt: str
    mode: Mode
    voice: str | None
    """None: the container's default voice."""
    speed: float | None = None
    """None: the container's default speed (1.0)."""


def parse_invocation(
    payload: object, *, default_mode: Mode, default_voice: str | None, voices: Sequence[str]
) -> InvocationRequest:
    """Check an invocation payload; fields left out take the configured defaults; `voices` are
    the voices the speech container serves."""
    if not isinstance(payload, dict):
        raise BadRequest(f"the payload must be a JSON object, got {type(payload).__name__}")
    unknown = sorted(str(key) for key in payload if key not in FIELDS)
    if unknown:
        named = ", ".join(quote(key) for key in unknown[:_UNKNOWN_FIELDS_NAMED])
        more = f" and {len(unknown) - _UNKNOWN_FIELDS_NAMED} more" if len(unknown) > _UNKNOWN_FIELDS_NAMED else ""
        raise BadRequest(f"unknown field(s) {named}{more}; allowed: {', '.join(FIELDS)}")

    prompt = payload.get("prompt")
    if not isinstance(prompt, str):
        raise BadRequest("'prompt' is required and must be a string")
    if not prompt.strip():
        raise BadRequest("'prompt' is empty")
    if len(prompt) > MAX_PROMPT_CHARS:
        raise BadRequest(f"'prompt' has {len(prompt)} characters; the limit is {MAX_PROMPT_CHARS}")
    if (at := lone_surrogate_at(prompt)) is not None:
        raise BadRequest(
            f"'prompt' contains a lone UTF-16 surrogate (U+{ord(prompt[at]):04X}) at character {at}; "
            "it has no UTF-8 form"
        )

    mode: Mode = default_mode
    if "mode" in payload:
        raw_mode = payload["mode"]
        for option in MODES:
            if raw_mode == option:
                mode = option
                break
        else:
            raise BadRequest(f"'mode' must be one of {', '.join(MODES)}; got {quote(raw_mode)}")

    voice = default_voice
    if "voice" in payload:
        raw_voice = payload["voice"]
        if not isinstance(raw_voice, str) or not raw_voice.strip() or len(raw_voice) > MAX_VOICE_CHARS:
            raise BadRequest(f"'voice' must be a non-empty string of at most {MAX_VOICE_CHARS} characters")
        if raw_voice not in voices:
            raise BadRequest(f"'voice' must be one of {', '.join(voices)}; got {quote(raw_voice)}")
        voice = raw_voice

    speed: float | None = None
    if "speed" in payload:
        speed = _speed(payload["speed"])

    return InvocationRequest(prompt=prompt, mode=mode, voice=voice, speed=speed)


def _speed(raw: object) -> float:
    message = f"'speed' must be a number from {SPEED_MIN:g} to {SPEED_MAX:g}"
    # bool is an int in Python, and true is not a speed; a huge int would overflow float().
    if isinstance(raw, bool) or not isinstance(raw, int | float) or (isinstance(raw, int) and abs(raw) > 10):
        raise BadRequest(f"{message}; got {quote(raw)}")
    speed = float(raw)
    if not math.isfinite(speed) or not SPEED_MIN <= speed <= SPEED_MAX:
        raise BadRequest(f"{message}; got {quote(raw)}")
    return speed
