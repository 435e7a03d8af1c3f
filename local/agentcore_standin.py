"""A local stand-in for Amazon Bedrock AgentCore Runtime's data plane, in front of the real agent.

It serves, over HTTPS (the real SDKs' way), the two routes a caller of a deployed runtime uses:

- `POST /runtimes/{agentRuntimeArn}/invocations` (InvokeAgentRuntime: boto3's
  `bedrock-agentcore` client, the AWS CLI), streamed back chunk by chunk as the agent sends it;
- `WS /runtimes/{agentRuntimeArn}/ws` (the WebSocket route), bridged frame by frame,

and refuses what AgentCore refuses, the way it does (status, `x-amzn-ErrorType`, JSON body as
botocore's model reads it): SigV4 checked by botocore's own signer against the test principals
(`local.standin.agentcore_auth`: header and presigned-query signatures, bad, expired,
wrong-region or wrong-service signatures, expired credentials, IAM actions), unknown runtimes and
qualifiers, session ids outside the model's rules, payloads over 100 MB
(`local.standin.agentcore_routing`), WebSocket frames over 32 KB or over 250 per second (AWS's
numbers, written once in `agent_app.frames`), and sessions idle for the idle timeout
(`local.standin.agentcore_frames`). A switch injects
`RetryableConflictException` (409) for the first calls of each new session, as while AgentCore
starts a session's microVM. Each accepted call reaches the agent as the runtime's does: the
session header, a request id, the allowlisted headers and nothing else.

Errors of the agent itself: a container that cannot be reached or answers a status other than
200 gets a 424 `RuntimeClientError` (its status and body in the message; AgentCore's exact text
is not published). WebSocket close codes pass through both ways; 1005 and 1006, which cannot be
sent, become 1000 and 1011.

Command line (`python -m local.stack --agentcore` starts it in front of the agent):

    ARN=arn:aws:bedrock-agentcore:us-east-1:000000000000:runtime/voicestack_local-localstand
    python -m local.agentcore_standin --port 8444 --runtime "$ARN=http://127.0.0.1:8080" \\
        [--region us-east-1] [--host 127.0.0.1] [--cert-dir DIR] [--qualifier DEFAULT ...] \\
        [--allow-header NAME ...] [--idle-timeout 900] [--max-frame-bytes 32000] \\
        [--max-frames-per-second 250] [--conflicts-per-new-session 0]

It writes a throwaway CA to `DIR/ca.pem` and prints one JSON line once it accepts connections:

    {"event": "ready", "url": "https://127.0.0.1:8444", "ca_file": "DIR/ca.pem", "region": "us-east-1",
     "runtimes": [...], "credentials": {"AWS_ACCESS_KEY_ID": "...", "AWS_SECRET_ACCESS_KEY": "..."}}

Callers reach it with the SDK's standard settings: `AWS_ENDPOINT_URL_BEDROCK_AGENTCORE=<url>`,
`AWS_CA_BUNDLE=<ca_file>` and the test credentials of the ready line (the principal allowed to
invoke everything; the others are in `local.standin.agentcore_auth`). SIGINT/SIGTERM stop it.

In tests: `async with run_agentcore_standin(AgentCoreConfig(...)) as info:` gives `info.url`,
`info.ca_path` (uvicorn on the caller's event loop, no signal handlers of its own).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import sys
import uuid
from collections import OrderedDict
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, Final

import httpx
import uvicorn
from starlette import status
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidURI

from local.standin.agentcore_auth import ALLOWED, SignedRequest, authorize, verify
from local.standin.agentcore_frames import FrameGuard, Violation, frame_size, idle_violation
from local.standin.agentcore_routing import (
    AgentCoreConfig,
    Operation,
    Target,
    forwarded_headers,
    parse_route,
    parse_runtime_specs,
    query_params,
    resolve_target,
    runtime_arn,
    validation_error,
)
from local.standin.events import ErrorResponse
from local.standin.routing import header_map
from local.standin.serving import serve_until_signalled, tls_listener
from voicestack.agentcore import DEFAULT_QUALIFIER, INVOKE_ACTION, SESSION_HEADER, WEBSOCKET_ACTION

logger = logging.getLogger(__name__)

Message = dict[str, Any]

BRIDGE_MAX_MESSAGE_BYTES: Final = 1024 * 1024
"""What either side may send before the WebSocket library itself closes with 1009; above the
32 KB frame limit so that limit is applied (and explained) here, below it only to bound memory."""
AGENT_CLOSE_TIMEOUT_S: Final = 1.0
"""How long the agent gets to answer a close frame; one that is still flooding frames nobody reads
never would (the library stops reading once its queue is full)."""
SHUTDOWN_GRACE_S: Final = 1.0
"""How long connections get to close by themselves when the stand-in stops."""
MAX_TRACKED_SESSIONS: Final = 10_000
"""Sessions remembered for the conflict switch (oldest forgotten first)."""
_BEARER_SUBPROTOCOL: Final = "base64UrlBearerAuthorization"
_UNSENDABLE_CLOSE: Final = {status.WS_1005_NO_STATUS_RCVD: 1000, status.WS_1006_ABNORMAL_CLOSURE: 1011}


class _Refused(Exception):
    def __init__(self, error: ErrorResponse) -> None:
        super().__init__(error.message)
        self.error = error


@dataclass(frozen=True, slots=True)
class _Accepted:
    target: Target
    forwarded: dict[str, str]


class AgentCoreStandIn:
    """The ASGI application: the front door's checks, then one bridged call to the agent."""

    def __init__(self, config: AgentCoreConfig) -> None:
        self._config = config
        self._conflicts_left: OrderedDict[str, int] = OrderedDict()
        self._http: httpx.AsyncClient | None = None

    async def __call__(self, scope: Message, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            await self._invocation(scope, receive, send)
        elif scope["type"] == "websocket":
            await self._websocket(scope, receive, send)

    async def aclose(self) -> None:
        if self._http is not None:
            await self._http.aclose()

    # --- the front door ---------------------------------------------------------------------

    def _admit(self, scope: Message, body: bytes, operation: Operation, request_id: str) -> _Accepted:
        config = self._config
        method = "GET" if scope["type"] == "websocket" else str(scope["method"])
        raw_path = bytes(scope.get("raw_path") or scope["path"].encode()).decode("latin-1")
        route = parse_route(method, raw_path)
        if isinstance(route, ErrorResponse):
            raise _Refused(route)
        if route.operation != operation:  # a plain GET of the WebSocket route
            raise _Refused(
                ErrorResponse(400, "ValidationException", {"message": "the ws route takes a WebSocket upgrade"})
            )
        headers = header_map(scope["headers"])
        raw_query = bytes(scope.get("query_string", b"")).decode("latin-1")
        if (
            operation == "ws"
            and "authorization" not in headers
            and any(p.startswith(_BEARER_SUBPROTOCOL) for p in scope.get("subprotocols", []))
            and "X-Amz-Signature" not in raw_query
        ):
            raise _Refused(
                ErrorResponse(
                    403,
                    "AccessDeniedException",
                    {"message": "Authorization method mismatch: this runtime accepts SigV4 (IAM), not a bearer token."},
                )
            )
        request = SignedRequest(method, headers.get("host", ""), raw_path, raw_query, headers, body)
        caller = verify(
            request,
            principals=config.principals,
            region=config.region,
            now=config.clock(),
            allow_presigned=operation == "ws",
        )
        if isinstance(caller, ErrorResponse):
            raise _Refused(caller)
        params = query_params(raw_query)
        arn = runtime_arn(route, params, config.region)
        if isinstance(arn, ErrorResponse):
            raise _Refused(arn)
        denied = authorize(caller, WEBSOCKET_ACTION if operation == "ws" else INVOKE_ACTION, arn)
        if denied is not None:
            raise _Refused(denied)
        target = resolve_target(arn, operation, params, headers, config)
        if isinstance(target, ErrorResponse):
            raise _Refused(target)
        conflict = self._conflict(target.session_id)
        if conflict is not None:
            raise _Refused(conflict)
        return _Accepted(target, forwarded_headers(headers, params, config, target, request_id, operation=operation))

    def _conflict(self, session_id: str) -> ErrorResponse | None:
        budget = self._config.conflicts_per_new_session
        if budget == 0:
            return None
        left = self._conflicts_left.pop(session_id, budget)
        self._conflicts_left[session_id] = max(0, left - 1)
        while len(self._conflicts_left) > MAX_TRACKED_SESSIONS:
            self._conflicts_left.popitem(last=False)
        if left == 0:
            return None
        return ErrorResponse(
            409,
            "RetryableConflictException",
            {"message": f"Session {session_id} is starting; retry the request."},
        )

    def _client(self) -> httpx.AsyncClient:
        if self._http is None:
            timeout = httpx.Timeout(None, connect=self._config.connect_timeout_s)
            self._http = httpx.AsyncClient(timeout=timeout, trust_env=False)
        return self._http

    # --- InvokeAgentRuntime -------------------------------------------------------------------

    async def _invocation(self, scope: Message, receive: Any, send: Any) -> None:
        request_id = str(uuid.uuid4())
        body = bytearray()
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            body += message.get("body", b"")
            if len(body) > self._config.max_payload_bytes:
                limit = self._config.max_payload_bytes
                await _send_error(
                    send,
                    validation_error("payload", f"Member must have length less than or equal to {limit}"),
                    request_id,
                )
                return
            if not message.get("more_body", False):
                break
        try:
            accepted = self._admit(scope, bytes(body), "invocations", request_id)
        except _Refused as refused:
            _log_refusal(request_id, refused.error)
            await _send_error(send, refused.error, request_id)
            return

        target = accepted.target
        client = self._client()
        request = client.build_request(
            "POST", f"{target.agent_url}/invocations", headers=accepted.forwarded, content=bytes(body)
        )
        try:
            upstream = await client.send(request, stream=True)
        except httpx.TransportError as exc:
            await _send_error(send, _runtime_error(f"The runtime's container could not be reached: {exc}"), request_id)
            return
        try:
            if upstream.status_code != status.HTTP_200_OK:
                detail = (await upstream.aread())[:2000].decode("utf-8", "replace")
                logger.warning("request %s: the agent answered %s", request_id, upstream.status_code)
                await _send_error(
                    send,
                    _runtime_error(f"Received error ({upstream.status_code}) from the runtime: {detail}"),
                    request_id,
                )
                return
            logger.info("request %s: %s session %s invoked", request_id, target.arn, target.session_id)
            headers = [
                (b"content-type", upstream.headers.get("content-type", "application/octet-stream").encode("latin-1")),
                (SESSION_HEADER.lower().encode(), target.session_id.encode()),
                (b"x-amzn-requestid", request_id.encode()),
            ]
            await send({"type": "http.response.start", "status": status.HTTP_200_OK, "headers": headers})
            await _stream_until_hangup(upstream, receive, send, request_id)
        finally:
            await upstream.aclose()

    # --- the WebSocket route ------------------------------------------------------------------

    async def _websocket(self, scope: Message, receive: Any, send: Any) -> None:
        if (await receive())["type"] != "websocket.connect":
            return
        request_id = str(uuid.uuid4())
        try:
            accepted = self._admit(scope, b"", "ws", request_id)
            agent = await self._open_agent(accepted)
        except _Refused as refused:
            _log_refusal(request_id, refused.error)
            await _deny(scope, send, refused.error, request_id)
            return
        target = accepted.target
        logger.info("request %s: %s session %s connected", request_id, target.arn, target.session_id)
        await send(
            {
                "type": "websocket.accept",
                "headers": [
                    (SESSION_HEADER.lower().encode(), target.session_id.encode()),
                    (b"x-amzn-requestid", request_id.encode()),
                ],
            }
        )
        try:
            await _Bridge(self._config, receive, send, agent, request_id).run()
        finally:
            await agent.close()

    async def _open_agent(self, accepted: _Accepted) -> ClientConnection:
        url = "ws" + accepted.target.agent_url.removeprefix("http") + "/ws"
        try:
            return await connect(
                url,
                additional_headers=accepted.forwarded,
                open_timeout=self._config.connect_timeout_s,
                max_size=BRIDGE_MAX_MESSAGE_BYTES,
                close_timeout=AGENT_CLOSE_TIMEOUT_S,
                ping_interval=None,
                compression=None,
                proxy=None,
            )
        except (OSError, TimeoutError, InvalidHandshake, InvalidURI) as exc:
            raise _Refused(_runtime_error(f"The runtime's container refused the WebSocket at {url}: {exc}")) from exc


class _Bridge:
    """One WebSocket call: frames both ways through one `FrameGuard`, until a side closes, a
    limit is broken or the session idles out; the other side then gets the same close code."""

    def __init__(
        self, config: AgentCoreConfig, receive: Any, send: Any, agent: ClientConnection, request_id: str
    ) -> None:
        self._config = config
        self._receive = receive
        self._send = send
        self._agent = agent
        self._request_id = request_id
        self._guard = FrameGuard(config.max_frame_bytes, config.max_frames_per_s)
        self._loop = asyncio.get_running_loop()
        self._last_activity = self._loop.time()

    def _check(self, data: str | bytes) -> Violation | None:
        now = self._loop.time()
        self._last_activity = now
        return self._guard.admit(frame_size(data), now)

    async def run(self) -> None:
        tasks = [
            asyncio.create_task(self._from_client(), name="client-to-agent"),
            asyncio.create_task(self._from_agent(), name="agent-to-client"),
            asyncio.create_task(self._idle(), name="idle"),
        ]
        try:
            done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
            outcome = next(iter(done)).result()
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
        await self._finish(outcome)

    async def _from_client(self) -> Violation | tuple[str, int]:
        while True:
            message = await self._receive()
            if message["type"] == "websocket.disconnect":
                return ("client", int(message.get("code", 1005)))
            data: str | bytes | None = message.get("text")
            if data is None:
                data = message.get("bytes") or b""
            violation = self._check(data)
            if violation is not None:
                return violation
            try:
                await self._agent.send(data)
            except ConnectionClosed:
                return ("agent", self._agent.close_code or 1006)

    async def _from_agent(self) -> Violation | tuple[str, int]:
        try:
            async for data in self._agent:
                violation = self._check(data)
                if violation is not None:
                    return violation
                key = "text" if isinstance(data, str) else "bytes"
                await self._send({"type": "websocket.send", key: data})
        except ConnectionClosed:
            pass
        return ("agent", self._agent.close_code or 1006)

    async def _idle(self) -> Violation:
        timeout = self._config.idle_timeout_s
        while True:
            remaining = self._last_activity + timeout - self._loop.time()
            if remaining <= 0:
                return idle_violation(timeout)
            await asyncio.sleep(remaining)

    async def _finish(self, outcome: Violation | tuple[str, int]) -> None:
        if isinstance(outcome, Violation):
            logger.warning("request %s: closed with %d: %s", self._request_id, outcome.code, outcome.reason)
            with contextlib.suppress(OSError, RuntimeError):
                await self._send({"type": "websocket.close", "code": outcome.code, "reason": outcome.reason})
            await self._agent.close(outcome.code, outcome.reason)
            return
        side, code = outcome
        code = _UNSENDABLE_CLOSE.get(code, code)
        logger.info("request %s: the %s closed the connection (%d)", self._request_id, side, code)
        if side == "client":
            await self._agent.close(code)
        else:
            with contextlib.suppress(OSError, RuntimeError):
                await self._send({"type": "websocket.close", "code": code, "reason": self._agent.close_reason or ""})


def _runtime_error(message: str) -> ErrorResponse:
    return ErrorResponse(424, "RuntimeClientError", {"message": message})


def _log_refusal(request_id: str, error: ErrorResponse) -> None:
    logger.warning("request %s: refused %s %s: %s", request_id, error.status, error.error_type, error.message)


async def _send_error(send: Any, error: ErrorResponse, request_id: str) -> None:
    await send({"type": "http.response.start", "status": error.status, "headers": error.headers(request_id)})
    await send({"type": "http.response.body", "body": error.encode_body(), "more_body": False})


async def _deny(scope: Message, send: Any, error: ErrorResponse, request_id: str) -> None:
    """Refuse a WebSocket handshake with the error's HTTP status and JSON body."""
    if "websocket.http.response" in scope.get("extensions", {}):
        await send(
            {"type": "websocket.http.response.start", "status": error.status, "headers": error.headers(request_id)}
        )
        await send({"type": "websocket.http.response.body", "body": error.encode_body(), "more_body": False})
    else:  # a server without the denial-response extension can only answer 403
        await send({"type": "websocket.close", "code": status.WS_1008_POLICY_VIOLATION})


async def _stream_until_hangup(upstream: httpx.Response, receive: Any, send: Any, request_id: str) -> None:
    """Stream the agent's answer through; a caller who hangs up closes the agent's stream at once."""

    async def relay() -> None:
        try:
            async for chunk in upstream.aiter_raw():
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
        except httpx.TransportError as exc:
            logger.warning("request %s: the agent's stream broke: %s", request_id, exc)
        await send({"type": "http.response.body", "body": b"", "more_body": False})

    async def hangup() -> None:
        while (await receive())["type"] != "http.disconnect":
            pass

    relaying = asyncio.create_task(relay())
    watching = asyncio.create_task(hangup())
    done, pending = await asyncio.wait({relaying, watching}, return_when=asyncio.FIRST_COMPLETED)
    for task in pending:
        task.cancel()
    await asyncio.gather(*pending, return_exceptions=True)
    if relaying in done:
        relaying.result()
    else:
        logger.info("request %s: the caller hung up", request_id)


# --- serving ---------------------------------------------------------------------------------------


class _EmbeddedServer(uvicorn.Server):
    """uvicorn that leaves signal handling to whoever runs it (a test, the lab, our own CLI)."""

    def capture_signals(self) -> contextlib.AbstractContextManager[None]:  # type: ignore[override]
        return contextlib.nullcontext()


@dataclass(frozen=True, slots=True)
class AgentCoreStandInInfo:
    """Where a running stand-in listens, which CA its certificate chains to, what it serves."""

    url: str
    port: int
    ca_path: Path
    region: str
    runtimes: tuple[str, ...]


@asynccontextmanager
async def run_agentcore_standin(
    config: AgentCoreConfig, *, port: int = 0, host: str = "127.0.0.1", cert_dir: Path | None = None
) -> AsyncIterator[AgentCoreStandInInfo]:
    """Serve the stand-in on `host:port` (0 = a free port) over TLS until the context exits."""
    with tls_listener(host, port, cert_dir, prefix="agentcore-standin-") as listening:
        files = listening.files
        app = AgentCoreStandIn(config)
        server = _EmbeddedServer(
            uvicorn.Config(
                app,
                lifespan="off",
                ws="websockets-sansio",
                ws_max_size=BRIDGE_MAX_MESSAGE_BYTES,
                ws_ping_interval=None,
                ssl_certfile=str(files.cert_path),
                ssl_keyfile=str(files.key_path),
                log_config=None,  # the embedding process's logging stays as it is
                access_log=False,
            )
        )
        serving = asyncio.create_task(server.serve(sockets=[listening.socket]), name="agentcore-standin")
        try:
            while not server.started:
                if serving.done():
                    serving.result()
                    raise RuntimeError("the AgentCore stand-in stopped before it started")
                await asyncio.sleep(0.01)
            yield AgentCoreStandInInfo(
                url=listening.url,
                port=listening.port,
                ca_path=files.ca_path,
                region=config.region,
                runtimes=tuple(config.runtimes),
            )
        finally:
            server.should_exit = True
            try:
                await asyncio.wait_for(asyncio.shield(serving), SHUTDOWN_GRACE_S)
            except TimeoutError:
                # A TLS connection a client keeps idle in its pool (boto3 does) would hold the
                # shutdown for asyncio's 30 s close_notify wait: drop what is left.
                for connection in list(server.server_state.connections):
                    connection.transport.abort()
                await serving
            await app.aclose()


# --- command line ----------------------------------------------------------------------------------


def _parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    defaults = {f.name: f.default for f in fields(AgentCoreConfig)}
    parser = argparse.ArgumentParser(
        prog="python -m local.agentcore_standin",
        description="Local stand-in for AgentCore Runtime's data plane (HTTPS, SigV4, WebSocket limits).",
    )
    parser.add_argument("--port", type=int, default=8444, help="port to listen on; 0 picks a free one (default 8444)")
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    parser.add_argument(
        "--runtime",
        action="append",
        required=True,
        metavar="ARN=URL",
        help="runtime ARN and agent base URL (repeatable)",
    )
    parser.add_argument("--region", default=defaults["region"], help="the region it pretends to be (%(default)s)")
    parser.add_argument("--cert-dir", type=Path, default=None, help="where to write ca.pem, server.pem, server-key.pem")
    parser.add_argument("--qualifier", action="append", default=None, help="endpoint names served (default DEFAULT)")
    parser.add_argument("--allow-header", action="append", default=[], help="request header passed to the agent")
    parser.add_argument("--idle-timeout", type=float, default=defaults["idle_timeout_s"], help="seconds (%(default)s)")
    parser.add_argument("--max-frame-bytes", type=int, default=defaults["max_frame_bytes"], help="(%(default)s)")
    parser.add_argument("--max-frames-per-second", type=int, default=defaults["max_frames_per_s"], help="(%(default)s)")
    parser.add_argument(
        "--conflicts-per-new-session",
        type=int,
        default=0,
        help="answer each new session's first N calls with RetryableConflictException (409), for tests",
    )
    parser.add_argument("--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR"])
    return parser.parse_args(argv)


