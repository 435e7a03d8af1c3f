"""A seeded fuzz run against the page's web server in remote mode, in front of the AgentCore stand-in.

Hundreds of hostile requests, many at once, against the routes a hostile page would want most
(`POST /api/ws-url` hands out presigned URLs; `POST /api/invoke` is signed with the server's
credentials): deep and huge JSON, lone surrogates, invalid UTF-8, NaN and huge numbers, wrong
types, duplicate keys, oversized bodies, wrong content types, hostile session ids and headers,
other sites' Origin and Sec-Fetch-Site, DNS-rebinding Host names, other methods and paths, and
WebSockets to the relay remote mode does not have. Proven: each gets exactly its expected status
and JSON error code (never a 5xx); only the valid ones are signed, reach the agent, or get a URL;
no answer carries the secret key; the URLs handed out after all that still open their session;
the server answers its health check at the end; nothing is logged as an error or with a traceback.
"""

from __future__ import annotations

import asyncio
import json
import logging
import random
import ssl
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import InvalidStatus

from tests.local.local_fakes import ONE_EVENT, TEMPORARY, RemoteStack, RemoteStacks
from voicestack.agentcore import SESSION_HEADER

pytestmark = pytest.mark.timeout(180)

SEED = 20261203
CASES = 700
CONCURRENT = 16
SOCKET_REQUEST_LIMIT = 1024
"""`remote_routes.MAX_SOCKET_REQUEST_BYTES`, written out: the fuzz states the limit it expects."""
SESSION_CHARS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_"


@dataclass(frozen=True)
class Case:
    """One request and what must come back: `status` and, for a refusal, the error `code`."""

    kind: str
    method: str
    path: str
    status: int
    code: str | None = None
    body: bytes = b""
    headers: dict[str, str | bytes] = field(default_factory=dict)
    session: str | None = None
    """The session a valid request names (a URL for it, or the agent sees it)."""


Generator = Callable[[random.Random, str], Case]
JSON: dict[str, str | bytes] = {"content-type": "application/json"}


def valid_session(rng: random.Random) -> str:
    length = rng.randint(33, 100)
    return rng.choice(SESSION_CHARS[:62]) + "".join(rng.choice(SESSION_CHARS) for _ in range(length - 1))


def socket_request(
    body: bytes,
    status: int,
    code: str | None,
    kind: str,
    *,
    headers: dict[str, str | bytes] | None = None,
    session: str | None = None,
) -> Case:
    return Case(kind, "POST", "/api/ws-url", status, code, body, dict(JSON) if headers is None else headers, session)


def _valid_socket_url(rng: random.Random, origin: str) -> Case:
    session = valid_session(rng)
    body = {"session": session, **({"extra": rng.random()} if rng.random() < 0.3 else {})}
    headers: dict[str, str | bytes] = {
        "content-type": rng.choice(["application/json", "application/json; charset=utf-8", "Application/JSON"])
    }
    if rng.random() < 0.5:
        headers |= {"origin": origin, "sec-fetch-site": "same-origin"}
    return socket_request(json.dumps(body).encode(), 200, None, "valid_socket_url", headers=headers, session=session)


def _deep_json(rng: random.Random, origin: str) -> Case:
    depth = rng.randint(2, 5_000)
    opener, closer = rng.choice([("[", "]"), ('{"session":', "}")])
    body = (opener * depth + "1" + closer * depth).encode()
    if len(body) > SOCKET_REQUEST_LIMIT:
        return socket_request(body, 413, "body_too_large", "deep_json_over_limit")
    return socket_request(body, 400, "bad_session", "deep_json")


def _surrogate_session(rng: random.Random, origin: str) -> Case:
    surrogate = f"\\u{rng.randint(0xD800, 0xDFFF):04x}"
    body = ('{"session": "' + "a" * rng.randint(16, 60) + surrogate + "b" * 20 + '"}').encode()
    return socket_request(body, 400, "bad_session", "surrogate_session")


