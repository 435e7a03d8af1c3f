"""One invocation: the agent's answer streamed as text events and spoken as audio events.

In `stream` mode each chunk the segmenter releases is sent at once over one speech session while
the model keeps generating, and audio is read concurrently; in `batch` mode the whole answer is
sent once the model has finished (in several requests when it is longer than the container's text
limit). Events leave through a small bounded outbox that the caller's generator drains.

A speech session that cannot open is tried once more after a short random pause (many calls
failing together should not retry in step); if it fails again the caller gets a
`speech_unavailable` error event and the answer goes on as text. Word timings from the container
become `words` events, in the answer's audio time.

Events are bounded to one AgentCore WebSocket frame each (`agent_app.frames`): a container frame
longer than one `audio_chunk` is cut into several, and audio or text that arrives while the caller
has not taken the previous piece is merged into it (`agent_app.outbox`).

AgentCore does not cancel the generator when its caller disconnects: it stops pulling, and the
generator stays parked. So the work runs in its own task and treats an outbox that stays full for
`caller_gone_after_s` as a caller that is gone: it stops the model (Strands' cancel signal) and the
speech session. Closing the generator (`aclose`) or `hang_up()` (the app calls it the moment the
caller's connection closes) stops the work at once, and a deadline bounds every invocation.

Whenever the work stops before the speech session ended normally (hang-up, deadline, failure), every
request the container has not finished gets the protocol's `cancel` (newest first, so the container
never starts a queued request it is about to be told to drop) before the session is left: the
container drops queued requests and discards the running one at once, instead of finishing them
for nobody (over SageMaker, leaving sends `close`, which on its own lets accepted requests finish).
"""

from __future__ import annotations

import asyncio
import logging
import random
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from enum import StrEnum
from functools import partial
from typing import Any, Final

from strands import Agent

from agent_app import events
from agent_app.events import AgentErrorCode, AgentEvent, Mode
from agent_app.frames import pcm_pieces, text_pieces
from agent_app.memory import close_interrupted_turn
from agent_app.outbox import Outbox
from agent_app.segmenter import SegmenterConfig
from agent_app.speech.split import DEFAULT_MAX_REQUEST_CHARS, split_text
from agent_app.speech.tracker import SessionTracker, SpeechRejectedError
from agent_app.speech.transport import SpeechConnection, SpeechErrorCode, SpeechTransport, SpeechTransportError
from agent_app.spoken import SpokenSegmenter, to_spoken
from speech_protocol import (
    AUDIO_CHANNELS,
    SAMPLE_RATE,
    SAMPLE_WIDTH,
    Cancel,
    Close,
    SynthesisStart,
    Synthesize,
    Timestamps,
)

logger = logging.getLogger(__name__)

BATCH_REQUEST_ID: Final = "answer"
CALLER_GONE_AFTER_S: Final = 10.0
"""How long the outbox may stay full before the caller counts as gone (a slow network reads on)."""
CANCEL_SEND_TIMEOUT_S: Final = 0.5
"""Longest wait for the `cancel` messages of an abandoned session to be sent (the stream may be stuck)."""
MESSAGE_SEPARATOR: Final = " "
"""Put between the texts of two model messages (before and after a tool call), which carry none."""
SPEECH_OPEN_ATTEMPTS: Final = 2
SPEECH_RETRY_PAUSE_S: Final = (0.1, 0.5)
"""Range of the random pause before the second attempt to open a speech session."""
_BYTES_PER_SECOND: Final = SAMPLE_RATE * SAMPLE_WIDTH * AUDIO_CHANNELS


class CallerGone(Exception):
    """Nobody has taken an event from the outbox for `caller_gone_after_s`."""


class ModelError(Exception):
    """The model (or the agent loop around it) failed."""


@dataclass(frozen=True, slots=True)
class _MessageEnd:
    """An assistant message ended (the agent may now call a tool, then answer on)."""


@dataclass(frozen=True, slots=True)
class _ModelDone:
    pass


