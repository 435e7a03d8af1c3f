"""Which runtime a data-plane call reaches and with what, the stand-in's configuration, and the
WebSocket frame limits (pure, no sockets)."""

from __future__ import annotations

import json
import re

import pytest

from agent_app.frames import AGENTCORE_FRAME_LIMIT_BYTES, AGENTCORE_FRAMES_PER_S
from local.standin.agentcore_frames import FrameGuard, Violation, frame_size, idle_violation
from local.standin.agentcore_routing import (
    AgentCoreConfig,
    Route,
    Target,
    forwarded_headers,
    parse_route,
    parse_runtime_specs,
    query_params,
    resolve_target,
    runtime_arn,
)
from local.standin.events import ErrorResponse
from voicestack.agentcore import (
    check_session_id,
    invocation_url,
    parse_runtime_arn,
    runtime_path,
    websocket_url,
)

ARN = "arn:aws:bedrock-agentcore:us-east-1:000000000000:runtime/voicestack_local-localstand"
AGENT = "http://127.0.0.1:8080"
CONFIG = AgentCoreConfig(
    runtimes={ARN: AGENT},
    qualifiers=("DEFAULT", "canary"),
    header_allowlist=("X-Amzn-Bedrock-AgentCore-Runtime-Custom-Trace", "X-Tenant"),
)
SESSION = "0f6e9c2a-8c1d-4f57-9d1b-5a3e8b7c6d2f"


def refusal(result: object) -> tuple[int, str, str]:
    assert isinstance(result, ErrorResponse), result
    return result.status, result.error_type, result.message


def test_urls_encode_the_arn_as_boto3_does() -> None:
    encoded = "arn%3Aaws%3Abedrock-agentcore%3Aus-east-1%3A000000000000%3Aruntime%2Fvoicestack_local-localstand"
    assert runtime_path(ARN, "ws") == f"/runtimes/{encoded}/ws"
    assert invocation_url("https://bedrock-agentcore.us-east-1.amazonaws.com", ARN) == (
        f"https://bedrock-agentcore.us-east-1.amazonaws.com/runtimes/{encoded}/invocations"
    )
    assert (
        invocation_url("https://h:1", ARN, "canary") == f"https://h:1/runtimes/{encoded}/invocations?qualifier=canary"
    )
    assert websocket_url("https://h:1", ARN, "DEFAULT", SESSION) == (
        f"wss://h:1/runtimes/{encoded}/ws?qualifier=DEFAULT&X-Amzn-Bedrock-AgentCore-Runtime-Session-Id={SESSION}"
    )
    assert websocket_url("http://127.0.0.1:8080", ARN) == f"ws://127.0.0.1:8080/runtimes/{encoded}/ws"
    with pytest.raises(ValueError, match=r"^endpoint 'ftp://h' must be an https:// URL$"):
        websocket_url("ftp://h", ARN)


def test_runtime_arns_follow_the_control_planes_pattern() -> None:
    parsed = parse_runtime_arn(ARN)
    assert (parsed.partition, parsed.region, parsed.account, parsed.runtime_id) == (
        "aws",
        "us-east-1",
        "000000000000",
        "voicestack_local-localstand",
    )
    for bad in ["arn:aws:bedrock-agentcore:us-east-1:000000000000:runtime/x", "arn:aws:s3:::bucket", ARN + "\n", ""]:
        with pytest.raises(ValueError, match=r"is not an AgentCore runtime ARN \(botocore's pattern: arn:aws"):
            parse_runtime_arn(bad)


def test_session_ids_as_invoke_agent_runtimes_model_allows() -> None:
    assert check_session_id("a" * 33) == "a" * 33
    assert check_session_id("a" * 256) == "a" * 256
    with pytest.raises(ValueError, match=r"^a runtime session id has 33 to 256 characters; got 32$"):
        check_session_id("a" * 32)
    with pytest.raises(ValueError, match=r"^a runtime session id has 33 to 256 characters; got 257$"):
        check_session_id("a" * 257)
    with pytest.raises(ValueError, match="visible ASCII"):
        check_session_id("a" * 33 + "\r\nX: 1")
    with pytest.raises(ValueError, match="visible ASCII"):
        check_session_id("é" * 40)


