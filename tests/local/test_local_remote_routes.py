"""The web server in remote mode, over real sockets, in front of the AgentCore stand-in (which
verifies every SigV4 signature with botocore's signer): the health answer, presigned WebSocket URLs
bound to one runtime and session, signed SSE invocations, every refusal with its exact status and
JSON body; and the launcher's flags and target resolution."""

from __future__ import annotations

import asyncio
import json
import socket
import ssl
import time
from typing import Any
from urllib.parse import parse_qs, quote, urlencode, urlsplit, urlunsplit

import httpx
import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import InvalidStatus

from local.remote import page_view, session_problem
from local.remote_routes import CREDENTIALS_HINT
from local.standin.agentcore_auth import DENIED, EXPIRED
from local.standin.agentcore_routing import AgentCoreConfig
from local.webserver import RemoteChoice, WebServerConfig, main, parse_args
from tests.local.local_fakes import (
    ONE_EVENT,
    OTHER_SITES,
    REGION,
    RUNTIME_ARN,
    TEMPORARY,
    RemoteStack,
    RemoteStacks,
    fake_stack,
    use_sdk_environment,
)
from voicestack.agentcore import SESSION_HEADER
from voicestack.runtime_target import resolve_runtime

SESSION = "page-remote-session-0123456789abcdef01"
OTHER_ARN = "arn:aws:bedrock-agentcore:us-east-1:000000000000:runtime/voicestack_other-abcdefghij"
MEMORY_RULE = "33 to 100 characters matching [a-zA-Z0-9][a-zA-Z0-9-_]*"


def view(**changes: Any) -> dict[str, Any]:
    base = {
        "kind": "agentcore",
        "stack": None,
        "region": REGION,
        "runtime_arn": RUNTIME_ARN,
        "qualifier": None,
        "websocket_auth": "sigv4",
        "max_frame_bytes": 32_000,
    }
    return {**base, **changes}


def trust(stack: RemoteStack) -> ssl.SSLContext:
    return ssl.create_default_context(cafile=str(stack.standin.ca_path))


def presign(stack: RemoteStack, session: str = SESSION) -> dict[str, Any]:
    with httpx.Client(base_url=stack.url) as client:
        response = client.post("/api/ws-url", json={"session": session})
    assert response.status_code == 200, response.text
    assert response.headers["cache-control"] == "no-store"
    body: dict[str, Any] = response.json()
    return body


async def handshake_refusal(url: str, context: ssl.SSLContext) -> tuple[int, str]:
    with pytest.raises(InvalidStatus) as refused:
        async with connect(url, ssl=context, open_timeout=5):
            pass
    response = refused.value.response
    return response.status_code, response.headers.get("x-amzn-errortype", "")


def with_query(url: str, **changes: str) -> str:
    parts = urlsplit(url)
    query = {key: values[0] for key, values in parse_qs(parts.query).items()}
    return urlunsplit(parts._replace(query=urlencode({**query, **changes})))


# --- health ------------------------------------------------------------------------------------------


def test_health_names_the_target_once_credentials_resolve(remote_stacks: RemoteStacks) -> None:
    stack = remote_stacks.start()
    with httpx.Client(base_url=stack.url) as client:
        response = client.get("/api/health")
    assert (response.status_code, response.json()) == (200, {"status": "ok", "target": view()})


def test_health_names_the_stack_it_was_read_from(remote_stacks: RemoteStacks) -> None:
    stack = remote_stacks.start(stack="dev")
    with httpx.Client(base_url=stack.url) as client:
        response = client.get("/api/health")
    assert (response.status_code, response.json()) == (200, {"status": "ok", "target": view(stack="dev")})


def test_without_credentials_every_route_says_so(remote_stacks: RemoteStacks) -> None:
    stack = remote_stacks.start(principal=None)
    error = {"code": "credentials_unavailable", "message": f"Unable to locate credentials; {CREDENTIALS_HINT}"}
    with httpx.Client(base_url=stack.url) as client:
        health = client.get("/api/health")
        socket_url = client.post("/api/ws-url", json={"session": SESSION})
        invoke = client.post("/api/invoke", json={"prompt": "hi"})
    assert (health.status_code, health.json()) == (503, {"error": error, "target": view()})
    assert (socket_url.status_code, socket_url.json()) == (503, {"error": error})
    assert (invoke.status_code, invoke.json()) == (503, {"error": error})
    assert stack.agent.requests == []


