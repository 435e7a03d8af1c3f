"""Test doubles for the local tooling: scripted agent SSE streams, servers on free ports, the
AgentCore stand-in in a thread, and the few steps every page test takes in the browser."""

from __future__ import annotations

import asyncio
import base64
import json
import queue
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import AbstractContextManager, ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Page
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route, WebSocketRoute
from starlette.websockets import WebSocket

from local.agentcore_standin import AgentCoreStandInInfo, run_agentcore_standin
from local.standin.agentcore_auth import TEST_PRINCIPALS, Principal
from local.standin.agentcore_routing import AgentCoreConfig
from local.threaded_server import ThreadedServer, serve_in_thread
from local.webserver import RemoteChoice, WebServerConfig, create_app
from voicestack.errors import UsageError
from voicestack.pulumi_stack import StackView
from voicestack.runtime_target import REGION_OUTPUT, RUNTIME_ARN_OUTPUT, RuntimeTarget, resolve_runtime

SAMPLE_RATE = 24_000

# Text with 2-, 3- and 4-byte UTF-8 characters (the emoji is a surrogate pair in JavaScript), so
# that byte splits land inside characters.
ANSWER_PIECES: tuple[str, ...] = (
    "Hello! ",
    "Streaming speech ",
    "starts sooner — ",
    "café, naïve, 日本語 ",
    "and 😀 too. ",
    "The second sentence ",
    "arrives while the first ",
    "one is already playing.",
)
ANSWER_TEXT = "".join(ANSWER_PIECES)


def pcm_samples(count: int, *, offset: int = 0) -> list[int]:
    """Deterministic PCM16 samples covering the extremes and both signs."""
    pattern = (0, 1, -1, 255, 256, -256, -257, 32767, -32768, 12345, -12345)
    return [pattern[(offset + i) % len(pattern)] for i in range(count)]


def pcm_bytes(samples: list[int]) -> bytes:
    return b"".join(s.to_bytes(2, "little", signed=True) for s in samples)


def split_bytes(data: bytes, sizes: list[int]) -> list[bytes]:
    """Cut `data` into pieces of the given sizes, cycling through them (odd sizes split samples)."""
    pieces: list[bytes] = []
    pos = 0
    i = 0
    while pos < len(data):
        size = sizes[i % len(sizes)]
        pieces.append(data[pos : pos + size])
        pos += size
        i += 1
    return pieces


def agent_events(mode: str, pcm: bytes, *, chunk_sizes: list[int], demo: bool = True) -> list[dict[str, Any]]:
    """A complete answer in the agent's SSE schema; audio chunks of odd sizes (sample splits)."""
    chunks = split_bytes(pcm, chunk_sizes)
    audio = [
        {"type": "audio_chunk", "seq": seq, "audio": base64.b64encode(chunk).decode("ascii")}
        for seq, chunk in enumerate(chunks)
    ]
    texts = [{"type": "text_delta", "text": piece} for piece in ANSWER_PIECES]
    audio_start = {"type": "audio_start", "format": "pcm_s16le", "sample_rate": SAMPLE_RATE, "channels": 1}
    body: list[dict[str, Any]] = []
    if mode == "stream":
        # The first sentence's audio starts after its text; the rest interleaves.
        body = [*texts[:3], audio_start]
        rest_text = texts[3:]
        for i, chunk_event in enumerate(audio):
            body.append(chunk_event)
            if i < len(rest_text):
                body.append(rest_text[i])
        body.extend(rest_text[len(audio) :])
    else:
        body = [*texts, audio_start, *audio]
    return [
        {"type": "agent_start", "mode": mode, "model": "demo", "demo": demo},
        *body,
        {"type": "audio_end", "chunks": len(chunks), "bytes": len(pcm)},
        {
            "type": "metrics",
            "mode": mode,
            "time_to_first_text_ms": 12.5,
            "time_to_first_audio_ms": 80.25,
            "total_ms": 400.0,
        },
        {"type": "agent_end"},
    ]


