"""Session ids as AgentCore accepts them, with botocore's service models as the oracle.

AgentCore Runtime's `runtimeSessionId` (InvokeAgentRuntime) and AgentCore Memory's `sessionId`
(CreateEvent) are read from the bedrock-agentcore model botocore ships; its validator checks their
minimum length, the model's `max` and `pattern` the rest (botocore's validator checks neither).
"""

from __future__ import annotations

import re
import uuid
from datetime import UTC, datetime
from typing import Any

import botocore.session  # type: ignore[import-untyped]
import pytest
from botocore.validate import ParamValidator  # type: ignore[import-untyped]
from hypothesis import given
from hypothesis import strategies as st

from agent_app.memory import (
    ACTOR_ID,
    MEMORY_SESSION_ID_CHARS,
    MEMORY_SESSION_ID_PATTERN,
    RUNTIME_SESSION_ID_CHARS,
    SESSION_ID_CHARS,
    BadSessionId,
    check_session_id,
)

MODEL = botocore.session.get_session().get_service_model("bedrock-agentcore")
INVOKE = MODEL.operation_model("InvokeAgentRuntime").input_shape
CREATE_EVENT = MODEL.operation_model("CreateEvent").input_shape
RUNTIME_ID = INVOKE.members["runtimeSessionId"]
MEMORY_ID = CREATE_EVENT.members["sessionId"]
ARN = "arn:aws:bedrock-agentcore:us-east-1:123456789012:runtime/voicestack-abc123"


def valid(shape: Any, params: dict[str, Any]) -> bool:
    return not ParamValidator().validate(params, shape).has_errors()


def runtime_accepts(session_id: str) -> bool:
    meta = RUNTIME_ID.metadata
    assert "pattern" not in meta
    return valid(INVOKE, {"agentRuntimeArn": ARN, "payload": b"{}", "runtimeSessionId": session_id}) and (
        len(session_id) <= meta["max"]
    )


def memory_accepts(session_id: str) -> bool:
    meta = MEMORY_ID.metadata
    params = {
        "memoryId": "voicestack_memory-AbC123",
        "actorId": ACTOR_ID,
        "sessionId": session_id,
        "eventTimestamp": datetime(2026, 12, 1, tzinfo=UTC),
        "payload": [{"conversational": {"content": {"text": "Hi"}, "role": "USER"}}],
    }
    return (
        valid(CREATE_EVENT, params)
        and len(session_id) <= meta["max"]
        and re.fullmatch(meta["pattern"], session_id) is not None
    )


def agent_accepts(session_id: str) -> bool:
    try:
        return check_session_id(session_id) == session_id
    except BadSessionId:
        return False


def test_the_limits_are_botocores() -> None:
    assert RUNTIME_SESSION_ID_CHARS == (RUNTIME_ID.metadata["min"], RUNTIME_ID.metadata["max"]) == (33, 256)
    assert MEMORY_SESSION_ID_CHARS == (MEMORY_ID.metadata["min"], MEMORY_ID.metadata["max"]) == (1, 100)
    assert MEMORY_ID.metadata["pattern"] == MEMORY_SESSION_ID_PATTERN
    assert SESSION_ID_CHARS == (33, 100)
    # And the oracle itself knows a good call from a bad one.
    assert memory_accepts("a")
    assert not runtime_accepts("a")
    assert runtime_accepts("a." * 100)
    assert not memory_accepts("a." * 100)


def test_the_actor_id_is_one_memory_accepts() -> None:
    actor = CREATE_EVENT.members["actorId"].metadata
    assert re.fullmatch(actor["pattern"], ACTOR_ID)
    assert actor["min"] <= len(ACTOR_ID) <= actor["max"]


def test_a_uuid4_works_everywhere() -> None:
    session_id = str(uuid.uuid4())
    assert agent_accepts(session_id)
    assert runtime_accepts(session_id)
    assert memory_accepts(session_id)


ALPHABET = "aZ09-_./ é\n"
LENGTHS = [0, 1, 32, 33, 34, 99, 100, 101, 255, 256, 257]


@given(
    st.one_of(
        st.text(alphabet=ALPHABET, max_size=300),
        st.sampled_from(LENGTHS).flatmap(lambda n: st.text(alphabet="aZ09-_", min_size=n, max_size=n)),
    )
)
def test_the_agent_takes_exactly_what_both_runtime_and_memory_take(session_id: str) -> None:
    if not session_id.strip():
        assert check_session_id(session_id) is None  # a one-turn call: no conversation
        return
    assert agent_accepts(session_id) == (runtime_accepts(session_id) and memory_accepts(session_id)), session_id


@pytest.mark.parametrize(("session_id", "runtime", "memory"), [("a" * 32, False, True), ("a" * 101, True, False)])
def test_ids_one_store_would_take_are_refused(session_id: str, runtime: bool, memory: bool) -> None:
    assert (runtime_accepts(session_id), memory_accepts(session_id)) == (runtime, memory)
    with pytest.raises(BadSessionId, match=f"got {len(session_id)} characters"):
        check_session_id(session_id)
