"""Agent test support: a tiny protocol-faithful speech server, scripted invocations, event helpers."""

from __future__ import annotations

import asyncio
import base64
import logging
from collections.abc import AsyncIterable, AsyncIterator, Callable, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from typing import Any, Literal

from strands import Agent
from strands.types.streaming import StreamEvent
from websockets.asyncio.server import Server, ServerConnection
from websockets.exceptions import ConnectionClosed

from agent_app.config import AgentConfig
from agent_app.models import ModelChoice, ScriptedModel, ScriptedTurn, build_agent, tokenize, user_questions
from agent_app.pipeline import Invocation, PipelineSettings
from agent_app.speech.transport import (
    SpeechConnection,
    SpeechErrorCode,
    SpeechFrame,
    SpeechTransport,
    SpeechTransportError,
)
from agent_app.speech.websocket import WebSocketTransport
from kokoro_server.engine import ZeroCostEngine
from speech_protocol import (
    WS_PATH,
    Cancel,
    ClientMessage,
    ErrorEvent,
    SynthesisComplete,
    SynthesisStart,
    Synthesize,
    Timestamps,
    WordTiming,
    encode_server_event,
    parse_client_message,
)

Event = dict[str, Any]
"""An agent event as a client sees it (plain JSON object; the TypedDict union is for producers)."""

FRAME_BYTES = 4_800  # 0.1 s of 24 kHz PCM16 per binary frame

Fault = Literal["none", "close_mid_stream", "drop_mid_stream", "malformed_control", "reject", "close_early"]


@dataclass
class FakeSpeechServer:
    """Speaks the container's session protocol with ZeroCostEngine audio; can misbehave on request.

    Records every received frame (kind, text), the PCM it sent per request, and `disconnects`:
    sessions the client left without a `close` message (closed its socket, or the socket broke).
    """

    fault: Fault = "none"
    synth_delay_s: float = 0.0
    engine: ZeroCostEngine = field(default_factory=lambda: ZeroCostEngine(seconds_per_char=0.01))
    received: list[tuple[str, str]] = field(default_factory=list)
    sent_pcm: dict[str, bytes] = field(default_factory=dict)
    sessions: int = 0
    disconnects: int = 0
    server: Server | None = None

    @property
    def url(self) -> str:
        assert self.server is not None
        port = self.server.sockets[0].getsockname()[1]
        return f"ws://127.0.0.1:{port}{WS_PATH}"

    @property
    def texts(self) -> list[str]:
        return [msg.text for msg in (parse_client_message(t) for _, t in self.received) if isinstance(msg, Synthesize)]

    async def handler(self, websocket: ServerConnection) -> None:
        self.sessions += 1
        try:
            async for data in websocket:
                kind = "text" if isinstance(data, str) else "binary"
                text = data if isinstance(data, str) else data.decode()
                self.received.append((kind, text))
                message = parse_client_message(text)
                if isinstance(message, Cancel):
                    continue  # requests are answered one at a time: the one named is answered already
                if not isinstance(message, Synthesize):
                    await websocket.close()  # Close: every request is already answered
                    return
                await self._answer(websocket, message)
        except ConnectionClosed:
            pass
        self.disconnects += 1

    async def _answer(self, websocket: ServerConnection, message: Synthesize) -> None:
        request_id = message.request_id or "r"
        if self.fault == "reject":
            await websocket.send(encode_server_event(ErrorEvent(request_id, "unknown_voice", "no such voice")))
            return
        if self.fault == "close_early":
            await websocket.close()
            return
        await websocket.send(encode_server_event(SynthesisStart(request_id)))
        if message.timestamps:
            await websocket.send(encode_server_event(Timestamps(request_id, 0, fake_word_timings(message.text))))
        if self.fault == "malformed_control":
            await websocket.send('{"type": "synthesis_complete", "request_id": 7}')
            return
        pcm = self.engine.synthesize(message.text, message.voice or "af_heart", 1.0).pcm
        self.sent_pcm[request_id] = pcm
        for index, offset in enumerate(range(0, len(pcm), FRAME_BYTES)):
            if self.synth_delay_s:
                await asyncio.sleep(self.synth_delay_s)
            if index == 1 and self.fault == "close_mid_stream":
                await websocket.close(code=1011, reason="engine crashed")
                return
            if index == 1 and self.fault == "drop_mid_stream":
                websocket.transport.abort()
                return
            await websocket.send(pcm[offset : offset + FRAME_BYTES])
        await websocket.send(
            encode_server_event(
                SynthesisComplete(
                    request_id, audio_duration_s=len(pcm) / 48_000, time_to_first_audio_ms=0.0, elapsed_ms=0.0, chunks=1
                )
            )
        )


