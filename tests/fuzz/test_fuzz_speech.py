"""A seeded fuzz run against the speech server as production configures it (zero-cost engine).

Thousands of hostile frames of every kind from issue 12 (deep JSON, huge integers, lone
surrogates, invalid UTF-8 in binary and text frames, oversized frames, wrong types, garbage, cancel
races), pipelined over many concurrent sessions. Proven: the process lives (/ping 200 at the end),
no session ends with 1011, every hostile frame is answered by exactly one `error` frame with the
expected code, or ends its session with a documented close code (1007 invalid UTF-8 in a text
frame, 1009 frame over the size limit), every valid request completes or is cancelled, and no
bad input is logged as an error or with a traceback.
"""

from __future__ import annotations

import asyncio
import json
import logging
import random
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import httpx
import pytest
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed

from kokoro_server.engine import ZeroCostEngine
from kokoro_server.invocations import body_limit
from tests.speech.speech_support import WAIT_S, production_server

pytestmark = pytest.mark.timeout(120)

SEED = 20261130
SESSIONS = 64
FRAMES_PER_SESSION = 34
CONCURRENT_SESSIONS = 12
MAX_TEXT_CHARS = 500
FRAME_LIMIT = body_limit(MAX_TEXT_CHARS)
"""uvicorn's ws_max_size in production: a bigger frame closes the session with 1009."""


@dataclass(frozen=True)
class Hostile:
    """A frame the server must answer with exactly one `error` frame of `code`."""

    kind: str
    data: str | bytes
    code: str
    text_frame: bool = True


Generator = Callable[[random.Random, int], Hostile]


def _deep_array(rng: random.Random, i: int) -> Hostile:
    depth = rng.randint(1_600, 3_000)  # CPython's JSON parser stops at 1,500 levels
    return Hostile("deep_array", "[" * depth + "]" * depth, "invalid_json")


def _deep_object(rng: random.Random, i: int) -> Hostile:
    depth = rng.randint(1_520, 1_600)
    return Hostile("deep_object", '{"a":' * depth + "1" + "}" * depth, "invalid_json")


def _huge_speed(rng: random.Random, i: int) -> Hostile:
    digits = "".join(rng.choice("123456789") for _ in range(rng.randint(310, 4_000)))
    sign = rng.choice(["", "-"])
    return Hostile(
        "huge_speed", f'{{"text": "Hi.", "request_id": "h{i}", "speed": {sign}{digits}}}', "speed_out_of_range"
    )


def _float_overflow(rng: random.Random, i: int) -> Hostile:
    return Hostile("float_overflow", f'{{"text": "Hi.", "speed": {rng.choice(["1e400", "-1e999"])}}}', "invalid_field")


def _constant(rng: random.Random, i: int) -> Hostile:
    return Hostile(
        "json_constant", f'{{"text": "Hi.", "speed": {rng.choice(["NaN", "Infinity", "-Infinity"])}}}', "invalid_json"
    )


def _surrogate_id(rng: random.Random, i: int) -> Hostile:
    surrogate = f"\\u{rng.randint(0xD800, 0xDFFF):04x}"
    return Hostile("surrogate_request_id", f'{{"text": "Hi.", "request_id": "id{surrogate}{i}"}}', "invalid_field")


def _surrogate_text(rng: random.Random, i: int) -> Hostile:
    surrogate = f"\\u{rng.randint(0xD800, 0xDFFF):04x}"
    return Hostile(
        "surrogate_text",
        f'{{"text": "Say {surrogate} now.", "request_id": "t{i}", "timestamps": true}}',
        "invalid_field",
    )


def _bad_utf8_binary(rng: random.Random, i: int) -> Hostile:
    body = bytearray(rng.randbytes(rng.randint(1, 64)))
    body.insert(rng.randint(0, len(body)), rng.choice([0xFF, 0xFE, 0xC0, 0x80]))
    return Hostile("invalid_utf8_binary", bytes(body) + b"\xff", "invalid_utf8", text_frame=False)


def _garbage(rng: random.Random, i: int) -> Hostile:
    junk = "".join(rng.choice("abc{}[]:,\"' 0123456789\\") for _ in range(rng.randint(0, 200)))
    return Hostile("garbage", "{x" + junk, "invalid_json", text_frame=rng.random() < 0.5)


def _empty(rng: random.Random, i: int) -> Hostile:
    return Hostile("empty_frame", "" if rng.random() < 0.5 else b"", "invalid_json", text_frame=rng.random() < 0.5)


def _not_object(rng: random.Random, i: int) -> Hostile:
    return Hostile(
        "not_an_object", rng.choice(["[]", "1", '"text"', "null", "true", "[1, {}]", str(10**300)]), "not_an_object"
    )


