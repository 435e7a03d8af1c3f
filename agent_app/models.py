"""The agent's language model and tools: Bedrock when configured, else a scripted offline model.

`ScriptedModel` is a real `strands.models.Model`: it streams a fixed answer token by token at a
chosen rate, tool calls included, through the same Strands event loop as Bedrock. Tests and the
latency measurements use it; the offline demo (no BEDROCK_MODEL_ID) is one. Nothing here is
created at import time.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncGenerator, AsyncIterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Final, TypeVar

from pydantic import BaseModel
from strands import Agent, tool
from strands.models import Model
from strands.types.content import Messages
from strands.types.streaming import StreamEvent
from strands.types.tools import ToolSpec

from agent_app.config import AgentConfig

if TYPE_CHECKING:
    from strands.models.bedrock import BedrockModel

T = TypeVar("T", bound=BaseModel)

SYSTEM_PROMPT: Final = """\
You are a voice assistant. Everything you write is read aloud by a speech synthesizer as soon as each \
sentence is complete, so write for the ear:
- Start with a short, direct sentence that answers the question; add detail only if it helps.
- Keep sentences short and complete, and the whole answer under about 120 words unless asked for more.
- Plain prose only: no markdown, no bullet points, headings, tables, code blocks, emoji or URLs.
- Write numbers, dates, times and units the way they are spoken when that is clearer \
("about three and a half million", "half past ten").
- Do not spell out symbols or abbreviations that sound odd aloud; say what they mean.
- If code, a table or a link is truly needed, it is shown on screen and not read aloud: say in words \
what it is for.
- If you need a tool, say in a few words what you are doing first, then use it."""

DEMO_MODEL_NAME: Final = "demo"
DEMO_TOKENS_PER_S: Final = 40.0
DEMO_ANSWER: Final = (
    "This is the offline demo model speaking, because no Bedrock model is configured. "
    "Each sentence you hear went to the speech server as soon as it was complete, "
    "while the rest of this answer was still being written. "
    "In batch mode, the same answer is spoken only once it is finished. "
    "Configure a Bedrock model and AWS credentials to talk to a real model."
)


@tool
def current_time() -> str:
    """The current date and time in UTC, worded to be read aloud."""
    now = datetime.now(UTC)
    return f"It is {now:%H:%M} UTC on {now:%A}, {now.day} {now:%B %Y}."


TOOLS: Final = (current_time,)


def build_agent(model: Model) -> Agent:
    """A fresh agent for one invocation (an `Agent` runs one invocation at a time)."""
    return Agent(model=model, system_prompt=SYSTEM_PROMPT, tools=list(TOOLS), callback_handler=None)


@dataclass(frozen=True, slots=True)
class ModelChoice:
    model: Model
    name: str
    """Shown to the caller in `agent_start`."""
    demo: bool


def build_model(config: AgentConfig) -> ModelChoice:
    """Bedrock when a model id is configured, else the announced offline demo model."""
    if config.bedrock_model_id is None:
        return ModelChoice(model=demo_model(), name=DEMO_MODEL_NAME, demo=True)
    return ModelChoice(
        model=bedrock_model(config.bedrock_model_id, config.aws_region), name=config.bedrock_model_id, demo=False
    )


def bedrock_model(model_id: str, region: str | None) -> BedrockModel:
    """A streaming Bedrock model; its boto3 client is created here, so call it per invocation."""
    from strands.models.bedrock import BedrockModel

    return BedrockModel(model_id=model_id, region_name=region, streaming=True)


def demo_model() -> ScriptedModel:
    return ScriptedModel([ScriptedTurn(DEMO_ANSWER)], tokens_per_s=DEMO_TOKENS_PER_S, model_id=DEMO_MODEL_NAME)


# --- scripted model ------------------------------------------------------------------------------

_TOKEN: Final = re.compile(r"\s*(?:\w+|[^\w\s])|\s+")


def tokenize(text: str) -> list[str]:
    """Split text into model-like tokens (a word or a punctuation mark with its leading space)."""
    return _TOKEN.findall(text)


@dataclass(frozen=True, slots=True)
class ToolCall:
    name: str
    input: dict[str, Any] = field(default_factory=dict)
    tool_use_id: str = "tool-1"


@dataclass(frozen=True, slots=True)
class ScriptedTurn:
    """One model response: text, then optionally a tool call (the agent then asks for the next turn)."""

    text: str
    tool_call: ToolCall | None = None


class ScriptedModel(Model):
    """Streams scripted turns token by token at `tokens_per_s`, one turn per model call.

    It records what it did, so tests can tell a finished answer from one that was stopped:
    `tokens_sent`, `finished` (the last turn was streamed to its end) and `stopped_early`.
    """

    def __init__(self, turns: Sequence[ScriptedTurn], *, tokens_per_s: float, model_id: str = "scripted") -> None:
        if not turns:
            raise ValueError("a script needs at least one turn")
        if turns[-1].tool_call is not None:
            raise ValueError("the last turn must not call a tool: the agent would ask for one more turn")
        if tokens_per_s <= 0:
            raise ValueError(f"tokens_per_s must be > 0, got {tokens_per_s}")
        self.turns = tuple(turns)
        self.tokens_per_s = tokens_per_s
        self._config: dict[str, Any] = {"model_id": model_id}
        self.calls = 0
        self.tokens_sent = 0
        self.finished = False
        self.stopped_early = False

    def update_config(self, **model_config: Any) -> None:
        self._config.update(model_config)

    def get_config(self) -> dict[str, Any]:
        return dict(self._config)

    async def structured_output(
        self, output_model: type[T], prompt: Messages, system_prompt: str | None = None, **kwargs: Any
    ) -> AsyncGenerator[dict[str, T | Any], None]:
        raise NotImplementedError("the scripted model has no structured output")
        yield {}  # pragma: no cover - makes this an async generator, like the interface

    async def wait_for_token(self, position: int, due: float) -> None:
        """Hold token `position` (0-based over the whole script) until `due` (loop time).

        Override to pace the script differently, e.g. to hold it until a test has seen something.
        """
        await asyncio.sleep(max(0.0, due - asyncio.get_running_loop().time()))

    def stream(
        self,
        messages: Messages,
        tool_specs: list[ToolSpec] | None = None,
        system_prompt: str | None = None,
        **kwargs: Any,
    ) -> AsyncIterable[StreamEvent]:
        if self.calls >= len(self.turns):
            raise RuntimeError(f"the script has {len(self.turns)} turn(s); the agent asked for more")
        turn = self.turns[self.calls]
        last = self.calls == len(self.turns) - 1
        self.calls += 1
        return self._stream_turn(turn, last=last)

    async def _stream_turn(self, turn: ScriptedTurn, *, last: bool) -> AsyncGenerator[StreamEvent, None]:
        start = asyncio.get_running_loop().time()
        completed = False
        try:
            yield {"messageStart": {"role": "assistant"}}
            tokens = tokenize(turn.text)
            if tokens:
                yield {"contentBlockStart": {"start": {}}}
                for index, token in enumerate(tokens):
                    await self.wait_for_token(self.tokens_sent, start + (index + 1) / self.tokens_per_s)
                    self.tokens_sent += 1
                    yield {"contentBlockDelta": {"delta": {"text": token}}}
                yield {"contentBlockStop": {}}
            if turn.tool_call is not None:
                call = turn.tool_call
                yield {"contentBlockStart": {"start": {"toolUse": {"name": call.name, "toolUseId": call.tool_use_id}}}}
                yield {"contentBlockDelta": {"delta": {"toolUse": {"input": json.dumps(call.input)}}}}
                yield {"contentBlockStop": {}}
                yield {"messageStop": {"stopReason": "tool_use"}}
            else:
                yield {"messageStop": {"stopReason": "end_turn"}}
            yield {
                "metadata": {
                    "usage": {"inputTokens": 0, "outputTokens": len(tokens), "totalTokens": len(tokens)},
                    "metrics": {"latencyMs": round((asyncio.get_running_loop().time() - start) * 1000)},
                }
            }
            completed = True
            self.finished = last
        finally:
            if not completed:
                self.stopped_early = True
