"""End to end, offline: the agent's SageMaker transport -> real SDK -> stand-in -> the real speech server.

The speech server is `kokoro_server.app.create_app` on uvicorn with the ZeroCostEngine, so every
frame is known in advance (`tests.speech.speech_support.expected_request`).
"""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent_app.speech.transport import SpeechConnection, SpeechErrorCode, SpeechTransportError
from kokoro_server.engine import ZeroCostEngine
from kokoro_server.service import EngineLoader, LoadedEngine
from local.sagemaker_standin import StandInInfo, run_standin
from local.standin.routing import StandInConfig
from speech_protocol import Close, ErrorEvent, Synthesize, encode_server_event
from tests.speech.speech_support import Frame, LiveServer, expected_request, live_server, make_app, without_timing
from tests.standin.standin_support import REPO_ROOT, WAIT_S, transport

FRAME_MS = 250  # several audio frames per chunk
TEXTS = {
    "a": "Hello there. This is the first request.",
    "b": "A second one, in the same session!",
}


@pytest.fixture(scope="module")
def speech_server() -> Iterator[LiveServer]:
    with live_server(make_app(ZeroCostEngine(), frame_ms=FRAME_MS)) as server:
        yield server


def container_url(server: LiveServer) -> str:
    return server.ws_url.removesuffix("/invocations-bidirectional-stream")


async def frames_until_end(connection: SpeechConnection) -> list[Frame]:
    """Everything the session sends until its normal end, as ('text', JSON) / ('bytes', PCM)."""
    frames: list[Frame] = []
    async with asyncio.timeout(WAIT_S):
        while (frame := await connection.receive()) is not None:
            frames.append(
                ("bytes", frame) if isinstance(frame, bytes) else ("text", json.loads(encode_server_event(frame)))
            )
    return without_timing(frames)


async def speak(info: StandInInfo, texts: dict[str, str]) -> list[Frame]:
    async with transport(info, "speech").connect() as connection:
        for request_id, text in texts.items():
            await connection.send(Synthesize(text=text, request_id=request_id))
        await connection.send(Close())
        return await frames_until_end(connection)


def expected(texts: dict[str, str]) -> list[Frame]:
    return [frame for rid, text in texts.items() for frame in expected_request(rid, text, frame_ms=FRAME_MS)]


async def test_several_requests_in_one_session(speech_server: LiveServer) -> None:
    async with run_standin({"speech": container_url(speech_server)}) as info:
        frames = await speak(info, TEXTS)

    assert frames == expected(TEXTS)
    assert sum(kind == "bytes" for kind, _ in frames) > 4  # audio came as several BINARY parts


async def test_requests_sent_while_audio_flows(speech_server: LiveServer) -> None:
    """Stream mode: the second sentence is sent after the first one's audio has started."""
    async with (
        run_standin({"speech": container_url(speech_server)}) as info,
        transport(info, "speech").connect() as connection,
    ):
        await connection.send(Synthesize(text=TEXTS["a"], request_id="a"))
        first = await connection.receive()
        await connection.send(Synthesize(text=TEXTS["b"], request_id="b"))
        await connection.send(Close())
        rest = await frames_until_end(connection)

    assert not isinstance(first, bytes | None)
    assert [("text", json.loads(encode_server_event(first))), *rest] == expected(TEXTS)


async def test_server_error_events_pass_through_and_the_session_goes_on(speech_server: LiveServer) -> None:
    async with (
        run_standin({"speech": container_url(speech_server)}) as info,
        transport(info, "speech").connect() as connection,
    ):
        await connection.send(Synthesize(text="Hi.", request_id="bad", voice="no_such_voice"))
        error = await connection.receive()
        await connection.send(Synthesize(text=TEXTS["a"], request_id="a"))
        await connection.send(Close())
        rest = await frames_until_end(connection)

    assert isinstance(error, ErrorEvent)
    assert (error.request_id, error.code) == ("bad", "unknown_voice")
    assert rest == expected({"a": TEXTS["a"]})


async def test_concurrent_sessions_each_get_their_own_frames(speech_server: LiveServer) -> None:
    sessions = {
        f"s{n}": {f"s{n}-1": f"Session {n} says hello.", f"s{n}-2": f"And then session {n} says goodbye."}
        for n in range(5)
    }
    async with run_standin({"speech": container_url(speech_server)}) as info:
        results = await asyncio.gather(*(speak(info, texts) for texts in sessions.values()))

    assert results == [expected(texts) for texts in sessions.values()]


async def test_real_container_answers_pings_while_it_synthesizes() -> None:
    slow = ZeroCostEngine(compute_s_per_char=0.01)  # ~0.4 s per chunk, off the event loop like the model
    with live_server(make_app(slow, frame_ms=FRAME_MS)) as server:
        # Pings every 50 ms during about a second of synthesis; ten missed in a row would end it.
        config = StandInConfig(endpoints={"speech": container_url(server)}, ping_interval_s=0.05, max_missed_pongs=10)
        async with run_standin(config) as info:
            frames = await speak(info, TEXTS)

    assert frames == expected(TEXTS)


async def test_container_refusing_the_session_is_a_stream_error() -> None:
    def load() -> LoadedEngine:
        raise RuntimeError("weights missing")

    failures: list[BaseException] = []
    with live_server(make_app(EngineLoader(load, on_failure=failures.append))) as server:
        async with (
            run_standin({"speech": container_url(server)}) as info,
            transport(info, "speech").connect() as connection,
        ):
            await connection.send(Synthesize(text="Hello.", request_id="a"))
            with pytest.raises(SpeechTransportError) as raised:
                await frames_until_end(connection)

    assert raised.value.code == SpeechErrorCode.STREAM_ERROR
    assert raised.value.message == (
        "endpoint speech: ModelStreamError [StreamBroken]: "
        "The model container closed the stream: close code 1013 (model failed)"
    )


def test_command_line_standin(speech_server: LiveServer, tmp_path: Path) -> None:
    """What the local stack runs: the module as a process, ready line on stdout, SIGTERM to stop."""
    command = [
        sys.executable,
        "-m",
        "local.sagemaker_standin",
        "--port",
        "0",
        "--endpoint",
        f"speech={container_url(speech_server)}",
        "--cert-dir",
        str(tmp_path),
        "--log-level",
        "WARNING",
    ]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO_ROOT)
    try:
        assert process.stdout is not None
        ready = json.loads(process.stdout.readline())
        port = int(ready["url"].rsplit(":", 1)[1])
        assert ready == {
            "event": "ready",
            "url": f"https://127.0.0.1:{port}",
            "ca_file": str(tmp_path / "ca.pem"),
            "endpoints": ["speech"],
        }
        info = StandInInfo(url=ready["url"], port=port, ca_path=Path(ready["ca_file"]), endpoints=("speech",))
        assert asyncio.run(speak(info, {"a": TEXTS["a"]})) == expected({"a": TEXTS["a"]})
    finally:
        process.send_signal(signal.SIGTERM)
        _, stderr = process.communicate(timeout=WAIT_S)
    assert process.returncode == 0, stderr


def test_command_line_rejects_a_bad_endpoint() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "local.sagemaker_standin", "--endpoint", "speech=http://127.0.0.1:8080"],
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
        timeout=WAIT_S,
        check=False,
    )
    assert result.returncode == 2
    assert result.stderr.strip() == (
        "sagemaker_standin: endpoint 'speech': container URL 'http://127.0.0.1:8080' must be ws://host:port or wss://host:port"
    )
