"""The bidirectional session, in process (Starlette TestClient): exact frames, their order, and what must not happen."""

from __future__ import annotations

import asyncio
import json
from collections.abc import MutableMapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from starlette import status
from starlette.websockets import WebSocket

from kokoro_server.audio import frame_bytes
from kokoro_server.chunking import SentenceChunker
from kokoro_server.engine import ZeroCostEngine
from kokoro_server.scheduler import FairScheduler
from kokoro_server.session import Session, SessionLimits
from speech_protocol import (
    WS_PATH,
    ErrorCode,
    ProtocolError,
    Synthesize,
    check_synthesis,
    encode_server_event,
    parse_client_message,
)
from tests.speech.speech_support import (
    Frame,
    GatedEngine,
    audio_frames,
    chunks_of,
    expected_request,
    is_event,
    message_to_frame,
    receive_until,
    serve_in_process,
    wait_until,
    without_timing,
)

pytestmark = pytest.mark.timeout(30)

TWO_SENTENCES = "The first sentence is short. The second one follows it closely."
THREE_SENTENCES = "Short one. Another sentence follows. The last sentence ends it."
"""Its first chunk fits in one binary frame, so "chunk 1 fully sent" is one frame received."""


def synth(text: str, **fields: Any) -> str:
    return json.dumps({"text": text, **fields})


def test_one_request_gives_start_audio_complete_in_order() -> None:
    engine = ZeroCostEngine()
    with serve_in_process(engine) as (client, _), client.websocket_connect("/invocations-bidirectional-stream") as ws:
        ws.send_text(synth(TWO_SENTENCES, request_id="r1"))
        frames = receive_until(ws, is_event("synthesis_complete"))

    assert without_timing(frames) == expected_request("r1", TWO_SENTENCES)
    # Two chunks of 1.68 s and 2.04 s of audio, cut into frames of at most 1 s.
    assert [len(payload) for kind, payload in frames if kind == "bytes"] == [48000, 32640, 48000, 48000, 1920]
    assert engine.calls == [(chunk, "af_heart", 1.0) for chunk in chunks_of(TWO_SENTENCES)]


def test_binary_frame_is_answered_exactly_like_a_text_frame() -> None:
    message = synth(TWO_SENTENCES, request_id="same", voice="am_michael", speed=1.25)
    received = []
    for send in ("text", "bytes"):
        with (
            serve_in_process(ZeroCostEngine()) as (client, _),
            client.websocket_connect("/invocations-bidirectional-stream") as ws,
        ):
            if send == "text":
                ws.send_text(message)
            else:
                ws.send_bytes(message.encode("utf-8"))
            received.append(without_timing(receive_until(ws, is_event("synthesis_complete"))))

    assert received[0] == received[1] == expected_request("same", TWO_SENTENCES, speed=1.25)


def test_many_requests_in_one_session_are_answered_in_order_with_their_voice_and_speed() -> None:
    engine = ZeroCostEngine()
    requests = [
        ("a", "First request here.", "af_heart", 1.0),
        ("b", "Second one.", "am_michael", 0.5),
        ("c", "Third.", "af_heart", 2.0),
    ]
    with serve_in_process(engine) as (client, _), client.websocket_connect("/invocations-bidirectional-stream") as ws:
        for rid, text, voice, speed in requests:
            ws.send_text(synth(text, request_id=rid, voice=voice, speed=speed))
        frames = receive_until(ws, is_event("synthesis_complete", "c"))

    expected = []
    for rid, text, _, speed in requests:
        expected += expected_request(rid, text, speed=speed)
    assert without_timing(frames) == expected
    assert engine.calls == [(text, voice, speed) for _, text, voice, speed in requests]


def test_missing_request_id_gets_a_generated_one_used_by_every_frame() -> None:
    with (
        serve_in_process(ZeroCostEngine()) as (client, _),
        client.websocket_connect("/invocations-bidirectional-stream") as ws,
    ):
        ws.send_text(json.dumps({"type": "synthesize", "text": "Hello there."}))
        frames = receive_until(ws, is_event("synthesis_complete"))

    request_id = frames[0][1]["request_id"]
    assert len(request_id) == 32
    assert set(request_id) <= set("0123456789abcdef")
    assert without_timing(frames) == expected_request(request_id, "Hello there.")


