"""The scripted model through a real Strands agent, the demo model, and the Bedrock factory."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from strands.models.bedrock import BedrockModel
from strands.types.content import Messages
from strands.types.exceptions import ModelThrottledException

from agent_app.config import load_config
from agent_app.models import (
    DEMO_ANSWER,
    DEMO_MODEL_NAME,
    SYSTEM_PROMPT,
    DemoModel,
    ScriptedModel,
    ScriptedTurn,
    ToolCall,
    build_agent,
    build_model,
    demo_answer,
    tokenize,
    user_questions,
)

WEBSOCKET = {"SPEECH_TRANSPORT": "websocket", "SPEECH_WS_URL": "ws://127.0.0.1:1/x"}


async def run_agent(model: ScriptedModel) -> list[dict[str, Any]]:
    return [event async for event in build_agent(model).stream_async("What time is it?")]


def test_tokenize_keeps_every_character() -> None:
    text = "Hello, world! It's 10:30 — v1.2.3.\n- item  "
    tokens = tokenize(text)
    assert "".join(tokens) == text
    assert tokens[:4] == ["Hello", ",", " world", "!"]


async def test_text_arrives_token_by_token_through_the_agent() -> None:
    model = ScriptedModel([ScriptedTurn("Paris is the capital.")], tokens_per_s=1000)
    deltas = [event["data"] for event in await run_agent(model) if "data" in event]
    assert deltas == ["Paris", " is", " the", " capital", "."]
    assert model.tokens_sent == 5
    assert model.finished is True
    assert model.stopped_early is False


async def test_a_tool_call_runs_the_tool_and_the_next_turn_follows() -> None:
    model = ScriptedModel(
        [ScriptedTurn("Let me check.", ToolCall("current_time")), ScriptedTurn("It is late.")], tokens_per_s=1000
    )
    events = await run_agent(model)
    deltas = [event["data"] for event in events if "data" in event]
    assert "".join(deltas) == "Let me check.It is late."
    tool_results = [
        block["toolResult"]
        for event in events
        if "message" in event and event["message"]["role"] == "user"
        for block in event["message"]["content"]
        if "toolResult" in block
    ]
    assert len(tool_results) == 1
    assert tool_results[0]["status"] == "success"
    assert tool_results[0]["content"][0]["text"].startswith("It is ")
    assert model.calls == 2
    assert model.finished is True


async def test_tokens_are_paced_at_the_chosen_rate() -> None:
    model = ScriptedModel([ScriptedTurn("one two three four five six seven eight")], tokens_per_s=100)
    loop = asyncio.get_running_loop()
    start = loop.time()
    await run_agent(model)
    elapsed = loop.time() - start
    # 8 tokens at 100/s: the last one is due at 80 ms; no upper bound (a shared CPU can be slow).
    assert elapsed >= 0.08


async def test_cancelling_the_consumer_stops_the_model_at_once() -> None:
    model = ScriptedModel([ScriptedTurn("one two three four five six")], tokens_per_s=100)
    first = asyncio.Event()

    async def consume() -> None:
        async for event in build_agent(model).stream_async("hi"):
            if "data" in event:
                first.set()

    task = asyncio.create_task(consume())
    await first.wait()
    task.cancel()
    await asyncio.wait([task])
    assert model.stopped_early is True
    assert model.finished is False
    sent = model.tokens_sent
    await asyncio.sleep(0.05)  # five more tokens would be due by now
    assert model.tokens_sent == sent < 6


def test_a_script_must_end_without_a_tool_call() -> None:
    with pytest.raises(ValueError, match="the last turn must not call a tool"):
        ScriptedModel([ScriptedTurn("x", ToolCall("current_time"))], tokens_per_s=10)


def test_a_script_needs_a_positive_rate() -> None:
    with pytest.raises(ValueError, match="tokens_per_s must be > 0"):
        ScriptedModel([ScriptedTurn("x")], tokens_per_s=0)


def test_without_a_model_id_the_demo_model_is_chosen_and_announced() -> None:
    choice = build_model(load_config(WEBSOCKET))
    assert choice.demo is True
    assert choice.name == DEMO_MODEL_NAME
    assert isinstance(choice.model, DemoModel)
    assert choice.model.tokens_per_s == 40.0
    assert len([s for s in DEMO_ANSWER.split(". ") if s]) >= 4


def test_with_a_model_id_bedrock_is_chosen_with_its_region_and_streaming() -> None:
    choice = build_model(
        load_config({**WEBSOCKET, "BEDROCK_MODEL_ID": "us.amazon.nova-lite-v1:0", "AWS_REGION": "eu-west-1"})
    )
    assert choice.demo is False
    assert choice.name == "us.amazon.nova-lite-v1:0"
    assert isinstance(choice.model, BedrockModel)
    config = choice.model.get_config()
    assert config["model_id"] == "us.amazon.nova-lite-v1:0"
    assert config.get("streaming", True) is True
    assert choice.model.client.meta.region_name == "eu-west-1"
    # botocore may repeat a refused call (no token exists yet), three attempts in all.
    assert choice.model.client.meta.config.retries == {"mode": "standard", "total_max_attempts": 3}


def test_each_call_builds_a_new_model() -> None:
    config = load_config(WEBSOCKET)
    assert build_model(config).model is not build_model(config).model


def test_the_agent_speaks_plainly_and_has_the_clock_tool() -> None:
    agent = build_agent(ScriptedModel([ScriptedTurn("x")], tokens_per_s=10))
    assert agent.system_prompt == SYSTEM_PROMPT
    assert "no markdown" in SYSTEM_PROMPT
    assert agent.tool_names == ["current_time"]


# --- the demo model answers from the conversation ---------------------------------------------------


def test_user_questions_skip_tool_results() -> None:
    messages: Messages = [
        {"role": "user", "content": [{"text": "What time is it?"}]},
        {"role": "assistant", "content": [{"toolUse": {"toolUseId": "t", "name": "current_time", "input": {}}}]},
        {
            "role": "user",
            "content": [{"toolResult": {"toolUseId": "t", "status": "success", "content": [{"text": "10:30"}]}}],
        },
        {"role": "assistant", "content": [{"text": "It is half past ten."}]},
        {"role": "user", "content": [{"text": "And "}, {"text": "in Tokyo?"}]},
    ]
    assert user_questions(messages) == ["What time is it?", "And in Tokyo?"]


def test_the_demo_quotes_the_previous_question_word_for_word() -> None:
    assert demo_answer([]) == DEMO_ANSWER
    assert demo_answer(["Hi?"]) == DEMO_ANSWER
    assert demo_answer(["Is it *really* 42?", "Why?", "And then?"]) == 'You asked me before: "Why?" ' + DEMO_ANSWER


async def test_the_demo_model_answers_from_the_messages_it_is_given() -> None:
    agent = build_agent(DemoModel(tokens_per_s=5000))
    answers = []
    for question in ("Where is Paris?", "And Rome?"):
        answers.append("".join([e["data"] async for e in agent.stream_async(question) if "data" in e]))
    assert answers == [DEMO_ANSWER, 'You asked me before: "Where is Paris?" ' + DEMO_ANSWER]


# --- retries that never repeat spoken text ----------------------------------------------------------


class ThrottledOnce(ScriptedModel):
    """Its first call is throttled once `throttle_at` tokens have been streamed."""

    def __init__(self, text: str, *, throttle_at: int) -> None:
        super().__init__([ScriptedTurn(text), ScriptedTurn(text)], tokens_per_s=1000)
        self.throttle_at = throttle_at

    async def wait_for_token(self, position: int, due: float) -> None:
        if self.calls == 1 and position == self.throttle_at:
            raise ModelThrottledException("Too many requests")
        await super().wait_for_token(position, due)


async def test_a_throttled_call_that_said_nothing_is_retried() -> None:
    model = ThrottledOnce("Paris is the capital.", throttle_at=0)
    deltas = [event["data"] for event in await run_agent(model) if "data" in event]
    assert "".join(deltas) == "Paris is the capital."  # once
    assert model.calls == 2


async def test_a_throttled_call_that_already_spoke_is_not_retried() -> None:
    model = ThrottledOnce("Paris is the capital.", throttle_at=2)
    deltas: list[str] = []

    async def run() -> None:
        async for event in build_agent(model).stream_async("Where?"):
            if "data" in event:
                deltas.append(event["data"])

    with pytest.raises(ModelThrottledException):
        await run()
    assert deltas == ["Paris", " is"]  # never "Paris is Paris is the capital."
    assert model.calls == 1
