"""Conversations: session ids, one turn at a time per session, stored turns, interrupted turns."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator
from pathlib import Path
from typing import Any, cast

import pytest

from agent_app.memory import (
    ACTOR_ID,
    BadSessionId,
    ConversationKey,
    Conversations,
    SessionBusy,
    check_session_id,
    close_interrupted_turn,
    file_sessions,
)
from agent_app.models import DEMO_ANSWER, DemoModel, build_agent
from tests.agent.agent_support import FOUR_SENTENCES, GatedModel, collect, make_invocation, types, ws_transport

UUID = "0b7e6c52-3f1e-4d0a-9a53-5e2f1d9c4b11"
MINE = ConversationKey(ACTOR_ID, UUID)


def listing(directory: Path) -> list[str]:
    return sorted(path.name for path in directory.iterdir())


def test_a_uuid_is_a_session_id_and_none_or_blank_means_one_turn() -> None:
    assert check_session_id(UUID) == UUID
    assert check_session_id("A" * 100) == "A" * 100
    assert check_session_id(None) is None
    assert check_session_id("   ") is None


@pytest.mark.parametrize("raw", ["a" * 32, "a" * 101, "_" + "a" * 40, "a" * 40 + ".json", "a" * 40 + "/x", "é" * 40])
def test_ids_no_store_accepts_are_refused(raw: str) -> None:
    with pytest.raises(BadSessionId, match="the session id must be 33 to 100 letters"):
        check_session_id(raw)


async def test_one_turn_at_a_time_per_session_and_nothing_kept_when_idle() -> None:
    conversations = Conversations(None, wait_s=0.2)
    first = await conversations.acquire(MINE)
    other = await conversations.acquire(ConversationKey(ACTOR_ID, "b" * 36))  # another session is not held up
    with pytest.raises(SessionBusy, match=r"still running \(waited 0.2 s\)"):
        await conversations.acquire(MINE)
    assert conversations.active == 2

    waiting = asyncio.create_task(conversations.acquire(MINE))
    await asyncio.sleep(0.05)
    assert not waiting.done()
    first.release()
    second = await waiting
    first.release()  # a second release changes nothing
    with pytest.raises(SessionBusy):
        await conversations.acquire(MINE)
    second.release()
    other.release()
    assert conversations.active == 0


async def test_a_call_without_a_session_is_never_busy_and_has_no_store(tmp_path: Path) -> None:
    conversations = Conversations(file_sessions(tmp_path), wait_s=0.1)
    leases = [await conversations.acquire(None) for _ in range(3)]
    assert [conversations.session_manager(lease) for lease in leases] == [None, None, None]
    assert conversations.active == 0
    assert listing(tmp_path) == []


async def test_a_waiter_that_is_cancelled_leaves_no_slot_behind() -> None:
    conversations = Conversations(None, wait_s=5)
    lease = await conversations.acquire(MINE)
    waiting = asyncio.create_task(conversations.acquire(MINE))
    await asyncio.sleep(0.05)
    waiting.cancel()
    await asyncio.wait([waiting])
    lease.release()
    assert conversations.active == 0


async def test_an_interrupted_turn_is_stored_with_what_was_said(tmp_path: Path) -> None:
    sessions = file_sessions(tmp_path)
    agent = build_agent(DemoModel(), session_manager=sessions(MINE))
    agent.messages.append({"role": "user", "content": [{"text": "Tell me a story."}]})
    assert await close_interrupted_turn(agent, "Once upon a time ") is True
    assert await close_interrupted_turn(agent, "more") is False  # the turn already ends with a reply
    restored = build_agent(DemoModel(), session_manager=sessions(MINE))
    assert [(m["role"], m["content"]) for m in restored.messages] == [
        ("assistant", [{"text": "Once upon a time [interrupted]"}]),
    ]


async def test_a_turn_stopped_mid_answer_leaves_a_conversation_the_next_turn_can_continue(
    fake_speech, tmp_path: Path
) -> None:
    fake = await fake_speech()
    sessions = file_sessions(tmp_path)
    model = GatedModel(FOUR_SENTENCES, hold_at=5)
    agent = build_agent(model, session_manager=sessions(MINE))
    invocation = make_invocation(model, ws_transport(fake), agent=agent, prompt="Tell me about the tower.")
    stream = cast("AsyncGenerator[dict[str, Any], None]", invocation.events())
    seen = [await anext(stream) for _ in range(6)]  # agent_start and 5 tokens: the model is now held
    await stream.aclose()  # the caller stops (barge-in)
    said = "".join(e["text"] for e in seen if e["type"] == "text_delta")
    assert said == "The Eiffel Tower is about"

    follow_up = build_agent(DemoModel(tokens_per_s=2000), session_manager=sessions(MINE))
    assert [(m["role"], m["content"]) for m in follow_up.messages] == [
        ("user", [{"text": "Tell me about the tower."}]),
        ("assistant", [{"text": "The Eiffel Tower is about [interrupted]"}]),
    ]
    events = await collect(make_invocation(DemoModel(), ws_transport(fake), agent=follow_up, prompt="And Paris?"))
    assert types(events)[-1] == "agent_end"
    answer = "".join(e["text"] for e in events if e["type"] == "text_delta")
    assert answer == 'You asked me before: "Tell me about the tower." ' + DEMO_ANSWER