@dataclass(frozen=True, slots=True)
class _ModelFailed:
    error: Exception


_ModelItem = str | _MessageEnd | _ModelDone | _ModelFailed


@dataclass(slots=True)
class _SentChunks:
    """What a stream-mode speech session took from the chunk queue, for a second attempt to resend."""

    texts: list[str] = field(default_factory=list)
    ended: bool = False
    """The end of the queue was taken too."""


class Outcome(StrEnum):
    COMPLETED = "completed"
    FAILED = "failed"
    """An `error` event was the last event."""
    CALLER_GONE = "caller_gone"
    CLOSED = "closed"
    """The caller closed the event generator before the end."""
    HUNG_UP = "hung_up"
    """The caller's connection closed before the end (`Invocation.hang_up`)."""
    TEXT_ONLY = "text_only"
    """The answer was complete, but speech could not be opened: it was text only."""


@dataclass(frozen=True, slots=True)
class PipelineSettings:
    mode: Mode
    voice: str | None
    deadline_s: float
    speed: float | None = None
    timestamps: bool = True
    """Ask the container for word timings (forwarded as `words` events, for captions)."""
    max_request_chars: int = DEFAULT_MAX_REQUEST_CHARS
    """The container's text limit per request; a longer `batch` answer is sent in several."""
    caller_gone_after_s: float = CALLER_GONE_AFTER_S
    outbox_size: int = 32
    segmenter: SegmenterConfig = field(default_factory=lambda: SegmenterConfig(first_clause_min_chars=40))

    def __post_init__(self) -> None:
        if not self.deadline_s > 0:
            raise ValueError(f"deadline_s must be > 0, got {self.deadline_s}")
        if not self.caller_gone_after_s > 0:
            raise ValueError(f"caller_gone_after_s must be > 0, got {self.caller_gone_after_s}")
        if self.outbox_size < 2:
            raise ValueError(f"outbox_size must be at least 2 (an error and the end), got {self.outbox_size}")


def _speakable(chunk: str) -> bool:
    # A chunk of only symbols ("---", "**") has nothing to say; the container would return no audio.
    return any(ch.isalnum() for ch in chunk)


def _first_leaf(group: BaseExceptionGroup[BaseException]) -> BaseException:
    first = group.exceptions[0]
    return _first_leaf(first) if isinstance(first, BaseExceptionGroup) else first


async def _cancel_unfinished(connection: SpeechConnection, tracker: SessionTracker) -> None:
    """Barge-in on our own session: `cancel` every request the container has not finished, newest first."""
    try:
        async with asyncio.timeout(CANCEL_SEND_TIMEOUT_S):
            for request_id in reversed(tracker.unfinished_ids()):
                await connection.send(Cancel(request_id=request_id))
    except TimeoutError:
        logger.warning("the speech session's cancel messages took over %s s; leaving it", CANCEL_SEND_TIMEOUT_S)
    except SpeechTransportError as exc:
        # The session is broken already; leaving it ends the container's work for it.
        logger.info("cancel not sent, the speech session is gone: %s", exc.message)


async def _run_concurrently(*coroutines: Coroutine[Any, Any, None]) -> None:
    """Run coroutines together; the first failure cancels the others and is raised as itself."""
    try:
        async with asyncio.TaskGroup() as group:
            for coroutine in coroutines:
                group.create_task(coroutine)
    except BaseExceptionGroup as failed:
        raise _first_leaf(failed) from None