def _unknown_type(rng: random.Random, i: int) -> Hostile:
    kind = rng.choice(['"dance"', '"' + "x" * rng.randint(100, 4_000) + '"', "[" * 200 + "]" * 200, "7" * 4_000])
    return Hostile("unknown_type", f'{{"type": {kind}}}', "unknown_type")


def _wrong_field(rng: random.Random, i: int) -> Hostile:
    body = rng.choice(
        [
            '{"text": 12}',
            '{"text": ["a"]}',
            '{"text": "x", "timestamps": "yes"}',
            '{"text": "x", "voice": ""}',
            '{"text": "x", "voice": 3}',
            '{"text": "x", "speed": "fast"}',
            '{"text": "x", "speed": true}',
            '{"text": "x", "request_id": ""}',
            '{"text": "x", "request_id": ' + json.dumps("r" * 129) + "}",
            '{"text": "x", "request_id": {"a": 1}}',
        ]
    )
    return Hostile("wrong_field", body, "invalid_field")


def _missing_or_empty_text(rng: random.Random, i: int) -> Hostile:
    return rng.choice(
        [
            Hostile("missing_text", '{"voice": "af_heart"}', "missing_text"),
            Hostile("empty_text", '{"text": " \\n\\t "}', "empty_text"),
        ]
    )


def _too_long(rng: random.Random, i: int) -> Hostile:
    return Hostile(
        "text_too_long",
        json.dumps({"text": "a" * rng.randint(MAX_TEXT_CHARS + 1, MAX_TEXT_CHARS + 50)}),
        "text_too_long",
    )


def _unknown_voice(rng: random.Random, i: int) -> Hostile:
    return Hostile("unknown_voice", json.dumps({"text": "x", "voice": "v" * rng.randint(1, 300)}), "unknown_voice")


def _speed_range(rng: random.Random, i: int) -> Hostile:
    return Hostile(
        "speed_out_of_range",
        json.dumps({"text": "x", "speed": rng.choice([0, 0.49, 2.01, -5, 1e300])}),
        "speed_out_of_range",
    )


def _cancel_unknown(rng: random.Random, i: int) -> Hostile:
    return Hostile("cancel_unknown", json.dumps({"type": "cancel", "request_id": f"nobody-{i}"}), "unknown_request")


HOSTILE: tuple[Generator, ...] = (
    _deep_array,
    _deep_object,
    _huge_speed,
    _float_overflow,
    _constant,
    _surrogate_id,
    _surrogate_text,
    _bad_utf8_binary,
    _garbage,
    _empty,
    _not_object,
    _unknown_type,
    _wrong_field,
    _missing_or_empty_text,
    _too_long,
    _unknown_voice,
    _speed_range,
    _cancel_unknown,
)


@dataclass(frozen=True)
class Valid:
    request_id: str
    cancel: bool
    """Send a cancel right after it: the answer is `cancelled`, or (too late) complete + unknown_request."""


@dataclass(frozen=True)
class Fatal:
    """A frame that ends the session with `code`."""

    kind: str
    data: str | bytes
    code: int
    text_frame: bool


@dataclass
class Plan:
    frames: list[Hostile | Valid] = field(default_factory=list)
    fatal: Fatal | None = None

    @property
    def frame_count(self) -> int:
        sent = sum(2 if isinstance(f, Valid) and f.cancel else 1 for f in self.frames)
        return sent + 1  # and the fatal frame, or the final close


def make_plans(seed: int) -> Iterator[Plan]:
    rng = random.Random(seed)
    counter = 0
    for s in range(SESSIONS):
        plan = Plan()
        for _ in range(FRAMES_PER_SESSION):
            counter += 1
            if rng.random() < 0.15:
                plan.frames.append(Valid(f"v{s}-{counter}", cancel=rng.random() < 0.5))
            else:
                plan.frames.append(rng.choice(HOSTILE)(rng, counter))
        if s % 4 == 1:
            plan.frames = [f for f in plan.frames if isinstance(f, Hostile)]  # nothing in flight when it dies
            plan.fatal = Fatal("invalid_utf8_text", b'{"text": "caf\xe9"}', 1007, text_frame=True)
        elif s % 4 == 3:
            plan.frames = [f for f in plan.frames if isinstance(f, Hostile)]
            size = rng.randint(FRAME_LIMIT + 1, FRAME_LIMIT * 3)
            plan.fatal = Fatal("oversized", b"x" * size, 1009, text_frame=rng.random() < 0.5)
        yield plan


@dataclass
class Outcome:
    close_code: int | None
    errors: Counter[str]
    expected_errors: Counter[str]
    completed: set[str]
    cancelled: set[str]
    valid: list[Valid]
    unexpected: list[str]


async def _send(ws: ClientConnection, data: str | bytes, text_frame: bool) -> None:
    payload = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else data
    await ws.send(payload, text=text_frame)


