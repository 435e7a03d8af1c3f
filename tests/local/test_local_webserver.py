"""The page's web server: static files, the streaming proxy to the agent, the health check."""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from local.guard import host_problem
from local.webserver import WebServerConfig, parse_args
from tests.local.local_fakes import OTHER_SITES, WebStacks, paced_script, serve


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


def test_serves_the_page_and_its_modules(web_stacks: WebStacks) -> None:
    stack = web_stacks.start(paced_script(lambda _: []))
    with httpx.Client(base_url=stack.url) as client:
        index = client.get("/")
        module = client.get("/sse.js")
        worklet = client.get("/player-worklet.js")
        missing = client.get("/nope.js")
    assert index.status_code == 200
    assert index.headers["content-type"] == "text/html; charset=utf-8"
    assert index.headers["cache-control"] == "no-cache"
    assert '<script type="module" src="app.js"></script>' in index.text
    # Module scripts and worklets load only with a JavaScript MIME type.
    assert (module.status_code, module.headers["content-type"]) == (200, "text/javascript; charset=utf-8")
    assert (worklet.status_code, worklet.headers["content-type"]) == (200, "text/javascript; charset=utf-8")
    assert missing.status_code == 404


def test_invoke_streams_each_piece_before_the_agent_writes_the_next(web_stacks: WebStacks) -> None:
    first = b'data: {"type": "agent_start", "mode": "stream", "model": "demo", "demo": true}\n\n'
    rest = b'data: {"type": "text_delta", "text": "Hi."}\n\ndata: {"type": "agent_end"}\n\n'
    release = threading.Event()

    async def held(_: dict[str, Any]) -> AsyncIterator[bytes]:
        yield first
        await asyncio.to_thread(release.wait, 20)
        yield rest

    stack = web_stacks.start(held)
    body = {"prompt": "hello", "mode": "batch"}
    headers = {"X-Amzn-Bedrock-AgentCore-Runtime-Session-Id": "s" * 33}
    with (
        httpx.Client(base_url=stack.url, timeout=10) as client,
        client.stream("POST", "/api/invoke", json=body, headers=headers) as response,
    ):
        assert response.status_code == 200
        assert response.headers["content-type"] == "text/event-stream; charset=utf-8"
        assert response.headers["cache-control"] == "no-cache, no-transform"
        pieces = response.iter_raw()
        # The agent is still holding the rest: this piece can only have come through unbuffered.
        assert next(pieces) == first
        release.set()
        assert b"".join(pieces) == rest
    assert stack.agent.requests == [body]
    assert stack.agent.session_ids == ["s" * 33]


def test_invoke_passes_agent_errors_through(web_stacks: WebStacks) -> None:
    async def invocations(_: Request) -> JSONResponse:
        return JSONResponse({"error": "prompt is required"}, status_code=400)

    agent_url = web_stacks.enter(serve(Starlette(routes=[Route("/invocations", invocations, methods=["POST"])])))
    web_url = web_stacks.start_web(agent_url)
    with httpx.Client(base_url=web_url) as client:
        response = client.post("/api/invoke", json={"mode": "stream"})
    assert (response.status_code, response.json()) == (400, {"error": "prompt is required"})


def test_invoke_refuses_an_empty_body(web_stacks: WebStacks) -> None:
    stack = web_stacks.start(paced_script(lambda _: []))
    with httpx.Client(base_url=stack.url) as client:
        response = client.post("/api/invoke")
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "empty_body"
    assert stack.agent.requests == []


def test_invoke_and_health_report_an_unreachable_agent(web_stacks: WebStacks) -> None:
    port = closed_port()
    web_url = web_stacks.start_web(f"http://127.0.0.1:{port}")
    with httpx.Client(base_url=web_url) as client:
        invoke = client.post("/api/invoke", json={"prompt": "hi"})
        health = client.get("/api/health")
    for response in (invoke, health):
        assert response.status_code == 502
        error = response.json()["error"]
        assert error["code"] == "agent_unreachable"
        assert error["message"].startswith(f"no answer from http://127.0.0.1:{port}: ")


def test_health_reports_the_agent_ping(web_stacks: WebStacks) -> None:
    stack = web_stacks.start(paced_script(lambda _: []))
    with httpx.Client(base_url=stack.url) as client:
        healthy = client.get("/api/health")
        stack.agent.healthy = False
        unhealthy = client.get("/api/health")
    agent_url = stack.agent_url
    assert (healthy.status_code, healthy.json()) == (
        200,
        {"status": "ok", "agent_url": agent_url, "agent": {"status": "Healthy"}},
    )
    assert (unhealthy.status_code, unhealthy.json()) == (
        503,
        {"error": {"code": "agent_unhealthy", "message": f"{agent_url}/ping answered 503"}},
    )


def test_parse_args_defaults_and_flags() -> None:
    assert parse_args([]) == WebServerConfig()
    config = parse_args(["--port", "9001", "--agent-url", "http://127.0.0.1:9002/", "--read-timeout", "30"])
    assert (config.port, config.agent_url, config.read_timeout_s, config.host) == (
        9001,
        "http://127.0.0.1:9002/",
        30.0,
        "127.0.0.1",
    )


