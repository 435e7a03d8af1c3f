"""`python -m agent_app`: a configuration error exits 2 naming the key; a real process serves the demo."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from pathlib import Path

import httpx
import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed
from websockets.frames import CloseCode

from agent_app.__main__ import main
from agent_app.models import DEMO_ANSWER
from agent_app.ws_route import WS_MAX_MESSAGE_BYTES
from tests.agent.agent_support import FakeSpeechServer, decoded_audio

ROOT = Path(__file__).resolve().parents[2]
AGENT_KEYS = (
    "SPEECH_TRANSPORT",
    "SPEECH_ENDPOINT_NAME",
    "SPEECH_WS_URL",
    "SPEECH_MODE",
    "SPEECH_VOICE",
    "AWS_REGION",
    "BEDROCK_MODEL_ID",
    "AGENT_DEADLINE_S",
    "AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME_HTTP2",
    "SAGEMAKER_CA_FILE",
)


def test_a_configuration_error_exits_2_and_names_the_key(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for key in AGENT_KEYS:
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("AWS_REGION", "us-east-1")
    assert main([]) == 2
    assert capsys.readouterr().err == (
        "agent_app: configuration error: SPEECH_ENDPOINT_NAME: is required when SPEECH_TRANSPORT is sagemaker\n"
    )


async def test_the_process_serves_the_announced_demo_model(fake_speech, free_port: int) -> None:
    fake: FakeSpeechServer = await fake_speech()
    env = {key: value for key, value in os.environ.items() if key not in AGENT_KEYS}
    env.update(
        PYTHONPATH=os.pathsep.join([str(ROOT), str(ROOT / "images" / "kokoro")]),
        SPEECH_TRANSPORT="websocket",
        SPEECH_WS_URL=fake.url,
    )
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "agent_app",
        "--port",
        str(free_port),
        env=env,
        cwd=ROOT,
        stderr=asyncio.subprocess.PIPE,
    )
    base = f"http://127.0.0.1:{free_port}"
    try:
        async with httpx.AsyncClient(timeout=20) as client:
            for _ in range(300):
                try:
                    if (await client.get(f"{base}/ping")).status_code == 200:
                        break
                except httpx.TransportError:
                    await asyncio.sleep(0.05)
            else:
                pytest.fail("the agent did not answer /ping")
            async with client.stream("POST", f"{base}/invocations", json={"prompt": "Hi"}) as response:
                events = [json.loads(line[6:]) async for line in response.aiter_lines() if line.startswith("data: ")]
        # WS /ws as the process configures uvicorn: a message over the agent's limit gets an error
        # event and the connection goes on; one over uvicorn's ws_max_size is refused unread (1009).
        async with connect(f"ws://127.0.0.1:{free_port}/ws", max_size=None) as socket:
            await socket.send("x" * 200_000)
            refused = json.loads(await socket.recv())
            await socket.send("x" * (WS_MAX_MESSAGE_BYTES + 1))
            with pytest.raises(ConnectionClosed) as closed:
                await socket.recv()
    finally:
        process.send_signal(signal.SIGTERM)
        _, stderr = await asyncio.wait_for(process.communicate(), 15)
    assert events[0] == {"type": "agent_start", "mode": "stream", "model": "demo", "demo": True}
    assert "".join(e["text"] for e in events if e["type"] == "text_delta") == DEMO_ANSWER
    assert [e["type"] for e in events][-3:] == ["audio_end", "metrics", "agent_end"]
    assert decoded_audio(events) == b"".join(fake.sent_pcm[f"s{i}"] for i in range(len(fake.sent_pcm)))
    assert "BEDROCK_MODEL_ID is not set: answering with the offline 'demo' model" in stderr.decode()
    assert refused == {
        "type": "error",
        "code": "bad_request",
        "message": "the message is over the limit of 65536 bytes",
    }
    assert closed.value.rcvd is not None
    assert closed.value.rcvd.code == CloseCode.MESSAGE_TOO_BIG
    assert "Traceback" not in stderr.decode()