def _invalid_utf8(rng: random.Random, origin: str) -> Case:
    body = bytearray(b'{"session": "' + b"a" * 40 + b'"}')
    body.insert(rng.randint(1, len(body) - 2), rng.choice([0xFF, 0xFE, 0xC0, 0x80]))
    return socket_request(bytes(body), 400, "invalid_json", "invalid_utf8")


def _not_a_string(rng: random.Random, origin: str) -> Case:
    value = rng.choice(
        ["NaN", "Infinity", "1e999", "-0", "null", "true", "[]", "{}", "7" * 900, '["' + "a" * 40 + '"]']
    )
    return socket_request(f'{{"session": {value}}}'.encode(), 400, "bad_session", "session_not_a_string")


def _not_an_object(rng: random.Random, origin: str) -> Case:
    body = rng.choice(["[]", "1", '"' + "a" * 40 + '"', "null", "true", '[{"session": "' + "a" * 40 + '"}]'])
    return socket_request(body.encode(), 400, "bad_session", "not_an_object")


def _duplicate_key(rng: random.Random, origin: str) -> Case:
    body = f'{{"session": "{valid_session(rng)}", "session": {rng.choice(["5", "null", '"short"'])}}}'
    return socket_request(body.encode(), 400, "bad_session", "duplicate_key")


def _bad_session(rng: random.Random, origin: str) -> Case:
    session = rng.choice(
        [
            "a" * rng.randint(0, 32),
            valid_session(rng) + "a" * 100,
            rng.choice("-_") + "a" * 40,
            "a" * 20 + rng.choice(" /.:;?#&=%+\t\n\x00é日😀\\\"'") + "a" * 20,
            "../" * 12,
        ]
    )
    return socket_request(json.dumps({"session": session}).encode(), 400, "bad_session", "bad_session")


def _garbage(rng: random.Random, origin: str) -> Case:
    junk = "".join(rng.choice("abc{}[]:,\"' 0123456789\\") for _ in range(rng.randint(0, 200)))
    return socket_request(("{x" + junk).encode(), 400, "invalid_json", "garbage")


def _oversized(rng: random.Random, origin: str) -> Case:
    body = json.dumps({"session": valid_session(rng), "pad": "x" * rng.randint(SOCKET_REQUEST_LIMIT, 200_000)})
    return socket_request(body.encode(), 413, "body_too_large", "oversized")


def _empty(rng: random.Random, origin: str) -> Case:
    return socket_request(b"", 400, "empty_body", "empty_body")


