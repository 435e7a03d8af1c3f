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

One task reads the socket; the running turn's task forwards its events; every send goes through
one lock, so frames never interleave. Stopping a turn cancels its task, which closes the
invocation's event generator: `Invocation` then cancels the model and the speech requests.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Final

from starlette.responses import JSONResponse
from starlette.websockets import WebSocket, WebSocketDisconnect, WebSocketState

from agent_app import events
from agent_app.events import AgentErrorCode, AgentEvent
from agent_app.invocation import BadRequest

logger = logging.getLogger(__name__)

Invoke = Callable[[object], Awaitable[JSONResponse | AsyncIterator[AgentEvent]]]
"""The entrypoint: a payload in, a 400 response or the invocation's events out."""

MAX_MESSAGE_CHARS: Final = 64 * 1024
CONTROL_TYPES: Final = ("prompt", "stop")


@dataclass(frozen=True, slots=True)
class Prompt:
    payload: dict[str, Any]
    """The invocation payload (every field but `type`), checked by the entrypoint."""


@dataclass(frozen=True, slots=True)
class Stop:
    pass


def parse_control(text: str) -> Prompt | Stop:
    """One control message from the caller; BadRequest says what is wrong."""
    if len(text) > MAX_MESSAGE_CHARS:
        raise BadRequest(f"the message has {len(text)} characters; the limit is {MAX_MESSAGE_CHARS}")
    try:
        obj = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise BadRequest(f"the message is not JSON: {exc}") from None
    if not isinstance(obj, dict):
        raise BadRequest(f"the message must be a JSON object, got {type(obj).__name__}")
    kind = obj.get("type")
    if kind == "stop":
        if len(obj) != 1:
            raise BadRequest("'stop' takes no other field")
        return Stop()
    if kind == "prompt":
        return Prompt({key: value for key, value in obj.items() if key != "type"})
    raise BadRequest(f"unknown message type {kind!r}; allowed: {', '.join(CONTROL_TYPES)}")


class ConversationSocket:
    """Serves one WebSocket connection until the caller closes it."""

    def __init__(self, websocket: WebSocket, invoke: Invoke) -> None:
        self._ws = websocket
        self._invoke = invoke
        self._send_lock = asyncio.Lock()
        self._turn = 0
        self._running: asyncio.Task[None] | None = None

    async def run(self) -> None:
        await self._ws.accept()
        try:
            while True:
                message = await self._ws.receive()
                if message["type"] == "websocket.disconnect":
                    return
                text = message.get("text")
                if text is None:
                    await self._send(events.error(AgentErrorCode.BAD_REQUEST, "binary frames are not accepted"))
                    continue
                try:
                    control = parse_control(text)
                except BadRequest as exc:
                    await self._send(events.error(AgentErrorCode.BAD_REQUEST, str(exc)))
                    continue
                await self._stop_turn()
                if isinstance(control, Prompt):
                    await self._start_turn(control.payload)
        except WebSocketDisconnect:
            return
        finally:
            # A caller who leaves mid-answer is a barge-in too.
            await self._stop_turn(announce=False)

    async def _start_turn(self, payload: dict[str, Any]) -> None:
        result = await self._invoke(payload)
        if isinstance(result, JSONResponse):
            await self._send(json.loads(bytes(result.body)))
            return
        self._turn += 1
        self._running = asyncio.create_task(self._forward(self._turn, result), name=f"ws-turn-{self._turn}")

    async def _forward(self, turn: int, stream: AsyncIterator[AgentEvent]) -> None:
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

    async def _stop_turn(self, *, announce: bool = True) -> None:
        task, self._running = self._running, None
        if task is None or task.done():
            return
        task.cancel()
        await asyncio.wait([task])
        if announce:
            await self._send({"type": "turn_stopped", "turn": self._turn})

    async def _send(self, message: dict[str, Any] | AgentEvent) -> None:
        async with self._send_lock:
            if self._ws.application_state != WebSocketState.CONNECTED:
                return
            with contextlib.suppress(WebSocketDisconnect):
                await self._ws.send_text(json.dumps(message, ensure_ascii=False))


def conversation_handler(invoke: Invoke) -> Callable[[WebSocket, object], Awaitable[None]]:
    """The `@app.websocket` handler serving `invoke` (AgentCore passes the request context second)."""

    async def handler(websocket: WebSocket, context: object) -> None:
        await ConversationSocket(websocket, invoke).run()

    return handler