def test_parse_args_rejects_a_read_timeout_that_is_not_positive(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        parse_args(["--read-timeout", "0"])
    assert exit_info.value.code == 2
    assert "--read-timeout must be > 0 seconds, got 0.0" in capsys.readouterr().err


# --- only its own page may drive the agent ---------------------------------------------------------


def test_invoke_accepts_its_own_page_origin(web_stacks: WebStacks) -> None:
    stack = web_stacks.start(paced_script(lambda _: [b'data: {"type": "agent_end"}\n\n']))
    headers = {"Origin": stack.url, "Sec-Fetch-Site": "same-origin"}
    with httpx.Client(base_url=stack.url) as client:
        response = client.post("/api/invoke", json={"prompt": "hi"}, headers=headers)
    assert (response.status_code, response.text) == (200, 'data: {"type": "agent_end"}\n\n')
    assert stack.agent.requests == [{"prompt": "hi"}]


@pytest.mark.parametrize(
    ("headers", "message"),
    [
        *OTHER_SITES,
        (
            {"Origin": "http://localhost:1"},
            "Origin 'http://localhost:1' is not this page's (http://{host}); only this server's page may call it",
        ),
    ],
)
def test_invoke_refuses_another_site(web_stacks: WebStacks, headers: dict[str, str], message: str) -> None:
    stack = web_stacks.start(paced_script(lambda _: []))
    host = stack.url.removeprefix("http://")
    with httpx.Client(base_url=stack.url) as client:
        response = client.post("/api/invoke", json={"prompt": "hi"}, headers=headers)
    assert (response.status_code, response.json()) == (
        403,
        {"error": {"code": "cross_origin", "message": message.format(host=host)}},
    )
    assert stack.agent.requests == []


@pytest.mark.parametrize("path", ["/api/invoke", "/api/health", "/"])
def test_a_dns_rebinding_host_is_refused_everywhere(web_stacks: WebStacks, path: str) -> None:
    stack = web_stacks.start(paced_script(lambda _: []))
    port = stack.url.rsplit(":", 1)[1]
    headers = {"Host": f"rebind.example:{port}", "Origin": f"http://rebind.example:{port}"}
    with httpx.Client(base_url=stack.url) as client:
        if path == "/api/invoke":
            response = client.post(path, json={"prompt": "hi"}, headers=headers)
        else:
            response = client.get(path, headers=headers)
    assert (response.status_code, response.json()) == (
        421,
        {
            "error": {
                "code": "wrong_host",
                "message": f"Host 'rebind.example:{port}' is not this server; open the page at http://127.0.0.1:{port}/",
            }
        },
    )
    assert stack.agent.requests == []


def test_localhost_is_the_same_server(web_stacks: WebStacks) -> None:
    stack = web_stacks.start(paced_script(lambda _: []))
    port = stack.url.rsplit(":", 1)[1]
    with httpx.Client(base_url=stack.url) as client:
        response = client.get("/", headers={"Host": f"localhost:{port}"})
        wrong_port = client.get("/", headers={"Host": "localhost:1"})
    assert response.status_code == 200
    assert wrong_port.status_code == 421


def test_invoke_refuses_a_body_over_the_limit(web_stacks: WebStacks) -> None:
    stack = web_stacks.start(paced_script(lambda _: []))
    limit = WebServerConfig().max_body_bytes
    big = b'{"prompt": "' + b"a" * limit + b'"}'

    def chunks() -> Iterator[bytes]:  # no Content-Length: the server must count
        yield big[: limit // 2]
        yield big[limit // 2 :]

    with httpx.Client(base_url=stack.url) as client:
        declared = client.post("/api/invoke", content=big, headers={"content-type": "application/json"})
        streamed = client.post("/api/invoke", content=chunks(), headers={"content-type": "application/json"})
    assert (declared.status_code, declared.json()["error"]) == (
        413,
        {"code": "body_too_large", "message": f"the body has {len(big)} bytes; the limit is {limit}"},
    )
    assert (streamed.status_code, streamed.json()["error"]) == (
        413,
        {"code": "body_too_large", "message": f"the body has over {limit} bytes; the limit is {limit}"},
    )
    assert stack.agent.requests == []


def test_invoke_refuses_a_body_that_is_not_json(web_stacks: WebStacks) -> None:
    stack = web_stacks.start(paced_script(lambda _: []))
    with httpx.Client(base_url=stack.url) as client:
        response = client.post("/api/invoke", content=b"prompt=hi", headers={"content-type": "text/plain"})
    assert (response.status_code, response.json()["error"]) == (
        415,
        {"code": "not_json", "message": "the body must be application/json, got text/plain"},
    )
    assert stack.agent.requests == []


@pytest.mark.parametrize(
    ("host", "server", "expected"),
    [
        ("127.0.0.1:8000", ("127.0.0.1", 8000), None),
        ("LOCALHOST:8000", ("127.0.0.1", 8000), None),
        ("[::1]:8000", ("::1", 8000), None),
        ("192.168.1.5:8000", ("192.168.1.5", 8000), None),
        (
            "192.168.1.5:8000",
            ("0.0.0.0", 8000),
            "Host '192.168.1.5:8000' is not this server; open the page at http://127.0.0.1:8000/",
        ),
        (
            "127.0.0.1",
            ("127.0.0.1", 8000),
            "Host '127.0.0.1' is not this server; open the page at http://127.0.0.1:8000/",
        ),
        (None, ("127.0.0.1", 8000), "the request has no Host header"),
        ("127.0.0.1:8000", None, "the server address is unknown"),
    ],
)
def test_host_problem(host: str | None, server: tuple[str, int] | None, expected: str | None) -> None:
    assert host_problem(host, server) == expected


def test_parse_args_body_limit_from_flag_and_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    assert parse_args(["--max-body-bytes", "100"]).max_body_bytes == 100
    monkeypatch.setenv("VOICESTACK_WEB_MAX_BODY_BYTES", "2048")
    assert parse_args([]).max_body_bytes == 2048


def test_parse_args_rejects_a_body_limit_below_one(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        parse_args(["--max-body-bytes", "0"])
    assert "--max-body-bytes must be at least 1, got 0" in capsys.readouterr().err
