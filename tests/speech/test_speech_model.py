"""End to end with the real Kokoro-82M engine (full-size architecture, random-weight checkpoint)."""

from __future__ import annotations

import io
import json
import signal
import struct
import subprocess
import sys
import time
import wave
from pathlib import Path
from typing import Any

import httpx
import pytest
from websockets.asyncio.client import connect

from kokoro_server.app import create_app
from kokoro_server.settings import Settings
from speech_protocol import SAMPLE_RATE
from tests.speech.speech_support import free_port, live_server, recv_until, subprocess_env

pytestmark = [pytest.mark.model, pytest.mark.timeout(300)]

TEXT = "Hello there, this is a test. The second sentence follows."


async def test_a_session_with_the_real_engine_streams_audio_and_word_timestamps(kokoro_engine: Any) -> None:
    # The sentence split: its two chunks are known in advance (the adaptive schedule's depend on timing).
    with live_server(create_app(Settings(chunking="sentence"), kokoro_engine)) as server:
        async with connect(server.ws_url) as ws:
            await ws.send(json.dumps({"text": TEXT, "request_id": "m", "timestamps": True}).encode())
            frames = await recv_until(ws, lambda f: f[0] == "text" and f[1]["type"] in ("synthesis_complete", "error"))

    shape = [("bytes", None) if kind == "bytes" else ("text", payload["type"]) for kind, payload in frames]
    deduped = [item for i, item in enumerate(shape) if i == 0 or item != shape[i - 1]]
    assert (deduped[0], deduped[-1]) == (("text", "synthesis_start"), ("text", "synthesis_complete"))
    pairs = deduped[1:-1]
    assert pairs == [("text", "timestamps"), ("bytes", None)] * (len(pairs) // 2)
    timestamps = [payload for kind, payload in frames if kind == "text" and payload["type"] == "timestamps"]
    # The first sentence starts from silence, so it is decoded in windows (how many depends on the
    # engine's measured speed: at least two), each piece sent with its words as soon as it exists.
    # The second follows whole while the first still plays, or in windows too when a slow CPU let
    # the listener hear all of the first.
    second = [i for i, t in enumerate(timestamps) if t["words"] and t["words"][0]["word"] == "The"]
    assert second[0] >= 2
    first_words = [w["word"] for t in timestamps[: second[0]] for w in t["words"]]
    assert first_words == ["Hello", "there", ",", "this", "is", "a", "test", "."]
    audio = b"".join(payload for kind, payload in frames if kind == "bytes")
    complete = frames[-1][1]
    assert complete["chunks"] == len(timestamps)  # pieces of audio, each after its words
    assert complete["audio_duration_s"] == round(len(audio) / (2 * SAMPLE_RATE), 3)
    assert complete["audio_duration_s"] > 1.0  # ~2.5 frames of 25 ms per phoneme
    words = [w["word"] for t in timestamps for w in t["words"]]
    assert words[:3] == ["Hello", "there", ","]
    starts = [w["start_s"] for t in timestamps for w in t["words"]]
    assert starts == sorted(starts)  # request-relative: chunk 2 continues after chunk 1
    before = [t for t in timestamps[: second[0]] if t["words"]][-1]
    assert timestamps[second[0]]["words"][0]["start_s"] >= before["words"][-1]["end_s"]


def test_the_process_loads_the_model_off_the_loop_and_serves_wav(kokoro_model_dir: Path) -> None:
    port = free_port()
    process = subprocess.Popen(
        [
            *(sys.executable, "-m", "kokoro_server", "serve", "--host", "127.0.0.1", "--port", str(port)),
            *("--model-dir", str(kokoro_model_dir), "--device", "cpu"),
        ],
        env=subprocess_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    statuses: list[int] = []
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and process.poll() is None and statuses[-1:] != [200]:
            try:
                statuses.append(httpx.get(f"http://127.0.0.1:{port}/ping", timeout=1).status_code)
            except httpx.TransportError:
                time.sleep(0.05)
        response = httpx.post(
            f"http://127.0.0.1:{port}/invocations", json={"text": "Short test.", "format": "wav"}, timeout=60
        )
        process.send_signal(signal.SIGTERM)
        output, _ = process.communicate(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate(timeout=10)

    # /ping answered 503 while the model loaded in a thread, then 200 once it was warmed up.
    assert statuses[0] == 503
    assert statuses[-1] == 200
    assert set(statuses[:-1]) == {503}
    assert "warm-up synthesis took" in output
    assert response.status_code == 200
    assert response.headers["content-type"] == "audio/wav"
    with wave.open(io.BytesIO(response.content)) as reader:
        assert (reader.getnchannels(), reader.getsampwidth(), reader.getframerate()) == (1, 2, SAMPLE_RATE)
        pcm = reader.readframes(10**9)
    assert len(pcm) == len(response.content) - 44 > 0
    assert max(abs(s) for (s,) in struct.iter_unpack("<h", pcm)) > 0
