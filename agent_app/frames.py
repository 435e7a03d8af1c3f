"""What one event may weigh, and how fast a WebSocket connection may send them: AgentCore's limits.

AgentCore Runtime closes a WebSocket whose message frames exceed 32 KB, or that sends more than
250 frames a second ("Quotas for Amazon Bedrock AgentCore": "WebSocket frame size", "WebSocket
frame rate per connection", neither adjustable). Every event the agent sends is one frame on
`WS /ws` (and one `data:` line over SSE: the same events on both routes, so a client parses one
shape), so every event is bounded here, whatever the speech server's `frame_ms` (up to 10 s, 480 kB
of PCM in one container frame):

- an `audio_chunk` carries at most `AUDIO_CHUNK_PCM_BYTES` of PCM; a longer container frame is cut
  into consecutive chunks (the client appends them, as it already does);
- a `text_delta` at most `MAX_TEXT_DELTA_CHARS`, a `words` event as many words as fit, each word
  at most `MAX_WORD_CHARS`, an `error` message at most `MAX_ERROR_MESSAGE_CHARS`;

so that every event, with its `turn` and any `seq`, fits `MAX_EVENT_BYTES` as UTF-8 JSON (the
tests check each kind at its worst). `FramePacer` keeps one connection under the rate: events
that wait for their turn are merged meanwhile (`agent_app.outbox`), so a slow rate never means
a slow answer.

Pure: no sockets, no clock of its own.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from typing import Final

from speech_protocol import AUDIO_CHANNELS, SAMPLE_WIDTH

# --- AgentCore's limits: AWS's numbers, the one place they are written -------------------------
# Source: "Quotas for Amazon Bedrock AgentCore", AgentCore Runtime's WebSocket rows
# (https://docs.aws.amazon.com/bedrock-agentcore/latest/devguide/bedrock-agentcore-limits.html;
# the Service Quotas console lists the same "WebSocket frame size (in KB)": 32, not adjustable) and
# the WebSocket guide's troubleshooting section (a frame over the limit closes the connection).
# The AgentCore stand-in (`local.standin.agentcore_routing`) enforces them and the page's remote
# mode (`local.remote`) checks a prompt against them: both import them from here, as this module is
# the only one of the three that must live in the agent's image (agent_app/ and speech_protocol/).
# What is our reading, not AWS's text: "KB" as 1,000 bytes (the stricter of 1,000 and 1,024: a
# stand-in that refuses 768 bytes AWS might take is stricter than AWS, never looser), counted as
# a message frame's payload (UTF-8 for text); the rate counted over any one-second window.

AGENTCORE_FRAME_LIMIT_BYTES: Final = 32_000
"""AgentCore's "32 KB" per WebSocket message frame, read as the stricter 32,000 bytes (a later
copy of the quotas page says 64 KB; the smaller figure holds under both)."""
AGENTCORE_FRAMES_PER_S: Final = 250
"""AgentCore's WebSocket frame rate per connection (frames a second; not adjustable)."""

# --- the agent's own budget, under those limits with a margin ------------------------------------

MAX_EVENT_BYTES: Final = 16_384
"""The most any event may weigh as sent (UTF-8 JSON, `turn` included): about half AgentCore's limit, so
neither a stricter front door nor a few more fields in an event can reach it."""
AUDIO_CHUNK_PCM_BYTES: Final = 12_000
"""0.25 s of 24 kHz PCM16: 16,000 characters of base64 (a multiple of 3 bytes: no padding), about
16,100 bytes of event. The page plays 0.25 s pieces as smoothly as 1 s ones; at the paced rate
below one connection still carries 50 s of audio per second."""
MAX_TEXT_DELTA_CHARS: Final = 2_000
"""JSON writes a character in at most 6 bytes (a control character as \\u00XX): 12,000 bytes."""
MAX_WORD_CHARS: Final = 200
"""Longer caption words (a 5,000-letter token in a batch answer) are cut; real words never are."""
MAX_ERROR_MESSAGE_CHARS: Final = 1_000
"""Error messages quote callers' values and exceptions; a listener needs the first lines."""
MAX_MODEL_NAME_CHARS: Final = 1_000
"""`agent_start`'s model name comes from the configuration (a Bedrock model id or ARN is shorter)."""

