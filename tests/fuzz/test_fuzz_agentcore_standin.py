"""A seeded fuzz run against the AgentCore stand-in, in front of a scripted agent.

Hundreds of hostile calls of every kind the stand-in parses, concurrently: unknown paths and
methods, garbage and truncated `Authorization` headers, signatures broken by one byte, hostile
session ids, qualifiers and runtime ARNs, payloads over the limit, callers without the IAM
action; valid calls mixed in. Then hostile WebSocket handshakes and sessions whose frames straddle
the 32 KB limit (text counted in UTF-8 bytes, both directions) and floods past the frame rate.

Proven: every HTTP refusal is exactly the error AgentCore's front door answers for that input
(status, `x-amzn-ErrorType`, JSON body with a `message`), never a 5xx; only valid calls reach the
agent; every WebSocket session gets exactly the echoes of the frames within the limits, then the
documented close code (1009 size, 1008 rate); malformed raw HTTP gets uvicorn's 400; the stand-in
still serves at the end and logged no error or traceback.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import random
import ssl
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import quote

import httpx
import pytest
from botocore.auth import SigV4Auth, SigV4QueryAuth  # type: ignore[import-untyped]
from botocore.awsrequest import AWSRequest  # type: ignore[import-untyped]
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed, InvalidStatus

from agent_app.frames import AGENTCORE_FRAME_LIMIT_BYTES
from local.standin.agentcore_auth import ALLOWED, DENIED, Principal
from tests.standin.agentcore_support import ARN, REGION, WAIT_S, scripted_agent, standin_for
from voicestack.agentcore import SERVICE, runtime_path, sign_websocket_headers, websocket_url

pytestmark = pytest.mark.timeout(300)

SEED = 20261202
HTTP_CALLS = 320
WS_SESSIONS = 36
CONCURRENCY = 8
PAYLOAD_LIMIT = 64 * 1024
FRAME_LIMIT = AGENTCORE_FRAME_LIMIT_BYTES
EVENTS = b'data: {"n": 0}\n\ndata: {"n": 1}\n\ndata: {"n": 2}\n\n'


@dataclass(frozen=True)
class Call:
    """One HTTP call and what the front door must answer: (status, error type) or (200, None)."""

    kind: str
    method: str
    path: str
    query: str
    headers: dict[str, str]
    body: bytes
    expected: tuple[int, str | None]


def _signed(
    path: str,
    query: str = "",
    body: bytes = b'{"prompt": "hi"}',
    *,
    host: str,
    principal: Principal = ALLOWED,
    extra: dict[str, str] | None = None,
) -> dict[str, str]:
    url = f"https://{host}{path}" + (f"?{query}" if query else "")
    request = AWSRequest(
        method="POST", url=url, data=body, headers={"Content-Type": "application/json", **(extra or {})}
    )
    SigV4Auth(principal.credentials(), SERVICE, REGION).add_auth(request)
    return dict(request.headers.items())


def _junk(rng: random.Random, alphabet: str, low: int, high: int) -> str:
    return "".join(rng.choice(alphabet) for _ in range(rng.randint(low, high)))


PATH_CHARS = "abcXYZ019-_.~%/:;@!$&'()*+,="
PRINTABLE = "".join(chr(c) for c in range(0x20, 0x7F))
INVOKE = runtime_path(ARN, "invocations")


def _valid(rng: random.Random, host: str) -> Call:
    return Call("valid", "POST", INVOKE, "", _signed(INVOKE, host=host), b'{"prompt": "hi"}', (200, None))


def _bad_path(rng: random.Random, host: str) -> Call:
    path = "/" + _junk(rng, PATH_CHARS, 0, 300).lstrip("/")
    if path.startswith("/runtimes/"):
        path = "/x" + path
    method = rng.choice(["POST", "GET", "PUT", "DELETE", "PATCH"])
    return Call("bad_path", method, quote(path, safe="/%"), "", {}, b"", (404, "UnknownOperationException"))


def _wrong_method(rng: random.Random, host: str) -> Call:
    return Call(
        "wrong_method", rng.choice(["GET", "PUT", "DELETE"]), INVOKE, "", {}, b"", (405, "UnknownOperationException")
    )


def _garbage_authorization(rng: random.Random, host: str) -> Call:
    value = _junk(rng, PRINTABLE, 1, 2_000).strip() or "x"
    if value.startswith(("AWS4-HMAC-SHA256 ", "Bearer ", "bearer ")):
        value = "X" + value
    headers = {"Authorization": value, "X-Amz-Date": "20261202T000000Z"}
    return Call("garbage_authorization", "POST", INVOKE, "", headers, b"{}", (403, "IncompleteSignatureException"))


def _truncated_signature(rng: random.Random, host: str) -> Call:
    headers = _signed(INVOKE, host=host)
    auth = headers["Authorization"]
    head, _, signature = auth.rpartition("Signature=")
    headers["Authorization"] = head + "Signature=" + signature[: rng.randint(0, 63)]
    return Call(
        "truncated_signature", "POST", INVOKE, "", headers, b'{"prompt": "hi"}', (403, "IncompleteSignatureException")
    )


def _tampered_body(rng: random.Random, host: str) -> Call:
    body = bytearray(b'{"prompt": "' + _junk(rng, "abcdef", 1, 500).encode() + b'"}')
    headers = _signed(INVOKE, body=bytes(body), host=host)
    position = rng.randrange(len(body))
    body[position] = (body[position] + rng.randint(1, 255)) % 256
    return Call("tampered_body", "POST", INVOKE, "", headers, bytes(body), (403, "InvalidSignatureException"))


def _hostile_session(rng: random.Random, host: str) -> Call:
    session = rng.choice(
        [_junk(rng, PRINTABLE.replace(" ", ""), 1, 32), _junk(rng, PRINTABLE.replace(" ", ""), 257, 2_000), "a b" * 20]
    )
    headers = _signed(INVOKE, host=host, extra={"X-Amzn-Bedrock-AgentCore-Runtime-Session-Id": session})
    return Call("hostile_session", "POST", INVOKE, "", headers, b'{"prompt": "hi"}', (400, "ValidationException"))


def _unknown_qualifier(rng: random.Random, host: str) -> Call:
    query = "qualifier=" + quote(_junk(rng, PRINTABLE, 1, 200), safe="")
    headers = _signed(INVOKE, query, host=host)
    return Call(
        "unknown_qualifier", "POST", INVOKE, query, headers, b'{"prompt": "hi"}', (404, "ResourceNotFoundException")
    )


def _unknown_runtime(rng: random.Random, host: str) -> Call:
    runtime = "arn:" + _junk(rng, PRINTABLE.replace("/", ""), 0, 300)
    path = f"/runtimes/{quote(runtime, safe='')}/invocations"
    headers = _signed(path, host=host)
    return Call("unknown_runtime", "POST", path, "", headers, b'{"prompt": "hi"}', (404, "ResourceNotFoundException"))


def _oversized_payload(rng: random.Random, host: str) -> Call:
    body = b"x" * rng.randint(PAYLOAD_LIMIT + 1, 3 * PAYLOAD_LIMIT)
    return Call(
        "oversized_payload",
        "POST",
        INVOKE,
        "",
        _signed(INVOKE, body=body, host=host),
        body,
        (400, "ValidationException"),
    )


def _denied(rng: random.Random, host: str) -> Call:
    headers = _signed(INVOKE, host=host, principal=DENIED)
    return Call("denied", "POST", INVOKE, "", headers, b'{"prompt": "hi"}', (403, "AccessDeniedException"))


GENERATORS: list[Callable[[random.Random, str], Call]] = [
    _valid,
    _bad_path,
    _wrong_method,
    _garbage_authorization,
    _truncated_signature,
    _tampered_body,
    _hostile_session,
    _unknown_qualifier,
    _unknown_runtime,
    _oversized_payload,
    _denied,
]


async def _run_http(calls: list[Call], url: str, context: ssl.SSLContext) -> list[tuple[Call, httpx.Response]]:
    semaphore = asyncio.Semaphore(CONCURRENCY)
    async with httpx.AsyncClient(verify=context, timeout=WAIT_S) as client:

        async def one(call: Call) -> tuple[Call, httpx.Response]:
            async with semaphore:
                target = f"{url}{call.path}" + (f"?{call.query}" if call.query else "")
                request = client.build_request(call.method, target, headers=call.headers, content=call.body)
                # Sent exactly as built: httpx must not re-encode the path it was given.
                request.url = request.url.copy_with(
                    raw_path=(call.path + (f"?{call.query}" if call.query else "")).encode()
                )
                return call, await client.send(request)

        return await asyncio.gather(*(one(call) for call in calls))


@dataclass(frozen=True)
class Session:
    """Frames a WebSocket client sends, the echoes it must get back, and how the session must end."""

    frames: list[str | bytes]
    echoes: list[str | bytes]
    close_code: int


def _echo(frame: str | bytes) -> str | bytes:
    if isinstance(frame, bytes):
        return frame
    command, _, argument = frame.partition(":")
    if command == "big":
        return "x" * int(argument)
    return f"echo:{frame}"


def _size(frame: str | bytes) -> int:
    return len(frame.encode()) if isinstance(frame, str) else len(frame)


def _session(rng: random.Random) -> Session:
    if rng.random() < 0.15:
        count = rng.randint(260, 400)
        return Session([f"flood:{count}"], [str(i) for i in range(249)], 1008)
    frames: list[str | bytes] = []
    echoes: list[str | bytes] = []
    for _ in range(rng.randint(1, 12)):
        roll = rng.random()
        if roll < 0.3:
            frame: str | bytes = rng.randbytes(
                rng.choice([rng.randint(0, 2_000), rng.randint(FRAME_LIMIT - 8, FRAME_LIMIT + 8)])
            )
        elif roll < 0.55:
            frame = f"big:{rng.randint(FRAME_LIMIT - 8, FRAME_LIMIT + 8)}"
        else:
            unit = rng.choice(["a", "é", "語", "🎙"])
            target = rng.choice([rng.randint(1, 500), rng.randint(FRAME_LIMIT - 12, FRAME_LIMIT + 4)])
            frame = "t" + unit * (target // len(unit.encode()))
        frames.append(frame)
        if _size(frame) > FRAME_LIMIT:
            return Session(frames, echoes, 1009)
        echo = _echo(frame)
        if _size(echo) > FRAME_LIMIT:
            return Session(frames, echoes, 1009)
        echoes.append(echo)
    return Session(frames, echoes, 1000)


async def _run_session(session: Session, url: str, context: ssl.SSLContext) -> tuple[list[str | bytes], int | None]:
    headers = sign_websocket_headers(url, ALLOWED.credentials().get_frozen_credentials(), REGION)
    received: list[str | bytes] = []
    async with connect(url, additional_headers=headers, ssl=context, max_size=None) as ws:
        try:
            for frame in session.frames:
                await ws.send(frame)
                if session.close_code == 1008:
                    break
                if len(received) < len(session.echoes):
                    received.append(await asyncio.wait_for(ws.recv(), WAIT_S))
            while len(received) < len(session.echoes):
                received.append(await asyncio.wait_for(ws.recv(), WAIT_S))
            if session.close_code == 1000:
                await ws.close()
                return received, 1000
            while True:
                received.append(await asyncio.wait_for(ws.recv(), WAIT_S))
        except ConnectionClosed as closed:
            return received, closed.rcvd.code if closed.rcvd else None


def _handshake(rng: random.Random, url: str) -> tuple[str, dict[str, str], tuple[int, str]]:
    """A hostile WebSocket handshake: (URL, headers, the refusal it must get)."""
    kind = rng.randrange(4)
    if kind == 0:
        return url, {"Authorization": "X" + _junk(rng, PRINTABLE, 0, 500)}, (403, "IncompleteSignatureException")
    if kind == 1:
        request = AWSRequest(method="GET", url=url.replace("wss://", "https://"))
        SigV4QueryAuth(ALLOWED.credentials(), SERVICE, REGION, expires=rng.randint(301, 100_000)).add_auth(request)
        return request.url.replace("https://", "wss://"), {}, (403, "InvalidSignatureException")
    if kind == 2:
        request = AWSRequest(method="GET", url=url.replace("wss://", "https://"))
        SigV4QueryAuth(ALLOWED.credentials(), SERVICE, REGION, expires=60).add_auth(request)
        tampered = (
            request.url.replace("https://", "wss://") + "&qualifier=" + quote(_junk(rng, PRINTABLE, 1, 50), safe="")
        )
        return tampered, {}, (403, "InvalidSignatureException")
    session = rng.choice(["s" * rng.randint(1, 32), "s" * rng.randint(257, 1_000)])
    headers = sign_websocket_headers(url, ALLOWED.credentials().get_frozen_credentials(), REGION, session_id=session)
    return url, headers, (400, "ValidationException")


async def _raw_garbage(host: str, port: int, context: ssl.SSLContext, data: bytes) -> bytes:
    reader, writer = await asyncio.open_connection(host, port, ssl=context, server_hostname=host)
    writer.write(data)
    await writer.drain()
    try:
        return await asyncio.wait_for(reader.read(200), WAIT_S)
    finally:
        writer.close()
        with contextlib.suppress(ssl.SSLError, ConnectionError):  # the server may hang up first
            await writer.wait_closed()


async def test_hostile_calls_get_exactly_the_front_doors_answers(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    rng = random.Random(SEED)
    with scripted_agent() as (agent, server):
        async with standin_for(server.http_url, max_payload_bytes=PAYLOAD_LIMIT) as info:
            context = ssl.create_default_context(cafile=str(info.ca_path))
            host = info.url.removeprefix("https://")
            calls = [rng.choice(GENERATORS)(rng, host) for _ in range(HTTP_CALLS)]
            results = await _run_http(calls, info.url, context)
            kinds: Counter[str] = Counter()
            for call, response in results:
                kinds[call.kind] += 1
                status, error_type = call.expected
                assert response.status_code == status, (call.kind, call.path[:80], response.text[:300])
                if error_type is None:
                    assert response.content == EVENTS
                    continue
                assert response.headers["x-amzn-errortype"] == error_type, (call.kind, response.text[:300])
                assert response.headers["content-type"] == "application/json"
                body = json.loads(response.content)
                assert isinstance(body["message"], str), body
                assert body["message"]
            assert set(kinds) == {g.__name__.removeprefix("_") for g in GENERATORS}
            assert len(agent.bodies) == kinds["valid"]

            ws_url = websocket_url(info.url, ARN)
            for _ in range(40):
                target, headers, (status, error_type) = _handshake(rng, ws_url)
                with pytest.raises(InvalidStatus) as raised:
                    async with connect(target, additional_headers=headers, ssl=context):
                        pass
                refusal = raised.value.response
                assert (refusal.status_code, refusal.headers["x-amzn-errortype"]) == (status, error_type)
                assert json.loads(refusal.body or b"{}")["message"]

            sessions = [_session(rng) for _ in range(WS_SESSIONS)]
            semaphore = asyncio.Semaphore(4)

            async def run(session: Session) -> tuple[list[str | bytes], int | None]:
                async with semaphore:
                    return await _run_session(session, ws_url, context)

            outcomes = await asyncio.gather(*(run(s) for s in sessions))
            codes: Counter[int] = Counter()
            for session, (received, code) in zip(sessions, outcomes, strict=True):
                assert received == session.echoes, [str(f)[:40] for f in session.frames]
                assert code == session.close_code, [str(f)[:40] for f in session.frames]
                codes[session.close_code] += 1
            assert set(codes) == {1000, 1008, 1009}

            for data in (
                b"\x00\xff garbage\r\n\r\n",
                b"POST /runtimes HTTP/1.1\r\nHost: x\r\nContent-Length: -5\r\n\r\n",
            ):
                answer = await _raw_garbage("127.0.0.1", info.port, context, data)
                assert answer.startswith(b"HTTP/1.1 400 Bad Request"), answer

            # Still serving, and everything above was a refusal, not a failure.
            ((_, last),) = await _run_http([_valid(rng, host)], info.url, context)
            assert last.content == EVENTS
    problems = [r for r in caplog.records if r.levelno >= logging.ERROR or r.exc_info is not None]
    assert problems == [], [r.getMessage()[:200] for r in problems]
