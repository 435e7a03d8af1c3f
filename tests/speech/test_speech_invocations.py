"""POST /invocations: streamed PCM or WAV, chunk by chunk; bad input as 4xx JSON; readiness."""

from __future__ import annotations

import asyncio
import json
import threading
from typing import Any

import httpx
import pytest

from kokoro_server.audio import wav_stream_header
from kokoro_server.engine import ZeroCostEngine
from kokoro_server.service import EngineLoader, LoadedEngine
from tests.speech.speech_support import GatedEngine, chunks_of, live_server, make_app, serve_in_process, wait_until

pytestmark = pytest.mark.timeout(30)

TEXT = "The first sentence is short. The second one follows it closely."


def pcm_of(text: str, *, voice: str = "af_heart", speed: float = 1.0) -> bytes:
    engine = ZeroCostEngine()
    return b"".join(engine.synthesize(chunk, voice, speed).pcm for chunk in chunks_of(text))


def test_default_is_raw_pcm_of_every_chunk_in_order() -> None:
    engine = ZeroCostEngine()
    with serve_in_process(engine) as (client, _):
        response = client.post("/invocations", json={"text": TEXT, "voice": "am_michael", "speed": 1.5})

    assert response.status_code == 200
    assert response.headers["content-type"] == "application/octet-stream"
    assert (
        response.headers["x-audio-format"],
        response.headers["x-sample-rate"],
        response.headers["x-audio-channels"],
    ) == (
        "pcm_s16le",
        "24000",
        "1",
    )
    assert response.content == pcm_of(TEXT, voice="am_michael", speed=1.5)
    assert engine.calls == [(chunk, "am_michael", 1.5) for chunk in chunks_of(TEXT)]


@pytest.mark.parametrize(
    ("body", "headers"),
    [({"text": TEXT, "format": "wav"}, {}), ({"text": TEXT}, {"Accept": "audio/x-wav;q=0.9, */*;q=0.1"})],
    ids=["format-field", "accept-header"],
)
def test_wav_on_request_is_a_streaming_header_then_the_pcm(body: dict[str, Any], headers: dict[str, str]) -> None:
    with serve_in_process(ZeroCostEngine()) as (client, _):
        response = client.post("/invocations", json=body, headers=headers)

    assert response.status_code == 200
    assert response.headers["content-type"] == "audio/wav"
    assert response.content == wav_stream_header() + pcm_of(TEXT)


def test_format_field_wins_over_accept() -> None:
    with serve_in_process(ZeroCostEngine()) as (client, _):
        response = client.post("/invocations", json={"text": TEXT, "format": "pcm"}, headers={"Accept": "audio/wav"})
    assert response.content == pcm_of(TEXT)


@pytest.mark.parametrize(
    ("body", "status", "code", "message"),
    [
        (b"{not json", 400, "invalid_json", None),
        (b"\xff\xfe", 400, "invalid_utf8", None),
        (b"[]", 400, "not_an_object", "message must be a JSON object, got list"),
        (b'{"voice": "af_heart"}', 400, "missing_text", "'text' is required"),
        (b'{"text": " "}', 400, "empty_text", "'text' is empty"),
        (b'{"text": "hi", "speed": 9}', 400, "speed_out_of_range", "'speed' must be between 0.5 and 2.0, got 9"),
        (
            b'{"text": "hi", "voice": "nobody"}',
            400,
            "unknown_voice",
            "unknown voice 'nobody'; available: af_heart, am_michael",
        ),
        (json.dumps({"text": "x" * 41}).encode(), 413, "text_too_long", "'text' has 41 characters; the limit is 40"),
        (b"x" * 10_000, 413, "text_too_long", "the request body exceeds 4576 bytes"),
        (b'{"text": "hi", "format": "mp3"}', 400, "invalid_field", "'format' must be 'pcm' or 'wav', got 'mp3'"),
        (
            b'{"type": "cancel"}',
            400,
            "unknown_type",
            "POST /invocations only synthesizes; cancel and close are WebSocket messages",
        ),
        (
            b'{"text": "hi", "timestamps": true}',
            400,
            "invalid_field",
            "'timestamps' are only sent on the WebSocket route",
        ),
    ],
)
def test_bad_input_is_a_4xx_with_a_json_code(body: bytes, status: int, code: str, message: str | None) -> None:
    engine = ZeroCostEngine()
    with serve_in_process(engine, max_text_chars=40) as (client, _):
        response = client.post("/invocations", content=body, headers={"Content-Type": "application/json"})

    assert response.status_code == status
    assert response.headers["content-type"] == "application/json"
    assert response.json()["code"] == code
    if message is not None:
        assert response.json() == {"code": code, "message": message}
    assert engine.calls == []


