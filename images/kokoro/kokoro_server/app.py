"""The speech container's Starlette app: the three routes SageMaker calls.

- GET /ping: 200 once the engine is loaded and warmed up, 503 before (or if loading failed), and
  503 `stalled` while every engine slot is held by a call past its time limit.
- POST /invocations: one text in, streamed audio out (`invocations.py`).
- WS /invocations-bidirectional-stream: a session of the bidirectional protocol (`session.py`);
  beyond `max_sessions` open sessions a new one is refused with HTTP 503 before the upgrade.

Model work never runs on the event loop (see `scheduler.py`), so /ping and the WebSocket
handshakes are answered at once while every session is synthesizing.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from typing import Final

from starlette import status
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route, WebSocketRoute
from starlette.websockets import WebSocket

from kokoro_server.audio import frame_bytes
from kokoro_server.engine import SpeechEngine
from kokoro_server.invocations import invocations
from kokoro_server.metrics import SpeechMetrics, report_gauges
from kokoro_server.service import EngineLoader, LoadedEngine, Readiness, SpeechService
from kokoro_server.session import Session, SessionLimits
from kokoro_server.settings import Settings
from speech_protocol import WS_PATH

logger = logging.getLogger(__name__)

SERVER_BUSY: Final = "server_busy"
"""Code of the HTTP 503 that refuses a WebSocket session beyond `max_sessions`."""


async def _load(service: SpeechService, loader: EngineLoader) -> None:
    started = time.perf_counter()
    try:
        # In a thread that ends with the load, not the default executor's (which lives on): the
        # load and warm-up make an intra-op team on every core, which would stay, and with it the
        # synthesis threads' teams would outnumber the cores (`concurrency.SynthesisThreads`).
        loading = ThreadPoolExecutor(max_workers=1, thread_name_prefix="engine-load")
        try:
            loaded = await asyncio.get_running_loop().run_in_executor(loading, loader.load)
        finally:
            loading.shutdown(wait=False)  # its thread ends once the load returns; never block the loop
    except Exception as exc:  # the start-up boundary: report it; the process owner decides (it exits)
        logger.exception("loading the speech engine failed")
        service.fail()
        if loader.on_failure is not None:
            loader.on_failure(exc)
        return
    service.start(loaded)
    logger.info("speech engine loaded and warmed up in %.1f s", time.perf_counter() - started)


def create_app(
    settings: Settings, engine: SpeechEngine | EngineLoader, metrics: SpeechMetrics | None = None
) -> Starlette:
    """The app serving `engine`, or the engine `EngineLoader` builds in the background at start-up.

    An engine given directly is served as it is (no warm-up): tests and benchmarks pass one.
    `metrics` defaults to EMF lines on stdout when `VOICESTACK_METRICS_NAMESPACE` is set.
    """
    service = SpeechService(settings)
    metrics = metrics if metrics is not None else SpeechMetrics.from_env()
    session_numbers = itertools.count(1)
    sessions: set[Session] = set()

    def gauges() -> tuple[int, int]:
        return service.active_sessions, sum(session.waiting_requests for session in sessions)

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        loading: asyncio.Task[None] | None = None
        if isinstance(engine, EngineLoader):
            loading = asyncio.create_task(_load(service, engine))
        else:
            service.start(LoadedEngine(engine, "cuda" if settings.device == "cuda" else "cpu"))
        reporting = asyncio.create_task(report_gauges(metrics, gauges, settings.metrics_interval_s))
        try:
            yield
        finally:
            if loading is not None:
                loading.cancel()
            reporting.cancel()
            service.shutdown()

    async def ping(request: Request) -> Response:
        if service.stalled:
            # Every slot is held by a hung engine call: unhealthy, so SageMaker replaces the instance.
            return JSONResponse({"status": "stalled"}, status_code=503)
        ready = service.readiness is Readiness.READY
        return JSONResponse({"status": service.readiness.value}, status_code=200 if ready else 503)

    async def invoke(request: Request) -> Response:
        return await invocations(request, service, metrics)

    async def speech_session(websocket: WebSocket) -> None:
        if service.readiness is not Readiness.READY:
            # Accept first so the client sees why: 1013 means "try again later".
            await websocket.accept()
            await websocket.close(code=status.WS_1013_TRY_AGAIN_LATER, reason=f"model {service.readiness.value}")
            return
        if service.active_sessions >= settings.max_sessions:
            # Refused before the upgrade, so the client (or SageMaker) sees a plain HTTP 503 and
            # nothing of the server's state is spent on it.
            logger.warning(
                "session refused: %d sessions open, the limit is %d", service.active_sessions, settings.max_sessions
            )
            metrics.error()
            await websocket.send_denial_response(
                JSONResponse(
                    {
                        "code": SERVER_BUSY,
                        "message": f"the server has {settings.max_sessions} sessions open; try again later",
                    },
                    status_code=503,
                )
            )
            return
        name = f"ws-{next(session_numbers)}"
        limits = SessionLimits(
            max_text_chars=settings.max_text_chars,
            frame_bytes=frame_bytes(settings.frame_ms),
            max_queued_requests=settings.max_queued_requests,
            idle_timeout_s=settings.idle_timeout_s,
        )
        session = Session(
            websocket, service.engine, service.scheduler.lane(name), service.chunk_policy(), limits, metrics=metrics
        )
        service.active_sessions += 1
        sessions.add(session)
        logger.info("session %s opened (%d active)", name, service.active_sessions)
        try:
            await session.run()
        finally:
            service.active_sessions -= 1
            sessions.discard(session)
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
