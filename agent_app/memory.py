"""Conversations: one per (user, AgentCore session id), kept by a Strands session manager.

AgentCore Runtime passes a session id with every call (header `SESSION_HEADER`). Calls of one user
that carry the same id are turns of one conversation: the agent built for a call is given a
Strands session manager for that user and id, which loads the earlier turns when the agent is
built and stores each new message as it is added. Deployed, the store is AgentCore Memory
(`AGENTCORE_MEMORY_ID`, through the Strands integration in `bedrock-agentcore`), the user being
the events' actor; without it, Strands' `FileSessionManager` under `AGENT_SESSION_DIR`, one
directory per user, so the local stack remembers too. A call without a session id is a
conversation of one turn and stores nothing.

The user: AgentCore does not bind a session id to a caller (any valid token may name any session
id), so a conversation is keyed on both. A signed-in user is the token's `sub` (`agent_app.auth`);
the IAM callers of a stack share one actor, `ACTOR_ID`, as before signed-in users existed.

Concurrency: one Strands `Agent` runs one invocation at a time, and two agents writing the same
conversation would interleave their messages. So a conversation has one turn in flight: a second
call on a busy conversation waits up to `session_wait_s` (a barge-in's new question arrives while
the interrupted turn is still unwinding), then is refused with `SessionBusy`. Another user naming
the same session id is another conversation, never held up by this one. The lock lives in this
process, which is enough: AgentCore routes every call of a session to the same microVM, and the
local stack runs one agent process.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Final, NamedTuple

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
"""The user of every IAM caller (AgentCore Memory files events under an actor; an IAM-authorized
runtime gives the agent no caller identity)."""
MEMORY_LEGACY_ACTOR_PREFIXES: Final = ("session_", "agent_")
"""The actors `AgentCoreMemorySessionManager` falls back to when a conversation has no state of its
own (`session_<session id>`, `agent_<agent id>`, its legacy layout), whoever the conversation's
user: no user may be one of them (a test keeps them equal to the integration's)."""
USERS_DIR: Final = "users"


class ConversationKey(NamedTuple):
    """A conversation: its user and its session id."""

    user: str
    session_id: str


SessionManagerFactory = Callable[[ConversationKey], SessionManager]
"""Builds the session manager of one conversation (it reads the stored turns: call it off the loop)."""


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


def user_directory(directory: Path, user: str) -> Path:
    """Where a user's conversations are kept as files: a digest of the user id, one fixed-length
    name for any id (never a path of the caller's making, and two ids that differ only in case stay
    two directories on a case-insensitive file system)."""
    return directory / USERS_DIR / hashlib.sha256(user.encode("utf-8")).hexdigest()


def file_sessions(directory: Path) -> SessionManagerFactory:
    """Conversations as files under `directory` (Strands' FileSessionManager), for the local stack."""
    from strands.session.file_session_manager import FileSessionManager

    def build(conversation: ConversationKey) -> SessionManager:
        storage = user_directory(directory, conversation.user)
        return FileSessionManager(session_id=conversation.session_id, storage_dir=str(storage))

    return build


def agentcore_sessions(memory_id: str, region: str) -> SessionManagerFactory:
    """Conversations in AgentCore Memory `memory_id` (its short-term events), for the deployed stack."""
    from bedrock_agentcore.memory.integrations.strands.config import AgentCoreMemoryConfig
    from bedrock_agentcore.memory.integrations.strands.session_manager import AgentCoreMemorySessionManager

    def build(conversation: ConversationKey) -> SessionManager:
        # async_mode: the per-message writes run in a thread, off the event loop that streams the answer.
        config = AgentCoreMemoryConfig(
            memory_id=memory_id, session_id=conversation.session_id, actor_id=conversation.user, async_mode=True
        )
        return AgentCoreMemorySessionManager(config, region_name=region)

    return build


@dataclass(slots=True)
class _Slot:
    lock: asyncio.Lock
    holders: int = 0
    """Calls holding or waiting for the lock; the slot is dropped at 0, so idle conversations cost nothing."""


class ConversationLease:
    """A conversation's turn, held from before the agent is built until the call's work has stopped."""

    def __init__(self, conversations: Conversations, conversation: ConversationKey | None) -> None:
        self._conversations = conversations
        self.conversation = conversation
        """None: a one-turn call (no session id), which stores nothing."""
        self._released = False

    def release(self) -> None:
        """Let the next call of this conversation run; calling it again does nothing."""
        if not self._released:
            self._released = True
            if self.conversation is not None:
                self._conversations._release(self.conversation)


class Conversations:
    """Hands out one turn at a time per conversation (user, session id), and session managers for them."""

    def __init__(self, sessions: SessionManagerFactory | None, *, wait_s: float) -> None:
        """`sessions` None: nothing is stored (every call is a one-turn conversation)."""
        if not wait_s > 0:
            raise ValueError(f"wait_s must be > 0, got {wait_s}")
        self._sessions = sessions
        self._wait_s = wait_s
        self._slots: dict[ConversationKey, _Slot] = {}

    @property
    def active(self) -> int:
        """Conversations with a call running or waiting (0 when idle: nothing is kept per conversation)."""
        return len(self._slots)

    async def acquire(self, conversation: ConversationKey | None) -> ConversationLease:
        """Wait for the conversation's turn; raise `SessionBusy` after `wait_s`."""
        if conversation is None:
            return ConversationLease(self, None)
        slot = self._slots.get(conversation)
        if slot is None:
            slot = self._slots[conversation] = _Slot(asyncio.Lock())
        slot.holders += 1
        try:
            async with asyncio.timeout(self._wait_s):
                await slot.lock.acquire()
        except TimeoutError:
            self._drop_holder(conversation, slot)
            raise SessionBusy(
                f"another call of this conversation is still running (waited {self._wait_s:g} s)"
            ) from None
        except BaseException:
            self._drop_holder(conversation, slot)
            raise
        return ConversationLease(self, conversation)

    def session_manager(self, lease: ConversationLease) -> SessionManager | None:
        """The store of the leased conversation; None for a one-turn call. Blocking: call it off the loop."""
        if lease.conversation is None or self._sessions is None:
            return None
        return self._sessions(lease.conversation)

    def _release(self, conversation: ConversationKey) -> None:
        slot = self._slots[conversation]
        slot.lock.release()
        self._drop_holder(conversation, slot)

    def _drop_holder(self, conversation: ConversationKey, slot: _Slot) -> None:
        slot.holders -= 1
        if slot.holders == 0:
            del self._slots[conversation]


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
