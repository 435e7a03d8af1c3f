"""Barge-in on the agent's side: a hang-up, a deadline or `hang_up()` stops the model and cancels
every speech request the container has not finished, with the protocol's `cancel`, newest first.

The speech server here is the real container app (zero-cost engine made slow, so requests are
still queued or running when the caller leaves), wrapped in a probe that records each session's
client frames and each engine job.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route
from websockets.asyncio.client import ClientConnection, connect

from agent_app.app import AppDependencies, create_app
from agent_app.hangup import Hangup, HangupMiddleware, current_hangup
from agent_app.pipeline import Invocation, Outcome
from agent_app.speech.tracker import SessionTracker
from agent_app.speech.transport import SpeechConnection, SpeechFrame, SpeechTransport
from agent_app.speech.websocket import WebSocketTransport
from bench.speech_probe import ProbedEngine, SessionProbe, SessionRecord
from kokoro_server.app import create_app as create_speech_app
from kokoro_server.engine import ZeroCostEngine
from kokoro_server.settings import Settings
from local.sagemaker_standin import run_standin
from speech_protocol import WS_PATH, Cancel, ClientMessage, SynthesisComplete, SynthesisStart, Synthesize
from tests.agent.agent_support import FOUR_SENTENCES, Event, Models, make_invocation, scripted
from tests.agent.conftest import LiveServer
from tests.agent.test_agent_app import fixed_model, sse_events, websocket_config
from tests.standin.standin_support import transport as sagemaker_transport

LONG_ANSWER = FOUR_SENTENCES * 4
NEVER_S = 600.0
"""The caller-gone check and the deadline are set this far out: only the barge-in can stop the work."""


class Speech:
    """The real speech container app, slowed down, with its probes."""

    def __init__(self, serve_asgi: Callable[[Any], LiveServer], *, compute_s_per_char: float = 0.01) -> None:
        self.engine = ProbedEngine(ZeroCostEngine(compute_s_per_char=compute_s_per_char))
        self.probe = SessionProbe(create_speech_app(Settings(), self.engine))
        self.url = serve_asgi(self.probe).ws_url(WS_PATH)

    async def wait_closed(self, index: int = 0) -> SessionRecord:
        for _ in range(400):
            if len(self.probe.sessions) > index and self.probe.sessions[index].closed is not None:
                break
            await asyncio.sleep(0.025)
        record = self.probe.sessions[index]
        assert record.closed is not None, "the speech session is still open"
        return record

    async def wait_idle(self) -> None:
        for _ in range(400):
            if self.engine.running() == 0:
                return
            await asyncio.sleep(0.025)
        raise AssertionError("an engine job is still running")


class RecordingTransport:
    """Records what the agent sent and the control events it received, per session."""

    def __init__(self, inner: SpeechTransport) -> None:
        self.inner = inner
        self.sent: list[ClientMessage] = []
        self.received: list[SpeechFrame] = []

    @asynccontextmanager
    async def connect(self) -> AsyncIterator[SpeechConnection]:
        async with self.inner.connect() as connection:
            yield _Recording(connection, self)

    def completed(self) -> set[str]:
        return {frame.request_id for frame in self.received if isinstance(frame, SynthesisComplete)}

    def synthesized(self) -> list[str]:
        return [m.request_id for m in self.sent if isinstance(m, Synthesize) and m.request_id is not None]


class _Recording:
    def __init__(self, inner: SpeechConnection, owner: RecordingTransport) -> None:
        self._inner = inner
        self._owner = owner

    async def send(self, message: ClientMessage) -> None:
        self._owner.sent.append(message)
        await self._inner.send(message)

    async def receive(self) -> SpeechFrame | None:
        frame = await self._inner.receive()
        if frame is not None and not isinstance(frame, bytes):
            self._owner.received.append(frame)
        return frame


def transport_to(speech: Speech) -> RecordingTransport:
    return RecordingTransport(WebSocketTransport(speech.url, open_timeout_s=5.0, close_timeout_s=1.0))


async def hang_up_at_first_audio(invocation: Invocation) -> tuple[list[Event], list[Event]]:
    """Read until the first audio chunk, hang up, read on: (events before, events after)."""
    before: list[Event] = []
    after: list[Event] = []
    hung_up = False
    async for event in invocation.events():
        (after if hung_up else before).append(dict(event))
        if event["type"] == "audio_chunk" and not hung_up:
            invocation.hang_up()
            hung_up = True
    return before, after


def assert_cancelled_in_order(
    record: SessionRecord, synthesized: int, cancels: int, then: tuple[str, ...] = ()
) -> None:
    """The container got every request, then the cancels (then `then`). When the agent's socket
    closes right after its last frame, the container may end the session (dropping all its work)
    before it has read the last frames, so a shorter tail is allowed, never another order."""
    kinds = record.kinds()
    expected = ["synthesize"] * synthesized + ["cancel"] * cancels + list(then)
    assert kinds == expected[: len(kinds)], kinds
    assert len(kinds) > synthesized, "no cancel reached the container"


def test_the_tracker_lists_unfinished_requests_in_the_order_they_were_sent() -> None:
    tracker = SessionTracker()
    for request_id in ("s0", "s1", "s2"):
        tracker.sent(request_id)
    assert tracker.unfinished_ids() == ["s0", "s1", "s2"]
    tracker.frame(SynthesisStart("s0"))
    tracker.frame(SynthesisComplete("s0", audio_duration_s=0.0, time_to_first_audio_ms=0.0, elapsed_ms=0.0, chunks=0))
    tracker.frame(SynthesisStart("s1"))
    assert tracker.unfinished_ids() == ["s1", "s2"]


async def test_hang_up_stops_the_model_and_cancels_the_unfinished_requests_newest_first(serve_asgi) -> None:
    speech = Speech(serve_asgi)
    transport = transport_to(speech)
    model = scripted(LONG_ANSWER, tokens_per_s=200)
    invocation = make_invocation(model, transport, caller_gone_after_s=NEVER_S, deadline_s=NEVER_S)

    before, after = await hang_up_at_first_audio(invocation)

    assert after == []  # nothing queued reaches a caller who is gone
    assert before[-1]["type"] == "audio_chunk"
    assert await invocation.wait_finished() is Outcome.HUNG_UP
    assert model.stopped_early is True
    sent_ids = transport.synthesized()
    unfinished = [request_id for request_id in sent_ids if request_id not in transport.completed()]
    assert unfinished, "the test needs a request still in progress at the hang-up"
    cancels = transport.sent[len(sent_ids) :]
    assert cancels == [Cancel(request_id=request_id) for request_id in reversed(unfinished)]
    record = await speech.wait_closed()
    assert_cancelled_in_order(record, len(sent_ids), len(unfinished))
    await speech.wait_idle()
    assert all(job.started <= record.closed for job in speech.engine.jobs if record.closed is not None)


async def test_over_sagemaker_the_abandoned_requests_are_cancelled_before_the_close(serve_asgi) -> None:
    """The deployed path: leaving a SageMaker session sends `close`, which alone would let the
    container finish every accepted request for nobody; the cancels come first."""
    speech = Speech(serve_asgi)
    async with run_standin({"speech": speech.url.removesuffix(WS_PATH)}) as info:
        recording = RecordingTransport(sagemaker_transport(info, "speech"))
        model = scripted(LONG_ANSWER, tokens_per_s=200)
        invocation = make_invocation(model, recording, caller_gone_after_s=NEVER_S, deadline_s=NEVER_S)

        _, after = await hang_up_at_first_audio(invocation)

        assert after == []
        assert await invocation.wait_finished() is Outcome.HUNG_UP
        assert model.stopped_early is True
        sent_ids = recording.synthesized()
        unfinished = [request_id for request_id in sent_ids if request_id not in recording.completed()]
        assert unfinished
        assert recording.sent[len(sent_ids) :] == [Cancel(request_id=request_id) for request_id in reversed(unfinished)]
        record = await speech.wait_closed()
    assert_cancelled_in_order(record, len(sent_ids), len(unfinished), then=("close",))
    await speech.wait_idle()


async def test_hang_up_in_batch_mode_cancels_the_answer_being_spoken(serve_asgi) -> None:
    speech = Speech(serve_asgi, compute_s_per_char=0.004)
    transport = transport_to(speech)
    invocation = make_invocation(
        scripted(LONG_ANSWER, tokens_per_s=4000), transport, mode="batch", caller_gone_after_s=NEVER_S
    )

    _, after = await hang_up_at_first_audio(invocation)

    assert after == []
    assert await invocation.wait_finished() is Outcome.HUNG_UP
    assert [type(m).__name__ for m in transport.sent] == ["Synthesize", "Close", "Cancel"]
    assert transport.sent[-1] == Cancel(request_id="answer")
    assert (await speech.wait_closed()).kinds() == ["synthesize", "close", "cancel"]


async def test_the_deadline_cancels_the_speech_requests_too(serve_asgi) -> None:
    speech = Speech(serve_asgi)
    transport = transport_to(speech)
    invocation = make_invocation(scripted(LONG_ANSWER, tokens_per_s=100), transport, deadline_s=1.0)

    events = [dict(event) async for event in invocation.events()]

    assert events[-1]["code"] == "deadline_exceeded"
    unfinished = [rid for rid in transport.synthesized() if rid not in transport.completed()]
    assert unfinished
    assert transport.sent[len(transport.synthesized()) :] == [Cancel(request_id=rid) for rid in reversed(unfinished)]


async def test_a_completed_answer_sends_no_cancel(serve_asgi) -> None:
    speech = Speech(serve_asgi, compute_s_per_char=0.0)
    transport = transport_to(speech)
    invocation = make_invocation(scripted(FOUR_SENTENCES), transport)

    events = [dict(event) async for event in invocation.events()]

    assert events[-1] == {"type": "agent_end"}
    assert not any(isinstance(m, Cancel) for m in transport.sent)
    assert (await speech.wait_closed()).kinds()[-1] == "close"
    # Hanging up after the end changes nothing.
    invocation.hang_up()
    assert await invocation.wait_finished() is Outcome.COMPLETED


async def test_a_caller_who_hangs_up_over_sse_stops_the_work_at_once(serve_asgi) -> None:
    """Through the real AgentCore app: the caller-gone check is 600 s away, only the hang-up acts."""
    speech = Speech(serve_asgi)
    model = scripted(LONG_ANSWER, tokens_per_s=200)
    app = create_app(
        websocket_config(speech.url, AGENT_DEADLINE_S="600"),
        AppDependencies(model=fixed_model(model), caller_gone_after_s=NEVER_S),
    )
    base = serve_asgi(app).http_url
    async with (
        httpx.AsyncClient(timeout=20) as client,
        client.stream("POST", f"{base}/invocations", json={"prompt": "Go on."}) as response,
    ):
        async for event in sse_events(response):
            if event["type"] == "audio_chunk":
                break

    record = await speech.wait_closed()
    assert model.stopped_early is True
    kinds = record.kinds()
    assert "close" not in kinds
    cancelled = [m["request_id"] for m in record.client_messages if m.get("type") == "cancel"]
    synthesized = [m["request_id"] for m in record.client_messages if m.get("type", "synthesize") == "synthesize"]
    assert cancelled, kinds
    # The cancels name the newest requests, newest first: a suffix of what was sent, reversed.
    assert cancelled == list(reversed(synthesized))[: len(cancelled)]
    assert kinds == ["synthesize"] * len(synthesized) + ["cancel"] * len(cancelled)
    tokens = model.tokens_sent
    await asyncio.sleep(0.2)
    assert model.tokens_sent == tokens


# --- the hang-up signal ------------------------------------------------------------------------


def test_a_hangup_fires_its_callbacks_once_and_late_subscribers_at_once() -> None:
    hangup = Hangup()
    calls: list[str] = []
    hangup.subscribe(lambda: calls.append("early"))
    assert (hangup.fired, calls) == (False, [])
    hangup.fire()
    hangup.fire()
    assert (hangup.fired, calls) == (True, ["early"])
    hangup.subscribe(lambda: calls.append("late"))
    assert calls == ["early", "late"]


def signal_app(seen: list[Hangup | None], released: asyncio.Event | None = None) -> HangupMiddleware:
    """/invocations streams until `released` (or ends at once); /other answers plainly."""

    async def body() -> AsyncIterator[bytes]:
        yield b"data: {}\n\n"
        if released is not None:
            await released.wait()

    async def invocations(request: Request) -> Response:
        await request.body()
        seen.append(current_hangup.get())
        return StreamingResponse(body(), media_type="text/event-stream")

    async def other(request: Request) -> Response:
        seen.append(current_hangup.get())
        return Response("ok")

    routes = [Route("/invocations", invocations, methods=["POST"]), Route("/other", other)]
    return HangupMiddleware(Starlette(routes=routes))


async def wait_fired(hangup: Hangup, tries: int = 200) -> bool:
    for _ in range(tries):
        if hangup.fired:
            return True
        await asyncio.sleep(0.025)
    return False


async def test_the_middleware_fires_when_the_caller_leaves_mid_answer(serve_asgi) -> None:
    seen: list[Hangup | None] = []
    released = asyncio.Event()
    base = serve_asgi(signal_app(seen, released)).http_url
    async with (
        httpx.AsyncClient(timeout=10) as client,
        client.stream("POST", f"{base}/invocations", content=b"{}") as response,
    ):
        async for _ in response.aiter_bytes():
            break
    assert len(seen) == 1
    assert seen[0] is not None
    assert await wait_fired(seen[0]) is True


@pytest.mark.parametrize("path", ["/invocations", "/other"])
async def test_the_middleware_does_not_fire_after_a_complete_answer(serve_asgi, path: str) -> None:
    seen: list[Hangup | None] = []
    base = serve_asgi(signal_app(seen)).http_url
    async with httpx.AsyncClient(timeout=10) as client:
        response = await (client.post if path == "/invocations" else client.get)(f"{base}{path}")
    assert response.status_code == 200
    if path == "/other":
        assert seen == [None]  # only the invocation route carries a hang-up signal
        return
    hangup = seen[0]
    assert hangup is not None
    assert await wait_fired(hangup, tries=12) is False


# --- WS /ws: the conversation over AgentCore's WebSocket route ------------------------------------


def ws_agent(serve_asgi: Callable[[Any], LiveServer], speech: Speech, models: Models) -> str:
    app = create_app(
        websocket_config(speech.url, AGENT_DEADLINE_S="600"),
        AppDependencies(model=models, caller_gone_after_s=NEVER_S),
    )
    return serve_asgi(app).ws_url("/ws")


async def receive_until(socket: ClientConnection, done: Callable[[Event], bool]) -> list[Event]:
    received: list[Event] = []
    async with asyncio.timeout(30):
        while True:
            data = await socket.recv()
            assert isinstance(data, str), "the agent sends text frames only"
            event = json.loads(data)
            received.append(event)
            if done(event):
                return received


def is_end(event: Event) -> bool:
    return event["type"] in ("agent_end", "error")


async def test_ws_answers_questions_one_turn_after_the_other(serve_asgi) -> None:
    speech = Speech(serve_asgi, compute_s_per_char=0.0)
    models = Models(FOUR_SENTENCES, tokens_per_s=2000)
    async with connect(ws_agent(serve_asgi, speech, models)) as socket:
        await socket.send(json.dumps({"type": "prompt", "prompt": "First?"}))
        first = await receive_until(socket, is_end)
        await socket.send(json.dumps({"type": "prompt", "prompt": "Second?", "mode": "batch"}))
        second = await receive_until(socket, is_end)

    for turn, received in ((1, first), (2, second)):
        assert {event["turn"] for event in received} == {turn}
        assert [e["type"] for e in received][-3:] == ["audio_end", "metrics", "agent_end"]
        assert "".join(e["text"] for e in received if e["type"] == "text_delta") == FOUR_SENTENCES
    assert second[0] == {"type": "agent_start", "mode": "batch", "model": "scripted", "demo": False, "turn": 2}
    assert [m.finished for m in models.made] == [True, True]


async def test_ws_stop_cancels_the_answer_and_the_conversation_goes_on(serve_asgi) -> None:
    speech = Speech(serve_asgi)
    models = Models()
    async with connect(ws_agent(serve_asgi, speech, models)) as socket:
        await socket.send(json.dumps({"type": "prompt", "prompt": "Talk."}))
        await receive_until(socket, lambda e: e["type"] == "audio_chunk")
        await socket.send(json.dumps({"type": "stop"}))
        stopped = await receive_until(socket, lambda e: e["type"] == "turn_stopped")
        assert stopped[-1] == {"type": "turn_stopped", "turn": 1}
        assert {e["turn"] for e in stopped} == {1}
        assert models.made[0].stopped_early is True
        record = await speech.wait_closed(0)
        assert record.kinds()[-1] == "cancel"
        assert "close" not in record.kinds()
        # A stop with nothing running is a no-op; the next question is answered.
        await socket.send(json.dumps({"type": "stop"}))
        await socket.send(json.dumps({"type": "prompt", "prompt": "Again.", "mode": "batch"}))
        models.text, models.tokens_per_s = FOUR_SENTENCES, 2000
        again = await receive_until(socket, is_end)
    assert again[0]["type"] == "agent_start"
    assert {e["turn"] for e in again} == {2}
    assert again[-1] == {"type": "agent_end", "turn": 2}


async def test_ws_a_new_question_stops_the_running_answer_first(serve_asgi) -> None:
    speech = Speech(serve_asgi)
    models = Models()
    async with connect(ws_agent(serve_asgi, speech, models)) as socket:
        await socket.send(json.dumps({"type": "prompt", "prompt": "Talk."}))
        await receive_until(socket, lambda e: e["type"] == "audio_chunk")
        models.text, models.tokens_per_s = FOUR_SENTENCES, 2000
        await socket.send(json.dumps({"type": "prompt", "prompt": "Something else."}))
        rest = await receive_until(socket, lambda e: is_end(e) and e.get("turn") == 2)
    stop_at = rest.index({"type": "turn_stopped", "turn": 1})
    assert {e["turn"] for e in rest[:stop_at]} <= {1}
    assert {e["turn"] for e in rest[stop_at + 1 :]} == {2}
    assert rest[-1] == {"type": "agent_end", "turn": 2}
    assert models.made[0].stopped_early is True
    assert (await speech.wait_closed(0)).kinds()[-1] == "cancel"


async def test_ws_closing_the_connection_stops_the_answer(serve_asgi) -> None:
    speech = Speech(serve_asgi)
    models = Models()
    async with connect(ws_agent(serve_asgi, speech, models)) as socket:
        await socket.send(json.dumps({"type": "prompt", "prompt": "Talk."}))
        await receive_until(socket, lambda e: e["type"] == "audio_chunk")
    record = await speech.wait_closed(0)
    assert models.made[0].stopped_early is True
    assert record.kinds()[-1] == "cancel"
    assert "close" not in record.kinds()


async def test_ws_bad_messages_get_an_error_and_the_connection_goes_on(serve_asgi) -> None:
    speech = Speech(serve_asgi, compute_s_per_char=0.0)
    models = Models(FOUR_SENTENCES, tokens_per_s=2000)
    bad: list[str | bytes] = [
        "not json",
        "[1, 2]",
        '{"type": "shout"}',
        '{"type": "stop", "now": true}',
        '{"type": "prompt", "prompt": ""}',
        '{"type": "prompt", "prompt": "hi", "colour": "red"}',
        b'{"type": "stop"}',
        # Each of these once ended the connection with 1011 or would reach the model (issue #29).
        '{"type": "prompt", "prompt": "hi", "\\ud800": 1}',
        '{"type": "prompt", "prompt": "hi \\ud800"}',
        "[" * 5_000 + "]" * 5_000,
        '{"type": "prompt", "prompt": "hi", "mode": ' + "9" * 5_000 + "}",
        '{"type": "prompt", "prompt": "hi", "speed": NaN}',
        json.dumps({"type": "prompt", "prompt": "x" * 70_000}),
    ]
    async with connect(ws_agent(serve_asgi, speech, models)) as socket:
        errors = []
        for message in bad:
            await socket.send(message)
            errors.append(json.loads(await socket.recv()))
        await socket.send(json.dumps({"type": "prompt", "prompt": "Fine."}))
        answer = await receive_until(socket, is_end)
    assert [e["type"] for e in errors] == ["error"] * len(bad)
    assert {e["code"] for e in errors} == {"bad_request"}
    assert errors[0]["message"] == "the message is not valid JSON: Expecting value: line 1 column 1 (char 0)"
    assert [e["message"] for e in errors[1:4]] == [
        "the message must be a JSON object, got list",
        "unknown message type 'shout'; allowed: prompt, stop",
        "'stop' takes no other field",
    ]
    assert errors[4]["message"] == "'prompt' is empty"
    assert errors[5]["message"] == "unknown field(s) 'colour'; allowed: prompt, mode, voice, speed"
    assert errors[6]["message"] == "binary frames are not accepted; send JSON in text frames"
    assert [e["message"] for e in errors[7:]] == [
        "unknown field(s) '\\ud800'; allowed: prompt, mode, voice, speed",
        "'prompt' contains a lone UTF-16 surrogate (U+D800) at character 3; it has no UTF-8 form",
        "the message is not valid JSON: nested too deeply",
        "the message is not valid JSON: an integer of 5,000 digits",
        "the message is not valid JSON: NaN is not valid JSON",
        "the message is over the limit of 65536 bytes",
    ]
    assert answer[-1] == {"type": "agent_end", "turn": 1}
    assert len(models.made) == 1
