"""`python -m kokoro_server [serve] [--flags]`: run the speech server (uvicorn, 0.0.0.0:8080 by default).

The server starts answering at once (/ping 503) while the engine loads and warms up in a thread;
if loading fails, the process exits with status 1 so that the orchestrator restarts it.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Sequence
from functools import partial

import uvicorn

from kokoro_server.app import create_app
from kokoro_server.capability import UnsupportedPrecision
from kokoro_server.engine import SpeechEngine
from kokoro_server.invocations import body_limit
from kokoro_server.loader import load_engine, preflight
from kokoro_server.service import EngineLoader
from kokoro_server.settings import Settings, SettingsError, load_settings


def server_config(settings: Settings, loader: EngineLoader | SpeechEngine) -> uvicorn.Config:
    """uvicorn serving the app as in production (tests pass an engine instead of a loader)."""
    return uvicorn.Config(
        create_app(settings, loader),
        host=settings.host,
        port=settings.port,
        log_level=settings.log_level,
        lifespan="on",
        ws="websockets-sansio",
        # SageMaker pings the container every 60 s; the server pings too, so that a half-open
        # connection (a peer gone without a close) ends instead of holding a session forever.
        ws_ping_interval=settings.ws_ping_interval_s or None,
        ws_ping_timeout=settings.ws_ping_timeout_s,
        # Room for the longest valid message; a bigger frame closes the session with 1009.
        ws_max_size=body_limit(settings.max_text_chars),
    )


def main(argv: Sequence[str] | None = None) -> int:
    try:
        settings = load_settings(sys.argv[1:] if argv is None else argv, os.environ)
    except SettingsError as exc:
        print(f"kokoro_server: {exc}", file=sys.stderr)
        return 2
    try:
        preflight(settings)  # a precision this host cannot run is a configuration error, not a crash later
    except UnsupportedPrecision as exc:
        print(f"kokoro_server: {exc}", file=sys.stderr)
        return 2
    logging.basicConfig(level=settings.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")

    server: uvicorn.Server | None = None
    load_failed = False

    def stop_on_failure(exc: BaseException) -> None:
        nonlocal load_failed
        load_failed = True
        if server is not None:
            server.should_exit = True

    server = uvicorn.Server(server_config(settings, EngineLoader(partial(load_engine, settings), stop_on_failure)))
    server.run()
    return 1 if load_failed else 0


if __name__ == "__main__":
    sys.exit(main())