def sse_bytes(events: list[dict[str, Any]]) -> bytes:
    """Frame events exactly as AgentCore does: `data: <json>\\n\\n`, JSON with non-ASCII kept."""
    return b"".join(f"data: {json.dumps(event, ensure_ascii=False)}\n\n".encode() for event in events)


Script = Callable[[dict[str, Any]], AsyncIterator[bytes]]


@dataclass
class FakeAgent:
    """An AgentCore-shaped app (`POST /invocations`, `GET /ping`, `WS /ws`) that plays a scripted
    stream and echoes WebSocket messages.

    `script(request_json)` yields the raw body pieces, each written as it is yielded.
    """

    script: Script
    requests: list[dict[str, Any]] = field(default_factory=list)
    session_ids: list[str | None] = field(default_factory=list)
    healthy: bool = True

    def app(self) -> Starlette:
        async def invocations(request: Request) -> Response:
            payload = await request.json()
            self.requests.append(payload)
            self.session_ids.append(request.headers.get("x-amzn-bedrock-agentcore-runtime-session-id"))
            return StreamingResponse(self.script(payload), media_type="text/event-stream")

        async def ping(_: Request) -> Response:
            if not self.healthy:
                return JSONResponse({"status": "Unhealthy"}, status_code=503)
            return JSONResponse({"status": "Healthy"})

        async def ws(websocket: WebSocket) -> None:
            # Echoes each text message (`WS /ws` of the AgentCore contract, minus the agent).
            self.session_ids.append(websocket.headers.get("x-amzn-bedrock-agentcore-runtime-session-id"))
            await websocket.accept()
            while True:
                message = await websocket.receive()
                if message["type"] == "websocket.disconnect":
                    return
                if message.get("text") is not None:
                    await websocket.send_text(f"echo:{message['text']}")

        return Starlette(
            routes=[
                Route("/invocations", invocations, methods=["POST"]),
                Route("/ping", ping),
                WebSocketRoute("/ws", ws),
            ]
        )


def paced_script(pieces_for: Callable[[dict[str, Any]], list[bytes]], delay_s: float = 0.0) -> Script:
    """A script that writes each piece in turn, sleeping `delay_s` between them."""

    async def script(payload: dict[str, Any]) -> AsyncIterator[bytes]:
        for piece in pieces_for(payload):
            yield piece
            if delay_s:
                await asyncio.sleep(delay_s)

    return script


def serve_real_agent(
    stack: ExitStack, speech_app: Any, sessions: Path, model: Callable[[Any], Any] | None = None
) -> ThreadedServer:
    """The real agent app (AgentCore's contract) and `speech_app` (the speech container's app), each
    served in a thread until `stack` closes; the agent speaks to it over the container's WebSocket
    and keeps its conversations under `sessions`. `model` (config -> ModelChoice) replaces its own."""
    from agent_app.app import AppDependencies
    from agent_app.app import create_app as create_agent_app
    from agent_app.config import load_config
    from speech_protocol import WS_PATH

    speech = stack.enter_context(serve_in_thread(speech_app))
    config = load_config(
        {"SPEECH_TRANSPORT": "websocket", "SPEECH_WS_URL": speech.ws_url(WS_PATH), "AGENT_SESSION_DIR": str(sessions)}
    )
    dependencies = AppDependencies() if model is None else AppDependencies(model=model)
    return stack.enter_context(serve_in_thread(create_agent_app(config, dependencies)))


@contextmanager
def serve(app: Any) -> Iterator[str]:
    """Run `app` with uvicorn on a free 127.0.0.1 port in a thread; yields its base URL."""
    with serve_in_thread(app) as server:
        yield server.http_url


# --- the page, driven in the browser --------------------------------------------------------------

ANSWER_WAIT_MS = 20_000


def ask(page: Page, prompt: str) -> None:
    page.fill("#prompt", prompt)
    page.click("#speak")


