"""One WebSocket session of the bidirectional speech protocol (`speech_protocol`).

Three tasks share a session:
- the receiver reads client frames (text or binary, both UTF-8 JSON), validates them and queues
  synthesis requests, or acts on `cancel` and `close`; bad input becomes an `error` frame;
- the producer takes requests in order and, for each, pulls chunks lazily from the chunk policy
  (telling it each chunk's compute time and the end of each request, so that an adaptive policy
  learns the engine's speed) and runs them on the engine through the session's scheduler lane; it
  hands each chunk's frames to the outbox and goes straight on to the next chunk (or the next
  request), so chunk k+1 is computed while chunk k is being sent;
- the writer is the only task that sends: it drains the outbox in order, so a request's frames
  always go out as synthesis_start, [timestamps], audio..., synthesis_complete.

Cancelling a request marks it, stops its synthesis at the next await (a queued engine job is
dropped; a running one finishes and is discarded), removes its queued frames and queues
`cancelled`; the writer checks the mark before every audio frame, so no audio of a cancelled
request follows `cancelled`. A disconnect cancels every task and closes the lane, which drops the
session's queued engine jobs.

Limits: a session holds at most `max_queued_requests` open requests (one more gets `queue_full`;
a cancelled request leaves the queue at once, so cancels cannot pile up behind a long request);
a fourth task, the watchdog, closes a session that has had no request open and no message for
`idle_timeout_s` with 1001. A client's bad input is logged as one warning line (session, request
id, code), never a traceback.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections import deque
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from functools import partial

from starlette import status
from starlette.types import Message
from starlette.websockets import WebSocket, WebSocketDisconnect, WebSocketState

from kokoro_server.audio import split_frames
from kokoro_server.chunking import ChunkPolicy
from kokoro_server.engine import ChunkAudio, PieceStreamingEngine, SpeechEngine
from kokoro_server.metrics import SpeechMetrics
from kokoro_server.schedule import PlaybackClock, starts_from_silence, timed
from kokoro_server.scheduler import Lane, LaneClosedError, SynthesisTimeoutError
from speech_protocol import (
    Cancel,
    Cancelled,
    ClientMessage,
    Close,
    ErrorCode,
    ErrorEvent,
    ProtocolError,
    ServerEvent,
    SynthesisComplete,
    SynthesisStart,
    Synthesize,
    Timestamps,
    WordTiming,
    check_synthesis,
    encode_server_event,
    parse_client_message,
    pcm_duration_s,
)

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class SessionLimits:
    max_text_chars: int
    frame_bytes: int
    """Largest binary frame; a chunk's audio is sent as several frames when longer."""
    max_queued_chunks: int = 2
    """Chunks of audio waiting to be sent before the producer pauses (a slow reader's backpressure)."""
    max_queued_frames: int = 256
    """Control frames waiting before the receiver stops reading (a client flooding bad messages)."""
    max_queued_requests: int = 100
    """Requests accepted and not yet finished; one more is refused with `queue_full`."""
    idle_timeout_s: float | None = None
    """Close the session after this long with no request open and no message received (None: never)."""


@dataclass(eq=False)
class _Request:
    request_id: str
    text: str
    voice: str
    speed: float
    timestamps: bool
    accepted_at: float
    cancelled: bool = False
    first_audio_at: float | None = None
    bytes_sent: int = 0
    chunks_sent: int = 0
    compute_s: float = 0.0


@dataclass(frozen=True, slots=True)
class _Control:
    event: ServerEvent
    request: _Request | None = None
    """The request this frame belongs to; not sent once that request is cancelled."""
    finishes: bool = False
    """This frame ends its request (an engine failure): forget the request once it is sent."""


@dataclass(frozen=True, slots=True)
class _Audio:
    request: _Request
    timestamps: Timestamps | None
    frames: tuple[bytes, ...]


@dataclass(frozen=True, slots=True)
class _Complete:
    request: _Request


@dataclass(frozen=True, slots=True)
class _End:
    """Everything accepted before `close` has been sent: close the session normally."""


_Item = _Control | _Audio | _Complete | _End


