"""The agent's language model and tools: Bedrock when configured, else a scripted offline model.

`ScriptedModel` is a real `strands.models.Model`: it streams a fixed answer token by token at a
chosen rate, tool calls included, through the same Strands event loop as Bedrock. Tests and the
latency measurements use it; the offline demo (no BEDROCK_MODEL_ID) is `DemoModel`, which answers
from the conversation. Nothing here is created at import time: the model is built once per
process (`build_model`), the agent once per call (`build_agent`).
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
from strands import Agent, ModelRetryStrategy, tool
from strands.agent.conversation_manager import SlidingWindowConversationManager
from strands.hooks import BeforeModelCallEvent, HookRegistry
from strands.models import Model
from strands.session.session_manager import SessionManager
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
DEMO_FOLLOW_UP: Final = 'You asked me before: "{previous}" '
"""How the demo model starts a follow-up: the caller's previous question, word for word (memory, audibly)."""

MODEL_ATTEMPTS: Final = 3
"""Model calls per turn when the model is throttled before it has said anything (then the error)."""
MODEL_RETRY_DELAY_S: Final = 1
"""First wait before a retry (then doubled): a caller waits in silence, so seconds, not Strands' 4 s default."""


@tool
def current_time() -> str:
    """The current date and time in UTC, worded to be read aloud."""
    now = datetime.now(UTC)
    return f"It is {now:%H:%M} UTC on {now:%A}, {now.day} {now:%B %Y}."


TOOLS: Final = (current_time,)


class VoiceRetryStrategy(ModelRetryStrategy):
    """Strands' retry on throttling, but never once the failed model call has streamed text.

    A retry restarts the model call from its first token; in a voice agent that text has already
    been shown and spoken, so the caller would hear it twice. A call that failed before saying
    anything is retried (after 1 s, then 2 s); one that failed after is not, and the answer ends
    with `model_error`. An earlier model call of the same turn (before a tool call) is part of the
    conversation and is not repeated by a retry of a later one. It is the agent's callback handler
    too: that is where Strands reports each text delta.
    """

    def __init__(self) -> None:
        super().__init__(max_attempts=MODEL_ATTEMPTS, initial_delay=MODEL_RETRY_DELAY_S, max_delay=4)
        self.streamed = False
        """Whether the current model call has produced text."""

    def register_hooks(self, registry: HookRegistry, **kwargs: Any) -> None:
        super().register_hooks(registry, **kwargs)
        registry.add_callback(BeforeModelCallEvent, self._model_call_starts)

    def _model_call_starts(self, event: BeforeModelCallEvent) -> None:
        self.streamed = False

    def __call__(self, **event: Any) -> None:
        if event.get("data"):
            self.streamed = True

    def is_retryable(self, exception: Exception) -> bool:
        return not self.streamed and super().is_retryable(exception)


def build_agent(
    model: Model,
    *,
    session_manager: SessionManager | None = None,
    history_messages: int | None = None,
) -> Agent:
    """A fresh agent for one invocation (an `Agent` runs one invocation at a time).

    With a session manager it continues that conversation: the stored turns are loaded here
    (blocking I/O, so build it off the event loop) and each new message is stored as it is added.
    `history_messages` bounds what the model sees (a sliding window over whole messages; the
    store keeps everything).
    """
    retry = VoiceRetryStrategy()
    return Agent(
        model=model,
        system_prompt=SYSTEM_PROMPT,
        tools=list(TOOLS),
        callback_handler=retry,
        retry_strategy=retry,
        session_manager=session_manager,
        conversation_manager=(
            SlidingWindowConversationManager(window_size=history_messages) if history_messages is not None else None
        ),
    )


@dataclass(frozen=True, slots=True)
class ModelChoice:
    model: Model
    name: str
    """Shown to the caller in `agent_start`."""
    demo: bool


def build_model(config: AgentConfig) -> ModelChoice:
    """Bedrock when a model id is configured, else the announced offline demo model.

    Call it once per process: the Bedrock model holds a boto3 client (its build costs over 100 ms),
    which is thread-safe and shared by every call's agent.
    """
    if config.bedrock_model_id is None:
        return ModelChoice(model=demo_model(), name=DEMO_MODEL_NAME, demo=True)
    return ModelChoice(
        model=bedrock_model(config.bedrock_model_id, config.aws_region), name=config.bedrock_model_id, demo=False
    )


def bedrock_model(model_id: str, region: str | None) -> BedrockModel:
    """A streaming Bedrock model; its boto3 client is created here (once per process)."""
    from botocore.config import Config  # type: ignore[import-untyped]
    from strands.models.bedrock import BedrockModel

    # botocore retries a refused ConverseStream call before any token exists (safe to repeat);
    # a stream that breaks later is the agent's retry strategy's decision (VoiceRetryStrategy).
    client_config = Config(retries={"mode": "standard", "total_max_attempts": 3}, connect_timeout=5)
    return BedrockModel(model_id=model_id, region_name=region, streaming=True, boto_client_config=client_config)


def demo_model() -> DemoModel:
    return DemoModel()


def user_questions(messages: Messages) -> list[str]:
    """The caller's questions in a conversation, oldest first (tool results are user messages too: skipped)."""
    questions = []
    for message in messages:
        if message["role"] != "user":
            continue
        text = "".join(block["text"] for block in message["content"] if "text" in block)
        if text:
            questions.append(text)
    return questions


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


class DemoModel(ScriptedModel):
    """The offline demo: a canned answer that, on a follow-up, first quotes the previous question.

    So a conversation's memory can be heard (and tested) without Bedrock. It keeps no state of
    its own between calls: everything comes from the messages the agent passes, which is the
    conversation as the session manager restored it.
    """

    def __init__(self, *, tokens_per_s: float = DEMO_TOKENS_PER_S) -> None:
        super().__init__([ScriptedTurn(DEMO_ANSWER)], tokens_per_s=tokens_per_s, model_id=DEMO_MODEL_NAME)

    def stream(
        self,
        messages: Messages,
        tool_specs: list[ToolSpec] | None = None,
        system_prompt: str | None = None,
        **kwargs: Any,
    ) -> AsyncIterable[StreamEvent]:
        return self._stream_turn(ScriptedTurn(demo_answer(user_questions(messages))), last=True)


def demo_answer(questions: Sequence[str]) -> str:
    """The demo's answer to the last of `questions` (the whole conversation's, oldest first)."""
    if len(questions) < 2:
        return DEMO_ANSWER
    return DEMO_FOLLOW_UP.format(previous=questions[-2]) + DEMO_ANSWER
