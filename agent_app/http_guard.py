"""POST /invocations checked before the AgentCore SDK reads it: every call it cannot serve gets a
4xx (or a 503 when a service it needs is down) with a JSON body and one line in the log (a
warning; an error for the 503), never a 500 or a traceback.

With signed-in users (`AGENT_AUTH=jwt`) the caller's token is checked first, before a byte of the
body is read (`identity.py`: 401 with the token's code, 503 `auth_unavailable`); the identity it
names is recorded in the request's scope for the entrypoint.

`BedrockAgentCoreApp._handle_invocation` parses the body itself (`request.json()`) and catches only
`JSONDecodeError` and `UnicodeDecodeError`: a body nested deeper than the parser's recursion limit
(RecursionError) or holding an integer of more than 4,300 digits (ValueError) escapes as a plain
text 500 with a traceback, and it reads any size of body and any content type. So this pure ASGI
middleware, outside the SDK, reads the body first and refuses, in this order:

| status | code | when |
|---|---|---|
| 401 | `token_*` | `AGENT_AUTH=jwt` and no valid access token (`auth.py` names each fault) |
| 503 | `auth_unavailable` | `AGENT_AUTH=jwt` and the user pool's keys cannot be fetched |
| 415 | `not_json` | a content type other than `application/json` (absent is fine; charset utf-8 only) |
| 413 | `body_too_large` | over `MAX_REQUEST_BYTES` (from Content-Length before reading, else while reading) |
| 400 | `bad_request` | not UTF-8, not JSON (NaN and Infinity included), not an object, or the call's own checks |

The call's own checks (`check`: the payload's fields and the session id) are the entrypoint's,
run here too so that a refused call is one warning: past this point the SDK logs every 4xx its
entrypoint returns as a second line. A body that passes is handed on unchanged; the SDK parses
it again, which it now always can (at most 64 KiB).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Final

from starlette import status
from starlette.datastructures import Headers
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from agent_app import events
from agent_app.events import AgentErrorCode, ErrorEvent
from agent_app.hangup import INVOCATIONS_PATH
from agent_app.invocation import MAX_REQUEST_BYTES, BadRequest, parse_json_object
from agent_app.memory import SESSION_HEADER
from speech_protocol import quote

logger = logging.getLogger(__name__)

JSON_MEDIA_TYPE: Final = "application/json"

CheckCall = Callable[[dict[str, Any], str | None], object]
"""The entrypoint's checks of a payload and a session id; raises `Refused`."""
Authenticate = Callable[[Scope], Awaitable[object]]
"""Who the call is from (`identity.Authenticator.authenticate`): recorded in the scope; raises `Refused`."""


class Refused(Exception):
    """A call that cannot be served: its HTTP status, the `error` event that says why, and any
    headers the status calls for (`WWW-Authenticate` on a 401)."""

    def __init__(self, status_code: int, event: ErrorEvent, headers: Mapping[str, str] | None = None) -> None:
        super().__init__(event["message"])
        self.status_code = status_code
        self.event = event
        self.headers = dict(headers or {})

    def response(self) -> JSONResponse:
        return JSONResponse(dict(self.event), status_code=self.status_code, headers=self.headers)


def bad_request(message: str) -> Refused:
    return Refused(status.HTTP_400_BAD_REQUEST, events.error(AgentErrorCode.BAD_REQUEST, message))


def _too_large(declared: int | None) -> Refused:
    size = "is over the limit of" if declared is None else f"has {declared} bytes; the limit is"
    return Refused(
        status.HTTP_413_CONTENT_TOO_LARGE,
        events.error(AgentErrorCode.BODY_TOO_LARGE, f"the body {size} {MAX_REQUEST_BYTES} bytes"),
    )


def check_content_type(value: str | None) -> None:
    """Absent, blank or `application/json` (any case, parameters allowed, a charset only utf-8)."""
    if value is None or not value.strip():
        return
    media_type, _, parameters = value.partition(";")
    if media_type.strip().lower() != JSON_MEDIA_TYPE:
        raise Refused(
            status.HTTP_415_UNSUPPORTED_MEDIA_TYPE,
            events.error(
                AgentErrorCode.NOT_JSON,
                f"the body must be {JSON_MEDIA_TYPE} (send that Content-Type), got {quote(media_type.strip())}",
            ),
        )
    for parameter in parameters.split(";"):
        name, _, charset = parameter.partition("=")
        if name.strip().lower() == "charset" and charset.strip().strip('"').lower() not in ("utf-8", "utf8"):
            raise Refused(
                status.HTTP_415_UNSUPPORTED_MEDIA_TYPE,
                events.error(AgentErrorCode.NOT_JSON, f"the body must be UTF-8, got charset {quote(charset.strip())}"),
            )


def check_declared_length(value: str | None) -> None:
    """A Content-Length over the limit is refused before a byte of the body is read."""
    # uvicorn has already refused a Content-Length that is not a number.
    if value is not None and value.strip().isdigit() and int(value) > MAX_REQUEST_BYTES:
        raise _too_large(int(value))


def parse_body(body: bytes) -> dict[str, Any]:
    """The body as a JSON object; a `Refused` (400) says why not."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise bad_request(f"the body is not valid UTF-8: {exc.reason} at byte {exc.start}") from None
    try:
        return parse_json_object(text.removeprefix("\ufeff"), what="the body")
    except BadRequest as exc:
        raise bad_request(str(exc)) from None


async def _read_body(receive: Receive) -> bytes | None:
    """The whole body, at most `MAX_REQUEST_BYTES`; None when the caller left before sending it."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return None
        chunk: bytes = message.get("body", b"")
        size += len(chunk)
        if size > MAX_REQUEST_BYTES:
            raise _too_large(None)
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)


class InvocationGuard:
    """Pure ASGI middleware: refuses what `POST /invocations` cannot serve, passes the rest on."""

    def __init__(self, app: ASGIApp, *, check: CheckCall, authenticate: Authenticate) -> None:
        self.app = app
        self._check = check
        self._authenticate = authenticate

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope.get("path") != INVOCATIONS_PATH or scope.get("method") != "POST":
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        try:
            await self._authenticate(scope)
            check_content_type(headers.get("content-type"))
            check_declared_length(headers.get("content-length"))
            body = await _read_body(receive)
            if body is None:
                return  # nobody to answer
            self._check(parse_body(body), headers.get(SESSION_HEADER))
        except Refused as refused:
            level = logging.ERROR if refused.status_code >= status.HTTP_500_INTERNAL_SERVER_ERROR else logging.WARNING
            logger.log(
                level,
                "refused POST %s: %d %s: %s",
                INVOCATIONS_PATH,
                refused.status_code,
                refused.event["code"],
                refused,
            )
            await refused.response()(scope, receive, send)
            return

        delivered = False

        async def replay() -> Message:
            # The body once, as read; then the connection itself (the hang-up listener waits on it).
            nonlocal delivered
            if not delivered:
                delivered = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)