class Invocation:
    """Runs one prompt through the agent and the speech session; `events()` yields the result."""

    def __init__(
        self,
        *,
        prompt: str,
        agent: Agent,
        model_name: str,
        demo: bool,
        transport: SpeechTransport,
        settings: PipelineSettings,
        on_finished: Callable[[Invocation], None] | None = None,
    ) -> None:
        """`on_finished` runs once all of the invocation's work has stopped (metrics, the conversation's turn)."""
        self._prompt = prompt
        self._agent = agent
        self._model_name = model_name
        self._demo = demo
        self._transport = transport
        self._settings = settings
        self._outbox = Outbox(settings.outbox_size)
        self._cancel_model = threading.Event()
        self._finished = asyncio.Event()
        self._started = False
        self._worker: asyncio.Task[None] | None = None
        self.outcome: Outcome | None = None
        self._t0 = 0.0
        self._first_text_s: float | None = None
        self._first_audio_s: float | None = None
        self._seq = 0
        self._audio_bytes = 0
        self._audio_started = False
        self._on_finished = on_finished
        self._speech_heard = False
        self._speech_lost = False
        self._request_offset_s = 0.0

    # --- the caller's side -------------------------------------------------------------------

    async def events(self) -> AsyncIterator[AgentEvent]:
        """The invocation's events, in order; the work starts on the first pull."""
        if self._started:
            raise RuntimeError("an invocation's events can be read once")
        self._started = True
        if self.outcome is Outcome.HUNG_UP:
            self._finish()
            return
        worker = self._worker = asyncio.create_task(self._work(), name="agent-invocation")
        try:
            while (event := await self._outbox.get()) is not None:
                yield event
        finally:
            if not worker.done():
                self._set_outcome(Outcome.CLOSED)
                _cancel_once(worker)
            await asyncio.wait([worker])

    @property
    def first_text_s(self) -> float | None:
        return self._first_text_s

    @property
    def first_audio_s(self) -> float | None:
        return self._first_audio_s

    def hang_up(self) -> None:
        """The caller's connection closed: stop the model and the speech requests now.

        Call it on the invocation's event loop. The events end (a reader still pulling gets the
        end at once); a no-op once the work has finished.
        """
        self._set_outcome(Outcome.HUNG_UP)
        if not self._started:
            # Its events will never be read, so its work never starts: it is finished now (its
            # conversation's turn given back at once, not when the app's watchdog fires).
            self._finish()
        elif self._worker is not None and not self._worker.done():
            # Nothing queued reaches the caller any more; the worker ends the events as it stops.
            self._outbox.clear()
            _cancel_once(self._worker)

    async def wait_finished(self) -> Outcome:
        """Wait until all model and speech work of this invocation has stopped."""
        await self._finished.wait()
        assert self.outcome is not None
        return self.outcome

    # --- the work ----------------------------------------------------------------------------

    def _now(self) -> float:
        return asyncio.get_running_loop().time()

    def _elapsed(self) -> float:
        return self._now() - self._t0

    def _set_outcome(self, outcome: Outcome) -> None:
        if self.outcome is None:
            self.outcome = outcome

    async def _work(self) -> None:
        self._t0 = self._now()
        mode = self._settings.mode
        try:
            await self._emit(events.agent_start(mode, self._model_name, demo=self._demo))
            failure = await self._answer()
            if failure is None:
                if not self._audio_started:
                    await self._emit(events.audio_start())
                await self._emit(events.audio_end(self._seq, self._audio_bytes))
                await self._emit(
                    events.metrics(
                        mode,
                        first_text_s=self._first_text_s,
                        first_audio_s=self._first_audio_s,
                        total_s=self._elapsed(),
                    )
                )
                await self._emit(events.agent_end())
                self._set_outcome(Outcome.TEXT_ONLY if self._speech_lost else Outcome.COMPLETED)
            else:
                self._set_outcome(Outcome.FAILED)
                await self._emit(events.error(*failure))
            await self._emit(None)
        except CallerGone:
            self._set_outcome(Outcome.CALLER_GONE)
            message = f"the caller read no event for {self._settings.caller_gone_after_s:g} s; the answer was stopped"
            logger.warning("%s", message)
            # Usually nobody will read again (AgentCore parks the generator). A caller that does
            # gets a clear end rather than a stream that never ends: drop what it never read.
            self._outbox.clear()
            self._outbox.put_nowait(events.error(AgentErrorCode.CALLER_TOO_SLOW, message))
            self._outbox.put_nowait(None)
        finally:
            self._cancel_model.set()
            if self.outcome is Outcome.HUNG_UP:
                # Nobody will read what is queued; end the events so the generator can finish.
                self._outbox.clear()
                self._outbox.put_nowait(None)
            logger.info(
                "invocation %s: mode=%s first_text=%s first_audio=%s total=%.3fs",
                self.outcome,
                mode,
                self._first_text_s,
                self._first_audio_s,
                self._elapsed(),
            )
            self._finish()

    def _finish(self) -> None:
        """All work has stopped (or never started): tell `wait_finished` and `on_finished`, once."""
        if self._finished.is_set():
            return
        self._finished.set()
        if self._on_finished is not None:
            self._on_finished(self)

    async def _answer(self) -> tuple[AgentErrorCode, str] | None:
        """Generate and speak the answer within the deadline; the error to report, or None."""
        deadline = asyncio.timeout(self._settings.deadline_s)
        try:
            async with deadline:
                if self._settings.mode == "stream":
                    await self._answer_streaming()
                else:
                    await self._answer_batch()
        except CallerGone:
            raise
        except TimeoutError:
            if not deadline.expired():
                logger.exception("unexpected timeout")
                return AgentErrorCode.INTERNAL_ERROR, "internal error: an operation timed out"
            return AgentErrorCode.DEADLINE_EXCEEDED, f"the answer did not finish within {self._settings.deadline_s:g} s"
        except SpeechTransportError as exc:
            logger.warning("speech session failed: %s: %s", exc.code, exc.message)
            return AgentErrorCode(exc.code.value), exc.message
        except SpeechRejectedError as exc:
            logger.warning("%s", exc)
            return AgentErrorCode.SPEECH_REJECTED, str(exc)
        except ModelError as exc:
            logger.warning("%s", exc, exc_info=exc.__cause__)
            return AgentErrorCode.MODEL_ERROR, str(exc)
        except Exception:
            # A bug of ours: the caller still gets a structured end instead of a stream that stops.
            logger.exception("invocation failed unexpectedly")
            return AgentErrorCode.INTERNAL_ERROR, "internal error (see the agent's log)"
        return None

    async def _answer_streaming(self) -> None:
        chunks: asyncio.Queue[str | None] = asyncio.Queue()
        sent = _SentChunks()
        await _run_concurrently(
            self._generate_into(chunks), self._speak_or_go_on_as_text(lambda: self._speak_chunks(chunks, sent))
        )

    async def _answer_batch(self) -> None:
        # The text shown keeps its markdown; the voice gets what a person would say (agent_app/spoken.py).
        answer = to_spoken(await self._generate(None))
        pieces = [piece.strip() for piece in split_text(answer, self._settings.max_request_chars)]
        pieces = [piece for piece in pieces if _speakable(piece)]
        if pieces:
            await self._speak_or_go_on_as_text(lambda: self._speak_pieces(pieces))

    async def _speak_pieces(self, pieces: list[str]) -> None:
        async with self._transport.connect() as connection:
            tracker = SessionTracker()
            finished = False
            try:
                for index, piece in enumerate(pieces):
                    request_id = BATCH_REQUEST_ID if index == 0 else f"{BATCH_REQUEST_ID}-{index}"
                    tracker.sent(request_id)
                    await connection.send(self._synthesize(piece, request_id))
                await connection.send(Close())
                await self._receive_audio(connection, tracker, close_sent=lambda: True)
                finished = True
            finally:
                if not finished:
                    await _cancel_unfinished(connection, tracker)

    def _synthesize(self, text: str, request_id: str) -> Synthesize:
        settings = self._settings
        return Synthesize(
            text=text, request_id=request_id, voice=settings.voice, speed=settings.speed, timestamps=settings.timestamps
        )

    async def _speak_or_go_on_as_text(self, session: Callable[[], Coroutine[Any, Any, None]]) -> None:
        """Run a speech session; one that cannot open is retried once, then the answer is text only."""
        failure: SpeechTransportError | None = None
        for attempt in range(1, SPEECH_OPEN_ATTEMPTS + 1):
            try:
                await session()
                return
            except SpeechTransportError as exc:
                # Only a session that never answered is retried: one that broke after audio
                # started cannot be resumed without repeating or losing speech.
                if exc.code is not SpeechErrorCode.UNAVAILABLE or self._speech_heard:
                    raise
                failure = exc
                logger.warning("speech session could not open (attempt %d): %s", attempt, exc.message)
            if attempt < SPEECH_OPEN_ATTEMPTS:
                await asyncio.sleep(random.uniform(*SPEECH_RETRY_PAUSE_S))
        assert failure is not None
        self._speech_lost = True
        await self._emit(
            events.error(
                AgentErrorCode.SPEECH_UNAVAILABLE,
                f"speech is unavailable ({failure.message}); the answer continues as text",
            )
        )

    async def _generate_into(self, chunks: asyncio.Queue[str | None]) -> None:
        await self._generate(chunks)

    async def _generate(self, chunks: asyncio.Queue[str | None] | None) -> str:
        """Run the agent: emit its text, feed speakable chunks to `chunks` as they complete, return the answer."""
        segmenter = SpokenSegmenter(self._settings.segmenter) if chunks is not None else None

        def release(completed: list[str]) -> None:
            if chunks is not None:
                for chunk in completed:
                    if _speakable(chunk):
                        chunks.put_nowait(chunk)

        answer: list[str] = []
        separate = False
        model_output: asyncio.Queue[_ModelItem] = asyncio.Queue()
        pump = asyncio.create_task(self._pump_model(model_output), name="agent-model")
        try:
            while not isinstance(item := await model_output.get(), _ModelDone):
                if isinstance(item, _ModelFailed):
                    raise ModelError(f"the model failed: {type(item.error).__name__}: {item.error}") from item.error
                if isinstance(item, _MessageEnd):
                    if answer:
                        # The end of a model message (e.g. before a tool call) is a certain boundary.
                        separate = True
                        if segmenter is not None:
                            release(segmenter.flush())
                    continue
                text = MESSAGE_SEPARATOR + item if separate and not item[0].isspace() else item
                separate = False
                answer.append(text)
                if self._first_text_s is None:
                    self._first_text_s = self._elapsed()
                await self._emit_text(text)
                if segmenter is not None:
                    release(segmenter.feed(text))
        finally:
            if not pump.done():
                self._cancel_model.set()
                pump.cancel()
            await asyncio.wait([pump])
            # A turn stopped before its answer (barge-in, failure) must still end with a reply in
            # the conversation, or its next turn would be refused.
            await close_interrupted_turn(self._agent, "".join(answer))
        if segmenter is not None:
            release(segmenter.finish())
        if chunks is not None:
            chunks.put_nowait(None)
        return "".join(answer)

    async def _pump_model(self, output: asyncio.Queue[_ModelItem]) -> None:
        """Drive the agent, passing on text deltas and message ends.

        A task of its own, so that stopping it is a cancellation that lands inside the agent's
        stream and unwinds every generator of the agent loop down to the model's at once (closing
        the outer generator would leave the inner ones to garbage collection). For that the task
        must never wait anywhere else, hence the unbounded queue: text is small, and a caller who
        stops reading is detected within `caller_gone_after_s`. The cancel signal also stops
        Bedrock's reader thread.
        """
        try:
            async for event in self._agent.stream_async(self._prompt, cancel_signal=self._cancel_model):
                text = event.get("data")
                if isinstance(text, str) and text:
                    output.put_nowait(text)
                elif _is_assistant_message(event):
                    output.put_nowait(_MessageEnd())
        except Exception as exc:
            # The model is a third-party boundary with an open set of errors (throttling,
            # validation, network); whatever it raises, the caller gets one stable code.
            output.put_nowait(_ModelFailed(exc))
            return
        output.put_nowait(_ModelDone())

    async def _speak_chunks(self, chunks: asyncio.Queue[str | None], sent: _SentChunks) -> None:
        """One session: send each chunk as it arrives while reading the audio that comes back.

        `sent` holds the chunks already taken from the queue; a second attempt sends them again first.
        """
        tracker = SessionTracker()
        closed = False

        async def send_all(connection: SpeechConnection) -> None:
            nonlocal closed
            for index, chunk in enumerate(sent.texts):
                tracker.sent(f"s{index}")
                await connection.send(self._synthesize(chunk, f"s{index}"))
            while not sent.ended:
                if (next_chunk := await chunks.get()) is None:
                    sent.ended = True
                    break
                request_id = f"s{len(sent.texts)}"
                sent.texts.append(next_chunk)
                tracker.sent(request_id)
                await connection.send(self._synthesize(next_chunk, request_id))
            closed = True
            await connection.send(Close())

        async with self._transport.connect() as connection:
            finished = False
            try:
                await _run_concurrently(
                    send_all(connection), self._receive_audio(connection, tracker, close_sent=lambda: closed)
                )
                finished = True
            finally:
                if not finished:
                    await _cancel_unfinished(connection, tracker)

    async def _receive_audio(
        self, connection: SpeechConnection, tracker: SessionTracker, *, close_sent: Callable[[], bool]
    ) -> None:
        while (frame := await connection.receive()) is not None:
            self._speech_heard = True
            pcm = tracker.frame(frame)
            if pcm:
                await self._emit_audio(pcm)
            elif isinstance(frame, SynthesisStart):
                # Word timings count from the request's first sample; captions need the answer's.
                self._request_offset_s = self._audio_bytes / _BYTES_PER_SECOND
            elif isinstance(frame, Timestamps) and frame.words:
                timings = [(word.word, word.start_s, word.end_s) for word in frame.words]
                for words_event in events.words(timings, offset_s=self._request_offset_s):
                    await self._emit(words_event)
        if not close_sent():
            raise SpeechTransportError(
                SpeechErrorCode.STREAM_ERROR, "the speech container ended the session before the agent closed it"
            )
        tracker.end()

    # --- the outbox --------------------------------------------------------------------------

    async def _emit_audio(self, pcm: bytes) -> None:
        """One container frame: topped up into the chunk the caller has not taken yet, the rest
        cut into chunks of at most one frame's worth, each with the next `seq`."""
        if not self._audio_started:
            self._audio_started = True
            self._first_audio_s = self._elapsed()
            await self._emit(events.audio_start())
        self._audio_bytes += len(pcm)
        if self.outcome is Outcome.HUNG_UP:
            return
        taken = self._outbox.top_up_audio(pcm)
        for piece in pcm_pieces(pcm[taken:]):
            await self._queue(partial(self._outbox.put_audio, self._seq, piece))
            self._seq += 1

    async def _emit_text(self, text: str) -> None:
        if self.outcome is Outcome.HUNG_UP or self._outbox.top_up_text(text):
            return
        for piece in text_pieces(text):
            await self._queue(partial(self._outbox.put_text, piece))

    async def _emit(self, event: AgentEvent | None) -> None:
        """Queue an event (None: the end); raise CallerGone when nobody takes it in time."""
        await self._queue(partial(self._outbox.put, event))

    async def _queue(self, put: Callable[[], Awaitable[None]]) -> None:
        if self.outcome is Outcome.HUNG_UP:
            return  # the work is being cancelled; a task that has not seen it yet must not queue more
        try:
            async with asyncio.timeout(self._settings.caller_gone_after_s):
                await put()
        except TimeoutError:
            raise CallerGone from None


def _cancel_once(task: asyncio.Task[None]) -> None:
    # A second cancel would interrupt the first one's cleanup (the `cancel` messages to the container).
    if not task.cancelling():
        task.cancel()


def _is_assistant_message(event: dict[str, Any]) -> bool:
    message = event.get("message")
    return isinstance(message, dict) and message.get("role") == "assistant"
