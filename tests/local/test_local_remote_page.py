"""The page in remote mode, in headless Chromium, against the AgentCore stand-in in front of the real
agent app and speech app: the web server holds the (temporary) credentials, signs SSE calls and
hands out presigned wss:// URLs valid for 3 s; the page plays answers over both connections, stops
one, keeps its socket after the URL has expired, reconnects with a new URL once AgentCore closes the
idle socket, retries a handshake refused for an expired URL, and receives no secret anywhere."""

from __future__ import annotations

import asyncio
import json
import ssl
import time
from collections.abc import AsyncIterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest
from bedrock_agentcore.runtime.context import BedrockAgentCoreContext
from playwright.sync_api import Page, Request, Response, Route, WebSocket
from strands.types.streaming import StreamEvent
from websockets.asyncio.client import connect
from websockets.exceptions import InvalidStatus

from agent_app.config import AgentConfig
from agent_app.models import ModelChoice, ScriptedModel, ScriptedTurn
from kokoro_server.app import create_app as create_speech_app
from kokoro_server.engine import ZeroCostEngine
from kokoro_server.settings import Settings
from local.agentcore_standin import AgentCoreStandInInfo
from local.standin.agentcore_routing import AgentCoreConfig
from local.webserver import RemoteChoice, WebServerConfig
from local.webserver import create_app as create_web_app
from tests.local.local_fakes import (
    REGION,
    RUNTIME_ARN,
    TEMPORARY,
    ask,
    fake_stack,
    runs,
    serve,
    serve_real_agent,
    standin_in_thread,
    turns,
    use_sdk_environment,
    wait_answered,
)
from voicestack.runtime_target import resolve_runtime

pytestmark = pytest.mark.browser

WAIT_MS = 30_000
EXPIRES_S = 3
"""The presigned URLs' life here (300 s by default): short, so the page outlives one in a test. As
X-Amz-Date counts whole seconds, a URL lives 2 to 3 s: time enough to open it on a loaded machine."""
IDLE_S = 6.0
"""The stand-in's idle timeout here (AgentCore's is 15 minutes)."""
LONG = "Streaming speech starts sooner than you think, and it keeps going while the model writes. " * 4
REFUSED_HANDSHAKE = "console.error: WebSocket connection to '{url}' failed: Error during WebSocket handshake: "


@dataclass
class RemoteChain:
    url: str
    standin: AgentCoreStandInInfo
    session_ids: list[str | None]
    prompts: list[str]


class _ByPrompt(ScriptedModel):
    """Answers "Talk for a while." at length (40 tokens/s, to be stopped), anything else in one short
    sentence; records each call's session id and prompt."""

    def __init__(self, chain_sessions: list[str | None], prompts: list[str]) -> None:
        super().__init__([ScriptedTurn(LONG)], tokens_per_s=40)
        self._sessions = chain_sessions
        self._prompts = prompts

    def stream(
        self, messages: Any, tool_specs: Any = None, system_prompt: str | None = None, **kwargs: Any
    ) -> AsyncIterable[StreamEvent]:
        prompt = str(messages[-1]["content"][0]["text"])
        self._sessions.append(BedrockAgentCoreContext.get_session_id())
        self._prompts.append(prompt)
        long = prompt == "Talk for a while."
        text = LONG if long else f"Answer number {len(self._prompts)}."
        made = ScriptedModel([ScriptedTurn(text)], tokens_per_s=40 if long else 300)
        return made.stream(messages, tool_specs, system_prompt, **kwargs)