def test_timestamps_frame_precedes_each_chunk_with_request_relative_times() -> None:
    text = "Hello big world. Bye now."
    with (
        serve_in_process(ZeroCostEngine()) as (client, _),
        client.websocket_connect("/invocations-bidirectional-stream") as ws,
    ):
        ws.send_text(synth(text, request_id="t", timestamps=True))
        frames = receive_until(ws, is_event("synthesis_complete"))

    kinds = [(k, p["type"]) if k == "text" else (k, None) for k, p in frames]
    assert kinds == [
        ("text", "synthesis_start"),
        ("text", "timestamps"),
        ("bytes", None),
        ("text", "timestamps"),
        ("bytes", None),
        ("text", "synthesis_complete"),
    ]
    # ZeroCostEngine: 0.06 s per character; chunk 2 starts after chunk 1's 16 characters (0.96 s).
    assert frames[1][1] == {
        "type": "timestamps",
        "request_id": "t",
        "chunk": 0,
        "words": [
            {"word": "Hello", "start_s": 0.0, "end_s": 0.3},
            {"word": "big", "start_s": 0.36, "end_s": 0.54},
            {"word": "world.", "start_s": 0.6, "end_s": 0.96},
        ],
    }
    assert frames[3][1] == {
        "type": "timestamps",
        "request_id": "t",
        "chunk": 1,
        "words": [{"word": "Bye", "start_s": 0.96, "end_s": 1.14}, {"word": "now.", "start_s": 1.2, "end_s": 1.44}],
    }


def test_long_first_sentence_is_cut_at_a_clause_for_the_first_chunk_only() -> None:
    text = "When the weather is fine and the sun is out, we walk down to the river together. Then, at last, we rest."
    engine = ZeroCostEngine()
    with serve_in_process(engine) as (client, _), client.websocket_connect("/invocations-bidirectional-stream") as ws:
        ws.send_text(synth(text, request_id="c"))
        receive_until(ws, is_event("synthesis_complete"))

    assert [t for t, _, _ in engine.calls] == [
        "When the weather is fine and the sun is out,",
        "we walk down to the river together.",
        "Then, at last, we rest.",
    ]


# --- close -----------------------------------------------------------------------------------


def test_close_finishes_accepted_requests_then_closes_normally(gated: GatedEngine) -> None:
    with serve_in_process(gated) as (client, _), client.websocket_connect("/invocations-bidirectional-stream") as ws:
        ws.send_text(synth(TWO_SENTENCES, request_id="r1"))
        assert receive_until(ws, is_event("synthesis_start"))[-1][1]["request_id"] == "r1"
        ws.send_text(synth("Queued before close.", request_id="r2"))
        ws.send_text(json.dumps({"type": "close"}))
        ws.send_text(synth("After close.", request_id="r3"))
        ws.send_text(json.dumps({"type": "close"}))
        # Both refusals come before any audio: the engine has produced nothing yet.
        refusals = receive_until(ws, lambda f: f[0] == "text" and f[1].get("request_id") is None)
        gated.open()
        rest = receive_until(ws, lambda f: False)

    assert refusals[0] == (
        "text",
        {
            "type": "error",
            "request_id": "r3",
            "code": "session_closing",
            "message": "the session is closing; it takes no new requests",
        },
    )
    assert refusals[1] == (
        "text",
        {"type": "error", "request_id": None, "code": "session_closing", "message": "close was already received"},
    )
    assert without_timing(rest[:-1]) == expected_request("r1", TWO_SENTENCES)[1:] + expected_request(
        "r2", "Queued before close."
    )
    assert rest[-1] == ("close", status.WS_1000_NORMAL_CLOSURE)
    assert gated.texts == [*chunks_of(TWO_SENTENCES), "Queued before close."]


