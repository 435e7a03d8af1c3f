"""The AgentCore app over real HTTP: SSE events, a 400 for bad payloads, /ping, a caller who hangs up."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from agent_app.app import LEASE_GRACE_S, AgentService, AppDependencies, create_app
from agent_app.config import AgentConfig, load_config
from agent_app.identity import IAM_CALLERS
from agent_app.memory import ACTOR_ID, SESSION_HEADER, user_directory
from agent_app.metrics import InvocationMetrics
from agent_app.models import (
    DEMO_ANSWER,
    DemoModel,
    ModelChoice,
    ScriptedModel,
    ScriptedTurn,
    tokenize,
    user_questions,
)
from agent_app.speech.websocket import WebSocketTransport
from speech_protocol.emf import MetricsEmitter
from tests.agent.agent_support import (
    FOUR_SENTENCES,
    Event,
    FakeSpeechServer,
    GatedModel,
    decoded_audio,
    scripted,
    types,
)
from tests.agent.conftest import LiveServer

Serve = Callable[..., str]


@pytest.fixture
def serve_app(serve_asgi: Callable[[Any], LiveServer]) -> Serve:
    """Serve `create_app(config, deps)`; returns its base URL."""

    def start(config: AgentConfig, deps: AppDependencies | None = None) -> str:
        return f"http://127.0.0.1:{serve_asgi(create_app(config, deps)).port}"

    return start


def websocket_config(url: str, **env: str) -> AgentConfig:
    return load_config({"SPEECH_TRANSPORT": "websocket", "SPEECH_WS_URL": url, **env})


def fixed_model(model: ScriptedModel) -> Callable[[AgentConfig], ModelChoice]:
    return lambda config: ModelChoice(model=model, name="scripted", demo=False)


async def sse_events(response: httpx.Response) -> AsyncIterator[Event]:
    async for line in response.aiter_lines():
        if line.startswith("data: "):
            yield json.loads(line.removeprefix("data: "))
        else:
            assert line == "", f"unexpected SSE line {line!r}"


async def post_events(base: str, payload: Any, *, session_id: str | None = None) -> list[Event]:
    headers = {SESSION_HEADER: session_id} if session_id is not None else {}
    async with (
        httpx.AsyncClient(timeout=20) as client,
        client.stream("POST", f"{base}/invocations", json=payload, headers=headers) as response,
    ):
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        return [event async for event in sse_events(response)]


async def test_the_demo_model_streams_its_answer_and_audio_over_sse(fake_speech, serve_app: Serve) -> None:
    fake: FakeSpeechServer = await fake_speech()
    base = serve_app(websocket_config(fake.url))  # default dependencies: demo model, transport from config
    events = await post_events(base, {"prompt": "Hello?"})
    assert events[0] == {"type": "agent_start", "mode": "stream", "model": "demo", "demo": True}
    assert "".join(e["text"] for e in events if e["type"] == "text_delta") == DEMO_ANSWER
    assert types(events)[-3:] == ["audio_end", "metrics", "agent_end"]
    assert decoded_audio(events) == b"".join(fake.sent_pcm[f"s{i}"] for i in range(len(fake.sent_pcm)))
    assert len(fake.sent_pcm) >= 4


async def test_mode_and_voice_from_the_payload(fake_speech, serve_app: Serve) -> None:
    fake: FakeSpeechServer = await fake_speech()
    deps = AppDependencies(model=fixed_model(scripted()))
    base = serve_app(websocket_config(fake.url, SPEECH_VOICE="af_heart"), deps)
    events = await post_events(base, {"prompt": "Tell me.", "mode": "batch", "voice": "am_michael"})
    assert events[0]["mode"] == "batch"
    assert fake.texts == [FOUR_SENTENCES]
    assert json.loads(fake.received[0][1])["voice"] == "am_michael"
    assert events[-2]["mode"] == "batch"


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (
            json.dumps({"prompt": "Hi", "mode": "fast"}),
            {"type": "error", "code": "bad_request", "message": "'mode' must be one of stream, batch; got 'fast'"},
        ),
        (
            json.dumps(["Hi"]),
            {"type": "error", "code": "bad_request", "message": "the body must be a JSON object, got list"},
        ),
        (json.dumps({"prompt": ""}), {"type": "error", "code": "bad_request", "message": "'prompt' is empty"}),
    ],
)
async def test_a_bad_payload_gets_a_400_with_a_json_error(serve_app: Serve, body, expected) -> None:
    base = serve_app(websocket_config("ws://127.0.0.1:9/unused"), AppDependencies(model=fixed_model(scripted())))
    async with httpx.AsyncClient(timeout=10) as client:
        response = await client.post(f"{base}/invocations", content=body, headers={"content-type": "application/json"})
    assert response.status_code == 400
    assert response.json() == expected


async def test_invalid_json_gets_a_400_in_the_agents_error_shape(serve_app: Serve) -> None:
    base = serve_app(websocket_config("ws://127.0.0.1:9/unused"))
    async with httpx.AsyncClient(timeout=10) as client:
        response = await client.post(f"{base}/invocations", content=b"{not json")
    assert response.status_code == 400
    assert response.json() == {
        "type": "error",
        "code": "bad_request",
        "message": "the body is not valid JSON: "
        "Expecting property name enclosed in double quotes: line 1 column 2 (char 1)",
    }


async def test_ping(serve_app: Serve) -> None:
    base = serve_app(websocket_config("ws://127.0.0.1:9/unused"))
    async with httpx.AsyncClient(timeout=10) as client:
        response = await client.get(f"{base}/ping")
    assert response.status_code == 200
    assert response.json()["status"] == "Healthy"


async def test_a_caller_who_hangs_up_stops_model_and_speech(fake_speech, serve_app: Serve) -> None:
    fake: FakeSpeechServer = await fake_speech()
    text = FOUR_SENTENCES * 8
    model = scripted(text, tokens_per_s=300)  # about 1.7 s of tokens
    base = serve_app(websocket_config(fake.url), AppDependencies(model=fixed_model(model), caller_gone_after_s=0.3))
    async with (
        httpx.AsyncClient(timeout=20) as client,
        client.stream("POST", f"{base}/invocations", json={"prompt": "Go on."}) as response,
    ):
        seen = []
        async for event in sse_events(response):
            seen.append(event)
            if len(seen) == 3:
                break
    # AgentCore keeps the generator parked; the pipeline notices nobody reads and stops its work.
    for _ in range(100):
        if model.stopped_early and fake.disconnects:
            break
        await asyncio.sleep(0.05)
    assert model.stopped_early is True
    assert fake.disconnects == 1
    sent = model.tokens_sent
    await asyncio.sleep(0.2)
    assert model.tokens_sent == sent < len(tokenize(text))


async def test_model_transport_and_store_are_built_once_per_process(fake_speech, serve_app: Serve) -> None:
    fake: FakeSpeechServer = await fake_speech()
    built: list[str] = []

    def model(config: AgentConfig) -> ModelChoice:
        built.append("model")
        return ModelChoice(model=DemoModel(tokens_per_s=2000), name="demo", demo=True)

    def transport(config: AgentConfig) -> WebSocketTransport:
        built.append("transport")
        return WebSocketTransport(fake.url)

    def sessions(config: AgentConfig) -> None:
        built.append("sessions")

    deps = AppDependencies(model=model, transport=transport, sessions=sessions)
    base = serve_app(websocket_config(fake.url), deps)
    assert built == ["model", "transport", "sessions"]  # when the app is created, not at import
    for _ in range(2):
        assert types(await post_events(base, {"prompt": "Hi"}))[-1] == "agent_end"
    assert built == ["model", "transport", "sessions"]
    assert fake.sessions == 2


# --- conversations ----------------------------------------------------------------------------------

SESSION_A = "a1b2c3d4-0000-4000-8000-00000000000a"
SESSION_B = "a1b2c3d4-0000-4000-8000-00000000000b"


def listing(directory: Path) -> list[str]:
    return sorted(path.name for path in directory.iterdir())


def answer_of(events: list[Event]) -> str:
    return "".join(e["text"] for e in events if e["type"] == "text_delta")


def demo_deps(**kwargs: Any) -> AppDependencies:
    fast_demo = ModelChoice(model=DemoModel(tokens_per_s=2000), name="demo", demo=True)
    return AppDependencies(model=lambda config: fast_demo, **kwargs)


async def test_a_follow_up_in_the_same_session_remembers_the_question(
    fake_speech, serve_app: Serve, tmp_path: Path
) -> None:
    fake: FakeSpeechServer = await fake_speech()
    base = serve_app(websocket_config(fake.url, AGENT_SESSION_DIR=str(tmp_path)), demo_deps())
    first = await post_events(base, {"prompt": "How warm is Paris in May?"}, session_id=SESSION_A)
    follow_up = await post_events(base, {"prompt": "And what about June?"}, session_id=SESSION_A)
    other = await post_events(base, {"prompt": "And what about July?"}, session_id=SESSION_B)
    no_session = await post_events(base, {"prompt": "And in August?"})

    assert answer_of(first) == DEMO_ANSWER
    assert answer_of(follow_up) == 'You asked me before: "How warm is Paris in May?" ' + DEMO_ANSWER
    assert answer_of(other) == DEMO_ANSWER  # another conversation
    assert answer_of(no_session) == DEMO_ANSWER  # a call without a session id is a turn of its own
    assert listing(tmp_path) == ["users"]
    assert listing(user_directory(tmp_path, ACTOR_ID)) == [f"session_{SESSION_A}", f"session_{SESSION_B}"]
    third = await post_events(base, {"prompt": "Thanks!"}, session_id=SESSION_A)
    assert answer_of(third) == 'You asked me before: "And what about June?" ' + DEMO_ANSWER


async def test_the_model_sees_a_bounded_window_of_the_conversation(
    fake_speech, serve_app: Serve, tmp_path: Path
) -> None:
    fake: FakeSpeechServer = await fake_speech()
    seen: list[tuple[int, list[str]]] = []

    class Counting(DemoModel):
        def stream(self, messages: Any, *args: Any, **kwargs: Any) -> Any:
            seen.append((len(messages), user_questions(messages)))
            return super().stream(messages, *args, **kwargs)

    choice = ModelChoice(model=Counting(tokens_per_s=2000), name="demo", demo=True)
    config = websocket_config(fake.url, AGENT_SESSION_DIR=str(tmp_path), AGENT_HISTORY_MESSAGES="4")
    base = serve_app(config, AppDependencies(model=lambda config: choice))
    for turn in range(5):
        await post_events(base, {"prompt": f"Question {turn}?"}, session_id=SESSION_A)
    # Each turn adds two messages; the model sees the new question after at most 4 earlier messages.
    assert seen == [
        (1, ["Question 0?"]),
        (3, ["Question 0?", "Question 1?"]),
        (5, ["Question 0?", "Question 1?", "Question 2?"]),
        (5, ["Question 1?", "Question 2?", "Question 3?"]),
        (5, ["Question 2?", "Question 3?", "Question 4?"]),
    ]


class HoldFirstCall(GatedModel):
    """Holds only its first call at `hold_at` (the token counter is shared by all calls)."""

    async def wait_for_token(self, position: int, due: float) -> None:
        if self.calls == 1 and position == self.hold_at:
            await self.gate.wait()
        await ScriptedModel.wait_for_token(self, position, due)


async def test_a_second_call_on_a_busy_session_waits_then_is_refused(fake_speech, serve_app: Serve, tmp_path) -> None:
    fake: FakeSpeechServer = await fake_speech()
    model = HoldFirstCall(turns=[ScriptedTurn(FOUR_SENTENCES), ScriptedTurn("Hello there, friend.")], hold_at=3)
    config = websocket_config(fake.url, AGENT_SESSION_DIR=str(tmp_path), AGENT_SESSION_WAIT_S="0.3")
    base = serve_app(config, AppDependencies(model=fixed_model(model)))
    async with (
        httpx.AsyncClient(timeout=20) as client,
        client.stream(
            "POST", f"{base}/invocations", json={"prompt": "Go on."}, headers={SESSION_HEADER: SESSION_A}
        ) as first,
    ):
        stream = sse_events(first)
        seen = [await anext(stream) for _ in range(3)]  # the model is now held: the turn is in flight
        busy = await client.post(f"{base}/invocations", json={"prompt": "Hello?"}, headers={SESSION_HEADER: SESSION_A})
        assert busy.status_code == 409
        assert busy.json() == {
            "type": "error",
            "code": "session_busy",
            "message": "another call of this conversation is still running (waited 0.3 s)",
        }
        other = await client.post(f"{base}/invocations", json={"prompt": "Hi"}, headers={SESSION_HEADER: SESSION_B})
        assert other.status_code == 200  # only that conversation is busy
        other_events = [json.loads(line[6:]) for line in other.text.splitlines() if line.startswith("data: ")]
        assert answer_of(other_events) == "Hello there, friend."
        model.gate.set()
        seen += [event async for event in stream]
    assert types(seen)[-1] == "agent_end"
    assert answer_of(seen) == FOUR_SENTENCES


async def test_a_call_waiting_on_its_session_runs_once_the_previous_turn_ends(
    fake_speech, serve_app: Serve, tmp_path: Path
) -> None:
    fake: FakeSpeechServer = await fake_speech()
    config = websocket_config(fake.url, AGENT_SESSION_DIR=str(tmp_path), AGENT_SESSION_WAIT_S="10")
    base = serve_app(config, demo_deps())
    first, second = await asyncio.gather(
        post_events(base, {"prompt": "First?"}, session_id=SESSION_A),
        post_events(base, {"prompt": "Second?"}, session_id=SESSION_A),
    )
    answers = sorted([answer_of(first), answer_of(second)])
    # Serialised: exactly one of the two saw the other's question.
    assert answers in (
        [DEMO_ANSWER, 'You asked me before: "First?" ' + DEMO_ANSWER],
        [DEMO_ANSWER, 'You asked me before: "Second?" ' + DEMO_ANSWER],
    )


@pytest.mark.parametrize("session_id", ["short", "x" * 101, "a" * 40 + "/../etc", "-" + "a" * 40])
async def test_a_bad_session_id_gets_a_400(serve_app: Serve, tmp_path: Path, session_id: str) -> None:
    base = serve_app(websocket_config("ws://127.0.0.1:9/unused", AGENT_SESSION_DIR=str(tmp_path)), demo_deps())
    async with httpx.AsyncClient(timeout=10) as client:
        response = await client.post(f"{base}/invocations", json={"prompt": "Hi"}, headers={SESSION_HEADER: session_id})
    assert response.status_code == 400
    assert response.json() == {
        "type": "error",
        "code": "bad_request",
        "message": "the session id must be 33 to 100 letters, digits, '-' or '_', starting with a letter or digit "
        f"(a UUID works); got {len(session_id)} characters",
    }
    assert listing(tmp_path) == []


async def test_an_unreadable_store_gets_a_503(serve_app: Serve, tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("")
    base = serve_app(websocket_config("ws://127.0.0.1:9/unused", AGENT_SESSION_DIR=str(blocker)), demo_deps())
    async with httpx.AsyncClient(timeout=10) as client:
        response = await client.post(f"{base}/invocations", json={"prompt": "Hi"}, headers={SESSION_HEADER: SESSION_A})
        assert response.status_code == 503
        assert response.json()["code"] == "memory_unavailable"
        # The failed call gave its turn back: the next one is not refused as busy.
        again = await client.post(f"{base}/invocations", json={"prompt": "Hi"}, headers={SESSION_HEADER: SESSION_A})
    assert again.status_code == 503


async def test_an_unknown_voice_is_refused_before_the_model_starts(serve_app: Serve) -> None:
    model = scripted()
    base = serve_app(websocket_config("ws://127.0.0.1:9/unused"), AppDependencies(model=fixed_model(model)))
    async with httpx.AsyncClient(timeout=10) as client:
        response = await client.post(f"{base}/invocations", json={"prompt": "Hi", "voice": "xx_nobody"})
    assert response.status_code == 400
    assert response.json()["message"] == (
        "'voice' must be one of af_heart, af_bella, am_michael, bf_emma; got 'xx_nobody'"
    )
    assert model.calls == 0


# --- metrics ----------------------------------------------------------------------------------------


async def test_each_invocation_prints_its_emf_lines(fake_speech, serve_app: Serve) -> None:
    fake: FakeSpeechServer = await fake_speech()
    lines: list[str] = []
    emitter = MetricsEmitter("voicestack-test", "agent", write=lines.append, clock_ms=lambda: 1_700_000_000_000)
    deps = demo_deps(metrics=lambda: InvocationMetrics(emitter))
    base = serve_app(websocket_config(fake.url), deps)
    events = await post_events(base, {"prompt": "Hi"})
    for _ in range(50):
        if len(lines) == 2:
            break
        await asyncio.sleep(0.02)
    latencies = events[-2]
    assert [json.loads(line) for line in lines] == [
        {
            "_aws": {
                "Timestamp": 1_700_000_000_000,
                "CloudWatchMetrics": [
                    {
                        "Namespace": "voicestack-test",
                        "Dimensions": [["Service"]],
                        "Metrics": [
                            {"Name": "TimeToFirstText", "Unit": "Milliseconds"},
                            {"Name": "TimeToFirstAudio", "Unit": "Milliseconds"},
                        ],
                    }
                ],
            },
            "Service": "agent",
            "TimeToFirstText": latencies["time_to_first_text_ms"],
            "TimeToFirstAudio": latencies["time_to_first_audio_ms"],
        },
        {
            "_aws": {
                "Timestamp": 1_700_000_000_000,
                "CloudWatchMetrics": [
                    {
                        "Namespace": "voicestack-test",
                        "Dimensions": [["Service", "Outcome"]],
                        "Metrics": [{"Name": "Invocations", "Unit": "Count"}],
                    }
                ],
            },
            "Service": "agent",
            "Outcome": "completed",
            "Invocations": 1,
        },
    ]


# bedrock-agentcore 1.25 imports a Strands module that Strands 1.62 marks deprecated.
@pytest.mark.filterwarnings("ignore:strands.experimental.hooks.multiagent is deprecated:DeprecationWarning")
async def test_with_a_memory_id_conversations_go_to_agentcore_memory(
    serve_app: Serve, monkeypatch: pytest.MonkeyPatch, free_port: int
) -> None:
    # No AWS here: AgentCore Memory's data-plane endpoint is a closed local port, so the call
    # shows which store it reached (the request path) and that a store failure is a clean 503.
    monkeypatch.setenv("AWS_ENDPOINT_URL_BEDROCK_AGENTCORE", f"http://127.0.0.1:{free_port}")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDAGENTTEST")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "not-a-secret")
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "1")
    config = websocket_config(
        "ws://127.0.0.1:9/unused", AGENTCORE_MEMORY_ID="voicestack_memory-AbC123", AWS_REGION="us-east-1"
    )
    base = serve_app(config, demo_deps())
    async with httpx.AsyncClient(timeout=30) as client:
        response = await client.post(f"{base}/invocations", json={"prompt": "Hi"}, headers={SESSION_HEADER: SESSION_A})
    assert response.status_code == 503
    body = response.json()
    assert body["code"] == "memory_unavailable"
    assert f"/memories/voicestack_memory-AbC123/actor/voicestack-caller/sessions/{SESSION_A}" in body["message"]


async def test_a_turn_whose_events_are_never_read_is_given_back_after_its_bound(tmp_path: Path) -> None:
    config = websocket_config(
        "ws://127.0.0.1:9/unused", AGENT_SESSION_DIR=str(tmp_path), AGENT_DEADLINE_S="0.2", AGENT_SESSION_WAIT_S="5"
    )
    service = AgentService(config, demo_deps(caller_gone_after_s=0.1))
    loop = asyncio.get_running_loop()
    await service.start({"prompt": "Hi"}, SESSION_A, IAM_CALLERS)  # its events are never read
    start = loop.time()
    second = await service.start({"prompt": "Hi again"}, SESSION_A, IAM_CALLERS)
    waited = loop.time() - start
    assert 0.2 + 0.1 + LEASE_GRACE_S - 0.05 <= waited < 5
    assert service.conversations.active == 1
    events = [dict(event) async for event in second.events()]
    assert types(events)[0] == "agent_start"
    assert service.conversations.active == 0
