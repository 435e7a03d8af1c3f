"""What both stand-ins need to serve: a TLS listener on a throwaway PKI, and their command's run.

- `tls_listener(host, port, cert_dir)`: a CA and a server certificate for `host`, 127.0.0.1 and
  localhost (`local.tls`), written to `cert_dir` (a temporary directory when None), and a socket
  bound and listening before any server starts, so that the port is known (0 picks a free one)
  and connections made right away wait in the backlog instead of being refused;
- `serve_until_signalled(running, ready)`: a stand-in's command line, which prints its one JSON
  `ready` line once it accepts connections and serves until SIGINT or SIGTERM.
"""

from __future__ import annotations

import asyncio
import json
import signal
import socket
import tempfile
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractAsyncContextManager, ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

from local.tls import TlsFiles, generate_tls_material, write_tls_files


@dataclass(frozen=True, slots=True)
class TlsListener:
    """A listening socket, the PEM files of the certificate it serves, and its `https://` URL."""

    socket: socket.socket
    port: int
    files: TlsFiles
    url: str


@contextmanager
def tls_listener(host: str, port: int, cert_dir: Path | None, *, prefix: str) -> Iterator[TlsListener]:
    """Listening on `host:port` with a fresh certificate until the block exits (the socket is closed then;
    a temporary `cert_dir`, named after `prefix`, is removed)."""
    with ExitStack() as stack:
        if cert_dir is None:
            cert_dir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix=prefix)))
        hosts = tuple(dict.fromkeys((host, "127.0.0.1", "localhost")))
        files = write_tls_files(generate_tls_material(hosts), cert_dir)
        listener = stack.enter_context(socket.create_server((host, port)))
        bound = int(listener.getsockname()[1])
        url_host = f"[{host}]" if ":" in host else host
        yield TlsListener(listener, bound, files, f"https://{url_host}:{bound}")


async def serve_until_signalled[Info](
    running: AbstractAsyncContextManager[Info], ready: Callable[[Info], Mapping[str, object]]
) -> None:
    """Enter `running` (a stand-in being served), print `ready(info)` as one JSON line, and serve until
    SIGINT or SIGTERM."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    async with running as info:
        print(json.dumps({"event": "ready", **ready(info)}), flush=True)
        await stop.wait()
