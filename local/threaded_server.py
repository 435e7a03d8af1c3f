"""An ASGI app served by uvicorn on a free loopback port, in a background thread.

For benchmarks and tests that need a real socket (WebSocket close codes, HTTP streaming,
concurrency) while the caller keeps its own event loop or stays synchronous.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Literal

import uvicorn

WsImplementation = Literal["auto", "websockets", "websockets-sansio", "wsproto"]


@dataclass(frozen=True)
class ThreadedServer:
    port: int
    server: uvicorn.Server
    thread: threading.Thread

    @property
    def http_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def ws_url(self, path: str) -> str:
        return f"ws://127.0.0.1:{self.port}{path}"

    def stop(self, timeout_s: float = 10.0) -> None:
        """Shut down as on SIGTERM (open WebSockets are closed with 1012) and wait for the thread."""
        self.server.should_exit = True
        self.thread.join(timeout_s)


@contextmanager
def serve_in_thread(
    app: Any, *, ws: WsImplementation = "auto", start_timeout_s: float = 30.0
) -> Iterator[ThreadedServer]:
    """Serve `app` (lifespan on, no server-initiated WebSocket pings) until the block exits."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    config = uvicorn.Config(app, lifespan="on", ws=ws, ws_ping_interval=None, log_level="warning")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, name="uvicorn", daemon=True)
    live = ThreadedServer(port=sock.getsockname()[1], server=server, thread=thread)
    thread.start()
    try:
        deadline = time.monotonic() + start_timeout_s
        while not server.started:
            if not thread.is_alive():
                raise RuntimeError("uvicorn exited before it started")
            if time.monotonic() > deadline:
                raise RuntimeError(f"uvicorn did not start within {start_timeout_s} s")
            time.sleep(0.01)
        yield live
    finally:
        live.stop()
        sock.close()