def test_routes_by_raw_path() -> None:
    assert parse_route("POST", runtime_path(ARN, "invocations")) == Route("invocations", ARN)
    assert parse_route("GET", runtime_path(ARN, "ws")) == Route("ws", ARN)
    assert parse_route("POST", "/runtimes/voicestack_local-localstand/invocations") == Route(
        "invocations", "voicestack_local-localstand"
    )
    assert refusal(parse_route("GET", runtime_path(ARN, "invocations"))) == (
        405,
        "UnknownOperationException",
        "invocations takes POST, not GET",
    )
    assert refusal(parse_route("POST", "/runtimes/a/b/invocations"))[:2] == (404, "UnknownOperationException")
    assert refusal(parse_route("POST", "/invocations"))[:2] == (404, "UnknownOperationException")


def test_an_agent_id_needs_an_account_id() -> None:
    route = Route("invocations", "voicestack_local-localstand")
    assert runtime_arn(route, {"accountId": "000000000000"}, "us-east-1") == ARN
    assert refusal(runtime_arn(route, {}, "us-east-1"))[:2] == (400, "ValidationException")
    assert refusal(runtime_arn(route, {"accountId": "12"}, "us-east-1")) == (
        400,
        "ValidationException",
        "1 validation error detected: Value at 'accountId' failed to satisfy constraint: "
        "Member must satisfy regular expression pattern: [0-9]{12}",
    )


def test_target_session_from_header_or_query_or_new() -> None:
    headers = {"x-amzn-bedrock-agentcore-runtime-session-id": SESSION}
    assert resolve_target(ARN, "invocations", {}, headers, CONFIG) == Target(ARN, "DEFAULT", AGENT, SESSION, False)
    query = {"X-Amzn-Bedrock-AgentCore-Runtime-Session-Id": SESSION, "qualifier": "canary"}
    assert resolve_target(ARN, "ws", query, {}, CONFIG) == Target(ARN, "canary", AGENT, SESSION, False)
    # Only the WebSocket route reads the session from the query.
    fresh = resolve_target(ARN, "invocations", query, {}, CONFIG)
    assert isinstance(fresh, Target)
    assert fresh.new_session
    assert re.fullmatch(r"[0-9a-f-]{36}", fresh.session_id)


def test_target_refusals() -> None:
    assert refusal(resolve_target(ARN.replace("localstand", "elsewhere0"), "ws", {}, {}, CONFIG)) == (
        404,
        "ResourceNotFoundException",
        f"No endpoint or agent found with qualifier 'DEFAULT' for agent '{ARN.replace('localstand', 'elsewhere0')}'",
    )
    assert refusal(resolve_target(ARN, "ws", {"qualifier": "prod"}, {}, CONFIG))[:2] == (
        404,
        "ResourceNotFoundException",
    )
    short = {"x-amzn-bedrock-agentcore-runtime-session-id": "too-short"}
    result = resolve_target(ARN, "invocations", {}, short, CONFIG)
    assert refusal(result) == (
        400,
        "ValidationException",
        "1 validation error detected: Value at 'runtimeSessionId' failed to satisfy constraint: "
        "Member must have length greater than or equal to 33",
    )
    assert isinstance(result, ErrorResponse)
    assert result.body["reason"] == "FieldValidationFailed"
    assert json.loads(result.encode_body())["fieldList"] == [
        {"name": "runtimeSessionId", "message": "Member must have length greater than or equal to 33"}
    ]
    long = {"x-amzn-bedrock-agentcore-runtime-session-id": "a" * 257}
    assert "less than or equal to 256" in refusal(resolve_target(ARN, "invocations", {}, long, CONFIG))[2]