def test_close_with_nothing_pending_closes_at_once() -> None:
    with (
        serve_in_process(ZeroCostEngine()) as (client, _),
        client.websocket_connect("/invocations-bidirectional-stream") as ws,
    ):
        ws.send_bytes(b'{"type": "close"}')
        assert message_to_frame(ws.receive()) == ("close", status.WS_1000_NORMAL_CLOSURE)


# --- cancel ----------------------------------------------------------------------------------


def test_cancel_mid_request_stops_it_and_no_audio_follows_cancelled(gated: GatedEngine) -> None:
    with serve_in_process(gated) as (client, _), client.websocket_connect("/invocations-bidirectional-stream") as ws:
        ws.send_text(synth(THREE_SENTENCES, request_id="r1"))
        gated.release()  # chunk 1 only
        first = receive_until(ws, lambda f: f[0] == "bytes")
        gated.wait_calls(2)  # chunk 2 is in the engine, blocked
        ws.send_text(json.dumps({"type": "cancel"}))
        after_cancel = receive_until(ws, is_event("cancelled"))
        gated.release()  # chunk 2 finishes; its audio must be discarded
        gated.wait_finished(2)
        ws.send_text(synth("Next one.", request_id="r2"))
        gated.open()
        following = receive_until(ws, is_event("synthesis_complete"))

    assert first == [expected_request("r1", THREE_SENTENCES)[0], *audio_frames("Short one.")]
    assert after_cancel == [("text", {"type": "cancelled", "request_id": "r1"})]
    # The very next frames belong to r2: nothing of r1 after `cancelled`.
    assert without_timing(following) == expected_request("r2", "Next one.")
    assert gated.texts == ["Short one.", "Another sentence follows.", "Next one."]


def test_cancel_by_id_drops_a_queued_request_before_it_starts(gated: GatedEngine) -> None:
    with serve_in_process(gated) as (client, _), client.websocket_connect("/invocations-bidirectional-stream") as ws:
        ws.send_text(synth("Running now.", request_id="r1"))
        ws.send_text(synth("Waiting its turn.", request_id="r2"))
        gated.wait_calls(1)
        ws.send_text(json.dumps({"type": "cancel", "request_id": "r2"}))
        frames = receive_until(ws, is_event("cancelled"))
        gated.open()
        frames += receive_until(ws, is_event("synthesis_complete"))

    assert without_timing(frames) == [
        expected_request("r1", "Running now.")[0],
        ("text", {"type": "cancelled", "request_id": "r2"}),
        *expected_request("r1", "Running now.")[1:],
    ]
    assert gated.texts == ["Running now."]


def test_cancel_of_unknown_or_finished_request_is_an_error_and_the_session_goes_on() -> None:
    with (
        serve_in_process(ZeroCostEngine()) as (client, _),
        client.websocket_connect("/invocations-bidirectional-stream") as ws,
    ):
        ws.send_text(synth("Done soon.", request_id="r1"))
        receive_until(ws, is_event("synthesis_complete"))
        ws.send_text(json.dumps({"type": "cancel", "request_id": "r1"}))
        ws.send_text(json.dumps({"type": "cancel"}))
        errors = [message_to_frame(ws.receive()), message_to_frame(ws.receive())]
        ws.send_text(synth("Still here.", request_id="r2"))
        frames = receive_until(ws, is_event("synthesis_complete"))

    assert errors == [
        (
            "text",
            {
                "type": "error",
                "request_id": "r1",
                "code": "unknown_request",
                "message": "cancel: request 'r1' is not in progress",
            },
        ),
        (
            "text",
            {
                "type": "error",
                "request_id": None,
                "code": "unknown_request",
                "message": "cancel: no request is in progress",
            },
        ),
    ]
    assert without_timing(frames) == expected_request("r2", "Still here.")


# --- bad input -------------------------------------------------------------------------------

