"""The web server's API in remote mode: the page speaks to a deployed AgentCore runtime.

Routes (the static page is the same as in local mode):
- `GET /api/health` -> 200 `{"status": "ok", "target": {...}}` once credentials resolve (the
  target: stack, region, runtime ARN, qualifier, how to open the socket; `remote.page_view`), or
  503 `credentials_unavailable` with the same `target` (the page shows where it would speak);
- `POST /api/invoke` -> `InvokeAgentRuntime`, signed here (SigV4, the AWS SDK's credentials) and
  streamed through chunk by chunk. The page's session header is checked and signed with it.
  AgentCore's refusals come back with their status as `{"error": {"code": <x-amzn-ErrorType>,
  "message": <AWS's message>}}`; a `RetryableConflictException` (409: the session is starting)
  is retried once after a short jittered pause before the page sees it;
- `POST /api/ws-url` with `{"session": "<id>"}` -> 200 `{"url": "wss://...", "expires_s": N,
  "session": "<id>"}`: a fresh presigned URL of the runtime's `/ws` for that session only. The
  browser opens it itself (a connection outlives its URL; a reconnect asks again). Answered with
  `Cache-Control: no-store`;
- `WS /api/ws` -> refused before the handshake (the relay is local mode's).

`guard.py` applies to all of it (Host 421, Origin / Sec-Fetch-Site 403 on `/api/invoke` and
`/api/ws-url`); `/api/ws-url` also takes only an `application/json` body, which a cross-site form
cannot send and a cross-site `fetch` cannot send without a CORS preflight this server never
grants. The session id it signs for is bounded by what AgentCore Runtime and AgentCore Memory
both accept (`remote.session_problem`: 33 to 100 characters, `[a-zA-Z0-9][a-zA-Z0-9-_]*`).
"""

from __future__ import annotations

import asyncio
import json
import logging
import random
from typing import Any, Final

import httpx
from botocore.credentials import ReadOnlyCredentials  # type: ignore[import-untyped]
from botocore.exceptions import BotoCoreError  # type: ignore[import-untyped]
from starlette import status
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route, WebSocketRoute
from starlette.websockets import WebSocket

from local.relay import INVOCATION_EXPECTED, error_response, read_json_body, stream_through
from local.remote import page_view, presign_socket, session_problem, sign_invocation
from voicestack.agentcore import SESSION_HEADER
from voicestack.runtime_target import RuntimeTarget

logger = logging.getLogger("voicestack.webserver")

MAX_SOCKET_REQUEST_BYTES: Final = 1024
"""`POST /api/ws-url` carries one session id (at most 256 characters) in a small JSON object."""
SOCKET_REQUEST_EXPECTED: Final = 'POST a JSON body: {"session": "<session id>"}'
CONFLICT_RETRY_S: Final = (0.2, 0.6)
"""The pause before the one retry of a 409 `RetryableConflictException` (uniform in this range):
AgentCore answers it while a new session's microVM starts; jitter keeps retries of one page's
requests apart."""
MAX_ERROR_BODY_BYTES: Final = 64 * 1024
"""How much of an AgentCore error body is read (they are one short JSON object)."""
CREDENTIALS_HINT: Final = (
    "the web server signs with the AWS SDK's standard configuration (environment, --profile, SSO: "
    "`aws sso login`); fix it there and reload the page"
)