def test_the_page_itself_is_served_as_in_local_mode(remote_stacks: RemoteStacks) -> None:
    stack = remote_stacks.start()
    with httpx.Client(base_url=stack.url) as client:
        index = client.get("/")
        module = client.get("/socket-target.js")
    assert (index.status_code, index.headers["cache-control"]) == (200, "no-cache")
    assert '<span id="target" class="muted">local</span>' in index.text
    assert (module.status_code, module.headers["content-type"]) == (200, "text/javascript; charset=utf-8")


# --- presigned WebSocket URLs -------------------------------------------------------------------------


def test_a_presigned_url_opens_that_session_of_that_runtime(remote_stacks: RemoteStacks) -> None:
    stack = remote_stacks.start()
    before = time.time()
    body = presign(stack)
    assert (body["expires_s"], body["session"]) == (300, SESSION)
    parts = urlsplit(body["url"])
    assert (parts.scheme, parts.netloc) == ("wss", urlsplit(stack.standin.url).netloc)
    assert parts.path == f"/runtimes/{quote(RUNTIME_ARN, safe='')}/ws"
    query = {key: values for key, values in parse_qs(parts.query).items()}
    assert sorted(query) == [
        "X-Amz-Algorithm",
        "X-Amz-Credential",
        "X-Amz-Date",
        "X-Amz-Expires",
        "X-Amz-Security-Token",
        "X-Amz-Signature",
        "X-Amz-SignedHeaders",
        SESSION_HEADER,
    ]
    assert query[SESSION_HEADER] == [SESSION]
    assert query["X-Amz-Expires"] == ["300"]
    assert query["X-Amz-Security-Token"] == [TEMPORARY.session_token]
    signed_at = time.mktime(time.strptime(query["X-Amz-Date"][0], "%Y%m%dT%H%M%SZ")) - time.timezone
    assert before - 1 <= signed_at <= time.time() + 1  # signed when asked, not earlier
    credential = query["X-Amz-Credential"][0].split("/")
    assert (credential[0], credential[2:]) == (TEMPORARY.access_key, [REGION, "bedrock-agentcore", "aws4_request"])

    async def talk() -> str:
        async with connect(body["url"], ssl=trust(stack), open_timeout=5) as ws:
            await ws.send("hello")
            return str(await ws.recv())

    assert asyncio.run(talk()) == "echo:hello"
    assert stack.agent.session_ids == [SESSION]


def test_a_presigned_url_is_good_for_no_other_session_or_runtime(remote_stacks: RemoteStacks) -> None:
    stack = remote_stacks.start()
    url = presign(stack)["url"]
    other_session = with_query(url, **{SESSION_HEADER: "another-session-0123456789abcdef012345"})
    parts = urlsplit(url)
    other_runtime = urlunsplit(parts._replace(path=f"/runtimes/{quote(OTHER_ARN, safe='')}/ws"))

    async def refusals() -> list[tuple[int, str]]:
        return [await handshake_refusal(u, trust(stack)) for u in (other_session, other_runtime)]

    assert asyncio.run(refusals()) == [(403, "InvalidSignatureException")] * 2
    assert stack.agent.session_ids == []


def test_an_open_connection_outlives_its_url_and_a_new_one_is_needed_after(remote_stacks: RemoteStacks) -> None:
    # X-Amz-Date counts whole seconds: a URL valid "2 s" lives 1 to 2 s, time enough to open it.
    stack = remote_stacks.start(presign_expires_s=2)
    url = presign(stack)["url"]

    async def scenario() -> tuple[str, tuple[int, str], str]:
        async with connect(url, ssl=trust(stack), open_timeout=5) as ws:
            await asyncio.sleep(2.5)  # the URL has expired; the connection was admitted before
            await ws.send("still here")
            echoed = str(await ws.recv())
        refused = await handshake_refusal(url, trust(stack))
        fresh = (await asyncio.to_thread(presign, stack))["url"]
        async with connect(fresh, ssl=trust(stack), open_timeout=5) as ws:
            await ws.send("again")
            return echoed, refused, str(await ws.recv())

    assert asyncio.run(scenario()) == ("echo:still here", (403, "InvalidSignatureException"), "echo:again")
    assert stack.agent.session_ids == [SESSION, SESSION]


JSON = "application/json"
NOT_AN_OBJECT = ("bad_session", 'the body must be {"session": "<session id>"}')
BAD_SESSION = ("bad_session", f"'session' must be {MEMORY_RULE}")