@pytest.fixture
def chain(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[RemoteChain]:
    session_ids: list[str | None] = []
    prompts: list[str] = []

    def model(config: AgentConfig) -> ModelChoice:
        return ModelChoice(model=_ByPrompt(session_ids, prompts), name="scripted", demo=False)

    with ExitStack() as stack:
        speech_app = create_speech_app(Settings(), ZeroCostEngine(compute_s_per_char=0.002))
        agent = serve_real_agent(stack, speech_app, tmp_path / "conversations", model)
        standin = stack.enter_context(
            standin_in_thread(
                AgentCoreConfig(
                    runtimes={RUNTIME_ARN: agent.http_url},
                    region=REGION,
                    principals=(TEMPORARY,),
                    idle_timeout_s=IDLE_S,
                )
            )
        )
        use_sdk_environment(monkeypatch, standin, TEMPORARY)
        outputs = {"agentRuntimeArn": RUNTIME_ARN, "region": REGION}
        target = resolve_runtime(stack="dev", runtime_arn=None, read=fake_stack("dev", outputs))
        web_config = WebServerConfig(remote=RemoteChoice(stack="dev", presign_expires_s=EXPIRES_S))
        web = stack.enter_context(serve(create_web_app(web_config, target)))
        yield RemoteChain(url=web, standin=standin, session_ids=session_ids, prompts=prompts)


def open_page(page: Page, chain: RemoteChain, transport: str) -> list[str]:
    """Load the page, pick `transport`; returns the list the page's WebSocket URLs will land in."""
    sockets: list[str] = []
    page.on("websocket", lambda ws: sockets.append(ws.url))
    page.goto(chain.url + "/")
    page.wait_for_function("document.getElementById('health').dataset.state === 'ok'")
    page.check(f"input[name=transport][value={transport}]")
    return sockets


def signed_at(url: str) -> float:
    stamp = parse_qs(urlsplit(url).query)["X-Amz-Date"][0]
    return time.mktime(time.strptime(stamp, "%Y%m%dT%H%M%SZ")) - time.timezone


def handshake_status(url: str, chain: RemoteChain) -> tuple[int, str]:
    async def attempt() -> tuple[int, str]:
        context = ssl.create_default_context(cafile=str(chain.standin.ca_path))
        with pytest.raises(InvalidStatus) as refused:
            async with connect(url, ssl=context, open_timeout=5):
                pass
        response = refused.value.response
        return response.status_code, response.headers.get("x-amzn-errortype", "")

    # Playwright's sync API keeps an event loop running on this thread: the client gets its own.
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, attempt()).result()


def test_the_page_plays_stops_and_outlives_its_presigned_urls(tls_page: Page, chain: RemoteChain) -> None:
    page = tls_page
    sockets = open_page(page, chain, "websocket")
    assert page.inner_text("#target") == "stack dev · us-east-1"
    assert page.get_attribute("#target", "title") == RUNTIME_ARN
    assert page.title() == "voicestack · stack dev (us-east-1)"
    assert page.inner_text("#health") == "AgentCore: ready"
    session = page.evaluate("window.voicestack.sessionId")

    ask(page, "Talk for a while.")
    page.wait_for_function("window.voicestack.current?.samplesPlayed > 0", timeout=WAIT_MS)
    page.click("#stop")
    page.wait_for_function("window.voicestack.current?.done", timeout=WAIT_MS)
    assert page.inner_text("#status") == "Stopped."
    assert len(sockets) == 1

    # The URL that opened the socket expires; the open socket does not care (AgentCore checked it
    # at the handshake).
    first = sockets[0]
    time.sleep(max(0.0, signed_at(first) + EXPIRES_S + 1.5 - time.time()))
    assert handshake_status(first, chain) == (403, "InvalidSignatureException")
    ask(page, "And now?")
    wait_answered(page, 2, WAIT_MS)
    assert len(sockets) == 1

    # AgentCore closes an idle session's socket; the next question opens a new one with a new URL.
    page.wait_for_function("window.voicestack.socket.open === false", timeout=(IDLE_S + 10) * 1000)
    ask(page, "Still there?")
    wait_answered(page, 3, WAIT_MS)
    assert len(sockets) == 2
    assert signed_at(sockets[1]) > signed_at(first)
    for url in sockets:
        assert parse_qs(urlsplit(url).query)["X-Amzn-Bedrock-AgentCore-Runtime-Session-Id"] == [session]

    assert turns(page) == [
        {
            "prompt": "Talk for a while.",
            "answer": page.evaluate("window.voicestack.turns[0].answer"),
            "result": "stopped",
        },
        {"prompt": "And now?", "answer": "Answer number 2.", "result": "ok"},
        {"prompt": "Still there?", "answer": "Answer number 3.", "result": "ok"},
    ]
    assert turns(page)[0]["result"] == "stopped"
    stopped = turns(page)[0]["answer"]
    assert LONG.startswith(stopped)
    assert stopped != LONG
    assert runs(page) == ["stopped", "ok", "ok"]
    assert chain.session_ids == [session, session, session]
    assert page.evaluate("window.voicestack.current.error") is None


