"""Tells an invocation the moment its caller's HTTP connection closes (the SSE route's barge-in).

`BedrockAgentCoreApp` runs the entrypoint's generator on its worker loop and pulls it through a
thread-pool bridge; when the caller disconnects, Starlette cancels the response on the server's
loop, but nothing reaches the generator (it is closed, if ever, only when garbage collection gets
to the bridge). So the work would run on until the pipeline noticed nobody reads (seconds later).

`HangupMiddleware` wraps `POST /invocations`. Once the request body has been read, it alone reads
the connection (the app's own `receive` calls wait on it) and, when the server reports
`http.disconnect` before the response finished, fires the request's `Hangup`. The entrypoint finds
that `Hangup` in a context variable (the SDK copies the request's context onto its worker loop)
and subscribes a callback, which hops onto the invocation's loop to stop it.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import threading
from collections.abc import Callable
from typing import Final

from starlette.types import ASGIApp, Message, Receive, Scope, Send

logger = logging.getLogger(__name__)

INVOCATIONS_PATH: Final = "/invocations"

current_hangup: contextvars.ContextVar[Hangup | None] = contextvars.ContextVar("voicestack_hangup", default=None)
"""The `Hangup` of the request being served (None outside `POST /invocations` or without the middleware)."""


class Hangup:
    """Fires its callbacks once, from whichever thread sees the caller leave; thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._callbacks: list[Callable[[], object]] = []
        self._fired = False

    @property
    def fired(self) -> bool:
        with self._lock:
            return self._fired

    def subscribe(self, callback: Callable[[], object]) -> None:
        """Call `callback` when the caller hangs up (at once, if it already has)."""
        with self._lock:
            if not self._fired:
                self._callbacks.append(callback)
                return
        callback()

    def fire(self) -> None:
        with self._lock:
            if self._fired:
                return
            self._fired = True
            callbacks, self._callbacks = self._callbacks, []
        for callback in callbacks:
            callback()


def on_hangup_threadsafe(loop: asyncio.AbstractEventLoop, action: Callable[[], object]) -> Callable[[], object]:
    """A callback that runs `action` on `loop` (the invocation's), from any thread."""

    def callback() -> None:
        if not loop.is_closed():
            loop.call_soon_threadsafe(action)

    return callback


class HangupMiddleware:
    """Pure ASGI middleware: a `Hangup` per `POST /invocations`, fired on an early disconnect."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope.get("path") != INVOCATIONS_PATH:
            await self.app(scope, receive, send)
            return
        hangup = Hangup()
        disconnected = asyncio.Event()
        response_done = False
        body_done = False
        listener: asyncio.Task[None] | None = None

        async def listen() -> None:
            while (await receive())["type"] != "http.disconnect":
                pass  # a body after the last body part is not ours to use
            disconnected.set()
            if not response_done:
                logger.info("the caller hung up before the answer ended")
                hangup.fire()

        async def receive_wrapped() -> Message:
            nonlocal body_done, listener
            if body_done:
                # The app asks only to learn of a disconnect (Starlette's StreamingResponse): the
                # listener is the one reader of the connection now.
                await disconnected.wait()
                return {"type": "http.disconnect"}
            message = await receive()
            if message["type"] == "http.disconnect":
                disconnected.set()
                hangup.fire()
            elif not message.get("more_body", False):
                body_done = True
                listener = asyncio.create_task(listen(), name="invocation-hangup-listener")
            return message

        async def send_wrapped(message: Message) -> None:
            nonlocal response_done
            if message["type"] == "http.response.body" and not message.get("more_body", False):
                response_done = True
            await send(message)

        token = current_hangup.set(hangup)
        try:
            await self.app(scope, receive_wrapped, send_wrapped)
        finally:
            current_hangup.reset(token)
            if listener is not None and not listener.done():
                listener.cancel()
