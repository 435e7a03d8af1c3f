"""A conversation with the agent over one of its two routes; each question is one `Turn`.

- `WebSocketConversation`: the full-duplex route (`WS /ws` locally, the runtime's `/ws` through
  AgentCore, SigV4-signed): one connection for the conversation, opened at the first question and
  opened again, on the same session id, when it has closed in between (AgentCore ends a session
  idle for 15 minutes; the client sends no pings, so a conversation left at the prompt lets the
  runtime end its microVM). Up: `{"type": "prompt", ...}`, `{"type": "stop"}`; down: the turn's
  events, each with its `turn` number (counted per connection), `turn_stopped` after a stop (ours,
  or the agent's when another connection of the session asked a question), an `error` without
  `turn` when the agent refused the question. The agent answers prompts in the order sent, each
  with a new turn number or a refusal without one, so the n-th of those on a connection answers
  its n-th prompt (`TurnLedger`): a turn never waits for a number the agent gave no prompt.
- `SseConversation`: one request per question (`POST /invocations` locally, InvokeAgentRuntime
  through boto3), the session id in `X-Amzn-Bedrock-AgentCore-Runtime-Session-Id`; stopping a
  turn hangs up, which the agent takes as a barge-in.

Opening a connection or starting a request may be refused: the `Endpoint` turns the refusal into
a `CommandError` that names the code and the fix (`voicestack.talk.errors`). A
`RetryableConflictException` (409: the runtime's session is starting) is retried once after a
random 0.5-1.5 s, then reported.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import ssl
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final, Protocol

from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidStatus, InvalidURI
from websockets.protocol import State

from voicestack.errors import CommandError
from voicestack.talk.errors import RETRIED_CODE
from voicestack.talk.sse import SseError, SseParser
from voicestack.talk.turn import CONNECTION_CLOSED, PROTOCOL_ERROR, Transport

Event = tuple[dict[str, Any], int]
"""An agent event and the bytes it took on the wire."""

STOP_TIMEOUT_S: Final = 5.0
"""How long a stopped turn may take to confirm (`turn_stopped`) before the client gives up on it."""
MAX_MESSAGE_BYTES: Final = 4 * 1024 * 1024
"""Largest WebSocket message accepted from the agent (its audio events are a few tens of KB)."""


def retry_delay_s() -> float:
    """The jitter before the one retry of a RetryableConflictException."""
    return random.uniform(0.5, 1.5)


class TurnFailed(Exception):
    """A turn that ended without its end event: a closed connection, events that break the contract."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class Turn(Protocol):
    """One question's events as they arrive (`TurnFailed` when they cannot go on)."""

    def events(self) -> AsyncIterator[Event]: ...

    async def stop(self) -> bool:
        """Barge-in: ask the agent to stop this answer. True: `events` goes on until the agent confirms
        (WebSocket); False: the answer is over for this client, stop reading (one request: hang up)."""


class Conversation(Protocol):
    transport: Transport
    target: str
    session_id: str

    async def ask(self, payload: Mapping[str, Any]) -> tuple[Turn, float, float | None]:
        """Send a question: its turn, the clock when it was sent, and what opening a connection took (ms)."""

    async def aclose(self) -> None: ...


# --- the WebSocket route ---------------------------------------------------------------------


@dataclass(frozen=True)
class Handshake:
    """How to open one WebSocket connection (made again for each: a signature is valid 5 minutes)."""

    url: str
    headers: Mapping[str, str]
    ssl: ssl.SSLContext | None


class WebSocketEndpoint(Protocol):
    description: str

    def handshake(self, session_id: str) -> Handshake: ...

    def refusal(self, status: int, headers: Mapping[str, str], body: bytes) -> tuple[str, CommandError]:
        """(AWS error code or agent code, the error to raise) for a refused handshake."""

    def unreachable(self, exc: BaseException) -> CommandError: ...


