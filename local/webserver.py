"""Serves the browser page and its API on one origin: in front of the local agent, or of a deployed runtime.

Local mode (default), routes:
- `GET /` and the static files of `local/web/` (plain ES modules, no build step);
- `POST /api/invoke` -> the agent's `POST /invocations`, streamed through chunk by chunk as the
  agent writes them (no buffering: the page's time to first audio is the agent's);
- `GET /api/health` -> the agent's `GET /ping`;
- `WS /api/ws` -> the agent's `WS /ws` (the full-duplex conversation, `ws_proxy.py`).

Remote mode (`--remote --stack NAME`, or `--remote --runtime-arn ARN [--region R]`): the same page
speaking to a deployed AgentCore runtime; this server holds the credentials, signs SSE calls and
hands the browser presigned WebSocket URLs (`remote_routes.py`, `remote.py`).

Errors of the server itself are JSON bodies `{"error": {"code", "message"}}` with status 502 (agent
unreachable or broken) or 503 (agent not healthy).

Only its own page may drive the agent (`guard.py`): every request must name this server in `Host`
(421 otherwise: a DNS-rebinding page has its own name there), and `POST /api/invoke` must come from
this origin (403 for an `Origin` or `Sec-Fetch-Site` of another site; `WS /api/ws` likewise, refused
before the handshake completes; remote mode's `POST /api/ws-url` too) with a JSON body of at most
`max_body_bytes` (413 when larger, 415 when not JSON). Run: `python -m local.webserver --port 8000
--agent-url http://127.0.0.1:8080`, or `python -m local.webserver --remote --stack dev`.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import sys
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import httpx
import uvicorn
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Mount, Route, WebSocketRoute
from starlette.staticfiles import StaticFiles
from starlette.status import (
    HTTP_502_BAD_GATEWAY,
    HTTP_503_SERVICE_UNAVAILABLE,
    WS_1008_POLICY_VIOLATION,
)
from starlette.types import Receive, Scope, Send
from starlette.websockets import WebSocket

from local.guard import DEFAULT_MAX_BODY_BYTES, SameOriginGuard
from local.relay import INVOCATION_EXPECTED, error_response, passed_through, read_json_body, stream_through
from local.remote import DEFAULT_PRESIGN_EXPIRES_S
from local.remote_routes import RemoteApi
from local.ws_proxy import relay_conversation
from voicestack.agentcore import MAX_PRESIGN_EXPIRES_S, SESSION_HEADER, conversation_session_rule
from voicestack.errors import CommandError
from voicestack.runtime_target import RuntimeTarget, resolve_runtime

logger = logging.getLogger("voicestack.webserver")

WEB_DIR = Path(__file__).resolve().parent / "web"


@dataclass(frozen=True, slots=True)
class RemoteChoice:
    """Remote mode's flags: which deployed runtime, through which AWS profile (resolved at start-up
    by `voicestack.runtime_target.resolve_runtime`, as for `voicestack talk`)."""

    stack: str | None = None
    runtime_arn: str | None = None
    region: str | None = None
    profile: str | None = None
    qualifier: str | None = None
    presign_expires_s: int = DEFAULT_PRESIGN_EXPIRES_S
    """How long each presigned WebSocket URL is valid (1 to 300 s)."""


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
    remote: RemoteChoice | None = None
    """Remote mode's flags; None: local mode (`agent_url`)."""