class RemoteApi:
    """The remote-mode handlers around one target; the HTTP client lives on `app.state.http`."""

    def __init__(self, target: RuntimeTarget, *, presign_expires_s: int, max_body_bytes: int) -> None:
        self.target = target
        self.presign_expires_s = presign_expires_s
        self.max_body_bytes = max_body_bytes
        self.view = page_view(target)

    def routes(self) -> list[BaseRoute]:
        return [
            Route("/api/invoke", self.invoke, methods=["POST"]),
            Route("/api/health", self.health, methods=["GET"]),
            Route("/api/ws-url", self.socket_url, methods=["POST"]),
            WebSocketRoute("/api/ws", refuse_relay),
        ]

    async def _credentials(self) -> ReadOnlyCredentials | JSONResponse:
        """Credentials now (off the loop: a refresh may call STS or SSO), or the 503 to send."""
        try:
            return await asyncio.to_thread(self.target.credentials)
        except BotoCoreError as exc:
            logger.warning("no usable AWS credentials: %s", exc)
            return self._unavailable(exc)

    def _unavailable(self, exc: BotoCoreError, **extra: Any) -> JSONResponse:
        error = {"code": "credentials_unavailable", "message": f"{exc}; {CREDENTIALS_HINT}"}
        return JSONResponse({"error": error, **extra}, status_code=status.HTTP_503_SERVICE_UNAVAILABLE)

    async def health(self, request: Request) -> Response:
        try:
            await asyncio.to_thread(self.target.credentials)
        except BotoCoreError as exc:
            return self._unavailable(exc, target=self.view)
        return JSONResponse({"status": "ok", "target": self.view})

    async def socket_url(self, request: Request) -> Response:
        body = await read_json_body(request, MAX_SOCKET_REQUEST_BYTES, when_empty=SOCKET_REQUEST_EXPECTED)
        if isinstance(body, Response):
            return body
        session = _session_field(body)
        if isinstance(session, Response):
            return session
        credentials = await self._credentials()
        if isinstance(credentials, JSONResponse):
            return credentials
        url = presign_socket(self.target, credentials, session, expires_s=self.presign_expires_s)
        return JSONResponse(
            {"url": url, "expires_s": self.presign_expires_s, "session": session},
            headers={"Cache-Control": "no-store"},
        )

    async def invoke(self, request: Request) -> Response:
        body = await read_json_body(request, self.max_body_bytes, when_empty=INVOCATION_EXPECTED)
        if isinstance(body, Response):
            return body
        headers = {"Content-Type": "application/json", "Accept": "text/event-stream"}
        session = request.headers.get(SESSION_HEADER)
        if session is not None:
            problem = session_problem(session, name=SESSION_HEADER)
            if problem is not None:
                return error_response(status.HTTP_400_BAD_REQUEST, "bad_session", problem)
            headers[SESSION_HEADER] = session
        client: httpx.AsyncClient = request.app.state.http
        upstream = await self._invocation(client, body, headers)
        if isinstance(upstream, httpx.Response) and upstream.status_code == status.HTTP_409_CONFLICT:
            _, code, message = await _refusal(upstream)
            logger.info("AgentCore answered 409 %s (%s); one retry", code, message[:200])
            await asyncio.sleep(random.uniform(*CONFLICT_RETRY_S))
            upstream = await self._invocation(client, body, headers)
        if not isinstance(upstream, httpx.Response):
            return upstream
        if upstream.status_code != status.HTTP_200_OK:
            refused, code, message = await _refusal(upstream)
            logger.warning("AgentCore refused the invocation: %d %s: %s", refused, code, message[:200])
            return error_response(refused, code, message)
        return stream_through(upstream)

    async def _invocation(
        self, client: httpx.AsyncClient, body: bytes, headers: dict[str, str]
    ) -> httpx.Response | JSONResponse:
        """One signed InvokeAgentRuntime, its response headers read; or the error to send."""
        credentials = await self._credentials()
        if isinstance(credentials, JSONResponse):
            return credentials
        url, signed = sign_invocation(self.target, credentials, body, headers)
        try:
            return await client.send(client.build_request("POST", url, content=body, headers=signed), stream=True)
        except httpx.TransportError as exc:
            logger.warning("AgentCore unreachable at %s: %s", self.target.endpoint_url, exc)
            return error_response(
                status.HTTP_502_BAD_GATEWAY, "runtime_unreachable", f"no answer from {self.target.endpoint_url}: {exc}"
            )


def _session_field(body: bytes) -> str | Response:
    """The `session` of a `POST /api/ws-url` body, or the 400 to send."""
    try:
        parsed = json.loads(body)
    except (ValueError, RecursionError) as exc:
        return error_response(status.HTTP_400_BAD_REQUEST, "invalid_json", f"the body is not JSON: {exc}")
    if not isinstance(parsed, dict) or not isinstance(parsed.get("session"), str):
        return error_response(
            status.HTTP_400_BAD_REQUEST, "bad_session", 'the body must be {"session": "<session id>"}'
        )
    session: str = parsed["session"]
    problem = session_problem(session, name="session")
    if problem is not None:
        return error_response(status.HTTP_400_BAD_REQUEST, "bad_session", problem)
    return session


async def _refusal(upstream: httpx.Response) -> tuple[int, str, str]:
    """AgentCore's error answer, read and closed: its status, `x-amzn-ErrorType` (the error code
    botocore would raise) and the `message` of its JSON body."""
    try:
        content = b""
        async for chunk in upstream.aiter_raw():
            content += chunk
            if len(content) > MAX_ERROR_BODY_BYTES:
                break
    except httpx.TransportError as exc:
        content = f"(the error body broke off: {exc})".encode()
    finally:
        await upstream.aclose()
    code = upstream.headers.get("x-amzn-errortype", "").split(":", 1)[0] or f"http_{upstream.status_code}"
    message = content[:2000].decode("utf-8", "replace")
    try:
        parsed = json.loads(content)
    except (ValueError, RecursionError):
        parsed = None
    if isinstance(parsed, dict):
        found = parsed.get("message", parsed.get("Message"))
        if isinstance(found, str):
            message = found
    return upstream.status_code, code, message


async def refuse_relay(websocket: WebSocket) -> None:
    """Remote mode has no relay: the page opens the runtime's URL itself (`POST /api/ws-url`)."""
    await websocket.close(code=status.WS_1008_POLICY_VIOLATION, reason="remote mode: POST /api/ws-url")
