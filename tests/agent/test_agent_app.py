"""The AgentCore app over real HTTP: SSE events, a 400 for bad payloads, /ping, a caller who hangs up."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import pytest

from agent_app.app import AppDependencies, create_app
from agent_app.config import AgentConfig, load_config
from agent_app.models import DEMO_ANSWER, ModelChoice, ScriptedModel, tokenize
from agent_app.speech.websocket import WebSocketTransport
from tests.agent.agent_support import FOUR_SENTENCES, Event, FakeSpeechServer, decoded_audio, scripted, types
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


async def post_events(base: str, payload: Any) -> list[Event]:
    async with (
        httpx.AsyncClient(timeout=20) as client,
        client.stream("POST", f"{base}/invocations", json=payload) as response,
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
            {"type": "error", "code": "bad_request", "message": "the payload must be a JSON object, got list"},
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


async def test_invalid_json_gets_the_runtimes_400(serve_app: Serve) -> None:
    base = serve_app(websocket_config("ws://127.0.0.1:9/unused"))
    async with httpx.AsyncClient(timeout=10) as client:
        response = await client.post(f"{base}/invocations", content=b"{not json")
    assert response.status_code == 400
    assert response.json()["error"] == "Invalid JSON"


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


def test_the_transport_is_built_per_invocation() -> None:
    built: list[WebSocketTransport] = []

    def transport(config: AgentConfig) -> WebSocketTransport:
        built.append(WebSocketTransport("ws://127.0.0.1:9/x"))
        return built[-1]

    app = create_app(websocket_config("ws://127.0.0.1:9/x"), AppDependencies(transport=transport))
    assert built == []  # nothing is created when the app is
    assert app.handlers["main"].__name__ == "invoke"
