"""Conversations: one per AgentCore session id, kept by a Strands session manager.

AgentCore Runtime passes a session id with every call (header `SESSION_HEADER`). Calls that carry
the same id are turns of one conversation: the agent built for a call is given a Strands session
manager for that id, which loads the earlier turns when the agent is built and stores each new
message as it is added. Deployed, the store is AgentCore Memory (`AGENTCORE_MEMORY_ID`, through
the Strands integration in `bedrock-agentcore`); without it, Strands' `FileSessionManager` under
`AGENT_SESSION_DIR`, so the local stack remembers too. A call without a session id is a
conversation of one turn and stores nothing.

Concurrency: one Strands `Agent` runs one invocation at a time, and two agents writing the same
session would interleave their messages. So a conversation has one turn in flight: a second call
on a busy session waits up to `session_wait_s` (a barge-in's new question arrives while the
interrupted turn is still unwinding), then is refused with `SessionBusy`. The lock lives in this
process, which is enough: AgentCore routes every call of a session to the same microVM, and the
local stack runs one agent process.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from strands import Agent
from strands.hooks import MessageAddedEvent
from strands.session.session_manager import SessionManager
from strands.types.content import Message

logger = logging.getLogger(__name__)

SESSION_HEADER: Final = "X-Amzn-Bedrock-AgentCore-Runtime-Session-Id"
"""The header AgentCore Runtime (and the local web server's proxy) carries the session id in."""
RUNTIME_SESSION_ID_CHARS: Final = (33, 256)
"""AgentCore Runtime's `runtimeSessionId`: botocore's bedrock-agentcore shape `SessionType` (min 33,
max 256, no pattern)."""
MEMORY_SESSION_ID_CHARS: Final = (1, 100)
MEMORY_SESSION_ID_PATTERN: Final = "[a-zA-Z0-9][a-zA-Z0-9-_]*"
"""AgentCore Memory's `sessionId` (CreateEvent, ListEvents, ...): botocore's bedrock-agentcore shape
`SessionId`. The tests hold these to botocore's models."""
SESSION_ID_CHARS: Final = (
    max(RUNTIME_SESSION_ID_CHARS[0], MEMORY_SESSION_ID_CHARS[0]),
    min(RUNTIME_SESSION_ID_CHARS[1], MEMORY_SESSION_ID_CHARS[1]),
)
"""What both accept, whichever store this process uses, so that a session id that works on the
local stack works deployed: 33 to 100 characters of Memory's pattern. A UUID4 string fits."""
_SESSION_ID = re.compile(MEMORY_SESSION_ID_PATTERN)
ACTOR_ID: Final = "voicestack-caller"
"""AgentCore Memory files events under an actor; the runtime gives the agent no caller identity."""
MEMORY_LEGACY_ACTOR_PREFIXES: Final = ("session_", "agent_")
"""The actors `AgentCoreMemorySessionManager` falls back to when a conversation has no state of its
own (`session_<session id>`, `agent_<agent id>`, its legacy layout), whoever the conversation's
user: no user may be one of them (a test keeps them equal to the integration's)."""

SessionManagerFactory = Callable[[str], SessionManager]
"""Builds the session manager of one session id (it reads the stored turns: call it off the loop)."""


class BadSessionId(ValueError):
    """The session id cannot name a conversation; the message says what is allowed."""


class SessionBusy(Exception):
    """Another call of the same conversation is still running."""


def check_session_id(raw: str | None) -> str | None:
    """The session id of a call, checked; None (or blank) means a conversation of one turn."""
    if raw is None or not raw.strip():
        return None
    shortest, longest = SESSION_ID_CHARS
    if not shortest <= len(raw) <= longest or _SESSION_ID.fullmatch(raw) is None:
        raise BadSessionId(
            f"the session id must be {shortest} to {longest} letters, digits, '-' or '_', starting with a "
            f"letter or digit (a UUID works); got {len(raw)} characters"
        )
    return raw


def file_sessions(directory: Path) -> SessionManagerFactory:
    """Conversations as files under `directory` (Strands' FileSessionManager), for the local stack."""
    from strands.session.file_session_manager import FileSessionManager

    def build(session_id: str) -> SessionManager:
        return FileSessionManager(session_id=session_id, storage_dir=str(directory))

    return build


def agentcore_sessions(memory_id: str, region: str) -> SessionManagerFactory:
    """Conversations in AgentCore Memory `memory_id` (its short-term events), for the deployed stack."""
    from bedrock_agentcore.memory.integrations.strands.config import AgentCoreMemoryConfig
    from bedrock_agentcore.memory.integrations.strands.session_manager import AgentCoreMemorySessionManager

    def build(session_id: str) -> SessionManager:
        # async_mode: the per-message writes run in a thread, off the event loop that streams the answer.
        config = AgentCoreMemoryConfig(memory_id=memory_id, session_id=session_id, actor_id=ACTOR_ID, async_mode=True)
        return AgentCoreMemorySessionManager(config, region_name=region)

    return build


@dataclass(slots=True)
class _Slot:
    lock: asyncio.Lock
    users: int = 0
    """Calls holding or waiting for the lock; the slot is dropped at 0, so idle sessions cost nothing."""


class ConversationLease:
    """A conversation's turn, held from before the agent is built until the call's work has stopped."""

    def __init__(self, conversations: Conversations, session_id: str | None) -> None:
        self._conversations = conversations
        self.session_id = session_id
        self._released = False

    def release(self) -> None:
        """Let the next call of this conversation run; calling it again does nothing."""
        if not self._released:
            self._released = True
            if self.session_id is not None:
                self._conversations._release(self.session_id)


class Conversations:
    """Hands out one turn at a time per session id, and session managers for them."""

    def __init__(self, sessions: SessionManagerFactory | None, *, wait_s: float) -> None:
        """`sessions` None: nothing is stored (every call is a one-turn conversation)."""
        if not wait_s > 0:
            raise ValueError(f"wait_s must be > 0, got {wait_s}")
        self._sessions = sessions
        self._wait_s = wait_s
        self._slots: dict[str, _Slot] = {}

    @property
    def active(self) -> int:
        """Sessions with a call running or waiting (0 when idle: nothing is kept per session)."""
        return len(self._slots)

    async def acquire(self, session_id: str | None) -> ConversationLease:
        """Wait for the conversation's turn; raise `SessionBusy` after `wait_s`."""
        if session_id is None:
            return ConversationLease(self, None)
        slot = self._slots.get(session_id)
        if slot is None:
            slot = self._slots[session_id] = _Slot(asyncio.Lock())
        slot.users += 1
        try:
            async with asyncio.timeout(self._wait_s):
                await slot.lock.acquire()
        except TimeoutError:
            self._drop_user(session_id, slot)
            raise SessionBusy(
                f"another call of this conversation is still running (waited {self._wait_s:g} s)"
            ) from None
        except BaseException:
            self._drop_user(session_id, slot)
            raise
        return ConversationLease(self, session_id)

    def session_manager(self, lease: ConversationLease) -> SessionManager | None:
        """The store of the leased conversation; None for a one-turn call. Blocking: call it off the loop."""
        if lease.session_id is None or self._sessions is None:
            return None
        return self._sessions(lease.session_id)

    def _release(self, session_id: str) -> None:
        slot = self._slots[session_id]
        slot.lock.release()
        self._drop_user(session_id, slot)

    def _drop_user(self, session_id: str, slot: _Slot) -> None:
        slot.users -= 1
        if slot.users == 0:
            del self._slots[session_id]


INTERRUPTED_MARK: Final = "[interrupted]"


async def close_interrupted_turn(agent: Agent, said: str) -> bool:
    """Store what the agent had said when its turn stopped without an answer (barge-in, error).

    A stopped turn leaves the caller's question as the last message; the next question would then
    follow it directly, and Bedrock refuses two user messages in a row. The reply added here is
    the text the caller saw and heard, marked as interrupted, so the model also knows where it
    was cut off. It goes through the agent's hooks, so the session manager stores it. Returns
    whether a reply was added.
    """
    if not agent.messages or agent.messages[-1]["role"] != "user":
        return False
    text = f"{said.strip()} {INTERRUPTED_MARK}".lstrip()
    message: Message = {"role": "assistant", "content": [{"text": text}]}
    agent.messages.append(message)
    await agent.hooks.invoke_callbacks_async(MessageAddedEvent(agent=agent, message=message))
    return True
