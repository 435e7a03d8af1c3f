"""Serves the browser page and proxies it to the agent, so the page and its API share one origin.

Routes:
- `GET /` and the static files of `local/web/` (plain ES modules, no build step);
- `POST /api/invoke` -> the agent's `POST /invocations`, streamed through chunk by chunk as the
  agent writes them (no buffering: the page's time to first audio is the agent's);
- `GET /api/health` -> the agent's `GET /ping`;
- `WS /api/ws` -> the agent's `WS /ws` (the full-duplex conversation, `ws_proxy.py`).

Errors of the proxy itself are JSON bodies `{"error": {"code", "message"}}` with status 502 (agent
unreachable or broken) or 503 (agent not healthy).

Only its own page may drive the agent (`guard.py`): every request must name this server in `Host`
(421 otherwise: a DNS-rebinding page has its own name there), and `POST /api/invoke` must come from
this origin (403 for an `Origin` or `Sec-Fetch-Site` of another site; `WS /api/ws` likewise, refused
before the handshake completes) with a JSON body of at most
`max_body_bytes` (413 when larger, 415 when not JSON). Run: `python -m local.webserver --port 8000
--agent-url http://127.0.0.1:8080`.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import httpx
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Mount, Route, WebSocketRoute
from starlette.staticfiles import StaticFiles
from starlette.status import (
    HTTP_400_BAD_REQUEST,
    HTTP_413_CONTENT_TOO_LARGE,
    HTTP_415_UNSUPPORTED_MEDIA_TYPE,
    HTTP_502_BAD_GATEWAY,
    HTTP_503_SERVICE_UNAVAILABLE,
)
from starlette.types import Scope
from starlette.websockets import WebSocket

from local.guard import DEFAULT_MAX_BODY_BYTES, BodyTooLarge, SameOriginGuard, read_body_capped
from local.ws_proxy import relay_conversation

logger = logging.getLogger("voicestack.webserver")

WEB_DIR = Path(__file__).resolve().parent / "web"
SESSION_HEADER = "X-Amzn-Bedrock-AgentCore-Runtime-Session-Id"
"""AgentCore's session header; passed through so a caller can pin a conversation."""


@dataclass(frozen=True, slots=True)
class WebServerConfig:
    """Everything the web server needs, read once at start-up."""

    agent_url: str = "http://127.0.0.1:8080"
    host: str = "127.0.0.1"
    port: int = 8000
    read_timeout_s: float = 120.0
    """Longest silence tolerated between two chunks of the agent's stream."""
    web_dir: Path = WEB_DIR
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    """Largest `POST /api/invoke` body accepted (the agent's prompt limit is 8,000 characters)."""


def error_response(status_code: int, code: str, message: str) -> JSONResponse:
    """The proxy's structured error body."""
    return JSONResponse({"error": {"code": code, "message": message}}, status_code=status_code)


class PageFiles(StaticFiles):
    """Static files that browsers revalidate on every load (ETag), so an edited module is never stale."""

    def file_response(
        self, full_path: str | os.PathLike[str], stat_result: os.stat_result, scope: Scope, status_code: int = 200
    ) -> Response:
        response = super().file_response(full_path, stat_result, scope, status_code)
        response.headers["Cache-Control"] = "no-cache"
        return response