def test_not_ready_until_the_loader_returns_then_ready() -> None:
    released = threading.Event()

    def load() -> LoadedEngine:
        if not released.wait(10):
            raise TimeoutError("never released")
        return LoadedEngine(ZeroCostEngine(), "cpu")

    with serve_in_process(EngineLoader(load)) as (client, _):
        ping = client.get("/ping")
        post = client.post("/invocations", json={"text": "Hello."})
        with client.websocket_connect("/invocations-bidirectional-stream") as ws:
            refused = ws.receive()
        released.set()
        wait_until(lambda: client.get("/ping").status_code == 200, "the engine to load")
        after = client.post("/invocations", json={"text": "Hello."})

    assert (ping.status_code, ping.json()) == (503, {"status": "loading"})
    assert (post.status_code, post.json()) == (503, {"code": "not_ready", "message": "the speech model is loading"})
    assert refused == {"type": "websocket.close", "code": 1013, "reason": "model loading"}
    assert (after.status_code, after.content) == (200, pcm_of("Hello."))


def test_a_failed_load_stays_unhealthy_and_tells_the_owner() -> None:
    failures: list[BaseException] = []

    def load() -> LoadedEngine:
        raise FileNotFoundError("/opt/ml/model/config.json")

    with serve_in_process(EngineLoader(load, on_failure=failures.append)) as (client, _):
        wait_until(lambda: bool(failures), "the failure to be reported")
        ping = client.get("/ping")

    assert (ping.status_code, ping.json()) == (503, {"status": "failed"})
    assert [type(f) for f in failures] == [FileNotFoundError]


async def test_audio_is_streamed_chunk_by_chunk_over_a_real_socket() -> None:
    engine = GatedEngine()
    with live_server(make_app(engine)) as server:
        try:
            async with (
                httpx.AsyncClient(base_url=server.http_url) as client,
                client.stream("POST", "/invocations", json={"text": TEXT}) as response,
            ):
                engine.release()  # chunk 1 only
                parts = response.aiter_bytes()
                received = bytearray()
                first_chunk = pcm_of(chunks_of(TEXT)[0])
                while len(received) < len(first_chunk):
                    received += await anext(parts)
                # Chunk 1 arrived whole while chunk 2, already started, is held in the engine.
                await asyncio.to_thread(engine.wait_calls, 2)
                received_before_release = len(received)
                engine.open()
                async for part in parts:
                    received += part
        finally:
            engine.open()

    assert received_before_release == len(first_chunk)
    assert bytes(received) == pcm_of(TEXT)


async def test_a_client_leaving_mid_stream_stops_the_work() -> None:
    text = "One. Two. Three. Four. Five."
    engine = GatedEngine()
    with live_server(make_app(engine)) as server:
        try:
            async with httpx.AsyncClient(base_url=server.http_url) as client:
                async with client.stream("POST", "/invocations", json={"text": text}) as response:
                    engine.release()
                    await anext(response.aiter_bytes())
                    await asyncio.to_thread(engine.wait_calls, 2)  # chunk 2 is computing when we leave
                scheduler = server.service.scheduler
                await asyncio.to_thread(wait_until, lambda: scheduler.open_lanes == 0, "the response's lane to close")
                engine.release()
                await asyncio.to_thread(wait_until, lambda: scheduler.running == 0, "chunk 2 to end")
        finally:
            engine.open()

    assert engine.texts == ["One.", "Two."]


async def test_a_synthesis_failure_mid_stream_aborts_the_response() -> None:
    engine = GatedEngine(gated=False, fail_on="second")
    with live_server(make_app(engine)) as server:
        received = bytearray()

        async def read_all() -> int:
            async with (
                httpx.AsyncClient(base_url=server.http_url) as client,
                client.stream("POST", "/invocations", json={"text": TEXT}) as response,
            ):
                async for part in response.aiter_bytes():
                    received.extend(part)
                return response.status_code

        with pytest.raises(httpx.RemoteProtocolError):
            await read_all()

    # The first chunk's audio arrived; the stream then broke instead of ending as if complete.
    assert bytes(received) == pcm_of(chunks_of(TEXT)[0])
    assert engine.texts == chunks_of(TEXT)


@pytest.mark.parametrize(
    ("body", "code", "message"),
    [
        (b"[" * 3000 + b"]" * 3000, "invalid_json", "message is not valid JSON: nested too deeply"),
        (
            b'{"text": "x", "speed": ' + b"9" * 400 + b"}",
            "speed_out_of_range",
            "'speed' must be between 0.5 and 2.0, got <integer of 1329 bits>",
        ),
        (
            b'{"text": "a\\ud800b"}',
            "invalid_field",
            "'text' contains a lone UTF-16 surrogate (U+D800) at character 1; it has no UTF-8 form",
        ),
        (
            b'{"text": "x", "format": ' + b"[" * 30 + b"]" * 30 + b"}",
            "invalid_field",
            "'format' must be 'pcm' or 'wav', got <list>",
        ),
    ],
    ids=["deep-json", "huge-speed", "lone-surrogate", "nested-format"],
)
def test_hostile_bodies_get_400_json_never_500(
    body: bytes, code: str, message: str, caplog: pytest.LogCaptureFixture
) -> None:
    engine = ZeroCostEngine()
    with serve_in_process(engine) as (client, _):
        response = client.post("/invocations", content=body)

    assert (response.status_code, response.json()) == (400, {"code": code, "message": message})
    assert engine.calls == []
    refusals = [r for r in caplog.records if r.name == "kokoro_server.invocations"]
    assert [(r.levelname, r.getMessage(), r.exc_info) for r in refusals] == [
        ("WARNING", f"POST /invocations -> 400 {code}: {message}", None)
    ]