BAD_MESSAGES: list[tuple[str, str | bytes, ErrorCode, str | None]] = [
    ("invalid_utf8", b'{"text": "caf\xe9"}', ErrorCode.INVALID_UTF8, None),
    ("invalid_json", '{"text": "unterminated', ErrorCode.INVALID_JSON, None),
    ("invalid_json_constant", '{"text": "x", "speed": NaN}', ErrorCode.INVALID_JSON, None),
    ("not_an_object", '["text", "hello"]', ErrorCode.NOT_AN_OBJECT, None),
    ("unknown_type", '{"type": "sing", "request_id": "u1"}', ErrorCode.UNKNOWN_TYPE, "u1"),
    ("invalid_field", '{"text": "hi", "speed": "fast", "request_id": "f1"}', ErrorCode.INVALID_FIELD, "f1"),
    ("invalid_request_id", '{"text": "hi", "request_id": 7}', ErrorCode.INVALID_FIELD, None),
    ("missing_text", '{"voice": "af_heart", "request_id": "m1"}', ErrorCode.MISSING_TEXT, "m1"),
    ("empty_text", '{"text": "   ", "request_id": "e1"}', ErrorCode.EMPTY_TEXT, "e1"),
    ("text_too_long", json.dumps({"text": "x" * 41, "request_id": "l1"}), ErrorCode.TEXT_TOO_LONG, "l1"),
    ("unknown_voice", '{"text": "hi", "voice": "zz_nobody", "request_id": "v1"}', ErrorCode.UNKNOWN_VOICE, "v1"),
    ("speed_out_of_range", '{"text": "hi", "speed": 3.5, "request_id": "s1"}', ErrorCode.SPEED_OUT_OF_RANGE, "s1"),
]


def _protocol_error(data: str | bytes) -> dict[str, Any]:
    """The error frame the protocol module defines for `data` (the server must send exactly it)."""
    try:
        msg = parse_client_message(data)
        assert isinstance(msg, Synthesize)
        check_synthesis(msg, max_text_chars=40, voices=ZeroCostEngine().voices)
    except ProtocolError as exc:
        frame: dict[str, Any] = json.loads(encode_server_event(exc.to_event()))
        return frame
    raise AssertionError(f"{data!r} is a valid message")


@pytest.mark.parametrize(("case", "data", "code", "request_id"), BAD_MESSAGES, ids=[c[0] for c in BAD_MESSAGES])
def test_bad_input_gets_an_error_frame_and_the_session_continues(
    case: str, data: str | bytes, code: ErrorCode, request_id: str | None
) -> None:
    engine = ZeroCostEngine()
    with (
        serve_in_process(engine, max_text_chars=40) as (client, _),
        client.websocket_connect("/invocations-bidirectional-stream") as ws,
    ):
        if isinstance(data, bytes):
            ws.send_bytes(data)
        else:
            ws.send_text(data)
        error = message_to_frame(ws.receive())
        ws.send_text(synth("Still speaking.", request_id="ok"))
        frames = receive_until(ws, is_event("synthesis_complete"))

    expected = _protocol_error(data)
    assert (expected["code"], expected["request_id"]) == (code.value, request_id)
    assert error == ("text", expected)
    assert without_timing(frames) == expected_request("ok", "Still speaking.")
    assert engine.calls == [("Still speaking.", "af_heart", 1.0)]


def test_duplicate_request_id_is_refused_while_the_first_is_in_progress(gated: GatedEngine) -> None:
    with serve_in_process(gated) as (client, _), client.websocket_connect("/invocations-bidirectional-stream") as ws:
        ws.send_text(synth("First.", request_id="dup"))
        gated.wait_calls(1)
        ws.send_text(synth("Second.", request_id="dup"))
        frames = receive_until(ws, is_event("error"))
        gated.open()
        frames += receive_until(ws, is_event("synthesis_complete"))
        ws.send_text(synth("Reused after completion.", request_id="dup"))
        frames += receive_until(ws, is_event("synthesis_complete"))

    assert without_timing(frames) == [
        expected_request("dup", "First.")[0],
        (
            "text",
            {
                "type": "error",
                "request_id": "dup",
                "code": "duplicate_request_id",
                "message": "request 'dup' is still in progress",
            },
        ),
        *expected_request("dup", "First.")[1:],
        *expected_request("dup", "Reused after completion."),
    ]
    assert gated.texts == ["First.", "Reused after completion."]