def _ready(info: AgentCoreStandInInfo) -> dict[str, object]:
    logger.info(
        "serving %s; callers need AWS_ENDPOINT_URL_BEDROCK_AGENTCORE=%s AWS_CA_BUNDLE=%s",
        ", ".join(info.runtimes),
        info.url,
        info.ca_path,
    )
    return {
        "url": info.url,
        "ca_file": str(info.ca_path),
        "region": info.region,
        "runtimes": list(info.runtimes),
        "credentials": {"AWS_ACCESS_KEY_ID": ALLOWED.access_key, "AWS_SECRET_ACCESS_KEY": ALLOWED.secret_key},
    }


def main(argv: Sequence[str] | None = None) -> int:
    args = _parse_args(argv)
    logging.basicConfig(
        level=args.log_level, stream=sys.stderr, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    logging.getLogger("httpx").setLevel(logging.WARNING)
    try:
        config = AgentCoreConfig(
            runtimes=parse_runtime_specs(args.runtime),
            region=args.region,
            qualifiers=tuple(args.qualifier or [DEFAULT_QUALIFIER]),
            header_allowlist=tuple(args.allow_header),
            idle_timeout_s=args.idle_timeout,
            max_frame_bytes=args.max_frame_bytes,
            max_frames_per_s=args.max_frames_per_second,
            conflicts_per_new_session=args.conflicts_per_new_session,
        )
    except ValueError as exc:
        print(f"agentcore_standin: {exc}", file=sys.stderr)
        return 2
    running = run_agentcore_standin(config, port=args.port, host=args.host, cert_dir=args.cert_dir)
    asyncio.run(serve_until_signalled(running, _ready))
    return 0


if __name__ == "__main__":
    sys.exit(main())