FRAMES_PER_S: Final = 200
FRAME_BURST: Final = 10
"""The pacer's rate and burst: at most 200 * 1 + 10 + 1 = 211 frames in any second, under 250
with room for the pings and close frames the server sends itself."""

_ENVELOPE_RESERVE_BYTES: Final = 128
"""Room kept in a `words` event for its type, its brackets and a 20-digit `turn`."""
_SURROGATE: Final = re.compile("[\ud800-\udfff]")


def utf8_safe(text: str) -> str:
    """`text` with every lone UTF-16 surrogate replaced by U+FFFD, so that it has a UTF-8 form.

    A Python string holds a surrogate only when one came unpaired (JSON's `"\\ud800"`); sending
    it would fail at the socket, mid-answer.
    """
    return _SURROGATE.sub("\ufffd", text)


def shorten(text: str, max_chars: int) -> str:
    """`text` cut to `max_chars` characters, the cut marked with an ellipsis."""
    return text if len(text) <= max_chars else text[: max_chars - 1] + "…"


def pcm_pieces(pcm: bytes, max_bytes: int = AUDIO_CHUNK_PCM_BYTES) -> list[bytes]:
    """`pcm` cut into consecutive pieces of at most `max_bytes` (even: whole 16-bit samples)."""
    if max_bytes < SAMPLE_WIDTH * AUDIO_CHANNELS or max_bytes % (SAMPLE_WIDTH * AUDIO_CHANNELS):
        raise ValueError(f"max_bytes must be a positive number of whole samples, got {max_bytes}")
    return [pcm[start : start + max_bytes] for start in range(0, len(pcm), max_bytes)]


def text_pieces(text: str, max_chars: int = MAX_TEXT_DELTA_CHARS) -> list[str]:
    """`text` cut into consecutive pieces of at most `max_chars` characters (joined: `text`)."""
    if max_chars < 1:
        raise ValueError(f"max_chars must be at least 1, got {max_chars}")
    return [text[start : start + max_chars] for start in range(0, len(text), max_chars)]


def word_groups[Entry](entries: Sequence[Entry], max_bytes: int = MAX_EVENT_BYTES) -> list[list[Entry]]:
    """Consecutive groups of caption entries, each group's JSON list within one event of `max_bytes`.

    Every entry's `word` must already be at most `MAX_WORD_CHARS` long, so that one entry always
    fits an event of its own.
    """
    budget = max_bytes - _ENVELOPE_RESERVE_BYTES
    groups: list[list[Entry]] = []
    group: list[Entry] = []
    size = 2  # the list's brackets
    for entry in entries:
        entry_bytes = len(json.dumps(entry, ensure_ascii=False).encode("utf-8")) + 2  # its ", "
        if group and size + entry_bytes > budget:
            groups.append(group)
            group, size = [], 2
        group.append(entry)
        size += entry_bytes
    if group:
        groups.append(group)
    return groups


class FramePacer:
    """Spaces the frames of one connection: at most `rate_per_s` a second after a burst of `burst`.

    A token bucket in its virtual-time form (GCRA): frame k may leave once the bucket has a token;
    in any window of W seconds at most `burst + 1 + W * rate_per_s` frames leave. `delay()` books
    the next frame and says how long to wait before sending it; a frame that is then not sent
    (its turn was stopped) only makes the connection slower, never faster.
    """

    def __init__(
        self, clock: Callable[[], float], *, rate_per_s: float = FRAMES_PER_S, burst: int = FRAME_BURST
    ) -> None:
        if not rate_per_s > 0:
            raise ValueError(f"rate_per_s must be > 0, got {rate_per_s}")
        if burst < 0:
            raise ValueError(f"burst must be >= 0, got {burst}")
        self._clock = clock
        self._interval = 1.0 / rate_per_s
        self._tolerance = burst * self._interval
        self._next_due = float("-inf")
        """The theoretical time of the next frame at the steady rate."""

    def delay(self) -> float:
        now = self._clock()
        due = max(now, self._next_due)
        send_at = max(now, due - self._tolerance)
        self._next_due = due + self._interval
        return send_at - now