def fake_word_timings(text: str) -> tuple[WordTiming, ...]:
    """The fake's word timings: word i from i * 0.25 s to i * 0.25 + 0.2 s of its request's audio."""
    return tuple(WordTiming(word, index * 0.25, index * 0.25 + 0.2) for index, word in enumerate(text.split()))


# --- pipeline helpers ------------------------------------------------------------------------

FOUR_SENTENCES = (
    "The Eiffel Tower is about three hundred and thirty meters tall, including its antennas. "
    "It was built for the World's Fair of 1889 and was meant to stand for only twenty years. "
    "Today it welcomes nearly seven million visitors every year. "
    "On a clear day you can see for about seventy kilometers from the top."
)


def make_invocation(
    model: ScriptedModel,
    transport: SpeechTransport,
    *,
    mode: Literal["stream", "batch"] = "stream",
    deadline_s: float = 20.0,
    caller_gone_after_s: float = 5.0,
    outbox_size: int = 32,
    voice: str | None = None,
    speed: float | None = None,
    timestamps: bool = True,
    max_request_chars: int = 5_000,
    prompt: str = "Tell me about the Eiffel Tower.",
    agent: Agent | None = None,
) -> Invocation:
    return Invocation(
        prompt=prompt,
        agent=agent if agent is not None else build_agent(model),
        model_name="scripted",
        demo=False,
        transport=transport,
        settings=PipelineSettings(
            mode=mode,
            voice=voice,
            deadline_s=deadline_s,
            caller_gone_after_s=caller_gone_after_s,
            outbox_size=outbox_size,
            speed=speed,
            timestamps=timestamps,
            max_request_chars=max_request_chars,
        ),
    )


def scripted(
    text: str = FOUR_SENTENCES, *, tokens_per_s: float = 400.0, turns: Sequence[ScriptedTurn] = ()
) -> ScriptedModel:
    return ScriptedModel(list(turns) or [ScriptedTurn(text)], tokens_per_s=tokens_per_s)


async def collect(invocation: Invocation) -> list[Event]:
    return [dict(event) async for event in invocation.events()]


def types(events: Sequence[Event]) -> list[str]:
    return [event["type"] for event in events]


def decoded_audio(events: Sequence[Event]) -> bytes:
    return b"".join(base64.b64decode(e["audio"]) for e in events if e["type"] == "audio_chunk")


def ws_transport(fake: FakeSpeechServer) -> WebSocketTransport:
    return WebSocketTransport(fake.url, open_timeout_s=2.0, close_timeout_s=1.0)


class GatedModel(ScriptedModel):
    """A scripted model that can hold one token until `gate` is set, and probe state before each token."""

    def __init__(
        self,
        text: str = FOUR_SENTENCES,
        *,
        tokens_per_s: float = 400.0,
        hold_at: int | None = None,
        probe: Callable[[], object] | None = None,
        fail_at: int | None = None,
        turns: Sequence[ScriptedTurn] = (),
    ) -> None:
        super().__init__(list(turns) or [ScriptedTurn(text)], tokens_per_s=tokens_per_s)
        self.gate = asyncio.Event()
        self.hold_at = hold_at
        self.fail_at = fail_at
        self.probe = probe
        self.probes: list[object] = []

    async def wait_for_token(self, position: int, due: float) -> None:
        if self.probe is not None:
            self.probes.append(self.probe())
        if position == self.fail_at:
            raise RuntimeError("model endpoint throttled")
        if position == self.hold_at:
            await self.gate.wait()
        await super().wait_for_token(position, due)


def sentence_start_token(text: str, sentence: str) -> int:
    """The index of the token at which `sentence` starts in `text` (tokens as the scripted model cuts them)."""
    offset = text.index(sentence)
    position = 0
    for index, token in enumerate(tokenize(text)):
        if position + len(token) > offset:
            return index
        position += len(token)
    raise ValueError(sentence)


class RecordingTransport:
    """Wraps a transport and records every audio frame exactly as the speech server sent it."""

    def __init__(self, inner: SpeechTransport) -> None:
        self.inner = inner
        self.frames: list[bytes] = []

    @asynccontextmanager
    async def connect(self) -> AsyncIterator[SpeechConnection]:
        async with self.inner.connect() as connection:
            yield _RecordingConnection(connection, self.frames)


class _RecordingConnection:
    def __init__(self, inner: SpeechConnection, frames: list[bytes]) -> None:
        self._inner = inner
        self._frames = frames

    async def send(self, message: ClientMessage) -> None:
        await self._inner.send(message)

    async def receive(self) -> SpeechFrame | None:
        frame = await self._inner.receive()
        if isinstance(frame, bytes):
            self._frames.append(frame)
        return frame