class PageFiles(StaticFiles):
    """Static files that browsers revalidate on every load (ETag), so an edited module is never stale."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "websocket":
            # A WebSocket to any other path than the API's: refused before the handshake (the
            # client sees 403), where StaticFiles would fail an assertion and log a traceback.
            await send({"type": "websocket.close", "code": WS_1008_POLICY_VIOLATION, "reason": "not_found"})
            return
        await super().__call__(scope, receive, send)

    def file_response(
        self, full_path: str | os.PathLike[str], stat_result: os.stat_result, scope: Scope, status_code: int = 200
    ) -> Response:
        response = super().file_response(full_path, stat_result, scope, status_code)
        response.headers["Cache-Control"] = "no-cache"
        return response


async def http_error(request: Request, exc: Exception) -> Response:
    """Starlette's own refusals (404 no such file, 405 wrong method) in the server's JSON error shape."""
    if not isinstance(exc, HTTPException):
        raise exc
    code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, f"http_{exc.status_code}")
    return JSONResponse(
        {"error": {"code": code, "message": f"{exc.detail}: {request.method} {request.url.path}"}},
        status_code=exc.status_code,
        headers=exc.headers,
    )


def local_routes(config: WebServerConfig) -> list[BaseRoute]:
    """Local mode's API: the agent at `config.agent_url`, proxied."""
    agent_url = config.agent_url.rstrip("/")

    async def invoke(request: Request) -> Response:
        body = await read_json_body(request, config.max_body_bytes, when_empty=INVOCATION_EXPECTED)
        if isinstance(body, Response):
            return body
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
            return await passed_through(upstream)
        return stream_through(upstream)

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

    return [
        Route("/api/invoke", invoke, methods=["POST"]),
        Route("/api/health", health, methods=["GET"]),
        WebSocketRoute("/api/ws", conversation),
    ]


def create_app(config: WebServerConfig, remote: RuntimeTarget | None = None) -> Starlette:
    """The page and its API: local mode, or remote mode when `remote` (the resolved target of
    `config.remote`) is given. The HTTP client is created at start-up, not at import."""
    timeout = httpx.Timeout(connect=5.0, read=config.read_timeout_s, write=10.0, pool=5.0)
    if remote is None:
        routes = local_routes(config)
        guarded = frozenset({"/api/invoke", "/api/ws"})
    else:
        choice = config.remote or RemoteChoice()
        api = RemoteApi(remote, presign_expires_s=choice.presign_expires_s, max_body_bytes=config.max_body_bytes)
        routes = api.routes()
        guarded = frozenset({"/api/invoke", "/api/ws", "/api/ws-url"})

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        # The session-id rule comes from botocore's models (about 160 ms to load): loaded here, off
        # the event loop, so that no page's first request waits for it.
        await asyncio.to_thread(conversation_session_rule)
        # Remote mode trusts what boto3 trusts (AWS_CA_BUNDLE, the profile's ca_bundle).
        verify = True if remote is None else remote.sdk.ssl_context()
        async with httpx.AsyncClient(timeout=timeout, verify=verify) as client:
            app.state.http = client
            yield

    app = Starlette(
        routes=[*routes, Mount("/", PageFiles(directory=config.web_dir, html=True), name="page")],
        lifespan=lifespan,
        exception_handlers={HTTPException: http_error},
    )
    app.add_middleware(SameOriginGuard, guarded_paths=guarded)
    return app