def _wrong_content_type(rng: random.Random, origin: str) -> Case:
    content_type = rng.choice(
        ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", "", "json", "*/*"]
    )
    body = json.dumps({"session": valid_session(rng)}).encode()
    return socket_request(body, 415, "not_json", "wrong_content_type", headers={"content-type": content_type})


def _other_site(rng: random.Random, origin: str) -> Case:
    port = origin.rsplit(":", 1)[1]
    headers: dict[str, str | bytes] = dict(JSON)
    headers |= rng.choice(
        [
            {"origin": rng.choice(["https://evil.example", "null", f"http://localhost:{int(port) + 1}"])},
            {"origin": f"https://127.0.0.1:{port}"},
            {"sec-fetch-site": rng.choice(["cross-site", "same-site", "CROSS-SITE", "junk"])},
            {"origin": origin, "sec-fetch-site": "cross-site"},
        ]
    )
    body = json.dumps({"session": valid_session(rng)}).encode()
    path = rng.choice(["/api/ws-url", "/api/invoke"])
    return Case("other_site", "POST", path, 403, "cross_origin", body, headers)


def _rebinding_host(rng: random.Random, origin: str) -> Case:
    port = origin.rsplit(":", 1)[1]
    host = rng.choice([f"rebind.example:{port}", "127.0.0.1", f"127.0.0.1:{int(port) + 1}", f"evil:{port}", "x" * 300])
    body = json.dumps({"session": valid_session(rng)}).encode()
    method, path = rng.choice([("POST", "/api/ws-url"), ("POST", "/api/invoke"), ("GET", "/api/health"), ("GET", "/")])
    return Case(
        "rebinding_host", method, path, 421, "wrong_host", body if method == "POST" else b"", JSON | {"host": host}
    )


def _other_method_or_path(rng: random.Random, origin: str) -> Case:
    method, path, status, code = rng.choice(
        [
            ("GET", "/api/ws-url", 404, "not_found"),
            ("GET", "/api/invoke", 404, "not_found"),
            ("PUT", "/api/ws-url", 405, "method_not_allowed"),
            ("DELETE", "/api/invoke", 405, "method_not_allowed"),
            ("PATCH", "/api/health", 405, "method_not_allowed"),
            ("GET", "/api/ws-url/../../etc/passwd", 404, "not_found"),
            ("GET", "/%2e%2e/%2e%2e/etc/passwd", 404, "not_found"),
            ("GET", "/api/presign", 404, "not_found"),
        ]
    )
    return Case("other_method_or_path", method, path, status, code)


def _valid_invoke(rng: random.Random, origin: str) -> Case:
    session = valid_session(rng)
    body = json.dumps({"prompt": rng.choice(["hi", "café ☕", "日本語"]), "mode": "stream"}, ensure_ascii=False)
    headers: dict[str, str | bytes] = JSON | {SESSION_HEADER: session}
    return Case("valid_invoke", "POST", "/api/invoke", 200, None, body.encode(), headers, session=session)


def _invoke_bad_session(rng: random.Random, origin: str) -> Case:
    sessions: list[str | bytes] = [
        "a" * rng.randint(1, 32),
        "a" * 101,
        "-" + "a" * 40,
        "a" * 40 + " b",
        "a" * 40 + "/",
        ("a" * 40 + "é").encode(),
    ]
    session = rng.choice(sessions)
    headers: dict[str, str | bytes] = JSON | {SESSION_HEADER: session}
    return Case("invoke_bad_session", "POST", "/api/invoke", 400, "bad_session", b'{"prompt": "hi"}', headers)


def _invoke_bad_body(rng: random.Random, origin: str) -> Case:
    return rng.choice(
        [
            Case("invoke_empty", "POST", "/api/invoke", 400, "empty_body", b"", JSON),
            Case(
                "invoke_not_json", "POST", "/api/invoke", 415, "not_json", b"prompt=hi", {"content-type": "text/plain"}
            ),
            Case(
                "invoke_oversized",
                "POST",
                "/api/invoke",
                413,
                "body_too_large",
                b'{"p": "' + b"x" * 70_000 + b'"}',
                JSON,
            ),
        ]
    )


HOSTILE: tuple[Generator, ...] = (
    _deep_json,
    _surrogate_session,
    _invalid_utf8,
    _not_a_string,
    _not_an_object,
    _duplicate_key,
    _bad_session,
    _garbage,
    _oversized,
    _empty,
    _wrong_content_type,
    _other_site,
    _rebinding_host,
    _other_method_or_path,
    _invoke_bad_session,
    _invoke_bad_body,
)
VALID: tuple[Generator, ...] = (_valid_socket_url, _valid_invoke)


def make_cases(seed: int, origin: str) -> Iterator[Case]:
    rng = random.Random(seed)
    for _ in range(CASES):
        generators = VALID if rng.random() < 0.12 else HOSTILE
        yield rng.choice(generators)(rng, origin)


@dataclass
class Answer:
    case: Case
    status: int
    body: bytes
    headers: str


async def send(client: httpx.AsyncClient, case: Case) -> Answer:
    headers = {name.encode(): v if isinstance(v, bytes) else v.encode("latin-1") for name, v in case.headers.items()}
    response = await client.request(case.method, case.path, content=case.body or None, headers=headers)
    return Answer(case, response.status_code, response.content, json.dumps(dict(response.headers)))


def problem(answer: Answer) -> str | None:
    """What is wrong with one answer, or None."""
    case = answer.case
    if answer.status != case.status:
        return f"{case.kind}: status {answer.status}, expected {case.status}: {answer.body[:200]!r}"
    if case.code is None:
        return None
    try:
        parsed = json.loads(answer.body)
    except ValueError:
        return f"{case.kind}: not JSON: {answer.body[:200]!r}"
    error = parsed.get("error") if isinstance(parsed, dict) else None
    if not isinstance(error, dict) or error.get("code") != case.code or not isinstance(error.get("message"), str):
        return f"{case.kind}: expected error {case.code}, got {parsed!r:.200}"
    return None


class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


async def websocket_refusals(stack: RemoteStack, rng: random.Random) -> list[int]:
    """WebSockets remote mode does not serve (the relay, other paths), some from other sites."""
    base = "ws" + stack.url.removeprefix("http")
    statuses = []
    for _ in range(20):
        path = rng.choice(["/api/ws", "/api/ws?session=" + "a" * 40, "/api/ws-url", "/", "/x/../api/ws"])
        headers = rng.choice([{}, {"Origin": "https://evil.example"}, {"Origin": stack.url}])
        with pytest.raises(InvalidStatus) as refused:
            async with connect(base + path, additional_headers=headers, open_timeout=5):
                pass
        statuses.append(refused.value.response.status_code)
    return statuses


async def opens_its_session(stack: RemoteStack, url: str) -> str:
    context = ssl.create_default_context(cafile=str(stack.standin.ca_path))
    async with connect(url, ssl=context, open_timeout=5) as ws:
        await ws.send("ping")
        return str(await ws.recv())


async def test_hostile_requests_each_get_their_refusal_and_the_valid_ones_work(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    records = _Records()
    watched = [logging.getLogger("voicestack.webserver"), logging.getLogger("uvicorn.error")]
    for logger in watched:
        logger.addHandler(records)
    stacks = RemoteStacks(monkeypatch)
    try:
        stack = await asyncio.to_thread(stacks.start)
        cases = list(make_cases(SEED, stack.url))
        kinds = Counter(case.kind for case in cases)
        gate = asyncio.Semaphore(CONCURRENT)
        async with httpx.AsyncClient(base_url=stack.url, timeout=30) as client:

            async def one(case: Case) -> Answer:
                async with gate:
                    return await send(client, case)

            answers = await asyncio.gather(*(one(case) for case in cases))
            refused_sockets = await websocket_refusals(stack, random.Random(SEED))
            health = await client.get("/api/health")
            handed = [a for a in answers if a.case.kind == "valid_socket_url"]
            echoes = [await opens_its_session(stack, json.loads(a.body)["url"]) for a in handed[:5]]
    finally:
        await asyncio.to_thread(stacks.close)
        for logger in watched:
            logger.removeHandler(records)

    assert len(kinds) >= 20, kinds  # every generator and most of their variants came up
    assert [p for a in answers if (p := problem(a)) is not None] == []
    assert [a.status for a in answers if a.status >= 500] == []
    assert refused_sockets == [403] * 20
    assert health.status_code == 200

    secret = TEMPORARY.secret_key
    assert [a.case.kind for a in answers if secret in a.body.decode("latin-1") or secret in a.headers] == []
    # Only valid requests got a URL, each for its own session; only valid invocations were signed.
    for answer in handed:
        url = json.loads(answer.body)["url"]
        assert parse_qs(urlsplit(url).query)[SESSION_HEADER] == [answer.case.session]
    assert sum("X-Amz-Signature" in a.body.decode("latin-1") for a in answers) == len(handed)
    invokes = [a for a in answers if a.case.kind == "valid_invoke"]
    assert {a.body for a in invokes} == {ONE_EVENT}
    assert sorted(s for s in stack.agent.session_ids if s is not None) == sorted(
        [a.case.session for a in invokes if a.case.session] + [a.case.session for a in handed[:5] if a.case.session]
    )
    assert len(stack.agent.requests) == len(invokes)
    assert echoes == ["echo:ping"] * len(handed[:5])
    # Bad input is the caller's problem: warnings without tracebacks, never an error.
    assert [r.getMessage() for r in records.records if r.levelno >= logging.ERROR or r.exc_info] == []
