"""Keeps other web sites away from the local agent: Host and Origin checks, a capped request body.

The page's server listens on loopback, but any site open in the same browser can still reach it:
a cross-site `fetch` POST (the browser sends it, even if the answer is then hidden from the site)
or a DNS-rebinding page, whose own host name resolves to 127.0.0.1 after a while. So:

- every request must carry a `Host` naming this server: a loopback name (`127.0.0.1`, `localhost`,
  `[::1]`) or the address it listens on, with the port the request arrived on. A rebinding page
  sends its own name there and gets 421;
- guarded routes (`POST /api/invoke`) also need an `Origin` equal to `http://<Host>` when the
  browser sends one (every browser does on a cross-site POST), and a `Sec-Fetch-Site` of
  `same-origin` or `none` when present; otherwise 403. A client that is no browser (curl, tests)
  sends neither and is let through: it could reach the agent directly anyway.

The checks are pure functions; `SameOriginGuard` applies them as ASGI middleware.
"""

from __future__ import annotations

import json
from typing import Final

from starlette.requests import Request
from starlette.status import HTTP_403_FORBIDDEN, HTTP_421_MISDIRECTED_REQUEST, WS_1008_POLICY_VIOLATION
from starlette.types import ASGIApp, Receive, Scope, Send

DEFAULT_MAX_BODY_BYTES: Final = 64 * 1024
"""An invocation is a prompt of at most 8,000 characters (up to 4 bytes each in UTF-8) plus a few fields."""
LOOPBACK_NAMES: Final = frozenset({"127.0.0.1", "localhost", "[::1]"})
_WILDCARDS: Final = frozenset({"0.0.0.0", "::", ""})
SAME_SITE_FETCHES: Final = frozenset({"same-origin", "none"})


class BodyTooLarge(Exception):
    """The request body is over the limit; the message says both sizes."""


def host_problem(host: str | None, server: tuple[str, int] | None) -> str | None:
    """Why `Host` does not name this server (listening on `server`), or None when it does."""
    if not host:
        return "the request has no Host header"
    if server is None:
        return "the server address is unknown"
    listen_host, port = server
    allowed = set(LOOPBACK_NAMES)
    if listen_host not in _WILDCARDS:
        allowed.add(f"[{listen_host}]" if ":" in listen_host else listen_host)
    if host.lower() not in {f"{name}:{port}" for name in allowed}:
        return f"Host {host!r} is not this server; open the page at http://127.0.0.1:{port}/"
    return None


def origin_problem(origin: str | None, host: str, sec_fetch_site: str | None) -> str | None:
    """Why a request to a guarded route is not from this server's own page, or None when it is."""
    if sec_fetch_site is not None and sec_fetch_site.lower() not in SAME_SITE_FETCHES:
        return f"cross-site request (Sec-Fetch-Site: {sec_fetch_site}); only this server's page may call it"
    if origin is not None and origin.lower() != f"http://{host.lower()}":
        return f"Origin {origin!r} is not this page's (http://{host}); only this server's page may call it"
    return None


async def read_body_capped(request: Request, limit: int) -> bytes:
    """The whole body, refusing more than `limit` bytes without reading (or buffering) the rest."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise BodyTooLarge(f"the body has {int(declared)} bytes; the limit is {limit}")
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise BodyTooLarge(f"the body has over {limit} bytes; the limit is {limit}")
        chunks.append(chunk)
    return b"".join(chunks)


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers", []):
        if key == name:
            decoded: str = value.decode("latin-1")
            return decoded
    return None


class SameOriginGuard:
    """ASGI middleware: the Host check on everything, the Origin check on `guarded_paths`."""

    def __init__(self, app: ASGIApp, guarded_paths: frozenset[str]) -> None:
        self.app = app
        self.guarded_paths = guarded_paths

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        host = _header(scope, b"host")
        problem = host_problem(host, scope.get("server"))
        code, status = "wrong_host", HTTP_421_MISDIRECTED_REQUEST
        if problem is None and scope.get("path") in self.guarded_paths:
            assert host is not None
            problem = origin_problem(_header(scope, b"origin"), host, _header(scope, b"sec-fetch-site"))
            code, status = "cross_origin", HTTP_403_FORBIDDEN
        if problem is None:
            await self.app(scope, receive, send)
            return
        body = json.dumps({"error": {"code": code, "message": problem}}).encode()
        if scope["type"] == "websocket":
            # Refused before the handshake completes: the client sees an HTTP 403.
            await send({"type": "websocket.close", "code": WS_1008_POLICY_VIOLATION, "reason": code})
            return
        await send(
            {
                "type": "http.response.start",
                "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())],
            }
        )
        await send({"type": "http.response.body", "body": body})