def parse_args(argv: Sequence[str] | None = None) -> WebServerConfig:
    defaults = WebServerConfig()
    parser = argparse.ArgumentParser(prog="python -m local.webserver", description=__doc__.splitlines()[0])
    parser.add_argument("--host", default=defaults.host)
    parser.add_argument("--port", type=int, default=defaults.port)
    parser.add_argument("--agent-url", default=None, help=f"base URL of the local agent (default {defaults.agent_url})")
    parser.add_argument(
        "--read-timeout", type=float, default=defaults.read_timeout_s, help="seconds of silence tolerated mid-stream"
    )
    parser.add_argument(
        "--max-body-bytes",
        type=int,
        default=os.environ.get("VOICESTACK_WEB_MAX_BODY_BYTES", str(defaults.max_body_bytes)),
        help="largest POST /api/invoke body accepted (env VOICESTACK_WEB_MAX_BODY_BYTES)",
    )
    remote = parser.add_argument_group("remote mode: the page against a deployed AgentCore runtime")
    remote.add_argument("--remote", action="store_true", help="speak to a deployed runtime (--stack or --runtime-arn)")
    remote.add_argument("--stack", help="Pulumi stack to read agentRuntimeArn and region from")
    remote.add_argument("--runtime-arn", help="the runtime's ARN (without Pulumi)")
    remote.add_argument("--region", help="the runtime's region (default: the ARN's)")
    remote.add_argument("--profile", help="AWS profile to sign with (default: the SDK's credential chain)")
    remote.add_argument("--qualifier", help="runtime endpoint to call (default: AgentCore's DEFAULT)")
    remote.add_argument(
        "--presign-expires",
        type=int,
        default=None,
        help=f"seconds each presigned WebSocket URL is valid, 1 to {MAX_PRESIGN_EXPIRES_S} "
        f"(default {DEFAULT_PRESIGN_EXPIRES_S})",
    )
    args = parser.parse_args(argv)
    if not args.read_timeout > 0:
        parser.error(f"--read-timeout must be > 0 seconds, got {args.read_timeout}")
    if args.max_body_bytes < 1:
        parser.error(f"--max-body-bytes must be at least 1, got {args.max_body_bytes}")
    remote_flags = {
        "--stack": args.stack,
        "--runtime-arn": args.runtime_arn,
        "--region": args.region,
        "--profile": args.profile,
        "--qualifier": args.qualifier,
        "--presign-expires": args.presign_expires,
    }
    choice: RemoteChoice | None = None
    if args.remote:
        if args.agent_url is not None:
            parser.error("--agent-url is local mode's; --remote speaks to the runtime of --stack or --runtime-arn")
        if (args.stack is None) == (args.runtime_arn is None):
            parser.error("--remote needs exactly one of --stack NAME or --runtime-arn ARN")
        expires = DEFAULT_PRESIGN_EXPIRES_S if args.presign_expires is None else args.presign_expires
        if not 1 <= expires <= MAX_PRESIGN_EXPIRES_S:
            limit = MAX_PRESIGN_EXPIRES_S
            parser.error(f"--presign-expires must be 1 to {limit} seconds (AgentCore's limit), got {expires}")
        choice = RemoteChoice(args.stack, args.runtime_arn, args.region, args.profile, args.qualifier, expires)
    else:
        given = [flag for flag, value in remote_flags.items() if value is not None]
        if given:
            parser.error(f"{', '.join(given)}: remote mode's flags; add --remote")
    return WebServerConfig(
        agent_url=defaults.agent_url if args.agent_url is None else args.agent_url,
        host=args.host,
        port=args.port,
        read_timeout_s=args.read_timeout,
        max_body_bytes=args.max_body_bytes,
        remote=choice,
    )


def resolve_remote(config: WebServerConfig) -> RuntimeTarget | None:
    """The deployed runtime `config.remote` names (reads the stack through the Pulumi CLI, the AWS
    profile from disk); None in local mode. Raises `UsageError` naming the flag that is wrong."""
    choice = config.remote
    if choice is None:
        return None
    return resolve_runtime(
        stack=choice.stack,
        runtime_arn=choice.runtime_arn,
        region=choice.region,
        profile=choice.profile,
        qualifier=choice.qualifier,
    )


def main(argv: Sequence[str] | None = None) -> int:
    config = parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    logging.getLogger("httpx").setLevel(logging.WARNING)  # one INFO line per proxied request otherwise
    try:
        remote = resolve_remote(config)
    except CommandError as exc:
        print(f"python -m local.webserver: {exc}", file=sys.stderr)
        return int(exc.code)
    url = f"http://{config.host}:{config.port}"
    if remote is None:
        logger.info("serving the page on %s, agent at %s", url, config.agent_url)
    else:
        where = f"stack {remote.stack}" if remote.stack is not None else remote.runtime_arn
        logger.info("serving the page on %s, speaking to %s in %s (%s)", url, where, remote.region, remote.endpoint_url)
    uvicorn.run(create_app(config, remote), host=config.host, port=config.port, log_level="warning")
    return 0


if __name__ == "__main__":
    sys.exit(main())
