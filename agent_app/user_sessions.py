"""How many sessions each signed-in user has open, held to `AGENT_MAX_SESSIONS_PER_USER`.

A user's session (a session id, as the user's conversation) is open while anything holds it: a
call running one of its turns (`POST /invocations`, a `WS /ws` turn), from before its agent is
built until all of its work has stopped, and a `WS /ws` connection on it, for as long as the
socket is open. A call without a session id is a session of its own while its turn runs. The
same session held twice (a reconnect while the old socket lingers, a turn on an open socket)
counts once. Past the limit a new session is refused (`TooManySessions`: HTTP 429 or an `error`
event, `too_many_sessions`); the user's open sessions and every other user go on.

The IAM callers of a stack are one identity shared by its terminal client, lab and checks; they
are not limited.

Per process: the local stack runs one agent, so the limit holds there as stated. Deployed,
AgentCore Runtime runs each session in a microVM of its own, so one process sees one session id
and the limit never binds across a user's sessions; bounding a user's sessions on AWS needs a
count shared by the microVMs (`agent_app/README.md`, "Signed-in users").
"""

from __future__ import annotations

import threading
from collections import Counter

from agent_app.identity import Identity


class TooManySessions(Exception):
    """The user already has as many sessions open as the limit allows."""


class SessionHold:
    """One holder of a user's session; `release` lets go (again: nothing)."""

    def __init__(self, sessions: UserSessions | None, user: str, session: object) -> None:
        self._sessions = sessions
        self._user = user
        self._session = session

    def release(self) -> None:
        if self._sessions is not None:
            sessions, self._sessions = self._sessions, None
            sessions._release(self._user, self._session)


class UserSessions:
    """The open sessions of each signed-in user of this process.

    Thread-safe: `POST /invocations` runs on the AgentCore SDK's worker loop, `WS /ws` on the server's.
    """

    def __init__(self, limit: int) -> None:
        if limit < 1:
            raise ValueError(f"limit must be >= 1, got {limit}")
        self.limit = limit
        self._lock = threading.Lock()
        self._open: dict[str, Counter[object]] = {}
        """Per user: holders per session (a session id, or an object of its own for a one-turn call)."""

    def open_sessions(self, user: str) -> int:
        with self._lock:
            return len(self._open.get(user, ()))

    def hold(self, identity: Identity, session_id: str | None) -> SessionHold:
        """Hold `identity`'s session `session_id` (None: a one-turn call); raises `TooManySessions`."""
        if not identity.signed_in:
            return SessionHold(None, identity.user, session_id)
        session: object = session_id if session_id is not None else object()
        with self._lock:
            held = self._open.setdefault(identity.user, Counter())
            if session not in held and len(held) >= self.limit:
                raise TooManySessions(
                    f"this user already has {len(held)} sessions open, the most one user may have at once "
                    f"(limit {self.limit}); close one, then try again"
                )
            held[session] += 1
        return SessionHold(self, identity.user, session)

    def _release(self, user: str, session: object) -> None:
        with self._lock:
            held = self._open[user]
            held[session] -= 1
            if held[session] == 0:
                del held[session]
            if not held:
                del self._open[user]
