"""The bidirectional session over a real socket: uvicorn on a free port, the `websockets` client."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from websockets.asyncio.client import connect

from kokoro_server.engine import ZeroCostEngine
from tests.speech.speech_support import (
    GatedEngine,
    audio_frames,
    expected_request,
    is_event,
    live_server,
    make_app,
    recv_frame,
    recv_until,
    wait_until,
    without_timing,
)

pytestmark = pytest.mark.timeout(30)

TEXT = "The first sentence is short. The second one follows it closely."


def synth(text: str, **fields: Any) -> str:
    return json.dumps({"text": text, **fields})


async def in_thread(fn: Callable[[], Any]) -> Any:
    """Blocking test waits (on pool-thread state) without blocking this client's event loop."""
    return await asyncio.to_thread(fn)


async def test_text_and_binary_client_frames_get_the_same_exact_frames() -> None:
    message = synth(TEXT, request_id="r", voice="am_michael")
    with live_server(make_app(ZeroCostEngine())) as server:
        async with connect(server.ws_url) as ws:
            await ws.send(message)  # str: a text frame
            as_text = await recv_until(ws, is_event("synthesis_complete"))
            await ws.send(message.encode("utf-8"))  # bytes: a binary frame, as SageMaker sends by default
            as_binary = await recv_until(ws, is_event("synthesis_complete"))

    assert without_timing(as_text) == without_timing(as_binary) == expected_request("r", TEXT)


async def test_several_requests_then_close_gets_every_frame_then_code_1000() -> None:
    texts = {"a": "First request.", "b": "Second request here.", "c": "Third."}
    with live_server(make_app(ZeroCostEngine())) as server:
        async with connect(server.ws_url) as ws:
            for rid, text in texts.items():
                await ws.send(synth(text, request_id=rid))
            await ws.send(json.dumps({"type": "close"}))
            frames = await recv_until(ws, lambda f: False)

    expected = [frame for rid, text in texts.items() for frame in expected_request(rid, text)]
    assert without_timing(frames[:-1]) == expected
    assert frames[-1] == ("close", 1000)


async def test_cancel_mid_request_sends_no_audio_after_cancelled() -> None:
    engine = GatedEngine()
    with live_server(make_app(engine)) as server:
        try:
            async with connect(server.ws_url) as ws:
                await ws.send(synth("Short one. Another sentence follows. The end.", request_id="r1"))
                engine.release()
                first = await recv_until(ws, lambda f: f[0] == "bytes")
                await in_thread(lambda: engine.wait_calls(2))
                await ws.send(json.dumps({"type": "cancel", "request_id": "r1"}))
                cancelled = await recv_frame(ws)
                engine.release()
                await in_thread(lambda: engine.wait_finished(2))
                await ws.send(synth("Next.", request_id="r2"))
                engine.open()
                following = await recv_until(ws, is_event("synthesis_complete"))
        finally:
            engine.open()

    assert first == [expected_request("r1", "Short one.")[0], *audio_frames("Short one.")]
    assert cancelled == ("text", {"type": "cancelled", "request_id": "r1"})
    assert without_timing(following) == expected_request("r2", "Next.")
    assert engine.texts == ["Short one.", "Another sentence follows.", "Next."]


async def test_invalid_utf8_in_a_binary_frame_is_an_error_and_the_session_continues() -> None:
    with live_server(make_app(ZeroCostEngine())) as server:
        async with connect(server.ws_url) as ws:
            await ws.send(b'{"text": "\xff"}')
            error = await recv_frame(ws)
            await ws.send(synth("Fine.", request_id="ok"))
            frames = await recv_until(ws, is_event("synthesis_complete"))

    assert error == (
        "text",
        {
            "type": "error",
            "request_id": None,
            "code": "invalid_utf8",
            "message": "message is not valid UTF-8: invalid start byte at byte 10",
        },
    )

    assert without_timing(frames) == expected_request("ok", "Fine.")


async def test_abrupt_disconnect_mid_synthesis_stops_the_sessions_work() -> None:
    engine = GatedEngine()
    with live_server(make_app(engine)) as server:
        try:
            ws = await connect(server.ws_url)
            await ws.send(synth("Short one. Another sentence follows. The end.", request_id="r1"))
            await ws.send(synth("Queued request.", request_id="r2"))
            engine.release()
            await recv_until(ws, lambda f: f[0] == "bytes")
            await in_thread(lambda: engine.wait_calls(2))
            ws.transport.abort()  # no close frame: the TCP connection just drops
            scheduler = server.service.scheduler
            await in_thread(lambda: wait_until(lambda: scheduler.open_lanes == 0, "the session's lane to close"))
            assert (server.service.active_sessions, scheduler.queued) == (0, 0)
            engine.release()
            await in_thread(lambda: wait_until(lambda: scheduler.running == 0, "chunk 2 to end"))
        finally:
            engine.open()

    assert engine.texts == ["Short one.", "Another sentence follows."]


async def test_ping_and_websocket_pings_are_answered_while_the_engine_is_busy() -> None:
    engine = GatedEngine()
    with live_server(make_app(engine)) as server:
        try:
            async with connect(server.ws_url) as ws, httpx.AsyncClient(base_url=server.http_url) as client:
                await ws.send(synth(TEXT, request_id="busy"))
                await in_thread(lambda: engine.wait_calls(1))
                ping = await client.get("/ping")
                pong = await ws.ping()
                await asyncio.wait_for(pong, timeout=5)
                busy_while_answering = engine.in_flight
                engine.open()
                frames = await recv_until(ws, is_event("synthesis_complete"))
        finally:
            engine.open()

    assert (ping.status_code, ping.json()) == (200, {"status": "ready"})
    assert busy_while_answering == 1
    assert without_timing(frames) == expected_request("busy", TEXT)


async def test_a_second_session_is_served_between_the_first_sessions_chunks() -> None:
    engine = GatedEngine()
    long_text = " ".join(f"Sentence {n} of session A." for n in range(1, 5))
    with live_server(make_app(engine, max_concurrent=1)) as server:
        try:
            async with connect(server.ws_url) as a, connect(server.ws_url) as b:
                await a.send(synth(long_text, request_id="a"))
                await in_thread(lambda: engine.wait_calls(1))
                await b.send(synth("Session B.", request_id="b"))
                await in_thread(lambda: wait_until(lambda: server.service.scheduler.queued == 1, "B to queue"))
                engine.open()
                await recv_until(b, is_event("synthesis_complete"))
                await recv_until(a, is_event("synthesis_complete"))
        finally:
            engine.open()

    assert engine.texts == [
        "Sentence 1 of session A.",
        "Session B.",
        *[f"Sentence {n} of session A." for n in range(2, 5)],
    ]
