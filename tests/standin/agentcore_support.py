"""Support for the AgentCore stand-in tests: a scripted agent that records what reaches it, and
the SDK environment (endpoint override, test CA, test credentials) the way a user sets it."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from typing import Any

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route, WebSocketRoute
from starlette.websockets import WebSocket

from local.agentcore_standin import AgentCoreStandInInfo, run_agentcore_standin
from local.standin.agentcore_auth import Principal
from local.standin.agentcore_routing import AgentCoreConfig
from local.threaded_server import ThreadedServer, serve_in_thread

ARN = "arn:aws:bedrock-agentcore:us-east-1:000000000000:runtime/voicestack_test-abcdefghij"
REGION = "us-east-1"
WAIT_S = 10.0
"""Upper bound for any wait in these tests; reaching it means the test failed."""


@dataclass
class ScriptedAgent:
    """An AgentCore-contract app: `POST /invocations` streams three SSE events (after `release` for
    the second when the payload says `"hold": true`, or answers `"status"` with a JSON body);
    `WS /ws` echoes and obeys `big:N`, `flood:N`, `close:CODE`. Records headers and close codes."""

    headers: list[dict[str, str]] = field(default_factory=list)
    bodies: list[bytes] = field(default_factory=list)
    ws_closes: list[int] = field(default_factory=list)
    release: threading.Event = field(default_factory=threading.Event)
    """Set by a test (another thread) to let a held answer go on."""
    hangups: list[str] = field(default_factory=list)

    def app(self) -> Starlette:
        return Starlette(
            routes=[Route("/invocations", self._invoke, methods=["POST"]), WebSocketRoute("/ws", self._ws)]
        )

    async def _invoke(self, request: Request) -> Response:
        self.headers.append(dict(request.headers))
        body = await request.body()
        self.bodies.append(body)
        payload = json.loads(body or b"{}")
        if "status" in payload:
            return JSONResponse(
                {"type": "error", "code": "bad_request", "message": "scripted"}, status_code=payload["status"]
            )

        async def events() -> AsyncIterator[bytes]:
            try:
                yield b'data: {"n": 0}\n\n'
                if payload.get("hold"):
                    # A threading.Event, set from the test's thread: wait for it off the loop.
                    await asyncio.to_thread(self.release.wait, WAIT_S)
                yield b'data: {"n": 1}\n\n'
                yield b'data: {"n": 2}\n\n'
            except asyncio.CancelledError:
                self.hangups.append(request.headers.get("x-amzn-bedrock-agentcore-runtime-session-id", ""))
                raise

        return StreamingResponse(events(), media_type="text/event-stream")

    async def _ws(self, websocket: WebSocket) -> None:
        self.headers.append(dict(websocket.headers))
        await websocket.accept()
        while True:
            message = await websocket.receive()
            if message["type"] == "websocket.disconnect":
                self.ws_closes.append(int(message.get("code", 1005)))
                return
            text = message.get("text")
            if text is None:
                await websocket.send_bytes(message.get("bytes") or b"")
                continue
            command, _, argument = text.partition(":")
            if command == "big":
                await websocket.send_text("x" * int(argument))
            elif command == "flood":
                for i in range(int(argument)):
                    await websocket.send_text(str(i))
            elif command == "close":
                await websocket.close(int(argument))
                self.ws_closes.append(int(argument))
                return
            else:
                await websocket.send_text(f"echo:{text}")


@contextmanager
def scripted_agent() -> Iterator[tuple[ScriptedAgent, ThreadedServer]]:
    agent = ScriptedAgent()
    with serve_in_thread(agent.app(), ws="websockets-sansio") as server:
        yield agent, server


@asynccontextmanager
async def standin_for(url: str, **options: Any) -> AsyncIterator[AgentCoreStandInInfo]:
    async with run_agentcore_standin(AgentCoreConfig(runtimes={ARN: url}, region=REGION, **options)) as info:
        yield info


def use_sdk_environment(monkeypatch: pytest.MonkeyPatch, info: AgentCoreStandInInfo, principal: Principal) -> None:
    """What a user of the stand-in exports: the endpoint override, its CA, and test credentials."""
    for key in (
        "AWS_PROFILE",
        "AWS_SESSION_TOKEN",
        "AWS_DEFAULT_PROFILE",
        "AWS_CONFIG_FILE",
        "AWS_SHARED_CREDENTIALS_FILE",
    ):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent/aws-config")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent/aws-credentials")
    monkeypatch.setenv("AWS_ENDPOINT_URL_BEDROCK_AGENTCORE", info.url)
    monkeypatch.setenv("AWS_CA_BUNDLE", str(info.ca_path))
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)
    monkeypatch.delenv("AWS_REGION", raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", principal.access_key)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", principal.secret_key)
    if principal.session_token is not None:
        monkeypatch.setenv("AWS_SESSION_TOKEN", principal.session_token)
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
