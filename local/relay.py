"""What both modes of the page's web server share: the invocation body's checks, the error body, and
an upstream event stream relayed to the page chunk by chunk.

Errors of the web server itself are JSON bodies `{"error": {"code", "message"}}`; the page reads
that shape (`invoke.js`).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from typing import Final

import httpx
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.status import HTTP_400_BAD_REQUEST, HTTP_413_CONTENT_TOO_LARGE, HTTP_415_UNSUPPORTED_MEDIA_TYPE

from local.guard import BodyTooLarge, read_body_capped

logger = logging.getLogger("voicestack.webserver")


INVOCATION_EXPECTED: Final = 'POST a JSON invocation: {"prompt": ...}'
"""What `POST /api/invoke` says to an empty body, in both modes."""


def error_response(status_code: int, code: str, message: str) -> JSONResponse:
    """The web server's structured error body."""
    return JSONResponse({"error": {"code": code, "message": message}}, status_code=status_code)


async def read_json_body(request: Request, limit: int, *, when_empty: str) -> bytes | JSONResponse:
    """The request's body when it is non-empty JSON of at most `limit` bytes, else the error to send
    (413 `body_too_large`, 400 `empty_body` saying `when_empty`, 415 `not_json`)."""
    try:
        body = await read_body_capped(request, limit)
    except BodyTooLarge as exc:
        return error_response(HTTP_413_CONTENT_TOO_LARGE, "body_too_large", str(exc))
    if not body:
        return error_response(HTTP_400_BAD_REQUEST, "empty_body", when_empty)
    content_type = request.headers.get("content-type", "").split(";", 1)[0].strip().lower()
    if content_type != "application/json":
        return error_response(
            HTTP_415_UNSUPPORTED_MEDIA_TYPE,
            "not_json",
            f"the body must be application/json, got {content_type or 'no content type'}",
        )
    return body


def stream_through(upstream: httpx.Response) -> StreamingResponse:
    """Relay an upstream 200 stream as it arrives (no buffering: the page's time to first audio is
    the agent's); the upstream response is closed when the page's response ends or is dropped."""

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


async def passed_through(upstream: httpx.Response) -> Response:
    """An upstream error answer, read whole and closed, passed on as it came."""
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