def test_engine_failure_fails_only_that_request() -> None:
    engine = GatedEngine(gated=False, fail_on="explode")
    with serve_in_process(engine) as (client, _), client.websocket_connect("/invocations-bidirectional-stream") as ws:
        ws.send_text(synth("Fine first. Then explode here. Never reached.", request_id="bad"))
        ws.send_text(synth("After the failure.", request_id="good"))
        frames = receive_until(ws, is_event("synthesis_complete", "good"))

    assert without_timing(frames) == [
        expected_request("bad", "Fine first.")[0],
        *audio_frames("Fine first."),
        (
            "text",
            {
                "type": "error",
                "request_id": "bad",
                "code": "synthesis_failed",
                "message": "synthesis failed; see server logs",
            },
        ),
        *expected_request("good", "After the failure."),
    ]
    assert engine.texts == ["Fine first.", "Then explode here.", "After the failure."]


def test_a_receive_message_without_text_or_bytes_closes_with_unsupported_data() -> None:
    with (
        serve_in_process(ZeroCostEngine()) as (client, _),
        client.websocket_connect("/invocations-bidirectional-stream") as ws,
    ):
        ws.send({"type": "websocket.receive"})
        assert message_to_frame(ws.receive()) == ("close", status.WS_1003_UNSUPPORTED_DATA)


# --- disconnect, liveness, fairness, concurrency ----------------------------------------------


def test_disconnect_mid_synthesis_stops_all_work_of_the_session(gated: GatedEngine) -> None:
    with serve_in_process(gated) as (client, served):
        with client.websocket_connect("/invocations-bidirectional-stream") as ws:
            ws.send_text(synth(THREE_SENTENCES, request_id="r1"))
            ws.send_text(synth("A second request.", request_id="r2"))
            gated.release()
            receive_until(ws, lambda f: f[0] == "bytes")
            gated.wait_calls(2)  # chunk 2 is running when the client leaves
        scheduler = served.service.scheduler
        assert (served.service.active_sessions, scheduler.open_lanes, scheduler.queued) == (0, 0, 0)
        gated.release()
        gated.wait_finished(2)
        wait_until(lambda: scheduler.running == 0, "the last engine job to end")

        # The engine is free again, and nothing of the gone session was ever started.
        gated.open()
        with client.websocket_connect("/invocations-bidirectional-stream") as ws:
            ws.send_text(synth("New session.", request_id="n"))
            receive_until(ws, is_event("synthesis_complete"))

    assert gated.texts == ["Short one.", "Another sentence follows.", "New session."]


def test_ping_is_served_while_the_engine_is_busy(gated: GatedEngine) -> None:
    with (
        serve_in_process(gated) as (client, _),
        client.websocket_connect("/invocations-bidirectional-stream") as ws,
    ):
        ws.send_text(synth(TWO_SENTENCES, request_id="r1"))
        gated.wait_calls(1)
        response = client.get("/ping")
        in_flight_during_ping = gated.in_flight
        gated.open()
        receive_until(ws, is_event("synthesis_complete"))

    assert (response.status_code, response.json()) == (200, {"status": "ready"})
    assert in_flight_during_ping == 1


def test_a_second_session_first_chunk_is_not_starved_by_a_long_text(gated: GatedEngine) -> None:
    long_text = " ".join(f"Sentence number {n} of the long answer." for n in range(1, 7))
    with (
        serve_in_process(gated, max_concurrent=1) as (client, served),
        client.websocket_connect("/invocations-bidirectional-stream") as a,
    ):
        a.send_text(synth(long_text, request_id="a"))
        gated.wait_calls(1)  # A's chunk 1 is running
        with client.websocket_connect("/invocations-bidirectional-stream") as b:
            b.send_text(synth("Session B speaks.", request_id="b"))
            wait_until(lambda: served.service.scheduler.queued == 1, "B's first chunk to queue")
            gated.open()
            receive_until(b, is_event("synthesis_complete"))
        receive_until(a, is_event("synthesis_complete"))

    assert gated.texts == [
        "Sentence number 1 of the long answer.",
        "Session B speaks.",
        *[f"Sentence number {n} of the long answer." for n in range(2, 7)],
    ]


