"""The speech container's Starlette app: the three routes SageMaker calls.

- GET /ping: 200 once the engine is loaded and warmed up, 503 before (or if loading failed).
- POST /invocations: one text in, streamed audio out (`invocations.py`).
- WS /invocations-bidirectional-stream: a session of the bidirectional protocol (`session.py`).

Model work never runs on the event loop (see `scheduler.py`), so /ping and the WebSocket
handshakes are answered at once while every session is synthesizing.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from starlette import status
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route, WebSocketRoute
from starlette.websockets import WebSocket

from kokoro_server.audio import frame_bytes
from kokoro_server.engine import SpeechEngine
from kokoro_server.invocations import invocations
from kokoro_server.service import EngineLoader, LoadedEngine, Readiness, SpeechService
from kokoro_server.session import Session, SessionLimits
from kokoro_server.settings import Settings
from speech_protocol import WS_PATH

logger = logging.getLogger(__name__)


async def _load(service: SpeechService, loader: EngineLoader) -> None:
    started = time.perf_counter()
    try:
        loaded = await asyncio.to_thread(loader.load)
    except Exception as exc:  # the start-up boundary: report it; the process owner decides (it exits)
        logger.exception("loading the speech engine failed")
        service.fail()
        if loader.on_failure is not None:
            loader.on_failure(exc)
        return
    service.start(loaded)
    logger.info("speech engine loaded and warmed up in %.1f s", time.perf_counter() - started)


def create_app(settings: Settings, engine: SpeechEngine | EngineLoader) -> Starlette:
    """The app serving `engine`, or the engine `EngineLoader` builds in the background at start-up.

    An engine given directly is served as it is (no warm-up): tests and benchmarks pass one.
    """
    service = SpeechService(settings)
    session_numbers = itertools.count(1)

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        loading: asyncio.Task[None] | None = None
        if isinstance(engine, EngineLoader):
            loading = asyncio.create_task(_load(service, engine))
        else:
            service.start(LoadedEngine(engine, "cuda" if settings.device == "cuda" else "cpu"))
        try:
            yield
        finally:
            if loading is not None:
                loading.cancel()
            service.shutdown()

    async def ping(request: Request) -> Response:
        ready = service.readiness is Readiness.READY
        return JSONResponse({"status": service.readiness.value}, status_code=200 if ready else 503)

    async def invoke(request: Request) -> Response:
        return await invocations(request, service)

    async def speech_session(websocket: WebSocket) -> None:
        if service.readiness is not Readiness.READY:
            # Accept first so the client sees why: 1013 means "try again later".
            await websocket.accept()
            await websocket.close(code=status.WS_1013_TRY_AGAIN_LATER, reason=f"model {service.readiness.value}")
            return
        name = f"ws-{next(session_numbers)}"
        limits = SessionLimits(max_text_chars=settings.max_text_chars, frame_bytes=frame_bytes(settings.frame_ms))
        session = Session(websocket, service.engine, service.scheduler.lane(name), service.chunk_policy(), limits)
        service.active_sessions += 1
        logger.info("session %s opened (%d active)", name, service.active_sessions)
        try:
            await session.run()
        finally:
            service.active_sessions -= 1
            logger.info("session %s ended (%d active)", name, service.active_sessions)

    app = Starlette(
        routes=[
            Route("/ping", ping, methods=["GET"]),
            Route("/invocations", invoke, methods=["POST"]),
            WebSocketRoute(WS_PATH, speech_session),
        ],
        lifespan=lifespan,
    )
    app.state.speech = service
    return app
