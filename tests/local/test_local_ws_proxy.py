"""The web server's `WS /api/ws`: relays the page's conversation socket to the agent's `WS /ws`,
with the session id as AgentCore's header, only for its own page, within the size limit."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest
from starlette.applications import Starlette
from starlette.routing import WebSocketRoute
from starlette.websockets import WebSocket, WebSocketDisconnect
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed, InvalidStatus

from local.ws_proxy import session_problem
from tests.local.local_fakes import WebStacks, serve

SESSION = "0123456789abcdef0123456789abcdef-01"
RULE = "'session' must be 33 to 100 characters matching [a-zA-Z0-9][a-zA-Z0-9-_]*"


class EchoAgent:
    """An agent `WS /ws` that answers each text frame with `echo: <text>` and records what it saw."""

    def __init__(self) -> None:
        self.session_ids: list[str | None] = []
        self.received: list[str] = []
        self.disconnected = threading.Event()

    def app(self) -> Starlette:
        async def ws(websocket: WebSocket) -> None:
            self.session_ids.append(websocket.headers.get("x-amzn-bedrock-agentcore-runtime-session-id"))
            await websocket.accept()
            try:
                while True:
                    text = await websocket.receive_text()
                    self.received.append(text)
                    await websocket.send_text(f"echo: {text}")
            except WebSocketDisconnect:
                self.disconnected.set()

        return Starlette(routes=[WebSocketRoute("/ws", ws)])


async def test_relays_both_ways_with_the_session_header_and_passes_the_close_on(web_stacks: WebStacks) -> None:
    agent = EchoAgent()
    agent_url = web_stacks.enter(serve(agent.app()))
    web_url = web_stacks.start_web(agent_url)
    url = "ws" + web_url.removeprefix("http") + f"/api/ws?session={SESSION}"
    async with connect(url, origin=web_url) as socket:  # type: ignore[arg-type]
        await socket.send('{"type": "prompt", "prompt": "hi"}')
        assert await socket.recv() == 'echo: {"type": "prompt", "prompt": "hi"}'
        await socket.send('{"type": "stop"}')
        assert await socket.recv() == 'echo: {"type": "stop"}'
    assert agent.session_ids == [SESSION]
    assert agent.received == ['{"type": "prompt", "prompt": "hi"}', '{"type": "stop"}']
    assert await asyncio.to_thread(agent.disconnected.wait, 10), "the agent did not see the page leave"


async def test_refuses_another_sites_page(web_stacks: WebStacks) -> None:
    agent = EchoAgent()
    web_url = web_stacks.start_web(web_stacks.enter(serve(agent.app())))
    url = "ws" + web_url.removeprefix("http") + "/api/ws"
    with pytest.raises(InvalidStatus) as refused:
        async with connect(url, origin="https://evil.example"):  # type: ignore[arg-type]
            pass
    assert refused.value.response.status_code == 403
    assert agent.session_ids == []


@pytest.mark.parametrize(
    ("query", "message", "code", "reason"),
    [
        ("?session=short", None, 1008, RULE),
        (f"?session={SESSION}", "x" * (64 * 1024 + 1), 1009, "over 65536 characters"),
        (f"?session={SESSION}", b"binary", 1003, "text frames only"),
    ],
)
async def test_closes_on_what_it_cannot_relay(
    web_stacks: WebStacks, query: str, message: Any, code: int, reason: str
) -> None:
    agent = EchoAgent()
    web_url = web_stacks.start_web(web_stacks.enter(serve(agent.app())))
    url = "ws" + web_url.removeprefix("http") + "/api/ws" + query
    async with connect(url, origin=web_url) as socket:  # type: ignore[arg-type]
        if message is not None:
            await socket.send(message)
        with pytest.raises(ConnectionClosed) as closed:
            await socket.recv()
    assert closed.value.rcvd is not None
    assert (closed.value.rcvd.code, closed.value.rcvd.reason) == (code, reason)
    assert agent.received == []


@pytest.mark.parametrize(
    ("session", "expected"),
    [
        (None, None),
        (SESSION, None),
        ("a" * 33, None),
        ("a" * 100, None),
        ("a" * 32, RULE),
        ("a" * 101, RULE),  # AgentCore Runtime takes 256; the agent's Memory rule (and the agent) 100
        ("a" * 32 + "/", RULE),
        ("-" + "a" * 40, RULE),
    ],
)
def test_session_problem(session: str | None, expected: str | None) -> None:
    assert session_problem(session) == expected
