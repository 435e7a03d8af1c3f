"""The invocation's outbox: audio and text the caller has not taken yet are merged, up to one frame;
nothing taken is touched again, kinds never mix, and the order is the order of the puts."""

from __future__ import annotations

import asyncio
import base64

import pytest

from agent_app import events
from agent_app.frames import AUDIO_CHUNK_PCM_BYTES, MAX_TEXT_DELTA_CHARS
from agent_app.outbox import Outbox, OutboxFull

FRAME = bytes(range(240)) * 4  # 960 bytes: 20 ms, the speech server's smallest frame


async def drain(outbox: Outbox) -> list[object]:
    taken: list[object] = []
    while (item := await outbox.get()) is not None:
        taken.append(item)
    return taken


async def test_audio_waiting_for_the_caller_is_topped_up_to_one_chunk() -> None:
    outbox = Outbox(8)
    await outbox.put_audio(0, FRAME)
    taken = [outbox.top_up_audio(FRAME) for _ in range(13)]
    assert taken == [960] * 11 + [480, 0]  # 12 frames and a half make 12,000 bytes
    outbox.put_nowait(None)
    assert await drain(outbox) == [events.audio_chunk(0, (FRAME * 13)[:AUDIO_CHUNK_PCM_BYTES])]


async def test_audio_the_caller_took_is_never_topped_up() -> None:
    outbox = Outbox(8)
    await outbox.put_audio(0, FRAME)
    first = await outbox.get()
    assert outbox.top_up_audio(FRAME) == 0
    await outbox.put_audio(1, FRAME)
    outbox.put_nowait(None)
    assert [first, *await drain(outbox)] == [events.audio_chunk(0, FRAME), events.audio_chunk(1, FRAME)]


async def test_another_event_between_two_pieces_keeps_them_apart() -> None:
    outbox = Outbox(8)
    words = events.words([("Hi", 0.0, 0.2)], offset_s=0.0)[0]
    await outbox.put_audio(0, FRAME)
    await outbox.put(words)
    assert outbox.top_up_audio(FRAME) == 0
    assert outbox.top_up_text("Hi") is False
    await outbox.put_audio(1, FRAME)
    outbox.put_nowait(None)
    assert await drain(outbox) == [events.audio_chunk(0, FRAME), words, events.audio_chunk(1, FRAME)]


async def test_text_waiting_for_the_caller_is_merged_up_to_one_delta() -> None:
    outbox = Outbox(8)
    await outbox.put_text("The ")
    assert outbox.top_up_text("Eiffel ") is True
    assert outbox.top_up_text("x" * (MAX_TEXT_DELTA_CHARS - 10)) is False  # would not fit one delta
    assert outbox.top_up_audio(FRAME) == 0  # audio never merges into text
    outbox.put_nowait(None)
    assert await drain(outbox) == [events.text_delta("The Eiffel ")]


async def test_a_full_outbox_makes_the_producer_wait_for_the_caller() -> None:
    outbox = Outbox(2)
    await outbox.put(events.agent_start("stream", "m", demo=False))
    await outbox.put(events.audio_start())
    with pytest.raises(OutboxFull):
        outbox.put_nowait(None)
    waiting = asyncio.create_task(outbox.put(events.agent_end()))
    await asyncio.sleep(0.01)
    assert not waiting.done()
    assert await outbox.get() == events.agent_start("stream", "m", demo=False)
    await asyncio.wait_for(waiting, 1)
    assert [await outbox.get(), await outbox.get()] == [events.audio_start(), events.agent_end()]


async def test_a_waiting_caller_gets_the_next_event_as_it_is_put() -> None:
    outbox = Outbox(2)
    getter = asyncio.create_task(outbox.get())
    await asyncio.sleep(0.01)
    assert not getter.done()
    await outbox.put_audio(5, FRAME)
    event = await asyncio.wait_for(getter, 1)
    assert event == {"type": "audio_chunk", "seq": 5, "audio": base64.b64encode(FRAME).decode()}


async def test_clear_drops_everything_and_makes_room() -> None:
    outbox = Outbox(1)
    await outbox.put_audio(0, FRAME)
    outbox.clear()
    outbox.put_nowait(None)
    assert await outbox.get() is None
