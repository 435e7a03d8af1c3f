"""Agent test fixtures (helpers live in tests/agent/agent_support.py)."""

from __future__ import annotations

import socket
import threading
import time
import warnings
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
import uvicorn
from websockets.asyncio.server import Server, serve

from tests.agent.agent_support import FakeSpeechServer

with warnings.catch_warnings():
    # bedrock-agentcore 1.25 declares a pydantic model with a class-based config, deprecated since
    # pydantic 2.0, at import time; pytest turns that into an error. Import it once here, quietly.
    # (Better: "ignore::DeprecationWarning:bedrock_agentcore.*" in pyproject's filterwarnings.)
    warnings.filterwarnings("ignore", category=DeprecationWarning, module=r"bedrock_agentcore\.")
    import bedrock_agentcore.runtime  # noqa: F401


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


@dataclass
class LiveServer:
    """An ASGI app served by uvicorn in a thread on a free 127.0.0.1 port."""

    port: int
    server: uvicorn.Server
    thread: threading.Thread

    def stop(self) -> None:
        """Shut down as on SIGTERM (open WebSockets are closed with 1012), and wait for it."""
        self.server.should_exit = True
        self.thread.join(10)


@pytest.fixture
def serve_asgi() -> Iterator[Callable[[Any], LiveServer]]:
    """Factory: `serve_asgi(app)` starts a LiveServer; all are stopped at teardown."""
    running: list[tuple[LiveServer, socket.socket]] = []

    def start(app: Any) -> LiveServer:
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        server = uvicorn.Server(uvicorn.Config(app, lifespan="on", log_level="warning", ws_ping_interval=None))
        thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
        thread.start()
        live = LiveServer(port=sock.getsockname()[1], server=server, thread=thread)
        running.append((live, sock))
        deadline = time.monotonic() + 10
        while not server.started:
            if not thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("uvicorn did not start")
            time.sleep(0.01)
        return live

    yield start
    for live, sock in running:
        live.stop()
        sock.close()