@dataclass(eq=False)
class Outbox:
    """The ordered queue of frames to send, with room for `max_chunks` chunks of audio."""

    max_chunks: int
    max_items: int
    _items: deque[_Item] = field(default_factory=deque)
    _changed: asyncio.Condition = field(default_factory=asyncio.Condition)

    def _audio_items(self) -> int:
        return sum(isinstance(item, _Audio) for item in self._items)

    async def put(self, item: _Item) -> None:
        async with self._changed:
            if isinstance(item, _Audio):
                await self._changed.wait_for(lambda: self._audio_items() < self.max_chunks)
            else:
                await self._changed.wait_for(lambda: len(self._items) < self.max_items)
            if self._items and isinstance(self._items[-1], _End):
                # A `cancelled` or `error` answering a message received after `close` must still be
                # sent: `_End` (close the socket) stays last.
                self._items.insert(len(self._items) - 1, item)
            else:
                self._items.append(item)
            self._changed.notify_all()

    async def get(self) -> _Item:
        async with self._changed:
            await self._changed.wait_for(lambda: bool(self._items))
            item = self._items.popleft()
            self._changed.notify_all()
            return item

    async def drop(self, request: _Request) -> None:
        """Remove every queued frame of `request`."""
        async with self._changed:
            self._items = deque(item for item in self._items if _request_of(item) is not request)
            self._changed.notify_all()


def _request_of(item: _Item) -> _Request | None:
    return None if isinstance(item, _End) else item.request


@dataclass(eq=False)
class RequestQueue:
    """Accepted requests in order, then None after `close`; a cancelled request can be taken out."""

    _items: deque[_Request | None] = field(default_factory=deque)
    _added: asyncio.Event = field(default_factory=asyncio.Event)

    def put(self, item: _Request | None) -> None:
        self._items.append(item)
        self._added.set()

    def remove(self, request: _Request) -> None:
        if request in self._items:
            self._items.remove(request)

    async def get(self) -> _Request | None:
        while not self._items:
            self._added.clear()
            await self._added.wait()
        return self._items.popleft()

    @property
    def waiting(self) -> int:
        """Requests waiting for their synthesis to start."""
        return sum(item is not None for item in self._items)


class SessionIdleError(Exception):
    """The session had nothing to do for longer than its idle timeout."""


class UnsupportedFrameError(Exception):
    """An ASGI receive message with neither text nor bytes: nothing the session can answer."""


def frame_payload(message: Message) -> str | bytes:
    """The data of a `websocket.receive` message, text or binary (never assume text)."""
    if message.get("text") is not None:
        text: str = message["text"]
        return text
    if message.get("bytes") is not None:
        data: bytes = message["bytes"]
        return data
    raise UnsupportedFrameError("websocket.receive message carries neither text nor bytes")


def shift_words(words: tuple[WordTiming, ...], offset_s: float) -> tuple[WordTiming, ...]:
    """Chunk-relative word timings made relative to the request's first sample."""
    return tuple(WordTiming(w.word, w.start_s + offset_s, w.end_s + offset_s) for w in words)


