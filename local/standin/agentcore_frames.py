"""AgentCore Runtime's WebSocket limits on one connection: frame size, frame rate, idleness (pure).

Every message frame, whichever way it goes, passes `FrameGuard.admit` before it is forwarded.
AgentCore documents that it closes a connection whose frames exceed 32 KB or come too fast, but
not with which close code; the stand-in's choice, stated here once:

- a frame over the size limit: close 1009 (Message Too Big, RFC 6455's code for exactly that);
- more frames than the rate limit within one second: close 1008 (Policy Violation);
- no frame either way for the idle timeout: close 1001 (Going Away): the session has ended.

Frames are counted as the messages the server sees (uvicorn and websockets reassemble
fragments; none of our peers fragment), their size as payload bytes (UTF-8 for text). Pings are
answered below the application and not seen here, so a connection that only pings is closed as
idle, where AgentCore counts pings as activity: stricter than the service, never looser.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Final

from starlette import status

RATE_WINDOW_S: Final = 1.0


@dataclass(frozen=True, slots=True)
class Violation:
    """Why a connection is closed, as the close frame says it."""

    code: int
    reason: str


class FrameGuard:
    """Admits frames of one connection while they stay within the size and rate limits."""

    def __init__(self, max_frame_bytes: int, max_frames_per_s: int) -> None:
        self._max_bytes = max_frame_bytes
        self._max_rate = max_frames_per_s
        self._recent: deque[float] = deque()

    def admit(self, size: int, now: float) -> Violation | None:
        """None if a frame of `size` bytes at time `now` (seconds) may pass, else the violation."""
        if size > self._max_bytes:
            return Violation(
                status.WS_1009_MESSAGE_TOO_BIG,
                f"frame of {size} bytes exceeds the {self._max_bytes}-byte limit",
            )
        while self._recent and self._recent[0] <= now - RATE_WINDOW_S:
            self._recent.popleft()
        if len(self._recent) >= self._max_rate:
            return Violation(status.WS_1008_POLICY_VIOLATION, f"more than {self._max_rate} frames in one second")
        self._recent.append(now)
        return None


def idle_violation(idle_timeout_s: float) -> Violation:
    return Violation(status.WS_1001_GOING_AWAY, f"session idle for {idle_timeout_s:g} s")


def frame_size(message: str | bytes) -> int:
    """Payload bytes of a message frame (text frames travel as UTF-8)."""
    return len(message.encode("utf-8")) if isinstance(message, str) else len(message)