class CountingTransport:
    """Counts the sessions opened; can refuse the first, or make it take requests but never answer.

    `silent_after`: the first session records what it is sent and, once it has taken that many
    requests, fails its receive with `speech_unavailable` (what the SageMaker stream does when it
    is not accepted in time after the first send).
    """

    def __init__(self, inner: SpeechTransport, *, refuse_first: bool = False, silent_after: int | None = None) -> None:
        self.inner = inner
        self.attempts = 0
        self.refuse_first = refuse_first
        self.silent_after = silent_after
        self.first_session_sent: list[str] = []

    @asynccontextmanager
    async def connect(self) -> AsyncIterator[SpeechConnection]:
        self.attempts += 1
        if self.attempts == 1 and self.refuse_first:
            raise SpeechTransportError(SpeechErrorCode.UNAVAILABLE, "refused once for the test")
        if self.attempts == 1 and self.silent_after is not None:
            yield _SilentConnection(self.silent_after, self.first_session_sent)
            return
        async with self.inner.connect() as connection:
            yield connection


class _SilentConnection:
    def __init__(self, fail_after: int, sent: list[str]) -> None:
        self._fail_after = fail_after
        self._fail = asyncio.Event()
        self._sent = sent

    async def send(self, message: ClientMessage) -> None:
        if isinstance(message, Synthesize):
            self._sent.append(message.text)
            if len(self._sent) >= self._fail_after:
                self._fail.set()

    async def receive(self) -> SpeechFrame | None:
        await self._fail.wait()
        raise SpeechTransportError(SpeechErrorCode.UNAVAILABLE, "no response within 10 s")


async def run_releasing_on_first_audio(invocation: Invocation, model: GatedModel) -> tuple[list[Event], bool | None]:
    """Read every event; open the model's gate at the first audio. Returns the events and
    whether the model had finished when the first audio arrived (None: no audio)."""
    events: list[Event] = []
    finished_at_first_audio = None
    async for event in invocation.events():
        events.append(dict(event))
        if event["type"] == "audio_chunk" and not model.gate.is_set():
            finished_at_first_audio = model.finished
            model.gate.set()
    return events, finished_at_first_audio


class Models:
    """A fresh scripted model per model call (one model streams one answer), remembered in order,
    with the question each call was asked.

    The app builds its model once per process; this one hands each call to a new scripted model.
    """

    def __init__(self, text: str = FOUR_SENTENCES * 4, tokens_per_s: float = 200) -> None:
        self.text = text
        self.tokens_per_s = tokens_per_s
        self.made: list[ScriptedModel] = []
        self.asked: list[str] = []

    def __call__(self, config: AgentConfig) -> ModelChoice:
        return ModelChoice(model=_FreshPerCall(self), name="scripted", demo=False)


class _FreshPerCall(ScriptedModel):
    def __init__(self, models: Models) -> None:
        super().__init__([ScriptedTurn(models.text)], tokens_per_s=models.tokens_per_s)
        self._models = models

    def stream(
        self, messages: Any, tool_specs: Any = None, system_prompt: str | None = None, **kwargs: Any
    ) -> AsyncIterable[StreamEvent]:
        self._models.asked.append(user_questions(messages)[-1])
        model = scripted(self._models.text, tokens_per_s=self._models.tokens_per_s)
        self._models.made.append(model)
        return model.stream(messages, tool_specs, system_prompt, **kwargs)


def most_in_any_second(times: Sequence[float]) -> int:
    """The most of `times` (sorted, in seconds) that fall within one second."""
    most = start = 0
    for end, t in enumerate(times):
        while t - times[start] >= 1.0:
            start += 1
        most = max(most, end - start + 1)
    return most


class LogRecords(logging.Handler):
    """Every record of the agent's, the SDK's and uvicorn's loggers while `log_records()` is open."""

    WATCHED = ("agent_app", "bedrock_agentcore", "uvicorn.error")

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)

    def errors(self) -> list[str]:
        """Errors and anything logged with a traceback: bad input must produce none."""
        return [r.getMessage() for r in self.records if r.levelno >= logging.ERROR or r.exc_info]

    def warnings(self, containing: str = "") -> list[str]:
        return [m for r in self.records if r.levelno == logging.WARNING and containing in (m := r.getMessage())]


@contextmanager
def log_records() -> Iterator[LogRecords]:
    records = LogRecords()
    for name in LogRecords.WATCHED:
        logging.getLogger(name).addHandler(records)
    try:
        yield records
    finally:
        for name in LogRecords.WATCHED:
            logging.getLogger(name).removeHandler(records)