class Session:
    """The state of one WebSocket session; `run()` serves it until close or disconnect."""

    def __init__(
        self,
        websocket: WebSocket,
        engine: SpeechEngine,
        lane: Lane,
        policy: ChunkPolicy,
        limits: SessionLimits,
        *,
        metrics: SpeechMetrics | None = None,
    ) -> None:
        self._ws = websocket
        self._engine = engine
        self._lane = lane
        self._policy = policy
        self._limits = limits
        self._metrics = metrics if metrics is not None else SpeechMetrics.disabled()
        self._outbox = Outbox(max_chunks=limits.max_queued_chunks, max_items=limits.max_queued_frames)
        self._pending = RequestQueue()
        """Accepted requests in order; None after `close`."""
        self._last_activity = time.monotonic()
        """When the last message arrived or the last request ended (the idle clock)."""
        self._open: dict[str, _Request] = {}
        """Requests accepted and not yet completed, failed or cancelled, oldest first."""
        self._current: tuple[_Request, asyncio.Task[None]] | None = None
        self._closing = False
        self._clock = PlaybackClock()
        """When the audio this session produced ends playing: chunks are sized by it (`schedule.PlaybackClock`)."""

    async def run(self) -> None:
        await self._ws.accept()
        receiver = asyncio.create_task(self._receive(), name=f"{self._lane.name}-receive")
        producer = asyncio.create_task(self._produce(), name=f"{self._lane.name}-produce")
        writer = asyncio.create_task(self._write(), name=f"{self._lane.name}-write")
        tasks = {receiver, producer, writer}
        if self._limits.idle_timeout_s is not None:
            tasks.add(
                asyncio.create_task(self._watch_idle(self._limits.idle_timeout_s), name=f"{self._lane.name}-idle")
            )
        close_code: int | None = None
        try:
            close_code = await self._until_over(tasks, receiver, producer, writer)
        finally:
            for task in tasks:
                task.cancel()
            # Before any await: if the handler itself is being cancelled, queued engine jobs still go.
            self._lane.close()
            await asyncio.wait(tasks)
            for task in tasks:
                if not task.cancelled() and (exc := task.exception()) is not None:
                    logger.debug(
                        "session %s: %s ended with %r after the outcome", self._lane.name, task.get_name(), exc
                    )
        if close_code is not None and self._ws.application_state == WebSocketState.CONNECTED:
            reason = "idle timeout" if close_code == status.WS_1001_GOING_AWAY else None
            try:
                await self._ws.close(code=close_code, reason=reason)
            except WebSocketDisconnect:
                logger.info("session %s: client left before the close frame", self._lane.name)

    @property
    def waiting_requests(self) -> int:
        """Requests accepted whose synthesis has not started (the QueuedRequests gauge)."""
        return self._pending.waiting

    async def _until_over(
        self,
        tasks: set[asyncio.Task[None]],
        receiver: asyncio.Task[None],
        producer: asyncio.Task[None],
        writer: asyncio.Task[None],
    ) -> int | None:
        """Wait for the session's outcome; return the close code to send, None when the client left."""
        waiting = set(tasks)
        while True:
            done, waiting = await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
            for task in done:
                exc = task.exception()
                if exc is None:
                    if task is producer:
                        continue  # every request is handed to the writer; it sends _End last
                    if task is writer:
                        return status.WS_1000_NORMAL_CLOSURE
                    logger.info("session %s: client disconnected", self._lane.name)
                    return None
                if isinstance(exc, WebSocketDisconnect):
                    logger.info("session %s: client went away while sending (code %s)", self._lane.name, exc.code)
                    return None
                if isinstance(exc, UnsupportedFrameError):
                    logger.warning("session %s: %s", self._lane.name, exc)
                    return status.WS_1003_UNSUPPORTED_DATA
                if isinstance(exc, SessionIdleError):
                    logger.info("session %s: %s; closing", self._lane.name, exc)
                    return status.WS_1001_GOING_AWAY
                logger.error("session %s failed", self._lane.name, exc_info=exc)
                return status.WS_1011_INTERNAL_ERROR

    # --- receiver ---------------------------------------------------------------------------

    async def _receive(self) -> None:
        """Read client frames until the client disconnects."""
        while True:
            message = await self._ws.receive()
            if message["type"] == "websocket.disconnect":
                return
            self._last_activity = time.monotonic()
            try:
                await self._handle(parse_client_message(frame_payload(message)))
            except ProtocolError as exc:
                # The client's mistake, not the server's: one line, no traceback.
                logger.warning(
                    "session %s: request %s rejected: %s: %s", self._lane.name, exc.request_id, exc.code, exc.message
                )
                await self._outbox.put(_Control(exc.to_event()))

    async def _watch_idle(self, timeout_s: float) -> None:
        """Return (ending the session) once nothing is open and nothing arrived for `timeout_s`."""
        while True:
            idle_for = time.monotonic() - self._last_activity
            if self._open or idle_for < timeout_s:
                await asyncio.sleep(timeout_s - idle_for if not self._open else timeout_s)
                continue
            raise SessionIdleError(f"no request and no message for {timeout_s:g} s")

    async def _handle(self, msg: ClientMessage) -> None:
        if isinstance(msg, Synthesize):
            self._accept(msg)
        elif isinstance(msg, Cancel):
            await self._cancel(msg.request_id)
        else:
            self._close(msg)

    def _accept(self, msg: Synthesize) -> None:
        if self._closing:
            raise ProtocolError(
                ErrorCode.SESSION_CLOSING, "the session is closing; it takes no new requests", msg.request_id
            )
        check_synthesis(msg, max_text_chars=self._limits.max_text_chars, voices=self._engine.voices)
        request_id = msg.request_id if msg.request_id is not None else uuid.uuid4().hex
        if request_id in self._open:
            raise ProtocolError(
                ErrorCode.DUPLICATE_REQUEST_ID, f"request {request_id!r} is still in progress", request_id
            )
        if len(self._open) >= self._limits.max_queued_requests:
            raise ProtocolError(
                ErrorCode.QUEUE_FULL,
                f"the session already has {len(self._open)} requests in progress or queued "
                f"(the limit is {self._limits.max_queued_requests}); wait for one to finish, or cancel one",
                request_id,
            )
        request = _Request(
            request_id=request_id,
            text=msg.text,
            voice=msg.voice if msg.voice is not None else self._engine.default_voice,
            speed=msg.speed if msg.speed is not None else 1.0,
            timestamps=msg.timestamps,
            accepted_at=time.perf_counter(),
        )
        self._open[request_id] = request
        self._pending.put(request)

    async def _cancel(self, request_id: str | None) -> None:
        if request_id is None:
            target = next(iter(self._open.values()), None)
            if target is None:
                raise ProtocolError(ErrorCode.UNKNOWN_REQUEST, "cancel: no request is in progress")
        else:
            target = self._open.get(request_id)
            if target is None:
                raise ProtocolError(
                    ErrorCode.UNKNOWN_REQUEST, f"cancel: request {request_id!r} is not in progress", request_id
                )
        target.cancelled = True
        del self._open[target.request_id]
        self._clock.reset()  # the listener drops what it has buffered
        self._pending.remove(target)
        self._metrics.cancel()
        if self._current is not None and self._current[0] is target:
            self._current[1].cancel()
        await self._outbox.drop(target)
        await self._outbox.put(_Control(Cancelled(request_id=target.request_id)))

    def _close(self, msg: Close) -> None:
        if self._closing:
            raise ProtocolError(ErrorCode.SESSION_CLOSING, "close was already received")
        self._closing = True
        self._pending.put(None)

    # --- producer ---------------------------------------------------------------------------

    async def _produce(self) -> None:
        """Synthesize accepted requests one after another, in the order they arrived."""
        while (request := await self._pending.get()) is not None:
            if request.cancelled:
                continue  # cancelled while it waited; `cancelled` is already queued
            task = asyncio.create_task(self._synthesize(request))
            self._current = (request, task)
            try:
                await asyncio.wait({task})
            finally:
                self._current = None
                task.cancel()
            if not task.cancelled() and (exc := task.exception()) is not None:
                raise exc
        await self._outbox.put(_End())

    async def _synthesize(self, request: _Request) -> None:
        try:
            await self._synthesize_chunks(request)
        finally:
            self._policy.finish()

    async def _synthesize_chunks(self, request: _Request) -> None:
        await self._outbox.put(_Control(SynthesisStart(request_id=request.request_id), request=request))
        remaining, index, produced_s = request.text, 0, 0.0
        while True:
            ahead = self._clock.ahead_s(time.perf_counter())
            chunk = self._policy.next_chunk(remaining, first=starts_from_silence(index, ahead), buffered_audio_s=ahead)
            if chunk is None:
                break
            async for audio in self._chunk_audio(request, chunk.text, from_silence=starts_from_silence(index, ahead)):
                if audio is None:
                    return
                words = (
                    Timestamps(request.request_id, index, shift_words(audio.words, produced_s))
                    if request.timestamps
                    else None
                )
                await self._outbox.put(_Audio(request, words, split_frames(audio.pcm, self._limits.frame_bytes)))
                self._clock.delivered(time.perf_counter(), audio.duration_s)
                index, produced_s = index + 1, produced_s + audio.duration_s
            remaining = chunk.rest
        await self._outbox.put(_Complete(request))

    async def _chunk_audio(
        self, request: _Request, text: str, *, from_silence: bool
    ) -> AsyncIterator[ChunkAudio | None]:
        """The chunk's audio: in pieces as they are made when the listener waits in silence and the
        engine can (`PieceStreamingEngine`: first audio after a window, not a chunk), else whole.
        Each piece is its own engine job, so a newcomer waits for one window, not a whole chunk,
        and each job's deadline follows the audio delivered so far. None after reporting an engine
        failure."""
        engine = self._engine
        if not (from_silence and isinstance(engine, PieceStreamingEngine)):
            outcome = await self._run_engine(request, partial(engine.synthesize, text, request.voice, request.speed))
            if outcome is not None:
                self._computed(request, text, outcome[1])
            yield None if outcome is None else outcome[0]
            return
        # A suspended generator holds no thread-local state (see `PieceStreamingEngine`): when this
        # request is cancelled it is simply dropped, even while its last job still runs.
        pieces = engine.synthesize_pieces(
            text,
            request.voice,
            request.speed,
            others_waiting=self._lane.others_in_silence,
            ahead_s=lambda: self._clock.ahead_s(time.perf_counter()),
        )
        compute_s = 0.0
        while True:
            step = await self._run_engine(request, partial(next, pieces, None))
            if step is None:
                yield None
                return
            piece, spent = step
            compute_s += spent
            if piece is None:
                break
            yield piece
            if piece.ends_chunk:
                break  # no job just to find the iterator's end
        self._computed(request, text, compute_s)

    def _deadline(self, request: _Request) -> float:
        """When this session's listener needs its next audio: when the audio it has runs out, or
        when the request arrived if that is later (it waits in silence since then)."""
        ends_at = self._clock.ends_at
        return request.accepted_at if ends_at is None else max(ends_at, request.accepted_at)

    async def _run_engine[T](self, request: _Request, job: Callable[[], T]) -> tuple[T, float] | None:
        """`job`'s result and its compute seconds, or None after reporting an engine failure for this request."""
        try:
            return await self._lane.run(partial(timed, job), deadline=self._deadline(request))
        except LaneClosedError:
            raise
        except SynthesisTimeoutError as exc:
            # The scheduler has logged the stuck job; this request fails, the session goes on.
            logger.warning("session %s: request %s failed: %s", self._lane.name, request.request_id, exc)
            failure = ErrorEvent(request.request_id, ErrorCode.SYNTHESIS_FAILED.value, str(exc))
            await self._outbox.put(_Control(failure, request=request, finishes=True))
            return None
        except Exception:  # the engine boundary: any model failure fails this request only, not the session
            logger.exception("session %s: synthesis of request %s failed", self._lane.name, request.request_id)
            failure = ErrorEvent(
                request.request_id, ErrorCode.SYNTHESIS_FAILED.value, "synthesis failed; see server logs"
            )
            await self._outbox.put(_Control(failure, request=request, finishes=True))
            return None

    def _computed(self, request: _Request, text: str, compute_s: float) -> None:
        """A chunk is synthesized: the policy learns the engine's speed from it."""
        self._policy.observe(text, compute_s)
        request.compute_s += compute_s

    # --- writer -----------------------------------------------------------------------------

    async def _write(self) -> None:
        """Send queued frames in order until the session's work is done."""
        while not isinstance(item := await self._outbox.get(), _End):
            if isinstance(item, _Control):
                if item.request is not None and item.request.cancelled:
                    continue
                if item.finishes and item.request is not None:
                    self._open.pop(item.request.request_id, None)
                    self._last_activity = time.monotonic()
                if isinstance(item.event, ErrorEvent):
                    self._metrics.error()
                await self._ws.send_text(encode_server_event(item.event))
            elif isinstance(item, _Audio):
                await self._send_audio(item)
            elif not item.request.cancelled:
                await self._send_complete(item.request)

    async def _send_audio(self, item: _Audio) -> None:
        request = item.request
        if request.cancelled:
            return
        if item.timestamps is not None:
            await self._ws.send_text(encode_server_event(item.timestamps))
        for frame in item.frames:
            if request.cancelled:
                return  # `cancelled` is queued behind us; nothing of this request may follow it
            if request.first_audio_at is None:
                request.first_audio_at = time.perf_counter()
                self._metrics.time_to_first_audio((request.first_audio_at - request.accepted_at) * 1000)
            await self._ws.send_bytes(frame)
            request.bytes_sent += len(frame)
        request.chunks_sent += 1

    async def _send_complete(self, request: _Request) -> None:
        now = time.perf_counter()
        first_audio_at = request.first_audio_at if request.first_audio_at is not None else now
        complete = SynthesisComplete(
            request_id=request.request_id,
            audio_duration_s=pcm_duration_s(request.bytes_sent),
            time_to_first_audio_ms=(first_audio_at - request.accepted_at) * 1000,
            elapsed_ms=(now - request.accepted_at) * 1000,
            chunks=request.chunks_sent,
        )
        self._open.pop(request.request_id, None)
        self._last_activity = time.monotonic()
        self._metrics.synthesis_rtf(request.compute_s, complete.audio_duration_s)
        await self._ws.send_text(encode_server_event(complete))