def create_app(config: WebServerConfig) -> Starlette:
    """The page and the proxy. The HTTP client is created at start-up, not at import."""
    agent_url = config.agent_url.rstrip("/")
    timeout = httpx.Timeout(connect=5.0, read=config.read_timeout_s, write=10.0, pool=5.0)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with httpx.AsyncClient(timeout=timeout) as client:
            app.state.http = client
            yield

    async def invoke(request: Request) -> Response:
        try:
            body = await read_body_capped(request, config.max_body_bytes)
        except BodyTooLarge as exc:
            return error_response(HTTP_413_CONTENT_TOO_LARGE, "body_too_large", str(exc))
        if not body:
            return error_response(HTTP_400_BAD_REQUEST, "empty_body", 'POST a JSON invocation: {"prompt": ...}')
        content_type = request.headers.get("content-type", "").split(";", 1)[0].strip().lower()
        if content_type != "application/json":
            return error_response(
                HTTP_415_UNSUPPORTED_MEDIA_TYPE,
                "not_json",
                f"the body must be application/json, got {content_type or 'no content type'}",
            )
        client: httpx.AsyncClient = request.app.state.http
        headers = {"content-type": "application/json", "accept": "text/event-stream"}
        session_id = request.headers.get(SESSION_HEADER)
        if session_id is not None:
            headers[SESSION_HEADER] = session_id
        upstream_request = client.build_request("POST", f"{agent_url}/invocations", content=body, headers=headers)
        try:
            upstream = await client.send(upstream_request, stream=True)
        except httpx.TransportError as exc:
            logger.warning("agent unreachable at %s: %s", agent_url, exc)
            return error_response(HTTP_502_BAD_GATEWAY, "agent_unreachable", f"no answer from {agent_url}: {exc}")

        if upstream.status_code >= 400:
            try:
                content = await upstream.aread()
            finally:
                await upstream.aclose()
            logger.warning("agent answered %d: %s", upstream.status_code, content[:200])
            return Response(
                content,
                status_code=upstream.status_code,
                media_type=upstream.headers.get("content-type", "application/octet-stream"),
            )

        async def relay() -> AsyncIterator[bytes]:
            try:
                async for chunk in upstream.aiter_raw():
                    yield chunk
            except httpx.TransportError as exc:
                # Headers are sent already: ending the body early is all we can do; the page
                # reports the truncated stream.
                logger.warning("agent stream broke off: %s", exc)
            finally:
                await upstream.aclose()

        return StreamingResponse(
            relay(),
            status_code=upstream.status_code,
            media_type=upstream.headers.get("content-type", "text/event-stream"),
            # no-transform / X-Accel-Buffering: ask any proxy in between not to buffer the stream.
            headers={"Cache-Control": "no-cache, no-transform", "X-Accel-Buffering": "no"},
        )

    agent_ws_url = "ws" + agent_url.removeprefix("http") + "/ws"

    async def conversation(websocket: WebSocket) -> None:
        await relay_conversation(websocket, agent_ws_url, max_message_chars=config.max_body_bytes)

    async def health(request: Request) -> Response:
        client: httpx.AsyncClient = request.app.state.http
        try:
            ping = await client.get(f"{agent_url}/ping", timeout=2.0)
        except httpx.TransportError as exc:
            return error_response(HTTP_502_BAD_GATEWAY, "agent_unreachable", f"no answer from {agent_url}: {exc}")
        if ping.status_code != 200:
            return error_response(
                HTTP_503_SERVICE_UNAVAILABLE, "agent_unhealthy", f"{agent_url}/ping answered {ping.status_code}"
            )
        try:
            agent = ping.json()
        except ValueError:
            agent = ping.text
        return JSONResponse({"status": "ok", "agent_url": agent_url, "agent": agent})

    app = Starlette(
        routes=[
            Route("/api/invoke", invoke, methods=["POST"]),
            Route("/api/health", health, methods=["GET"]),
            WebSocketRoute("/api/ws", conversation),
            Mount("/", PageFiles(directory=config.web_dir, html=True), name="page"),
        ],
        lifespan=lifespan,
    )
    app.add_middleware(SameOriginGuard, guarded_paths=frozenset({"/api/invoke", "/api/ws"}))
    return app


def parse_args(argv: Sequence[str] | None = None) -> WebServerConfig:
    defaults = WebServerConfig()
    parser = argparse.ArgumentParser(prog="python -m local.webserver", description=__doc__.splitlines()[0])
    parser.add_argument("--host", default=defaults.host)
    parser.add_argument("--port", type=int, default=defaults.port)
    parser.add_argument("--agent-url", default=defaults.agent_url, help="base URL of the agent (AgentCore app)")
    parser.add_argument(
        "--read-timeout", type=float, default=defaults.read_timeout_s, help="seconds of silence tolerated mid-stream"
    )
    parser.add_argument(
        "--max-body-bytes",
        type=int,
        default=os.environ.get("VOICESTACK_WEB_MAX_BODY_BYTES", str(defaults.max_body_bytes)),
        help="largest POST /api/invoke body accepted (env VOICESTACK_WEB_MAX_BODY_BYTES)",
    )
    args = parser.parse_args(argv)
    if not args.read_timeout > 0:
        parser.error(f"--read-timeout must be > 0 seconds, got {args.read_timeout}")
    if args.max_body_bytes < 1:
        parser.error(f"--max-body-bytes must be at least 1, got {args.max_body_bytes}")
    return WebServerConfig(
        agent_url=args.agent_url,
        host=args.host,
        port=args.port,
        read_timeout_s=args.read_timeout,
        max_body_bytes=args.max_body_bytes,
    )


def main(argv: Sequence[str] | None = None) -> None:
    config = parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    logging.getLogger("httpx").setLevel(logging.WARNING)  # one INFO line per proxied request otherwise
    logger.info("serving the page on http://%s:%d, agent at %s", config.host, config.port, config.agent_url)
    uvicorn.run(create_app(config), host=config.host, port=config.port, log_level="warning")


if __name__ == "__main__":
    main()