def asking_for(session: object) -> bytes:
    return json.dumps({"session": session}).encode()


@pytest.mark.parametrize(
    ("content", "content_type", "status", "error"),
    [
        (b"", JSON, 400, ("empty_body", 'POST a JSON body: {"session": "<session id>"}')),
        (b"session=x", "text/plain", 415, ("not_json", "the body must be application/json, got text/plain")),
        (
            b"{nope",
            JSON,
            400,
            (
                "invalid_json",
                "the body is not JSON: Expecting property name enclosed in double quotes: line 1 column 2 (char 1)",
            ),
        ),
        (b"[]", JSON, 400, NOT_AN_OBJECT),
        (asking_for(7), JSON, 400, NOT_AN_OBJECT),
        (asking_for(None), JSON, 400, NOT_AN_OBJECT),
        (asking_for("a" * 32), JSON, 400, BAD_SESSION),
        (asking_for("a" * 101), JSON, 400, BAD_SESSION),
        (asking_for("-" + "a" * 35), JSON, 400, BAD_SESSION),
        (asking_for("a" * 30 + "/../" + "a" * 10), JSON, 400, BAD_SESSION),
        (asking_for("a" * 2000), JSON, 413, ("body_too_large", "the body has 2015 bytes; the limit is 1024")),
    ],
)
def test_socket_url_refuses_what_it_cannot_sign_for(
    remote_stacks: RemoteStacks, content: bytes, content_type: str, status: int, error: tuple[str, str]
) -> None:
    stack = remote_stacks.start()
    with httpx.Client(base_url=stack.url) as client:
        response = client.post("/api/ws-url", content=content, headers={"content-type": content_type})
    code, message = error
    assert (response.status_code, response.json()) == (status, {"error": {"code": code, "message": message}})
    assert "url" not in response.text


@pytest.mark.parametrize(("headers", "message"), OTHER_SITES)
def test_socket_url_refuses_another_sites_page(
    remote_stacks: RemoteStacks, headers: dict[str, str], message: str
) -> None:
    stack = remote_stacks.start()
    host = stack.url.removeprefix("http://")
    with httpx.Client(base_url=stack.url) as client:
        response = client.post("/api/ws-url", json={"session": SESSION}, headers=headers)
        own = client.post("/api/ws-url", json={"session": SESSION}, headers={"Origin": stack.url})
    assert (response.status_code, response.json()) == (
        403,
        {"error": {"code": "cross_origin", "message": message.format(host=host)}},
    )
    assert own.status_code == 200


def test_socket_url_refuses_a_dns_rebinding_host_and_a_get(remote_stacks: RemoteStacks) -> None:
    stack = remote_stacks.start()
    port = stack.url.rsplit(":", 1)[1]
    with httpx.Client(base_url=stack.url) as client:
        rebound = client.post("/api/ws-url", json={"session": SESSION}, headers={"Host": f"rebind.example:{port}"})
        get = client.get("/api/ws-url")
    assert (rebound.status_code, rebound.json()["error"]["code"]) == (421, "wrong_host")
    # GET falls through to the static files, which have no such file.
    assert (get.status_code, get.json()) == (
        404,
        {"error": {"code": "not_found", "message": "Not Found: GET /api/ws-url"}},
    )


def test_remote_mode_has_no_relay_and_other_websockets_are_refused(remote_stacks: RemoteStacks) -> None:
    stack = remote_stacks.start()
    ws_base = "ws" + stack.url.removeprefix("http")

    async def refusals() -> list[int]:
        statuses = []
        for path in ("/api/ws", "/elsewhere"):
            with pytest.raises(InvalidStatus) as refused:
                async with connect(ws_base + path, open_timeout=5):
                    pass
            statuses.append(refused.value.response.status_code)
        return statuses

    assert asyncio.run(refusals()) == [403, 403]


# --- signed invocations (SSE) ---------------------------------------------------------------------------


def test_invoke_is_signed_and_streamed_in_the_pages_session(remote_stacks: RemoteStacks) -> None:
    stack = remote_stacks.start()
    with httpx.Client(base_url=stack.url) as client:
        response = client.post(
            "/api/invoke", json={"prompt": "hi", "mode": "stream"}, headers={SESSION_HEADER: SESSION}
        )
    assert (response.status_code, response.text) == (200, ONE_EVENT.decode())
    assert response.headers["content-type"] == "text/event-stream; charset=utf-8"
    assert response.headers["cache-control"] == "no-cache, no-transform"
    assert stack.agent.requests == [{"prompt": "hi", "mode": "stream"}]
    assert stack.agent.session_ids == [SESSION]


