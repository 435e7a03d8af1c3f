"""`WS /api/ws` of the page's web server: relays the page's conversation socket to the agent's `WS /ws`.

Browsers cannot set headers on a WebSocket, so the page passes its conversation's session id as
the `session` query parameter and the proxy sends it upstream as AgentCore's session header.
Frames are relayed as they come, text only (the conversation protocol has no binary frames); a
frame from the page over the size limit closes the socket with 1009. Either side closing closes
the other, so the agent sees the page leave (and stops the running answer) at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from starlette import status
from starlette.websockets import WebSocket, WebSocketDisconnect, WebSocketState
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidURI

from voicestack.agentcore import SESSION_HEADER, conversation_session_problem

logger = logging.getLogger("voicestack.webserver")


def session_problem(session: str | None) -> str | None:
    """Why the `session` query parameter cannot be used, or None (absent is allowed: one-turn memory).
    The rule is the conversation's (`voicestack.agentcore.conversation_session_problem`: what AgentCore
    Runtime and Memory both accept, the agent's too); the page sends a UUID."""
    problem = None if session is None else conversation_session_problem(session)
    return None if problem is None else f"'session' must be {problem}"


async def relay_conversation(websocket: WebSocket, agent_ws_url: str, *, max_message_chars: int) -> None:
    """Serve one page socket: connect upstream, then relay both ways until either side closes."""
    session = websocket.query_params.get("session")
    problem = session_problem(session)
    await websocket.accept()
    if problem is not None:
        await websocket.close(code=status.WS_1008_POLICY_VIOLATION, reason=problem)
        return
    headers = {SESSION_HEADER: session} if session is not None else {}
    try:
        upstream = await connect(agent_ws_url, additional_headers=headers, open_timeout=5, compression=None)
    except (OSError, TimeoutError, InvalidHandshake, InvalidURI) as exc:
        logger.warning("agent WebSocket unreachable at %s: %s", agent_ws_url, exc)
        await websocket.close(code=status.WS_1011_INTERNAL_ERROR, reason="agent_unreachable")
        return
    async with upstream:
        down = asyncio.create_task(_agent_to_page(upstream, websocket), name="ws-proxy-down")
        up = asyncio.create_task(_page_to_agent(websocket, upstream, max_message_chars), name="ws-proxy-up")
        done, pending = await asyncio.wait({down, up}, return_when=asyncio.FIRST_COMPLETED)
        for task in pending:
            task.cancel()
        await asyncio.wait(pending)
        for task in done:
            if not task.cancelled() and (failure := task.exception()) is not None:
                logger.warning("conversation relay ended: %r", failure)
    if websocket.application_state == WebSocketState.CONNECTED:
        with contextlib.suppress(WebSocketDisconnect):  # the page may be gone already
            await websocket.close()


async def _page_to_agent(websocket: WebSocket, upstream: ClientConnection, limit: int) -> None:
    while True:
        message = await websocket.receive()
        if message["type"] == "websocket.disconnect":
            return
        text = message.get("text")
        if text is None:
            await websocket.close(code=status.WS_1003_UNSUPPORTED_DATA, reason="text frames only")
            return
        if len(text) > limit:
            await websocket.close(code=status.WS_1009_MESSAGE_TOO_BIG, reason=f"over {limit} characters")
            return
        await upstream.send(text)


async def _agent_to_page(upstream: ClientConnection, websocket: WebSocket) -> None:
    try:
        async for data in upstream:
            if isinstance(data, str):
                await websocket.send_text(data)
    except ConnectionClosed as exc:
        logger.info("the agent closed the conversation socket: %s", exc)