class WebSocketConversation:
    transport: Transport = "websocket"

    def __init__(
        self,
        endpoint: WebSocketEndpoint,
        session_id: str,
        *,
        on_reconnect: Callable[[int | None, str], None] | None = None,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        self._endpoint = endpoint
        self.session_id = session_id
        self.target = endpoint.description
        self._on_reconnect = on_reconnect
        self._clock = clock
        self._ws: ClientConnection | None = None
        self._ledger = TurnLedger()

    async def ask(self, payload: Mapping[str, Any]) -> tuple[Turn, float, float | None]:
        connect_ms: float | None = None
        if self._ws is None or self._ws.state is not State.OPEN:
            if self._ws is not None and self._on_reconnect is not None:
                self._on_reconnect(self._ws.close_code, self._ws.close_reason or "")
            began = self._clock()
            self._ws = await self._open()
            self._ledger = TurnLedger()
            connect_ms = round((self._clock() - began) * 1000.0, 1)
        message = json.dumps({"type": "prompt", **payload}, ensure_ascii=False)
        sent_at = self._clock()
        try:
            await self._ws.send(message)
        except ConnectionClosed as exc:
            raise TurnFailed(CONNECTION_CLOSED, _closed(exc)) from None
        return _WebSocketTurn(self._ws, self._ledger, self._ledger.asked()), sent_at, connect_ms

    async def _open(self) -> ClientConnection:
        try:
            return await self._connect_once()
        except Conflict:
            await asyncio.sleep(retry_delay_s())
        try:
            return await self._connect_once()
        except Conflict as again:
            raise again.error from None

    async def _connect_once(self) -> ClientConnection:
        handshake = self._endpoint.handshake(self.session_id)  # signed now: a signature lives 5 minutes
        try:
            return await connect(
                handshake.url,
                additional_headers=dict(handshake.headers),
                ssl=handshake.ssl,
                ping_interval=None,
                max_size=MAX_MESSAGE_BYTES,
                compression=None,
                open_timeout=30,
            )
        except InvalidStatus as exc:
            response = exc.response
            code, error = self._endpoint.refusal(
                response.status_code,
                {k.lower(): v for k, v in response.headers.raw_items()},
                bytes(response.body or b""),
            )
            raise (Conflict(error) if code == RETRIED_CODE else error) from None
        except (OSError, TimeoutError, InvalidHandshake, InvalidURI) as exc:
            raise self._endpoint.unreachable(exc) from None

    async def aclose(self) -> None:
        if self._ws is not None:
            await self._ws.close()


def _closed(exc: ConnectionClosed) -> str:
    frame = exc.rcvd or exc.sent
    if frame is None:
        return "the connection closed without a close frame"
    return f"the connection closed with {frame.code}" + (f" ({frame.reason})" if frame.reason else "")


class TurnLedger:
    """Which prompt a message of one connection answers (pure): the agent answers prompts in the order
    sent, each with a new turn number (its first event, or `turn_stopped` when it never began) or with
    a refusal without one, so the n-th such answer is the n-th prompt's."""

    def __init__(self) -> None:
        self._asked = 0
        self._answered = 0
        self._last_turn = 0

    def asked(self) -> int:
        """A prompt was sent: its index on this connection (1, 2, ...)."""
        self._asked += 1
        return self._asked

    def answer(self, turn: int | None) -> int | None:
        """The index of the prompt a message with `turn` (None: a refusal) starts answering, or None
        when it goes on with a turn already numbered."""
        if turn is not None and turn <= self._last_turn:
            return None
        if turn is not None:
            self._last_turn = turn
        self._answered += 1
        return self._answered


class _WebSocketTurn:
    def __init__(self, ws: ClientConnection, ledger: TurnLedger, prompt: int) -> None:
        self._ws = ws
        self._ledger = ledger
        self._prompt = prompt
        self._number: int | None = None
        """The agent's number for this turn, once its first message has said it."""
        self._stopping = False

    async def events(self) -> AsyncIterator[Event]:
        while True:
            try:
                message = await self._ws.recv()
            except ConnectionClosed as exc:
                raise TurnFailed(CONNECTION_CLOSED, _closed(exc)) from None
            if isinstance(message, bytes):
                raise TurnFailed(PROTOCOL_ERROR, "the agent sent a binary frame; its events are JSON text")
            try:
                event = json.loads(message)
            except ValueError as exc:
                raise TurnFailed(PROTOCOL_ERROR, f"the agent sent a frame that is not JSON: {exc}") from None
            if not isinstance(event, dict):
                raise TurnFailed(PROTOCOL_ERROR, "the agent sent a JSON frame that is not an object")
            turn = event.get("turn")
            if turn is None and event.get("type") != "error":
                raise TurnFailed(PROTOCOL_ERROR, f"an event without 'turn': {message[:120]}")
            if turn is not None and (not isinstance(turn, int) or isinstance(turn, bool) or turn < 1):
                raise TurnFailed(PROTOCOL_ERROR, f"an event whose 'turn' is not a turn number: {message[:120]}")
            if self._ledger.answer(turn) == self._prompt:
                if turn is None:
                    yield event, len(message.encode())  # the question itself was refused
                    return
                self._number = turn
            if turn is None or turn != self._number:
                continue  # an earlier question's answer (stopped, or refused after it was given up)
            yield event, len(message.encode())  # turn_stopped too: the recorder ends the turn on it
            if event.get("type") in ("agent_end", "error", "turn_stopped"):
                return

    async def stop(self) -> bool:
        if not self._stopping:
            self._stopping = True
            with contextlib.suppress(ConnectionClosed):
                await self._ws.send(json.dumps({"type": "stop"}))
        return True


# --- one request per question ----------------------------------------------------------------


ChunkReader = Callable[[], Awaitable[bytes]]
"""Reads the next bytes of a response as they arrive; b"" at its end."""


@dataclass
class Invocation:
    """A started request: its reader, and how to hang up."""

    read: ChunkReader
    hang_up: Callable[[], Awaitable[None]]


class InvokeEndpoint(Protocol):
    description: str

    async def invoke(self, payload: Mapping[str, Any], session_id: str) -> Invocation:
        """Start the request; raises `Conflict` for a RetryableConflictException, CommandError otherwise."""


class Conflict(Exception):
    """A refusal that may be retried once (RetryableConflictException), with the error to raise after."""

    def __init__(self, error: CommandError) -> None:
        super().__init__(str(error))
        self.error = error


class SseConversation:
    transport: Transport = "sse"

    def __init__(
        self, endpoint: InvokeEndpoint, session_id: str, clock: Callable[[], float] = time.perf_counter
    ) -> None:
        self._endpoint = endpoint
        self.session_id = session_id
        self.target = endpoint.description
        self._clock = clock

    async def ask(self, payload: Mapping[str, Any]) -> tuple[Turn, float, float | None]:
        sent_at = self._clock()
        try:
            invocation = await self._endpoint.invoke(payload, self.session_id)
        except Conflict:
            await asyncio.sleep(retry_delay_s())
            sent_at = self._clock()
            try:
                invocation = await self._endpoint.invoke(payload, self.session_id)
            except Conflict as again:
                raise again.error from None
        return _SseTurn(invocation), sent_at, None

    async def aclose(self) -> None:
        return None


class _SseTurn:
    def __init__(self, invocation: Invocation) -> None:
        self._invocation = invocation
        self._stopped = False

    async def events(self) -> AsyncIterator[Event]:
        parser = SseParser()
        try:
            while True:
                try:
                    chunk = await self._invocation.read()
                except TurnFailed:
                    if self._stopped:
                        return  # our own hang-up
                    raise
                if not chunk:
                    break
                try:
                    for event in parser.feed(chunk):
                        yield event
                except SseError as exc:
                    raise TurnFailed(PROTOCOL_ERROR, str(exc)) from None
            if parser.pending.strip():
                raise TurnFailed(CONNECTION_CLOSED, "the answer's stream ended in the middle of an event")
        finally:
            await self._invocation.hang_up()

    async def stop(self) -> bool:
        # The reader is cancelled next; closing the generator hangs up (in the reading task, where
        # the HTTP client expects it).
        self._stopped = True
        return False