def test_the_container_gets_only_the_session_request_id_and_allowlisted_headers() -> None:
    target = Target(ARN, "DEFAULT", AGENT, SESSION, False)
    sent = {
        "authorization": "AWS4-HMAC-SHA256 ...",
        "x-amz-date": "20261202T000000Z",
        "x-amz-security-token": "token",
        "cookie": "a=b",
        "content-type": "application/json",
        "accept": "text/event-stream",
        "x-tenant": "acme",
        "x-other": "dropped",
        "x-amzn-bedrock-agentcore-runtime-custom-trace": "t1",
        "x-amzn-bedrock-agentcore-runtime-custom-unlisted": "dropped",
    }
    assert forwarded_headers(sent, {}, CONFIG, target, "rid", operation="invocations") == {
        "X-Amzn-Bedrock-AgentCore-Runtime-Session-Id": SESSION,
        "X-Amzn-Bedrock-AgentCore-Runtime-Request-Id": "rid",
        "Content-Type": "application/json",
        "Accept": "text/event-stream",
        "X-Tenant": "acme",
        "X-Amzn-Bedrock-AgentCore-Runtime-Custom-Trace": "t1",
    }
    # Over the WebSocket a custom header may travel as a query parameter (a browser cannot set headers).
    params = query_params("X-Amzn-Bedrock-AgentCore-Runtime-Custom-Trace=t2&X-Tenant=not-a-header&X-Amz-Signature=s")
    assert forwarded_headers({}, params, CONFIG, target, "rid", operation="ws") == {
        "X-Amzn-Bedrock-AgentCore-Runtime-Session-Id": SESSION,
        "X-Amzn-Bedrock-AgentCore-Runtime-Request-Id": "rid",
        "X-Amzn-Bedrock-AgentCore-Runtime-Custom-Trace": "t2",
    }


def test_config_refuses_what_agentcore_would_not_configure() -> None:
    with pytest.raises(ValueError, match=r"^runtimes: at least one ARN=URL mapping is required$"):
        AgentCoreConfig(runtimes={})
    with pytest.raises(ValueError, match=r"its region us-east-1 is not the stand-in's \(eu-west-1\)$"):
        AgentCoreConfig(runtimes={ARN: AGENT}, region="eu-west-1")
    with pytest.raises(ValueError, match=r"agent URL 'ws://x' must be http://host:port \(no path\)$"):
        AgentCoreConfig(runtimes={ARN: "ws://x"})
    with pytest.raises(ValueError, match=r"^qualifier '1bad' must match "):
        AgentCoreConfig(runtimes={ARN: AGENT}, qualifiers=("1bad",))
    for header in ("Content-Type", "X-Amz-Date", "X-Amzn-Trace-Id", "Bad Header"):
        with pytest.raises(
            ValueError, match=rf"^header_allowlist: '{header}' cannot be allowlisted on AgentCore Runtime$"
        ):
            AgentCoreConfig(runtimes={ARN: AGENT}, header_allowlist=(header,))
    with pytest.raises(ValueError, match=r"^idle_timeout_s must be > 0, got 0$"):
        AgentCoreConfig(runtimes={ARN: AGENT}, idle_timeout_s=0)
    assert parse_runtime_specs([f"{ARN}={AGENT}/"]) == {ARN: AGENT}
    with pytest.raises(ValueError, match=r"expected ARN=http://host:port$"):
        parse_runtime_specs([ARN])
    with pytest.raises(ValueError, match=r"is given twice$"):
        parse_runtime_specs([f"{ARN}={AGENT}", f"{ARN}={AGENT}"])


def test_frames_over_32_kb_close_with_1009() -> None:
    guard = FrameGuard(AGENTCORE_FRAME_LIMIT_BYTES, AGENTCORE_FRAMES_PER_S)
    assert guard.admit(32_000, now=0.0) is None
    assert guard.admit(32_001, now=0.0) == Violation(1009, "frame of 32001 bytes exceeds the 32000-byte limit")
    assert frame_size("é" * 10) == 20
    assert frame_size(b"\0" * 7) == 7


def test_more_than_the_rate_within_one_second_closes_with_1008() -> None:
    guard = FrameGuard(AGENTCORE_FRAME_LIMIT_BYTES, 3)
    assert [guard.admit(10, now=t) for t in (0.0, 0.1, 0.2)] == [None, None, None]
    assert guard.admit(10, now=0.9) == Violation(1008, "more than 3 frames in one second")
    # The window slides: the frame at 0.0 is more than a second old at 1.0.
    assert guard.admit(10, now=1.0) is None
    assert guard.admit(10, now=1.05) == Violation(1008, "more than 3 frames in one second")


def test_idle_is_going_away() -> None:
    assert idle_violation(900.0) == Violation(1001, "session idle for 900 s")
