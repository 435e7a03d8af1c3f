"""An invocation's outbox: the bounded queue of events between its work and its caller.

Audio and text that arrive while the caller has not yet taken the previous piece are merged into
it, up to one frame's worth (`agent_app.frames`): a caller held back (AgentCore's frame rate, a
slow network) gets fewer, fuller events instead of a queue of small ones, and a caller that keeps
up gets every piece the moment it exists, so merging never delays anything. Only the newest
queued item is ever merged into, and only with the same kind, so the order of events is the
order they were put (a `words` event between two audio pieces keeps them apart).

Audio is kept as PCM until it is taken, then encoded once; its `seq` is given when the piece is
first queued, so the chunks a caller receives are numbered 0, 1, 2, ... whatever was merged.
One event loop, any number of producers, one consumer.
"""

from __future__ import annotations

import asyncio
from collections import deque
from dataclasses import dataclass

from agent_app import events
from agent_app.events import AgentEvent
from agent_app.frames import AUDIO_CHUNK_PCM_BYTES, MAX_TEXT_DELTA_CHARS


@dataclass(slots=True)
class _Audio:
    seq: int
    pcm: bytearray


@dataclass(slots=True)
class _Text:
    text: str


_Item = AgentEvent | _Audio | _Text | None


class OutboxFull(Exception):
    """`put_nowait` found no room."""


class Outbox:
    """A FIFO of at most `maxsize` items; None is the end of the events."""

    def __init__(self, maxsize: int) -> None:
        if maxsize < 1:
            raise ValueError(f"maxsize must be at least 1, got {maxsize}")
        self._maxsize = maxsize
        self._items: deque[_Item] = deque()
        self._ready = asyncio.Event()
        self._room = asyncio.Event()

    def full(self) -> bool:
        return len(self._items) >= self._maxsize

    def clear(self) -> None:
        """Drop everything queued (a caller who will read no more)."""
        self._items.clear()
        self._room.set()

    def put_nowait(self, item: AgentEvent | None) -> None:
        if self.full():
            raise OutboxFull
        self._append(item)

    async def put(self, item: AgentEvent | None) -> None:
        """Queue `item`, waiting for room (bound the wait from outside)."""
        await self._wait_for_room()
        self._append(item)

    def top_up_text(self, text: str) -> bool:
        """Append `text` to the queued text delta at the tail, if there is one with room; say whether."""
        tail = self._items[-1] if self._items else None
        if isinstance(tail, _Text) and len(tail.text) + len(text) <= MAX_TEXT_DELTA_CHARS:
            tail.text += text
            return True
        return False

    async def put_text(self, text: str) -> None:
        """Queue a text delta of at most `MAX_TEXT_DELTA_CHARS` (merged later, while it waits)."""
        await self._wait_for_room()
        self._append(_Text(text))

    def top_up_audio(self, pcm: bytes) -> int:
        """Append the start of `pcm` to the queued audio at the tail, up to one chunk; the bytes taken."""
        tail = self._items[-1] if self._items else None
        if not isinstance(tail, _Audio):
            return 0
        taken = min(len(pcm), AUDIO_CHUNK_PCM_BYTES - len(tail.pcm))
        tail.pcm += pcm[:taken]
        return taken

    async def put_audio(self, seq: int, pcm: bytes) -> None:
        """Queue audio chunk `seq`, at most `AUDIO_CHUNK_PCM_BYTES` (topped up later, while it waits)."""
        await self._wait_for_room()
        self._append(_Audio(seq, bytearray(pcm)))

    async def get(self) -> AgentEvent | None:
        """The oldest item as its event (None: the end), waiting for one."""
        while not self._items:
            self._ready.clear()
            await self._ready.wait()
        item = self._items.popleft()
        self._room.set()
        if isinstance(item, _Audio):
            return events.audio_chunk(item.seq, bytes(item.pcm))
        if isinstance(item, _Text):
            return events.text_delta(item.text)
        return item

    async def _wait_for_room(self) -> None:
        while self.full():
            self._room.clear()
            await self._room.wait()

    def _append(self, item: _Item) -> None:
        self._items.append(item)
        self._ready.set()