def test_invoke_refuses_a_session_it_would_not_sign_for(remote_stacks: RemoteStacks) -> None:
    stack = remote_stacks.start()
    with httpx.Client(base_url=stack.url) as client:
        response = client.post("/api/invoke", json={"prompt": "hi"}, headers={SESSION_HEADER: "short"})
    assert (response.status_code, response.json()) == (
        400,
        {"error": {"code": "bad_session", "message": f"'{SESSION_HEADER}' must be {MEMORY_RULE}"}},
    )
    assert stack.agent.requests == []


def test_invoke_checks_its_body_as_in_local_mode(remote_stacks: RemoteStacks) -> None:
    stack = remote_stacks.start()
    with httpx.Client(base_url=stack.url) as client:
        empty = client.post("/api/invoke")
        text = client.post("/api/invoke", content=b"hi", headers={"content-type": "text/plain"})
        foreign = client.post("/api/invoke", json={"prompt": "hi"}, headers={"Origin": "https://evil.example"})
    assert (empty.status_code, empty.json()["error"]) == (
        400,
        {"code": "empty_body", "message": 'POST a JSON invocation: {"prompt": ...}'},
    )
    assert (text.status_code, text.json()["error"]["code"]) == (415, "not_json")
    assert (foreign.status_code, foreign.json()["error"]["code"]) == (403, "cross_origin")
    assert stack.agent.requests == []


@pytest.mark.parametrize(
    ("principal", "code", "message"),
    [
        (
            DENIED,
            "AccessDeniedException",
            f"User: {DENIED.arn} is not authorized to perform: bedrock-agentcore:InvokeAgentRuntime on resource: "
            f"{RUNTIME_ARN} because no identity-based policy allows the bedrock-agentcore:InvokeAgentRuntime action",
        ),
        (EXPIRED, "ExpiredTokenException", "The security token included in the request is expired"),
    ],
)
def test_invoke_passes_agentcores_refusal_on_in_the_pages_shape(
    remote_stacks: RemoteStacks, principal: Any, code: str, message: str
) -> None:
    stack = remote_stacks.start(principal=principal)
    with httpx.Client(base_url=stack.url) as client:
        response = client.post("/api/invoke", json={"prompt": "hi"}, headers={SESSION_HEADER: SESSION})
    assert (response.status_code, response.json()) == (403, {"error": {"code": code, "message": message}})
    assert stack.agent.requests == []


def test_invoke_of_a_runtime_agentcore_does_not_know(remote_stacks: RemoteStacks) -> None:
    stack = remote_stacks.start(runtime_arn=OTHER_ARN)
    with httpx.Client(base_url=stack.url) as client:
        response = client.post("/api/invoke", json={"prompt": "hi"}, headers={SESSION_HEADER: SESSION})
    message = f"No endpoint or agent found with qualifier 'DEFAULT' for agent '{OTHER_ARN}'"
    assert (response.status_code, response.json()) == (
        404,
        {"error": {"code": "ResourceNotFoundException", "message": message}},
    )


def test_a_session_that_is_starting_is_retried_once(remote_stacks: RemoteStacks) -> None:
    stack = remote_stacks.start(conflicts_per_new_session=1)
    with httpx.Client(base_url=stack.url) as client:
        response = client.post("/api/invoke", json={"prompt": "hi"}, headers={SESSION_HEADER: SESSION})
    assert (response.status_code, response.text) == (200, ONE_EVENT.decode())
    assert stack.agent.requests == [{"prompt": "hi"}]


def test_a_session_still_starting_after_the_retry_is_reported(remote_stacks: RemoteStacks) -> None:
    stack = remote_stacks.start(conflicts_per_new_session=2)
    with httpx.Client(base_url=stack.url) as client:
        response = client.post("/api/invoke", json={"prompt": "hi"}, headers={SESSION_HEADER: SESSION})
    assert (response.status_code, response.json()) == (
        409,
        {
            "error": {
                "code": "RetryableConflictException",
                "message": f"Session {SESSION} is starting; retry the request.",
            }
        },
    )
    assert stack.agent.requests == []