def wait_answered(page: Page, turns: int, timeout_ms: float = ANSWER_WAIT_MS) -> None:
    """Until the page has `turns` turns and the last one has ended and played out."""
    page.wait_for_function(
        f"window.voicestack.turns.length === {turns} && window.voicestack.current?.done"
        " && window.voicestack.current.drained",
        timeout=timeout_ms,
    )


def turns(page: Page) -> list[dict[str, str]]:
    """The conversation's turns, as the page mirrors them."""
    result: list[dict[str, str]] = page.evaluate("() => window.voicestack.turns.map((t) => ({ ...t }))")
    return result


def runs(page: Page) -> list[str]:
    """The result column of the answers table, as the page mirrors it."""
    result: list[str] = page.evaluate("() => window.voicestack.runs.map((r) => r.result)")
    return result


OTHER_SITES: tuple[tuple[dict[str, str], str], ...] = (
    (
        {"Origin": "https://evil.example"},
        "Origin 'https://evil.example' is not this page's (http://{host}); only this server's page may call it",
    ),
    ({"Origin": "null"}, "Origin 'null' is not this page's (http://{host}); only this server's page may call it"),
    (
        {"Sec-Fetch-Site": "cross-site"},
        "cross-site request (Sec-Fetch-Site: cross-site); only this server's page may call it",
    ),
)
"""Requests from another site's page and the guard's 403 message (`{host}`: this server's)."""


@dataclass
class WebStack:
    """The page's web server in front of a fake agent."""

    url: str
    agent: FakeAgent
    agent_url: str


class WebStacks:
    """Starts web stacks for a test and stops them all at its end."""

    def __init__(self) -> None:
        self._exit = ExitStack()

    def start(self, script: Script) -> WebStack:
        agent = FakeAgent(script)
        agent_url = self.enter(serve(agent.app()))
        return WebStack(url=self.start_web(agent_url), agent=agent, agent_url=agent_url)

    def enter(self, server: AbstractContextManager[str]) -> str:
        """Keep another server (from `serve`) running until the end of the test."""
        return self._exit.enter_context(server)

    def start_web(self, agent_url: str) -> str:
        """Only the web server, in front of whatever listens (or not) at `agent_url`."""
        return self._exit.enter_context(serve(create_app(WebServerConfig(agent_url=agent_url))))

    def close(self) -> None:
        self._exit.close()


# --- remote mode: the AgentCore stand-in and the SDK environment ----------------------------------

RUNTIME_ARN = "arn:aws:bedrock-agentcore:us-east-1:000000000000:runtime/voicestack_page-abcdefghij"
REGION = "us-east-1"
ONE_EVENT = b'data: {"type": "agent_end"}\n\n'
TEMPORARY = Principal(
    "voicestack-page",
    "ASIAPAGEREMOTETEST00",
    "page-remote-test-secret-never-in-the-browser",
    session_token="page-remote-test-session-token",
)
"""Temporary credentials (a session token, as SSO and assumed roles give) allowed both routes."""


@contextmanager
def standin_in_thread(config: AgentCoreConfig) -> Iterator[AgentCoreStandInInfo]:
    """The AgentCore stand-in on its own event loop in a thread, until the block exits (the page
    tests drive Chromium synchronously on the main thread)."""
    ready: queue.Queue[AgentCoreStandInInfo | BaseException] = queue.Queue()
    loop = asyncio.new_event_loop()
    stop = asyncio.Event()

    async def serve() -> None:
        try:
            async with run_agentcore_standin(config) as info:
                ready.put(info)
                await stop.wait()
        except BaseException as exc:  # handed to the waiting test, which raises it
            ready.put(exc)
            raise

    thread = threading.Thread(target=loop.run_until_complete, args=(serve(),), name="agentcore-standin", daemon=True)
    thread.start()
    started = ready.get(timeout=30)
    if isinstance(started, BaseException):
        thread.join(5)
        raise RuntimeError("the AgentCore stand-in did not start") from started
    try:
        yield started
    finally:
        loop.call_soon_threadsafe(stop.set)
        thread.join(10)
        loop.close()


