"""The invocation payload: `{"prompt": str, "mode"?: "stream"|"batch", "voice"?: str, "speed"?: number}`.

Pure: a JSON value in, an `InvocationRequest` or a `BadRequest` naming the field out. Everything
the speech container would refuse later (an unknown voice, a speed out of range) is refused here,
before the model has said a word.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from agent_app.events import MODES, Mode
from speech_protocol import SPEED_MAX, SPEED_MIN

MAX_PROMPT_CHARS: Final = 8_000
MAX_VOICE_CHARS: Final = 64
FIELDS: Final = ("prompt", "mode", "voice", "speed")


class BadRequest(ValueError):
    """The payload cannot be served; the message says which field and what is allowed."""


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
        raise BadRequest(f"unknown field(s) {', '.join(unknown)}; allowed: {', '.join(FIELDS)}")

    prompt = payload.get("prompt")
    if not isinstance(prompt, str):
        raise BadRequest("'prompt' is required and must be a string")
    if not prompt.strip():
        raise BadRequest("'prompt' is empty")
    if len(prompt) > MAX_PROMPT_CHARS:
        raise BadRequest(f"'prompt' has {len(prompt)} characters; the limit is {MAX_PROMPT_CHARS}")

    mode: Mode = default_mode
    if "mode" in payload:
        raw_mode = payload["mode"]
        for option in MODES:
            if raw_mode == option:
                mode = option
                break
        else:
            raise BadRequest(f"'mode' must be one of {', '.join(MODES)}; got {raw_mode!r}")

    voice = default_voice
    if "voice" in payload:
        raw_voice = payload["voice"]
        if not isinstance(raw_voice, str) or not raw_voice.strip() or len(raw_voice) > MAX_VOICE_CHARS:
            raise BadRequest(f"'voice' must be a non-empty string of at most {MAX_VOICE_CHARS} characters")
        if raw_voice not in voices:
            raise BadRequest(f"'voice' must be one of {', '.join(voices)}; got {raw_voice!r}")
        voice = raw_voice

    speed: float | None = None
    if "speed" in payload:
        speed = _speed(payload["speed"])

    return InvocationRequest(prompt=prompt, mode=mode, voice=voice, speed=speed)


def _speed(raw: object) -> float:
    message = f"'speed' must be a number from {SPEED_MIN:g} to {SPEED_MAX:g}"
    # bool is an int in Python, and true is not a speed; a huge int would overflow float().
    if isinstance(raw, bool) or not isinstance(raw, int | float) or (isinstance(raw, int) and abs(raw) > 10):
        raise BadRequest(f"{message}; got {raw!r}"[:200])
    speed = float(raw)
    if not math.isfinite(speed) or not SPEED_MIN <= speed <= SPEED_MAX:
        raise BadRequest(f"{message}; got {raw!r}")
    return speed