@pytest.mark.parametrize("max_concurrent", [1, 2])
def test_syntheses_run_at_most_max_concurrent_at_once_and_excess_work_waits(max_concurrent: int) -> None:
    engine = GatedEngine()
    sessions = 4
    try:
        with serve_in_process(engine, max_concurrent=max_concurrent) as (client, served):
            sockets = [client.websocket_connect("/invocations-bidirectional-stream") for _ in range(sessions)]
            opened = [s.__enter__() for s in sockets]
            for i, ws in enumerate(opened):
                ws.send_text(synth("Two short ones. Here they are.", request_id=f"s{i}"))
            engine.wait_calls(max_concurrent)
            wait_until(lambda: served.service.scheduler.queued == sessions - max_concurrent, "the rest to queue")
            queued = served.service.scheduler.queued
            engine.open()
            results = [without_timing(receive_until(ws, is_event("synthesis_complete"))) for ws in opened]
            for s in sockets:
                s.__exit__(None, None, None)
    finally:
        engine.open()

    assert queued == sessions - max_concurrent
    assert engine.max_in_flight == max_concurrent
    assert results == [expected_request(f"s{i}", "Two short ones. Here they are.") for i in range(sessions)]


# --- a slow reader, driven at the ASGI level ---------------------------------------------------


class StalledClient:
    """ASGI receive/send of a client that stops reading audio until the test lets it."""

    def __init__(self) -> None:
        self.inbox: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self.sent: list[Frame] = []
        self.reading = asyncio.Event()

    async def receive(self) -> dict[str, Any]:
        return await self.inbox.get()

    async def send(self, message: MutableMapping[str, Any]) -> None:
        if message["type"] == "websocket.send" and message.get("bytes") is not None:
            await self.reading.wait()
        self.sent.append(("accept", None) if message["type"] == "websocket.accept" else message_to_frame(message))


async def test_a_slow_reader_pauses_synthesis_and_cancel_stops_between_frames_of_a_chunk() -> None:
    sentences = [f"Sentence {n} is long enough to fill four audio frames." for n in range(1, 9)]
    client = StalledClient()
    client.inbox.put_nowait({"type": "websocket.connect"})
    websocket = WebSocket({"type": "websocket", "path": WS_PATH, "headers": []}, client.receive, client.send)
    engine = ZeroCostEngine()
    with ThreadPoolExecutor(max_workers=1) as pool:
        lane = FairScheduler(1, pool).lane("stalled")
        limits = SessionLimits(max_text_chars=5000, frame_bytes=frame_bytes(1000))
        run = asyncio.create_task(Session(websocket, engine, lane, SentenceChunker(), limits).run())
        client.inbox.put_nowait({"type": "websocket.receive", "text": synth(" ".join(sentences), request_id="r")})
        # The writer is stuck on chunk 1's first frame; chunks 2 and 3 wait in the outbox and chunk 4,
        # synthesized, waits for room: the engine gets no fifth chunk while the client does not read.
        async with asyncio.timeout(10):
            while len(engine.calls) < 4:  # noqa: ASYNC110 - engine calls happen in a pool thread
                await asyncio.sleep(0.001)
        await asyncio.sleep(0.05)
        client.inbox.put_nowait({"type": "websocket.receive", "text": json.dumps({"type": "cancel"})})
        await asyncio.sleep(0.05)
        client.reading.set()
        client.inbox.put_nowait({"type": "websocket.receive", "text": json.dumps({"type": "close"})})
        async with asyncio.timeout(10):
            await run

    assert client.sent == [
        ("accept", None),
        expected_request("r", sentences[0])[0],
        audio_frames(sentences[0])[0],  # in flight when cancel arrived; the chunk's other three never go
        ("text", {"type": "cancelled", "request_id": "r"}),
        ("close", status.WS_1000_NORMAL_CLOSURE),
    ]
    assert [text for text, _, _ in engine.calls] == sentences[:4]
    assert len(audio_frames(sentences[0])) == 4
