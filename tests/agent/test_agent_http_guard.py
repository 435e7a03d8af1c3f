"""POST /invocations against hostile callers: each gets its exact 4xx and JSON body, one warning in
the log and no traceback, and the agent goes on answering."""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from agent_app.app import AppDependencies, create_app
from agent_app.http_guard import Refused, check_content_type, check_declared_length, parse_body
from agent_app.invocation import MAX_REQUEST_BYTES
from agent_app.memory import SESSION_HEADER
from agent_app.models import ScriptedModel, ScriptedTurn, user_questions
from tests.agent.agent_support import LogRecords, log_records, scripted, types
from tests.agent.test_agent_app import fixed_model, sse_events, websocket_config

SESSION = "a1b2c3d4-0000-4000-8000-00000000000a"
JSON = {"content-type": "application/json"}


def error(code: str, message: str) -> dict[str, str]:
    return {"type": "error", "code": code, "message": message}


def refusal(call: Any, *args: Any) -> tuple[int, dict[str, str]]:
    with pytest.raises(Refused) as caught:
        call(*args)
    event = caught.value.event
    return caught.value.status_code, {"type": event["type"], "code": event["code"], "message": event["message"]}


@pytest.mark.parametrize("value", [None, "", "application/json", "Application/JSON", "application/json; charset=UTF-8"])
def test_json_or_no_content_type_is_taken(value: str | None) -> None:
    check_content_type(value)


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("text/plain", "the body must be application/json (send that Content-Type), got 'text/plain'"),
        ("application/x-www-form-urlencoded", "the body must be application/json (send that Content-Type), got"),
        ("application/json; charset=latin-1", "the body must be UTF-8, got charset 'latin-1'"),
        ('application/json; charset="utf-16"', "the body must be UTF-8, got charset '\"utf-16\"'"),
    ],
)
def test_another_content_type_is_a_415(value: str, message: str) -> None:
    status, event = refusal(check_content_type, value)
    assert (status, event["code"]) == (415, "not_json")
    assert event["message"].startswith(message)


def test_a_declared_length_over_the_limit_is_a_413_before_reading() -> None:
    check_declared_length(str(MAX_REQUEST_BYTES))
    assert refusal(check_declared_length, str(MAX_REQUEST_BYTES + 1)) == (
        413,
        error("body_too_large", "the body has 65537 bytes; the limit is 65536 bytes"),
    )


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b'{"prompt": "caf\xe9"}', "the body is not valid UTF-8: invalid continuation byte at byte 15"),
        (b"[" * 5_000 + b"]" * 5_000, "the body is not valid JSON: nested too deeply"),
        (b'["Hi"]', "the body must be a JSON object, got list"),
        (b"", "the body is not valid JSON: Expecting value: line 1 column 1 (char 0)"),
    ],
)
def test_a_body_that_is_not_a_json_object_is_a_400(body: bytes, message: str) -> None:
    assert refusal(parse_body, body) == (400, error("bad_request", message))


def test_a_byte_order_mark_is_ignored() -> None:
    assert parse_body(b"\xef\xbb\xbf" + b'{"prompt": "Hi"}') == {"prompt": "Hi"}


# --- over HTTP --------------------------------------------------------------------------------------


@pytest.fixture
def records() -> Iterator[LogRecords]:
    with log_records() as handler:
        yield handler


async def chunked(body: bytes) -> AsyncIterator[bytes]:
    for start in range(0, len(body), 8_192):
        yield body[start : start + 8_192]


@dataclass(frozen=True)
class Hostile:
    name: str
    body: Any
    headers: dict[str, str]
    status: int
    expected: dict[str, str]


HOSTILE = [
    Hostile(*case)
    for case in [
        (
            "nested 5,000 deep",
            b"[" * 5_000 + b"]" * 5_000,
            {},
            400,
            error("bad_request", "the body is not valid JSON: nested too deeply"),
        ),
        (
            "an object nested 5,000 deep",
            b'{"a":' * 5_000 + b"1" + b"}" * 5_000,
            JSON,
            400,
            error("bad_request", "the body is not valid JSON: nested too deeply"),
        ),
        ("a JSON array", b'["Hi"]', JSON, 400, error("bad_request", "the body must be a JSON object, got list")),
        ("a JSON string", b'"Hi"', JSON, 400, error("bad_request", "the body must be a JSON object, got str")),
        ("null", b"null", JSON, 400, error("bad_request", "the body must be a JSON object, got NoneType")),
        (
            "invalid UTF-8",
            b'{"prompt": "\xff\xfe"}',
            JSON,
            400,
            error("bad_request", "the body is not valid UTF-8: invalid start byte at byte 12"),
        ),
        (
            "a lone surrogate in the prompt",
            b'{"prompt": "Hi \\ud800 there"}',
            JSON,
            400,
            error(
                "bad_request",
                "'prompt' contains a lone UTF-16 surrogate (U+D800) at character 3; it has no UTF-8 form",
            ),
        ),
        (
            "a lone surrogate as a field name",
            b'{"prompt": "Hi", "\\udfff": 1}',
            JSON,
            400,
            error("bad_request", "unknown field(s) '\\udfff'; allowed: prompt, mode, voice, speed"),
        ),
        (
            "an integer of 5,000 digits",
            b'{"prompt": "Hi", "speed": ' + b"9" * 5_000 + b"}",
            JSON,
            400,
            error("bad_request", "the body is not valid JSON: an integer of 5,000 digits"),
        ),
        (
            "NaN",
            b'{"prompt": "Hi", "speed": NaN}',
            JSON,
            400,
            error("bad_request", "the body is not valid JSON: NaN is not valid JSON"),
        ),
        (
            "a huge body, declared",
            b'{"prompt": "' + b"a" * 20_000_000 + b'"}',
            JSON,
            413,
            error("body_too_large", "the body has 20000014 bytes; the limit is 65536 bytes"),
        ),
        (
            "a huge body, chunked",
            lambda: chunked(b'{"prompt": "' + b"a" * 200_000 + b'"}'),
            JSON,
            413,
            error("body_too_large", "the body is over the limit of 65536 bytes"),
        ),
        (
            "text/plain",
            b'{"prompt": "Hi"}',
            {"content-type": "text/plain"},
            415,
            error("not_json", "the body must be application/json (send that Content-Type), got 'text/plain'"),
        ),
        (
            "a form, as curl -d sends it",
            b"prompt=Hi",
            {"content-type": "application/x-www-form-urlencoded"},
            415,
            error(
                "not_json",
                "the body must be application/json (send that Content-Type), got 'application/x-www-form-urlencoded'",
            ),
        ),
        (
            "a bad session id",
            b'{"prompt": "Hi"}',
            {**JSON, SESSION_HEADER: "../../etc/passwd-0000000000000000000000"},
            400,
            error(
                "bad_request",
                "the session id must be 33 to 100 letters, digits, '-' or '_', starting with a letter or digit "
                "(a UUID works); got 39 characters",
            ),
        ),
        (
            "a thousand unknown fields",
            json.dumps({"prompt": "Hi", **{f"f{i:03}": i for i in range(1_000)}}).encode(),
            JSON,
            400,
            error(
                "bad_request",
                "unknown field(s) 'f000', 'f001', 'f002', 'f003', 'f004' and 995 more; "
                "allowed: prompt, mode, voice, speed",
            ),
        ),
    ]
]


