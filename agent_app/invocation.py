"""The invocation payload: `{"prompt": str, "mode"?: "stream"|"batch", "voice"?: str}`, checked.

Pure: a JSON value in, an `InvocationRequest` or a `BadRequest` naming the field out.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from agent_app.events import MODES, Mode

MAX_PROMPT_CHARS: Final = 8_000
MAX_VOICE_CHARS: Final = 64
FIELDS: Final = ("prompt", "mode", "voice")


class BadRequest(ValueError):
    """The payload cannot be served; the message says which field and what is allowed."""


@dataclass(frozen=True, slots=True)
class InvocationRequest:
    prompt: str
    mode: Mode
    voice: str | None
    """None: the container's default voice."""


def parse_invocation(payload: object, *, default_mode: Mode, default_voice: str | None) -> InvocationRequest:
    """Check an invocation payload; fields left out take the configured defaults."""
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
        voice = raw_voice

    return InvocationRequest(prompt=prompt, mode=mode, voice=voice)
