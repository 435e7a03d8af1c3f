"""WS /ws: a whole conversation over AgentCore Runtime's WebSocket route, full duplex.

SSE can only learn of a barge-in when the caller's connection closes, and whether AgentCore's
front door passes a client's disconnect on to the container at once is not documented. Over the
WebSocket the caller says so explicitly, and the connection stays open for the next question:

- up (text frames, JSON): `{"type": "prompt", "prompt": str, "mode"?: ..., "voice"?: ...}` (the
  invocation payload's fields) asks a question; if an answer is still running it is stopped first
  (a new question is a barge-in). `{"type": "stop"}` stops the running answer; no-op without one.
- down (text frames, JSON): the same events as the SSE route, each with `"turn": n` (1, 2, ... per
  connection); `{"type": "turn_stopped", "turn": n}` once turn n's work has stopped (model stream
  cancelled, speech requests cancelled); an `error` event without `turn` for a message that cannot
  be served (the connection goes on). A closed connection stops the running answer.

Hostile messages never end the connection: a binary frame, a message over `MAX_REQUEST_BYTES`,
anything that is not a JSON object of a known type and a prompt the entrypoint refuses each get
one `error` event (`bad_request`, or the entrypoint's code) and one warning in the log. Only a
message over `WS_MAX_MESSAGE_BYTES` is refused by the server before it is read (close 1009).

AgentCore's frame limits (`agent_app.frames`): every event fits one frame, and `FramePacer` keeps
the connection under AgentCore's frame rate; a turn's events that wait for their turn are merged
meanwhile in its outbox, so the pacing costs no audio.

One conversation, one running turn: a prompt on a conversation whose turn runs on *another*
connection stops that turn first (`RunningTurns`), as a barge-in: the caller reconnected after its
socket dropped (the old socket may not have noticed yet), and must not wait for a turn nobody
reads. A conversation is the user's (`memory.ConversationKey`): another user naming the same
session id never stops this one's turn.

A connection the agent will not serve (a bad token, the user's session limit, the user pool's keys
unavailable) is accepted, told why in one `error` event and closed (`refuse_connection`): a
browser cannot read the status of a refused upgrade, and the page must tell "sign in again" from
a network failure. The upgrade is answered with the `base64UrlBearerAuthorization` subprotocol
whenever the caller offered it (a browser fails a handshake that picks none of its protocols).

One task reads the socket; the running turn's task forwards its events; every send goes through
one lock, so frames never interleave. Stopping a turn cancels its task, which closes the
invocation's event generator: `Invocation` then cancels the model and the speech requests.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final, Protocol, runtime_checkable

from starlette.types import Message
from starlette.websockets import WebSocket, WebSocketDisconnect, WebSocketState

from agent_app import events
from agent_app.auth import accepted_subprotocol
from agent_app.events import AgentErrorCode, AgentEvent, ErrorEvent
from agent_app.frames import MAX_EVENT_BYTES, FramePacer
from agent_app.invocation import MAX_REQUEST_BYTES, BadRequest, parse_json_object
from agent_app.memory import ConversationKey
from speech_protocol import quote

logger = logging.getLogger(__name__)

CONTROL_TYPES: Final = ("prompt", "stop")
WS_MAX_MESSAGE_BYTES: Final = 1024 * 1024
"""uvicorn's `ws_max_size` for the agent: a bigger message closes the connection (1009) before it is
read; from `MAX_REQUEST_BYTES` up to this, it gets an `error` event. AgentCore's front door refuses
frames over 32 KB itself."""
ANNOUNCE_TIMEOUT_S: Final = 1.0
"""Longest wait to tell a superseded connection that its turn stopped (it may be dead)."""


@runtime_checkable
class Turn(Protocol):
    """A started invocation: its events (read once), and `hang_up` to drop one never read."""

    def events(self) -> AsyncIterator[AgentEvent]: ...

    def hang_up(self) -> None: ...


Invoke = Callable[[object], Awaitable[Turn | ErrorEvent]]
"""The entrypoint: a payload in, the turn or the `error` event that refuses it out."""


@dataclass(frozen=True, slots=True)
class Prompt:
    payload: dict[str, Any]
    """The invocation payload (every field but `type`), checked by the entrypoint."""


@dataclass(frozen=True, slots=True)
class Stop:
    pass


def parse_control(text: str) -> Prompt | Stop:
    """One control message from the caller; BadRequest says what is wrong."""
    if len(text) > MAX_REQUEST_BYTES or len(text.encode("utf-8")) > MAX_REQUEST_BYTES:
        raise BadRequest(f"the message is over the limit of {MAX_REQUEST_BYTES} bytes")
    obj = parse_json_object(text, what="the message")
    kind = obj.get("type")
    if kind == "stop":
        if len(obj) != 1:
            raise BadRequest("'stop' takes no other field")
        return Stop()
    if kind == "prompt":
        return Prompt({key: value for key, value in obj.items() if key != "type"})
    raise BadRequest(f"unknown message type {quote(kind)}; allowed: {', '.join(CONTROL_TYPES)}")


def encode_frame(message: Mapping[str, object]) -> str:
    """The text frame of one event: UTF-8 JSON of at most `MAX_EVENT_BYTES` (the builders see to it).

    Two nets for a bug of ours, so that it never closes the connection: a lone surrogate a builder
    let through is sent as JSON's escape, and an event over the limit becomes an `internal_error`.
    """
    text = json.dumps(message, ensure_ascii=False)
    try:
        size = len(text.encode("utf-8"))
    except UnicodeEncodeError:
        text = json.dumps(message)
        size = len(text)
    if size > MAX_EVENT_BYTES:
        logger.error(
            "a %r event of %d bytes is over the frame limit; sent as internal_error", message.get("type"), size
        )
        error = events.error(AgentErrorCode.INTERNAL_ERROR, "internal error: an event too large for one frame")
        text = json.dumps({**error, **({"turn": message["turn"]} if "turn" in message else {})})
    return text


async def refuse_connection(websocket: WebSocket, event: ErrorEvent, close_code: int) -> None:
    """Accept the upgrade, send `event`, close with `close_code` (its reason: the event's code)."""
    await websocket.accept(subprotocol=accepted_subprotocol(websocket.scope.get("subprotocols", ())))
    with contextlib.suppress(WebSocketDisconnect):
        await websocket.send_text(encode_frame(event))
        await websocket.close(code=close_code, reason=event["code"])


class RunningTurns:
    """Which connection runs each conversation's turn; one per app (a session's calls reach one process)."""

    def __init__(self) -> None:
        self._owners: dict[ConversationKey, ConversationSocket] = {}

    async def take(self, conversation: ConversationKey, socket: ConversationSocket) -> None:
        """`socket` runs the conversation's next turn: a turn running on another connection stops first."""
        previous = self._owners.get(conversation)
        self._owners[conversation] = socket
        if previous is not None and previous is not socket:
            await previous.stop_turn_for_another_connection()

    def owns(self, conversation: ConversationKey, socket: ConversationSocket) -> bool:
        return self._owners.get(conversation) is socket

    def leave(self, conversation: ConversationKey, socket: ConversationSocket) -> None:
        if self._owners.get(conversation) is socket:
            del self._owners[conversation]


class ConversationSocket:
    """Serves one WebSocket connection until the caller closes it."""

    def __init__(
        self,
        websocket: WebSocket,
        invoke: Invoke,
        *,
        conversation: ConversationKey | None,
        running_turns: RunningTurns,
    ) -> None:
        """`conversation`: the user's session the connection names; None: each prompt is a one-turn call."""
        self._ws = websocket
        self._invoke = invoke
        self._conversation = conversation
        self._running_turns = running_turns
        self._send_lock = asyncio.Lock()
        self._pacer = FramePacer(asyncio.get_running_loop().time)
        self._turn = 0
        self._running: tuple[asyncio.Task[None], Turn] | None = None
        """The running turn's forwarding task and its invocation."""

    async def run(self) -> None:
        await self._ws.accept(subprotocol=accepted_subprotocol(self._ws.scope.get("subprotocols", ())))
        try:
            while True:
                message = await self._ws.receive()
                if message["type"] == "websocket.disconnect":
                    return
                control = await self._control(message)
                if control is None:
                    continue
                await self._stop_turn()
                if isinstance(control, Prompt):
                    await self._start_turn(control.payload)
        except WebSocketDisconnect:
            return
        finally:
            # A caller who leaves mid-answer is a barge-in too.
            await self._stop_turn(announce=False)
            if self._conversation is not None:
                self._running_turns.leave(self._conversation, self)

    async def stop_turn_for_another_connection(self) -> None:
        """Another connection of this conversation asked a question: stop this one's running turn."""
        if not await self._stop_turn(announce=False):
            return
        # Telling a socket that may be dead could hang: the new question does not wait for it.
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(ANNOUNCE_TIMEOUT_S):
                await self._send({"type": "turn_stopped", "turn": self._turn})

    async def _control(self, message: Message) -> Prompt | Stop | None:
        """The caller's message as a control, or None when it was refused with an `error` event."""
        text = message.get("text")
        try:
            if text is None:  # the "bytes" key: a binary frame
                raise BadRequest("binary frames are not accepted; send JSON in text frames")
            return parse_control(text)
        except BadRequest as exc:
            logger.warning("ws: refused a message: %s", exc)
            await self._send(events.error(AgentErrorCode.BAD_REQUEST, str(exc)))
            return None

    async def _start_turn(self, payload: dict[str, Any]) -> None:
        if self._conversation is not None:
            await self._running_turns.take(self._conversation, self)
        result = await self._invoke(payload)
        if not isinstance(result, Turn):
            await self._send(result)
            return
        self._turn += 1
        if self._conversation is not None and not self._running_turns.owns(self._conversation, self):
            # Another connection asked while this turn was being set up: it never starts.
            result.hang_up()
            await self._send({"type": "turn_stopped", "turn": self._turn})
            return
        task = asyncio.create_task(self._forward(self._turn, result), name=f"ws-turn-{self._turn}")
        self._running = task, result

    async def _forward(self, turn: int, invocation: Turn) -> None:
        stream = invocation.events()
        try:
            async for event in stream:
                await self._send({**event, "turn": turn})
        except WebSocketDisconnect:
            logger.info("turn %d: the caller left while events were being sent", turn)
        finally:
            if isinstance(stream, AsyncGenerator):
                # Cancelled while sending, the generator sits at a `yield`: close it so the
                # invocation stops its model and speech work now, not at garbage collection.
                await stream.aclose()

    async def _stop_turn(self, *, announce: bool = True) -> bool:
        """Stop the running turn and wait until its work has stopped; whether one was running."""
        running, self._running = self._running, None
        if running is None or running[0].done():
            return False
        task, invocation = running
        task.cancel()
        await asyncio.wait([task])
        # A task cancelled before it ran never read the invocation's events, so the invocation never
        # started: let go of it (and of its conversation's turn) now. A no-op once it has finished.
        invocation.hang_up()
        if announce:
            await self._send({"type": "turn_stopped", "turn": self._turn})
        return True

    async def _send(self, message: Mapping[str, object]) -> None:
        frame = encode_frame(message)
        async with self._send_lock:
            if self._ws.application_state != WebSocketState.CONNECTED:
                return
            if (wait_s := self._pacer.delay()) > 0:
                await asyncio.sleep(wait_s)
            with contextlib.suppress(WebSocketDisconnect):
                await self._ws.send_text(frame)
