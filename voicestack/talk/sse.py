"""Server-sent events as AgentCore's SDK frames them (`data: <json>` lines, a blank line between
events), parsed incrementally whatever the network's chunk boundaries (pure).

Each event comes with the bytes its frame took on the wire (the latency lab compares them with the
raw PCM they carry). Lines may end with LF, CRLF or CR; fields other than `data` and comment lines
are ignored, as the SSE specification says; an event's data must be one JSON object.
"""

from __future__ import annotations

import json
import re
from typing import Any, Final

_EVENT_END: Final = re.compile(rb"\r\n\r\n|\n\n|\r\r")
_LINE_END: Final = re.compile(rb"\r\n|\n|\r")


class SseError(ValueError):
    """An event whose data is not a JSON object."""


class SseParser:
    """Feed it bytes as they arrive; it returns the events they complete."""

    def __init__(self) -> None:
        self._buffer = b""

    def feed(self, chunk: bytes) -> list[tuple[dict[str, Any], int]]:
        """(event, wire bytes) of every event `chunk` completes, in order; SseError on bad data."""
        self._buffer += chunk
        events: list[tuple[dict[str, Any], int]] = []
        while (end := _EVENT_END.search(self._buffer)) is not None:
            frame, self._buffer = self._buffer[: end.start()], self._buffer[end.end() :]
            data = [line[5:].removeprefix(b" ") for line in _LINE_END.split(frame) if line.startswith(b"data:")]
            if not data:
                continue
            try:
                event = json.loads(b"\n".join(data))
            except (ValueError, RecursionError) as exc:
                raise SseError(f"an event's data is not JSON: {exc}") from None
            if not isinstance(event, dict):
                raise SseError(f"an event's data must be a JSON object, got {type(event).__name__}")
            events.append((event, end.end()))  # the frame and its blank line
        return events

    @property
    def pending(self) -> bytes:
        """Bytes of an unterminated event (empty at a clean end of stream)."""
        return self._buffer
