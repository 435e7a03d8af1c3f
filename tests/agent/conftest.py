"""Agent test fixtures (helpers live in tests/agent/agent_support.py)."""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import ExitStack
from typing import Any

import pytest
from websockets.asyncio.server import Server, serve

from local.threaded_server import ThreadedServer, serve_in_thread
from tests.agent.agent_support import FakeSpeechServer


@pytest.fixture
async def fake_speech() -> AsyncIterator[Callable[..., Any]]:
    """Factory: `await fake_speech(fault=..., ...)` starts a FakeSpeechServer on a free port."""
    servers: list[Server] = []

    async def start(**kwargs: Any) -> FakeSpeechServer:
        fake = FakeSpeechServer(**kwargs)
        fake.server = await serve(fake.handler, "127.0.0.1", 0, compression=None)
        servers.append(fake.server)
        return fake

    yield start
    for server in servers:
        server.close()
        await server.wait_closed()


@pytest.fixture
def free_port() -> int:
    """A port nothing listens on (bound then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


LiveServer = ThreadedServer


@pytest.fixture
def serve_asgi() -> Iterator[Callable[[Any], LiveServer]]:
    """Factory: `serve_asgi(app)` starts a LiveServer; all are stopped at teardown."""
    with ExitStack() as stack:
        yield lambda app: stack.enter_context(serve_in_thread(app))