def test_an_unreachable_runtime_endpoint_is_a_502(remote_stacks: RemoteStacks, monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        closed = f"https://127.0.0.1:{sock.getsockname()[1]}"
    stack = remote_stacks.start()
    monkeypatch.setenv("AWS_ENDPOINT_URL_BEDROCK_AGENTCORE", closed)
    target = resolve_runtime(stack=None, runtime_arn=RUNTIME_ARN)
    assert target.endpoint_url == closed
    with remote_stacks.web(target) as url, httpx.Client(base_url=url) as client:
        response = client.post("/api/invoke", json={"prompt": "hi"})
    error = response.json()["error"]
    assert (response.status_code, error["code"]) == (502, "runtime_unreachable")
    assert error["message"].startswith(f"no answer from {closed}: ")
    assert stack.agent.requests == []


# --- the launcher's flags and the target ---------------------------------------------------------------


def test_parse_args_remote_mode() -> None:
    assert parse_args(["--remote", "--stack", "dev"]).remote == RemoteChoice(stack="dev", presign_expires_s=300)
    flags = ["--runtime-arn", RUNTIME_ARN, "--region", REGION, "--profile", "p", "--qualifier", "q"]
    config = parse_args(["--remote", *flags, "--presign-expires", "60", "--port", "8001"])
    assert config == WebServerConfig(port=8001, remote=RemoteChoice(None, RUNTIME_ARN, REGION, "p", "q", 60))
    assert parse_args([]).remote is None


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--remote"], "--remote needs exactly one of --stack NAME or --runtime-arn ARN"),
        (["--remote", "--stack", "dev", "--runtime-arn", RUNTIME_ARN], "--remote needs exactly one of --stack NAME"),
        (["--stack", "dev"], "--stack: remote mode's flags; add --remote"),
        (["--region", "us-east-1", "--presign-expires", "5"], "--region, --presign-expires: remote mode's flags"),
        (["--remote", "--stack", "dev", "--agent-url", "http://x"], "--agent-url is local mode's; --remote speaks"),
        (["--remote", "--stack", "dev", "--presign-expires", "301"], "--presign-expires must be 1 to 300 seconds"),
        (["--remote", "--stack", "dev", "--presign-expires", "0"], "--presign-expires must be 1 to 300 seconds"),
    ],
)
def test_parse_args_refuses_a_confused_remote_mode(
    capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        parse_args(argv)
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err


def test_the_page_view_of_a_stack_target(monkeypatch: pytest.MonkeyPatch) -> None:
    use_sdk_environment(monkeypatch, None, TEMPORARY)  # AWS's real endpoint: resolved offline
    outputs = {"agentRuntimeArn": RUNTIME_ARN, "region": REGION, "memoryId": "m"}
    target = resolve_runtime(stack="dev", runtime_arn=None, read=fake_stack("dev", outputs))
    assert page_view(target) == view(stack="dev")


def test_main_exits_2_naming_the_flag(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    use_sdk_environment(monkeypatch, None, TEMPORARY)  # AWS's real endpoint: resolved offline
    assert main(["--remote", "--runtime-arn", "nope"]) == 2
    assert capsys.readouterr().err.startswith(
        "python -m local.webserver: --runtime-arn: 'nope' is not an AgentCore runtime ARN"
    )


@pytest.mark.parametrize(
    ("session", "problem"),
    [
        ("a" * 33, None),
        ("0" * 100, None),
        ("a1b2c3d4-e5f6-4789-8abc-def012345678", None),
        ("under_score-and-dash-0123456789abcdef", None),
        ("a" * 32, MEMORY_RULE),
        ("a" * 101, MEMORY_RULE),
        ("_" + "a" * 40, MEMORY_RULE),
        ("a" * 40 + "\n", MEMORY_RULE),
        ("a" * 40 + "é", MEMORY_RULE),
        ("a" * 40 + "/", MEMORY_RULE),
    ],
)
def test_session_problem(session: str, problem: str | None) -> None:
    assert session_problem(session, name="s") == (None if problem is None else f"'s' must be {problem}")


def test_the_page_is_told_agentcores_frame_limit_the_stand_in_enforces(monkeypatch: pytest.MonkeyPatch) -> None:
    use_sdk_environment(monkeypatch, None, TEMPORARY)  # AWS's real endpoint: resolved offline
    enforced = AgentCoreConfig(runtimes={RUNTIME_ARN: "http://127.0.0.1:9"}, region=REGION).max_frame_bytes
    assert page_view(resolve_runtime(stack=None, runtime_arn=RUNTIME_ARN))["max_frame_bytes"] == enforced == 32_000
