"""Every resource of the speech server is bounded: queued requests, sessions, idle time, dead peers,
hung engine calls, the test engine's memory. Each limit: its error, and what must go on unaffected."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import socket
import time
from typing import Any

import httpx
import pytest
from starlette import status
from websockets.asyncio.client import connect
from websockets.exceptions import InvalidStatus

from kokoro_server.__main__ import server_config
from kokoro_server.engine import ZeroCostEngine
from kokoro_server.settings import Settings
from speech_protocol import WS_PATH
from tests.speech.speech_support import (
    GatedEngine,
    expected_request,
    is_event,
    live_server,
    make_app,
    production_server,
    receive_until,
    recv_frame,
    recv_until,
    serve_in_process,
    wait_until,
    without_timing,
)

pytestmark = pytest.mark.timeout(30)


def synth(text: str, **fields: Any) -> str:
    return json.dumps({"text": text, **fields})


# --- queued requests per session ---------------------------------------------------------------


def test_a_request_beyond_the_queue_limit_gets_queue_full_and_the_session_goes_on(gated: GatedEngine) -> None:
    with serve_in_process(gated, max_queued_requests=2) as (client, _), client.websocket_connect(WS_PATH) as ws:
        ws.send_text(synth("One.", request_id="r1"))
        ws.send_text(synth("Two.", request_id="r2"))
        ws.send_text(synth("Three.", request_id="r3"))
        assert receive_until(ws, is_event("error")) == [
            ("text", {"type": "synthesis_start", "request_id": "r1", "sample_rate": 24000, "format": "pcm_s16le",
                      "channels": 1}),
            ("text", {"type": "error", "request_id": "r3", "code": "queue_full",
                      "message": "the session already has 2 requests in progress or queued (the limit is 2); "
                                 "wait for one to finish, or cancel one"}),
        ]  # fmt: skip
        # Cancelling the queued request frees its place at once (not when the producer reaches it).
        ws.send_text(json.dumps({"type": "cancel", "request_id": "r2"}))
        assert receive_until(ws, is_event("cancelled")) == [("text", {"type": "cancelled", "request_id": "r2"})]
        ws.send_text(synth("Four.", request_id="r4"))
        gated.open()
        frames = receive_until(ws, is_event("synthesis_complete", "r4"))

    assert without_timing(frames) == expected_request("r1", "One.")[1:] + expected_request("r4", "Four.")
    assert gated.texts == ["One.", "Four."]  # the refused and the cancelled request never reached the engine


def test_cancel_and_resend_in_a_loop_never_grows_the_queue(gated: GatedEngine) -> None:
    # 500 synthesize+cancel pairs behind one long-running request: each cancelled one leaves the
    # queue at once, so none is refused.
    with serve_in_process(gated, max_queued_requests=3) as (client, _), client.websocket_connect(WS_PATH) as ws:
        ws.send_text(synth("Long one.", request_id="long"))
        gated.wait_calls(1)
        for i in range(500):
            ws.send_text(synth("Again.", request_id=f"x{i}"))
            ws.send_text(json.dumps({"type": "cancel", "request_id": f"x{i}"}))
        frames = receive_until(ws, is_event("cancelled", "x499"))
        gated.open()
        frames += receive_until(ws, is_event("synthesis_complete", "long"))

    kinds = [payload["type"] for kind, payload in frames if kind == "text"]
    assert kinds.count("cancelled") == 500
    assert "error" not in kinds
    assert gated.texts == ["Long one."]


# --- sessions per server -------------------------------------------------------------------------


async def test_a_session_beyond_the_limit_is_refused_with_503_before_the_upgrade() -> None:
    with live_server(make_app(ZeroCostEngine(), max_sessions=2)) as server:
        async with connect(server.ws_url) as first, connect(server.ws_url) as second:
            with pytest.raises(InvalidStatus) as refused:
                await connect(server.ws_url)
            response = refused.value.response
            assert response.status_code == 503
            assert json.loads(response.body or b"") == {
                "code": "server_busy",
                "message": "the server has 2 sessions open; try again later",
            }
            # /ping and the open sessions are unaffected.
            async with httpx.AsyncClient() as http:
                ping = await http.get(f"{server.http_url}/ping")
            assert (ping.status_code, ping.json()) == (200, {"status": "ready"})
            for ws, rid in ((first, "a"), (second, "b")):
                await ws.send(synth("Still here.", request_id=rid))
                frames = await recv_until(ws, is_event("synthesis_complete"))
                assert without_timing(frames) == expected_request(rid, "Still here.")
        # Once they are closed, a new session is accepted again.
        await asyncio.to_thread(wait_until, lambda: server.service.active_sessions == 0, "sessions to end")
        async with connect(server.ws_url) as again:
            await again.send(synth("Back.", request_id="c"))
            assert without_timing(await recv_until(again, is_event("synthesis_complete"))) == expected_request(
                "c", "Back."
            )


# --- idle sessions and dead peers ------------------------------------------------------------------


def test_an_idle_session_is_closed_with_1001() -> None:
    with (
        serve_in_process(ZeroCostEngine(), idle_timeout_s=0.3) as (client, served),
        client.websocket_connect(WS_PATH) as ws,
    ):
        message = ws.receive()
    assert message == {"type": "websocket.close", "code": status.WS_1001_GOING_AWAY, "reason": "idle timeout"}
    assert served.service.active_sessions == 0


def test_a_session_is_not_idle_while_a_request_is_in_progress(gated: GatedEngine) -> None:
    with (
        serve_in_process(gated, idle_timeout_s=0.3) as (client, _),
        client.websocket_connect(WS_PATH) as ws,
    ):
        ws.send_text(synth("Slow one.", request_id="r"))
        gated.wait_calls(1)
        time.sleep(0.8)  # longer than the idle timeout, with a request open
        gated.open()
        frames = receive_until(ws, lambda frame: frame[0] == "close")
    # The request completes, then the idle clock starts and the session ends.
    assert without_timing(frames[:-1]) == expected_request("r", "Slow one.")
    assert frames[-1] == ("close", status.WS_1001_GOING_AWAY)


def test_messages_keep_a_session_alive() -> None:
    with (
        serve_in_process(ZeroCostEngine(), idle_timeout_s=0.4) as (client, _),
        client.websocket_connect(WS_PATH) as ws,
    ):
        for _ in range(4):
            time.sleep(0.2)
            ws.send_text("not json")
            assert receive_until(ws, is_event("error"))[0][1]["code"] == "invalid_json"
        ws.send_text(json.dumps({"type": "close"}))
        assert ws.receive() == {"type": "websocket.close", "code": 1000, "reason": ""}


def _half_open_client(port: int) -> socket.socket:
    """A peer that completes the WebSocket handshake and then never reads or answers anything."""
    sock = socket.create_connection(("127.0.0.1", port))
    key = base64.b64encode(os.urandom(16)).decode()
    sock.sendall(
        (
            f"GET {WS_PATH} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n"
        ).encode()
    )
    response = b""
    while b"\r\n\r\n" not in response:
        response += sock.recv(4096)
    assert response.startswith(b"HTTP/1.1 101"), response
    return sock


def test_keepalive_pings_end_a_half_open_connection() -> None:
    engine = ZeroCostEngine()
    with production_server(engine, ws_ping_interval_s=0.2, ws_ping_timeout_s=0.2) as server:
        sock = _half_open_client(server.port)
        try:
            wait_until(lambda: server.service.active_sessions == 1, "the session to open")
            wait_until(lambda: server.service.active_sessions == 0, "the dead peer's session to end", timeout_s=5)
        finally:
            sock.close()


async def test_keepalive_pings_keep_a_live_client_connected() -> None:
    with production_server(ZeroCostEngine(), ws_ping_interval_s=0.1, ws_ping_timeout_s=0.3) as server:
        async with connect(server.ws_url, ping_interval=None) as ws:  # this client answers pings on its own
            await asyncio.sleep(1.0)
            await ws.send(synth("Still connected.", request_id="r"))
            frames = await recv_until(ws, is_event("synthesis_complete"))
        assert without_timing(frames) == expected_request("r", "Still connected.")


@pytest.mark.parametrize(("interval", "expected"), [(20.0, 20.0), (0.0, None)])
def test_the_uvicorn_config_pings_unless_turned_off(interval: float, expected: float | None) -> None:
    config = server_config(Settings(ws_ping_interval_s=interval, ws_ping_timeout_s=7.0), ZeroCostEngine())
    assert (config.ws_ping_interval, config.ws_ping_timeout) == (expected, 7.0)


# --- one engine call's time limit --------------------------------------------------------------------


def test_a_hung_synthesis_fails_its_request_and_ping_reports_stalled_until_it_returns(gated: GatedEngine) -> None:
    with (
        serve_in_process(gated, synthesis_timeout_s=0.2, max_concurrent=1) as (client, served),
        client.websocket_connect(WS_PATH) as ws,
    ):
        ws.send_text(synth("Hangs here.", request_id="hung"))
        frames = receive_until(ws, is_event("error"))
        assert frames == [
            ("text", {"type": "synthesis_start", "request_id": "hung", "sample_rate": 24000, "format": "pcm_s16le",
                      "channels": 1}),
            ("text", {"type": "error", "request_id": "hung", "code": "synthesis_failed",
                      "message": "synthesis took longer than 0.2 s"}),
        ]  # fmt: skip
        # The one slot is still held by the hung call: unhealthy, so SageMaker replaces the instance.
        assert served.service.scheduler.stuck == 1
        ping = client.get("/ping")
        assert (ping.status_code, ping.json()) == (503, {"status": "stalled"})
        # The session goes on; when the call finally returns, the slot is free and /ping healthy again.
        gated.open()
        wait_until(lambda: served.service.scheduler.stuck == 0, "the hung call to return")
        ping = client.get("/ping")
        assert (ping.status_code, ping.json()) == (200, {"status": "ready"})
        ws.send_text(synth("Works again.", request_id="next"))
        frames = receive_until(ws, is_event("synthesis_complete"))
    assert without_timing(frames) == expected_request("next", "Works again.")
    assert gated.texts == ["Hangs here.", "Works again."]


def test_one_stuck_slot_of_two_is_not_stalled(gated: GatedEngine) -> None:
    with (
        serve_in_process(gated, synthesis_timeout_s=0.2, max_concurrent=2) as (client, served),
        client.websocket_connect(WS_PATH) as ws,
    ):
        ws.send_text(synth("Hangs here.", request_id="hung"))
        receive_until(ws, is_event("error"))
        assert served.service.scheduler.stuck == 1
        assert client.get("/ping").status_code == 200


# --- the zero-cost test engine -------------------------------------------------------------------------


def test_the_zero_cost_engine_remembers_only_its_last_calls() -> None:
    engine = ZeroCostEngine(history=3)
    for i in range(5):
        engine.synthesize(f"text {i}", "af_heart", 1.0)
    assert engine.calls == [(f"text {i}", "af_heart", 1.0) for i in (2, 3, 4)]
    assert engine.call_count == 5
    assert len(ZeroCostEngine().calls) == 0
    with pytest.raises(ValueError, match="history must be >= 0, got -1"):
        ZeroCostEngine(history=-1)


def test_the_zero_cost_engine_is_never_the_default() -> None:
    assert Settings().engine == "kokoro"


# --- server pieces still answer while a session floods -------------------------------------------------


async def test_a_flood_of_bad_frames_leaves_other_sessions_working() -> None:
    with live_server(make_app(ZeroCostEngine())) as server:
        async with connect(server.ws_url) as flooder, connect(server.ws_url) as other:
            for _ in range(300):
                await flooder.send("[" * 2000 + "]" * 2000)
            await other.send(synth("Unaffected.", request_id="u"))
            frames = await recv_until(other, is_event("synthesis_complete"))
            answers = [await recv_frame(flooder) for _ in range(300)]
    assert without_timing(frames) == expected_request("u", "Unaffected.")
    assert answers == [
        ("text", {"type": "error", "request_id": None, "code": "invalid_json",
                  "message": "message is not valid JSON: nested too deeply"})
    ] * 300  # fmt: skip