def test_a_handshake_refused_for_an_expired_url_is_retried_with_a_new_one(
    tls_page: Page, chain: RemoteChain, page_problems: list[str]
) -> None:
    page = tls_page
    sockets = open_page(page, chain, "websocket")
    session = page.evaluate("window.voicestack.sessionId")
    with httpx.Client(base_url=chain.url) as client:
        stale = client.post("/api/ws-url", json={"session": session}).json()
    time.sleep(EXPIRES_S + 1.5)
    handed: list[str] = []

    def hand_out(route: Route, request: Request) -> None:
        # The first URL the page gets expired on its way (a suspended laptop, a slow network).
        handed.append("stale" if not handed else "fresh")
        if handed[-1] == "stale":
            route.fulfill(status=200, content_type="application/json", body=json.dumps(stale))
        else:
            route.continue_()

    page.route("**/api/ws-url", hand_out)
    ask(page, "Hello?")
    wait_answered(page, 1, WAIT_MS)

    assert handed == ["stale", "fresh"]
    assert sockets[0] == stale["url"]
    assert len(sockets) == 2
    assert turns(page) == [{"prompt": "Hello?", "answer": "Answer number 1.", "result": "ok"}]
    assert len(page_problems) == 1
    assert page_problems[0].startswith(REFUSED_HANDSHAKE.format(url=stale["url"]))
    page_problems.clear()


def test_sse_is_signed_by_the_server_and_nothing_the_page_receives_holds_a_secret(
    tls_page: Page, chain: RemoteChain
) -> None:
    page = tls_page
    responses: list[Response] = []
    frames: list[str] = []

    def watch(ws: WebSocket) -> None:
        ws.on("framereceived", lambda payload: frames.append(payload if isinstance(payload, str) else payload.hex()))

    # A lambda: Playwright marks each handler with an attribute, which a builtin method cannot take.
    page.on("response", lambda response: responses.append(response))  # noqa: PLW0108
    page.on("websocket", watch)
    sockets = open_page(page, chain, "sse")
    session = page.evaluate("window.voicestack.sessionId")
    ask(page, "Over SSE?")
    wait_answered(page, 1, WAIT_MS)
    page.check("input[name=transport][value=websocket]")
    ask(page, "Over the socket?")
    wait_answered(page, 2, WAIT_MS)
    assert [t["result"] for t in turns(page)] == ["ok", "ok"]
    assert chain.prompts == ["Over SSE?", "Over the socket?"]
    assert chain.session_ids == [session, session]
    assert page.evaluate("window.voicestack.current.samplesPlayed") > 0

    received: list[tuple[str, str]] = []  # (where, what)
    for response in responses:
        headers = json.dumps(response.all_headers())
        body = response.body().decode("utf-8", "replace")
        received.append((response.url, headers + body))
    received += [("frame", frame) for frame in frames]
    received.append(("storage", page.evaluate("JSON.stringify({ ...sessionStorage, ...localStorage })")))
    assert len(frames) > 10
    assert any(url.endswith("/api/invoke") for url, _ in received)

    secret = TEMPORARY.secret_key
    assert [where for where, what in received if secret in what] == []
    # The key id and the session token travel only inside the presigned URL (X-Amz-Credential,
    # X-Amz-Security-Token), which cannot sign anything: the secret never leaves the server.
    token, key_id = TEMPORARY.session_token or "", TEMPORARY.access_key
    carrying = [where for where, what in received if token in what or key_id in what]
    assert carrying == [f"{chain.url}/api/ws-url"] * len(sockets)
    assert len(sockets) == 1


def test_a_question_over_agentcores_frame_limit_is_refused_by_the_page(tls_page: Page, chain: RemoteChain) -> None:
    """AgentCore closes a connection on a message over 32 KB: the page says so instead of sending it."""
    page = tls_page
    sockets = open_page(page, chain, "websocket")
    prompt = "日" * 11_000  # 33,000 bytes of UTF-8: over the 32,000
    ask(page, prompt)
    page.wait_for_function("window.voicestack.current?.done", timeout=WAIT_MS)
    message = {"type": "prompt", "prompt": prompt, "mode": "stream"}
    size = len(json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode())
    assert page.inner_text("#error") == (
        f"prompt_too_large: the question is {size} bytes as a WebSocket message; the runtime takes at most 32000"
    )
    assert chain.prompts == []

    ask(page, "A short one?")
    wait_answered(page, 2, WAIT_MS)
    assert [t["result"] for t in turns(page)] == ["prompt_too_large", "ok"]
    assert len(sockets) == 1  # the socket stayed open
