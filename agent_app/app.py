"""The AgentCore Runtime entrypoint: POST /invocations streams the agent's events as SSE.

`BedrockAgentCoreApp` serves `/invocations` and `/ping` on port 8080 and turns every event of the
returned async generator into `data: <json>\\n\\n`. The entrypoint is a coroutine rather than an
async generator so that a call it cannot serve gets a 4xx/5xx with a JSON body (the SDK passes a
returned Response through) instead of a stream that starts with 200.

What is expensive is built once per process, when the app is created (never at import): the
model (Bedrock's boto3 client), the speech transport, the conversation store and the
authenticator (`identity.py`; the user pool's keys are fetched on first use). Per call: who is
calling (the signed-in user a token names, or the stack's IAM callers), checked before anything
else, then the Strands agent (one runs one invocation at a time), given the conversation of the
caller's user and the call's session id (`memory.SESSION_HEADER`, which the SDK hands over as
`context.session_id`), and a hold on the user's session (`user_sessions.py`).

A call that cannot be served is refused before the SDK reads it (`http_guard.py`): a 4xx with a
JSON body `{"type": "error", "code", "message"}`, as every other refusal here (an unknown route
is a 404 `not_found`, a wrong method a 405 `method_not_allowed`). A caller who hangs up stops the
invocation at once (`hangup.py`): model stream cancelled, speech requests cancelled with the
protocol's `cancel`. `WS /ws` serves the same entrypoint full duplex (`ws_route.py`): questions
and `stop` up, the same events down; its turns are turns of the conversation named by the upgrade
request's session id.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass

from bedrock_agentcore.runtime import BedrockAgentCoreApp
from bedrock_agentcore.runtime.context import RequestContext
from botocore.exceptions import BotoCoreError, ClientError  # type: ignore[import-untyped]
from starlette import status
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.websockets import WebSocket
from strands import Agent
from strands.types.exceptions import SessionException

from agent_app import events
from agent_app.config import AgentConfig
from agent_app.events import AgentErrorCode, AgentEvent, ErrorEvent
from agent_app.hangup import INVOCATIONS_PATH, HangupMiddleware, current_hangup, on_hangup_threadsafe
from agent_app.http_guard import InvocationGuard, Refused, bad_request
from agent_app.identity import Authenticator, Identity, build_authenticator, identity_of
from agent_app.invocation import BadRequest, InvocationRequest, parse_invocation
from agent_app.memory import (
    BadSessionId,
    ConversationKey,
    ConversationLease,
    Conversations,
    SessionBusy,
    SessionManagerFactory,
    agentcore_sessions,
    check_session_id,
    file_sessions,
)
from agent_app.metrics import InvocationMetrics
from agent_app.models import ModelChoice, build_agent, build_model
from agent_app.pipeline import CALLER_GONE_AFTER_S, Invocation, Outcome, PipelineSettings
from agent_app.speech.factory import build_transport
from agent_app.speech.transport import SpeechTransport
from agent_app.user_sessions import SessionHold, TooManySessions, UserSessions
from agent_app.ws_route import ConversationSocket, RunningTurns, Turn, refuse_connection

logger = logging.getLogger(__name__)

LEASE_GRACE_S = 1.0
"""Beyond the deadline and the caller-gone wait, after which a conversation's turn is given back
even if its invocation never ran (its events were never read, so its work never started)."""

_STORE_ERRORS = (SessionException, OSError, BotoCoreError, ClientError)
"""What a conversation store raises when it cannot be read (files, AgentCore Memory's API)."""


def build_sessions(config: AgentConfig) -> SessionManagerFactory | None:
    """AgentCore Memory when AGENTCORE_MEMORY_ID is set, else files under AGENT_SESSION_DIR."""
    if config.agentcore_memory_id is not None:
        if config.aws_region is None:
            raise ValueError("AWS_REGION is required with AGENTCORE_MEMORY_ID")  # load_config guarantees it
        return agentcore_sessions(config.agentcore_memory_id, config.aws_region)
    if config.session_dir is not None:
        return file_sessions(config.session_dir)
    return None


@dataclass(frozen=True, slots=True)
class AppDependencies:
    """What the app builds once per process; tests swap in a scripted model or a test transport."""

    model: Callable[[AgentConfig], ModelChoice] = build_model
    transport: Callable[[AgentConfig], SpeechTransport] = build_transport
    sessions: Callable[[AgentConfig], SessionManagerFactory | None] = build_sessions
    metrics: Callable[[], InvocationMetrics] = InvocationMetrics.from_env
    authenticator: Callable[[AgentConfig], Authenticator] = build_authenticator
    caller_gone_after_s: float = CALLER_GONE_AFTER_S


class AgentService:
    """Starts invocations: checks the call, holds the user's session, takes its conversation's turn,
    builds its agent.

    The entrypoint uses it; any other route (a WebSocket) can start invocations the same way.
    """

    def __init__(self, config: AgentConfig, dependencies: AppDependencies | None = None) -> None:
        deps = dependencies or AppDependencies()
        self.config = config
        self._deps = deps
        self._model = deps.model(config)
        self._transport = deps.transport(config)
        self.conversations = Conversations(deps.sessions(config), wait_s=config.session_wait_s)
        self.user_sessions = UserSessions(config.max_sessions_per_user)
        self._metrics = deps.metrics()

    def check(self, payload: object, session_id: str | None) -> tuple[InvocationRequest, str | None]:
        """The call's request and conversation (None: a one-turn call), or `Refused` (400). Pure."""
        config = self.config
        try:
            request = parse_invocation(
                payload, default_mode=config.speech_mode, default_voice=config.speech_voice, voices=config.speech_voices
            )
            return request, check_session_id(session_id)
        except (BadRequest, BadSessionId) as exc:
            raise bad_request(str(exc)) from None

    def hold_session(self, identity: Identity, session_id: str | None) -> SessionHold:
        """Hold the user's session (None: a one-turn call) for as long as the caller needs it;
        `Refused` (429 `too_many_sessions`) over the user's limit."""
        try:
            return self.user_sessions.hold(identity, session_id)
        except TooManySessions as exc:
            logger.warning("user %s: %s", identity.user, exc)
            raise Refused(
                status.HTTP_429_TOO_MANY_REQUESTS, events.error(AgentErrorCode.TOO_MANY_SESSIONS, str(exc))
            ) from None

    async def start(self, payload: object, session_id: str | None, identity: Identity) -> Invocation:
        """An invocation of `identity`'s, ready to stream (its work starts when its events are read);
        raises `Refused`."""
        config = self.config
        try:
            request, session = self.check(payload, session_id)
        except Refused as refused:
            logger.warning("bad invocation: %s", refused)
            raise
        hold = self.hold_session(identity, session)
        conversation = ConversationKey(identity.user, session) if session is not None else None
        try:
            lease = await self.conversations.acquire(conversation)
        except SessionBusy as exc:
            hold.release()
            logger.warning("session %s: %s", session, exc)
            raise Refused(status.HTTP_409_CONFLICT, events.error(AgentErrorCode.SESSION_BUSY, str(exc))) from None
        except BaseException:
            hold.release()
            raise

        def give_back() -> None:
            lease.release()
            hold.release()

        try:
            agent = await asyncio.to_thread(self._build_agent, lease)
        except _STORE_ERRORS as exc:
            give_back()
            logger.error("session %s: the conversation store failed: %s", session, exc)
            raise Refused(
                status.HTTP_503_SERVICE_UNAVAILABLE,
                events.error(AgentErrorCode.MEMORY_UNAVAILABLE, f"the conversation could not be loaded: {exc}"),
            ) from None
        except BaseException:
            give_back()
            raise

        # Every invocation's work ends within this bound; one whose events were never read never
        # starts, and would otherwise hold its conversation (and its user's session) for good.
        bound_s = config.agent_deadline_s + self._deps.caller_gone_after_s + LEASE_GRACE_S
        watchdog = asyncio.get_running_loop().call_later(bound_s, give_back)

        def finished(invocation: Invocation) -> None:
            watchdog.cancel()
            give_back()
            self._metrics.record(
                str(invocation.outcome or Outcome.FAILED),
                first_text_s=invocation.first_text_s,
                first_audio_s=invocation.first_audio_s,
            )

        return Invocation(
            prompt=request.prompt,
            agent=agent,
            model_name=self._model.name,
            demo=self._model.demo,
            transport=self._transport,
            settings=PipelineSettings(
                mode=request.mode,
                voice=request.voice,
                speed=request.speed,
                deadline_s=config.agent_deadline_s,
                caller_gone_after_s=self._deps.caller_gone_after_s,
            ),
            on_finished=finished,
        )

    def _build_agent(self, lease: ConversationLease) -> Agent:
        # Blocking: the session manager reads the stored conversation (files or AgentCore Memory).
        return build_agent(
            self._model.model,
            session_manager=self.conversations.session_manager(lease),
            history_messages=self.config.history_messages,
        )


_WS_CLOSE_CODES = {
    status.HTTP_401_UNAUTHORIZED: status.WS_1008_POLICY_VIOLATION,
    status.HTTP_429_TOO_MANY_REQUESTS: status.WS_1013_TRY_AGAIN_LATER,
    status.HTTP_503_SERVICE_UNAVAILABLE: status.WS_1013_TRY_AGAIN_LATER,
}
"""How `WS /ws` closes a connection it refuses: 1008 for a token to sign in again for, 1013 for a
condition that passes (a session closed elsewhere, the user pool's keys back)."""


def create_app(config: AgentConfig, dependencies: AppDependencies | None = None) -> BedrockAgentCoreApp:
    deps = dependencies or AppDependencies()
    service = AgentService(config, deps)
    authenticator = deps.authenticator(config)
    app = BedrockAgentCoreApp()
    app.add_middleware(HangupMiddleware)
    # Added last: the outermost, before the SDK.
    app.add_middleware(InvocationGuard, check=service.check, authenticate=authenticator.authenticate)
    app.add_exception_handler(HTTPException, _route_error)
    running_turns = RunningTurns()

    # The SDK passes the request context only to an entrypoint whose second parameter is named `context`.
    async def invoke(payload: object, context: RequestContext) -> JSONResponse | AsyncIterator[AgentEvent]:
        identity = identity_of(context.request.scope) if context.request is not None else None
        if identity is None:  # the guard authenticates every call; without it, nobody is served
            logger.error("POST %s reached the entrypoint unauthenticated", INVOCATIONS_PATH)
            error = events.error(AgentErrorCode.INTERNAL_ERROR, "internal error: the caller was not authenticated")
            return JSONResponse(dict(error), status_code=status.HTTP_500_INTERNAL_SERVER_ERROR)
        try:
            invocation = await service.start(payload, context.session_id, identity)
        except Refused as refused:
            return refused.response()
        hangup = current_hangup.get()
        if hangup is not None:
            hangup.subscribe(on_hangup_threadsafe(asyncio.get_running_loop(), invocation.hang_up))
        return invocation.events()

    async def conversation(websocket: WebSocket, context: RequestContext) -> None:
        session_id = context.session_id if context.session_id and context.session_id.strip() else None
        try:
            identity = await authenticator.authenticate(websocket.scope)
            # The socket holds its session for as long as it is open; a one-turn socket's turns each hold their own.
            hold = service.hold_session(identity, session_id) if session_id is not None else None
        except Refused as refused:
            logger.warning("ws: refused the connection: %d %s: %s", refused.status_code, refused.event["code"], refused)
            await refuse_connection(websocket, refused.event, _WS_CLOSE_CODES[refused.status_code])
            return

        async def invoke_turn(payload: object) -> Turn | ErrorEvent:
            try:
                return await service.start(payload, session_id, identity)
            except Refused as refused:
                return refused.event

        conversation = ConversationKey(identity.user, session_id) if session_id is not None else None
        try:
            await ConversationSocket(
                websocket, invoke_turn, conversation=conversation, running_turns=running_turns
            ).run()
        finally:
            if hold is not None:
                hold.release()

    app.entrypoint(invoke)
    app.websocket(conversation)
    return app


_ROUTE_ERRORS = {
    status.HTTP_404_NOT_FOUND: AgentErrorCode.NOT_FOUND,
    status.HTTP_405_METHOD_NOT_ALLOWED: AgentErrorCode.METHOD_NOT_ALLOWED,
}
_ROUTES = "POST /invocations, GET /ping and WS /ws"


async def _route_error(request: Request, exc: Exception) -> Response:
    """Starlette's own refusals (no such route, wrong method) in the agent's JSON error shape."""
    assert isinstance(exc, HTTPException)
    code = _ROUTE_ERRORS.get(exc.status_code, AgentErrorCode.BAD_REQUEST)
    message = f"{request.method} {request.url.path}: {exc.detail.lower()}; the agent serves {_ROUTES}"
    logger.warning("refused %s", message)
    return JSONResponse(dict(events.error(code, message)), status_code=exc.status_code, headers=exc.headers)