def use_sdk_environment(
    monkeypatch: pytest.MonkeyPatch, standin: AgentCoreStandInInfo | None, principal: Principal | None
) -> None:
    """What a user of the stand-in exports (endpoint override, its CA, credentials), and nothing of
    this machine's own AWS configuration; `principal=None`: no credentials anywhere."""
    for key in ("AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_SESSION_TOKEN", "AWS_REGION", "AWS_CA_BUNDLE"):
        monkeypatch.delenv(key, raising=False)
    for key in ("AWS_ENDPOINT_URL_BEDROCK_AGENTCORE", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent/aws-config")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent/aws-credentials")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)
    if standin is not None:
        monkeypatch.setenv("AWS_ENDPOINT_URL_BEDROCK_AGENTCORE", standin.url)
        monkeypatch.setenv("AWS_CA_BUNDLE", str(standin.ca_path))
    if principal is not None:
        monkeypatch.setenv("AWS_ACCESS_KEY_ID", principal.access_key)
        monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", principal.secret_key)
        if principal.session_token is not None:
            monkeypatch.setenv("AWS_SESSION_TOKEN", principal.session_token)


def fake_stack(name: str, outputs: dict[str, Any]) -> Callable[[str], StackView]:
    """A stack reader (`pulumi stack output --json`) that knows one stack."""

    def read(stack: str) -> StackView:
        if stack != name:
            raise UsageError(f"--stack {stack}: no such stack")
        return StackView(name=name, outputs=outputs, config={})

    return read


@dataclass
class RemoteStack:
    """The page's web server in remote mode, the AgentCore stand-in, the agent behind it."""

    url: str
    agent: FakeAgent
    standin: AgentCoreStandInInfo
    target: RuntimeTarget


class RemoteStacks:
    """Starts remote-mode stacks for a test (its SDK environment set) and stops them at its end."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self._exit = ExitStack()
        self._monkeypatch = monkeypatch

    def start(
        self,
        script: Script | None = None,
        *,
        principal: Principal | None = TEMPORARY,
        presign_expires_s: int = 300,
        stack: str | None = None,
        runtime_arn: str = RUNTIME_ARN,
        **standin_options: Any,
    ) -> RemoteStack:
        """The agent answers `script` (default: ONE_EVENT); `principal` signs (None: no
        credentials); the stand-in serves `RUNTIME_ARN` (the
        target may name another, `runtime_arn`) for its test principals and TEMPORARY."""
        agent = FakeAgent(script or paced_script(lambda _: [ONE_EVENT]))
        agent_url = self._exit.enter_context(serve(agent.app()))
        config = AgentCoreConfig(
            runtimes={RUNTIME_ARN: agent_url},
            region=REGION,
            principals=(TEMPORARY, *TEST_PRINCIPALS),
            **standin_options,
        )
        standin = self._exit.enter_context(standin_in_thread(config))
        use_sdk_environment(self._monkeypatch, standin, principal)
        if stack is None:
            target = resolve_runtime(stack=None, runtime_arn=runtime_arn)
        else:
            outputs = {RUNTIME_ARN_OUTPUT: runtime_arn, REGION_OUTPUT: REGION}
            target = resolve_runtime(stack=stack, runtime_arn=None, read=fake_stack(stack, outputs))
        url = self._exit.enter_context(self.web(target, presign_expires_s=presign_expires_s))
        return RemoteStack(url=url, agent=agent, standin=standin, target=target)

    def web(self, target: RuntimeTarget, *, presign_expires_s: int = 300) -> AbstractContextManager[str]:
        """A web server in remote mode for `target` (from `serve`: yields its base URL)."""
        choice = RemoteChoice(runtime_arn=target.runtime_arn, presign_expires_s=presign_expires_s)
        return serve(create_app(WebServerConfig(remote=choice), target))

    def close(self) -> None:
        self._exit.close()