@pytest.mark.parametrize("case", HOSTILE, ids=[case.name for case in HOSTILE])
async def test_a_hostile_body_gets_its_4xx_and_one_warning(serve_asgi, records: LogRecords, case: Hostile) -> None:
    status, expected = case.status, case.expected
    model = scripted()
    base = serve_asgi(
        create_app(websocket_config("ws://127.0.0.1:9/unused"), AppDependencies(model=fixed_model(model)))
    ).http_url
    async with httpx.AsyncClient(timeout=30) as client:
        content = case.body() if callable(case.body) else case.body
        response = await client.post(f"{base}/invocations", content=content, headers=case.headers)
        assert (response.status_code, response.headers["content-type"]) == (status, "application/json")
        assert response.json() == expected
        # And the agent goes on.
        answer = await client.post(f"{base}/invocations", json={"prompt": "Hi"})
    assert (
        types([json.loads(line[6:]) for line in answer.text.splitlines() if line.startswith("data: ")])[-1]
        == "agent_end"
    )
    assert model.calls == 1  # only the good call reached the model
    refused = [r for r in records.records if r.levelno >= logging.WARNING and "refused" in r.getMessage()]
    assert [r.getMessage() for r in refused] == [
        f"refused POST /invocations: {status} {expected['code']}: {expected['message']}"
    ]
    assert [r.getMessage() for r in records.records if r.levelno >= logging.ERROR or r.exc_info] == []


@pytest.mark.parametrize(
    "route",
    [
        (
            "GET",
            "/invocations",
            405,
            error(
                "method_not_allowed",
                "GET /invocations: method not allowed; the agent serves POST /invocations, GET /ping and WS /ws",
            ),
        ),
        (
            "POST",
            "/ping",
            405,
            error(
                "method_not_allowed",
                "POST /ping: method not allowed; the agent serves POST /invocations, GET /ping and WS /ws",
            ),
        ),
        (
            "GET",
            "/admin",
            404,
            error("not_found", "GET /admin: not found; the agent serves POST /invocations, GET /ping and WS /ws"),
        ),
    ],
)
async def test_unknown_routes_and_methods_get_json_too(serve_asgi, records: LogRecords, route: tuple[Any, ...]) -> None:
    method, path, status, expected = route
    base = serve_asgi(create_app(websocket_config("ws://127.0.0.1:9/unused"))).http_url
    async with httpx.AsyncClient(timeout=10) as client:
        response = await client.request(method, f"{base}{path}")
    assert (response.status_code, response.json()) == (status, expected)
    assert records.warnings() == [f"refused {expected['message']}"]
    assert records.errors() == []


class Asked(ScriptedModel):
    """Records the last question of every model call."""

    def __init__(self) -> None:
        super().__init__([ScriptedTurn("Fine.")], tokens_per_s=2_000)
        self.questions: list[str] = []

    def stream(self, messages: Any, *args: Any, **kwargs: Any) -> Any:
        self.questions.append(user_questions(messages)[-1])
        return super().stream(messages, *args, **kwargs)


async def test_a_good_body_reaches_the_entrypoint_unchanged_and_streams(serve_asgi) -> None:
    model = Asked()
    base = serve_asgi(
        create_app(websocket_config("ws://127.0.0.1:9/unused"), AppDependencies(model=fixed_model(model)))
    ).http_url
    body = "\ufeff" + json.dumps({"prompt": "Caf\u00e9 \U0001f600?", "mode": "batch"}, ensure_ascii=False)
    async with (
        httpx.AsyncClient(timeout=20) as client,
        client.stream(
            "POST", f"{base}/invocations", content=body.encode(), headers={**JSON, SESSION_HEADER: SESSION}
        ) as response,
    ):
        events = [event async for event in sse_events(response)]
    assert events[0]["mode"] == "batch"
    assert events[-1] == {"type": "agent_end"}
    assert model.questions == ["Caf\u00e9 \U0001f600?"]
