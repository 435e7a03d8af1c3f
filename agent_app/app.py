"""The AgentCore Runtime entrypoint: POST /invocations streams the agent's events as SSE.

`BedrockAgentCoreApp` serves `/invocations` and `/ping` on port 8080 and turns every event of the
returned async generator into `data: <json>\\n\\n`. The entrypoint is a coroutine rather than an
async generator so that a payload it cannot serve gets a 400 with a JSON body (the SDK passes a
returned Response through) instead of a stream that starts with 200. Model, agent and speech
transport are created per invocation.

A caller who hangs up stops the invocation at once (`hangup.py`): model stream cancelled, speech
requests cancelled with the protocol's `cancel`. `WS /ws` serves the same entrypoint full duplex
(`ws_route.py`): questions and `stop` up, the same events down.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass

from bedrock_agentcore.runtime import BedrockAgentCoreApp
from starlette import status
from starlette.responses import JSONResponse

from agent_app import events
from agent_app.config import AgentConfig
from agent_app.events import AgentErrorCode, AgentEvent
from agent_app.hangup import HangupMiddleware, current_hangup, on_hangup_threadsafe
from agent_app.invocation import BadRequest, parse_invocation
from agent_app.models import ModelChoice, build_agent, build_model
from agent_app.pipeline import CALLER_GONE_AFTER_S, Invocation, PipelineSettings
from agent_app.speech.factory import build_transport
from agent_app.speech.transport import SpeechTransport
from agent_app.ws_route import conversation_handler

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class AppDependencies:
    """What the entrypoint builds per invocation; tests swap in a scripted model or a test transport."""

    model: Callable[[AgentConfig], ModelChoice] = build_model
    transport: Callable[[AgentConfig], SpeechTransport] = build_transport
    caller_gone_after_s: float = CALLER_GONE_AFTER_S


def create_app(config: AgentConfig, dependencies: AppDependencies | None = None) -> BedrockAgentCoreApp:
    deps = dependencies or AppDependencies()
    app = BedrockAgentCoreApp()
    app.add_middleware(HangupMiddleware)

    async def invoke(payload: object) -> JSONResponse | AsyncIterator[AgentEvent]:
        try:
            request = parse_invocation(payload, default_mode=config.speech_mode, default_voice=config.speech_voice)
        except BadRequest as exc:
            logger.warning("bad invocation payload: %s", exc)
            return JSONResponse(
                events.error(AgentErrorCode.BAD_REQUEST, str(exc)), status_code=status.HTTP_400_BAD_REQUEST
            )
        choice = deps.model(config)
        invocation = Invocation(
            prompt=request.prompt,
            agent=build_agent(choice.model),
            model_name=choice.name,
            demo=choice.demo,
            transport=deps.transport(config),
            settings=PipelineSettings(
                mode=request.mode,
                voice=request.voice,
                deadline_s=config.agent_deadline_s,
                caller_gone_after_s=deps.caller_gone_after_s,
            ),
        )
        hangup = current_hangup.get()
        if hangup is not None:
            hangup.subscribe(on_hangup_threadsafe(asyncio.get_running_loop(), invocation.hang_up))
        return invocation.events()

    app.entrypoint(invoke)
    app.websocket(conversation_handler(invoke))
    return app