async def _receive_all(ws: ClientConnection, sink: list[str | bytes]) -> int | None:
    """Every frame until the server closes; returns its close code."""
    try:
        while True:
            sink.append(await asyncio.wait_for(ws.recv(), timeout=WAIT_S))
    except ConnectionClosed as closed:
        return closed.rcvd.code if closed.rcvd is not None else None


def _errors_in(frames: list[str | bytes]) -> int:
    return sum(isinstance(f, str) and json.loads(f)["type"] == "error" for f in frames)


async def run_session(url: str, plan: Plan) -> Outcome:
    received: list[str | bytes] = []
    async with connect(url, max_size=None, ping_interval=None, compression=None) as ws:
        reader = asyncio.create_task(_receive_all(ws, received))
        for frame in plan.frames:
            if isinstance(frame, Hostile):
                await _send(ws, frame.data, frame.text_frame)
            else:
                await ws.send(json.dumps({"text": "Hi there. Bye now.", "request_id": frame.request_id}))
                if frame.cancel:
                    await ws.send(json.dumps({"type": "cancel", "request_id": frame.request_id}))
        if plan.fatal is None:
            await ws.send(json.dumps({"type": "close"}))
        else:
            # Every earlier frame answered first, so that the fatal one is the only thing cut short.
            async with asyncio.timeout(WAIT_S):
                while _errors_in(received) < len(plan.frames):  # noqa: ASYNC110 - the reader task fills it
                    await asyncio.sleep(0.005)
            await _send(ws, plan.fatal.data, plan.fatal.text_frame)
        close_code = await reader

    errors: Counter[str] = Counter()
    completed: set[str] = set()
    cancelled: set[str] = set()
    unexpected: list[str] = []
    for message in received:
        if isinstance(message, bytes):
            continue
        event = json.loads(message)
        if event["type"] == "error":
            errors[event["code"]] += 1
        elif event["type"] == "synthesis_complete":
            completed.add(event["request_id"])
        elif event["type"] == "cancelled":
            cancelled.add(event["request_id"])
        elif event["type"] != "synthesis_start":
            unexpected.append(message)
    valid = [f for f in plan.frames if isinstance(f, Valid)]
    expected: Counter[str] = Counter(f.code for f in plan.frames if isinstance(f, Hostile))
    expected["unknown_request"] += sum(1 for v in valid if v.cancel and v.request_id in completed)
    return Outcome(close_code, errors, +expected, completed, cancelled, valid, unexpected)


class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


async def test_thousands_of_hostile_frames_are_each_answered_and_nothing_dies() -> None:
    plans = list(make_plans(SEED))
    total_frames = sum(plan.frame_count for plan in plans)
    assert total_frames >= 2_000
    assert {g(random.Random(0), 0).kind for g in HOSTILE} <= {
        f.kind for p in plans for f in p.frames if isinstance(f, Hostile)
    }

    records = _Records()
    watched = [logging.getLogger("kokoro_server"), logging.getLogger("uvicorn.error")]
    for logger in watched:
        logger.addHandler(records)
    try:
        with production_server(ZeroCostEngine(seconds_per_char=0.01), max_text_chars=MAX_TEXT_CHARS) as server:
            gate = asyncio.Semaphore(CONCURRENT_SESSIONS)

            async def one(plan: Plan) -> Outcome:
                async with gate:
                    return await run_session(server.ws_url, plan)

            outcomes = await asyncio.gather(*(one(plan) for plan in plans))
            async with httpx.AsyncClient() as http:
                ping = await http.get(f"{server.http_url}/ping")
            active_after = server.service.active_sessions
    finally:
        for logger in watched:
            logger.removeHandler(records)

    assert (ping.status_code, ping.json()) == (200, {"status": "ready"})
    assert active_after == 0
    for index, (plan, outcome) in enumerate(zip(plans, outcomes, strict=True)):
        expected_close = 1000 if plan.fatal is None else plan.fatal.code
        assert outcome.close_code == expected_close, (index, outcome.close_code)
        assert outcome.errors == outcome.expected_errors, (index, outcome.errors - outcome.expected_errors)
        assert outcome.unexpected == [], index
        for request in outcome.valid:
            # Exactly one ending per valid request: complete, or cancelled (only when a cancel was sent).
            ended = (request.request_id in outcome.completed) + (request.request_id in outcome.cancelled)
            assert ended == 1, (index, request)
            assert request.cancel or request.request_id in outcome.completed, (index, request)
    assert sum(o.close_code == 1011 for o in outcomes) == 0
    # Bad input is the client's problem: warnings without tracebacks, never an error.
    assert [r.getMessage() for r in records.records if r.levelno >= logging.ERROR or r.exc_info] == []
    assert len(records.records) >= total_frames // 2
