"""The SageMaker transport's per-process client and its open timeout, through the stand-in."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from agent_app.speech.sagemaker import SageMakerConnection
from agent_app.speech.transport import SpeechErrorCode, SpeechTransportError
from local.sagemaker_standin import run_standin
from speech_protocol import Close, SynthesisComplete, SynthesisStart, Synthesize, encode_server_event
from tests.standin.standin_support import ScriptContainer, script_container, transport

pytestmark = pytest.mark.timeout(60)


async def answer_each(container: ScriptContainer, ws: Any) -> None:
    """Start and complete every request with 0.1 s of silence; close after `close`."""
    while True:
        _, data = await container.recv(ws)
        if data == '{"type": "close"}':
            await ws.close()
            return
        request_id = "r" if '"request_id"' not in data else data.split('"request_id": "')[1].split('"')[0]
        await ws.send(encode_server_event(SynthesisStart(request_id=request_id)))
        await ws.send(b"\0\0" * 2400)
        await ws.send(encode_server_event(SynthesisComplete(request_id, 0.1, 1.0, 2.0, 1)))


async def one_session(speech: Any, request_id: str) -> list[object]:
    async with speech.connect() as connection:
        await connection.send(Synthesize(text="Hello.", request_id=request_id))
        await connection.send(Close())
        frames = []
        while (frame := await connection.receive()) is not None:
            frames.append(frame)
        return frames


async def test_sessions_share_one_sdk_client_per_loop() -> None:
    async with script_container(answer_each) as container, run_standin({"speech": container.url}) as info:
        speech = transport(info, "speech")
        results = [await one_session(speech, f"a{i}") for i in range(3)]
        results += await asyncio.gather(one_session(speech, "c1"), one_session(speech, "c2"))
        assert speech.clients_built == 1
        await speech.aclose()
        assert await one_session(speech, "after") != []  # a closed client is rebuilt
        assert speech.clients_built == 2
        await speech.aclose()
    assert [len(frames) for frames in results] == [3, 3, 3, 3, 3]
    assert container.connections == 6  # one WebSocket per session, as before


class NeverAccepted:
    """A bidirectional stream whose response never comes; records when events were sent."""

    def __init__(self) -> None:
        self.sent: list[float] = []
        self.input_stream = self

    async def await_output(self) -> Any:
        await asyncio.Event().wait()

    async def send(self, event: Any) -> None:
        self.sent.append(asyncio.get_running_loop().time())


async def test_the_open_timeout_counts_from_the_first_send() -> None:
    stream = NeverAccepted()
    connection = SageMakerConnection(stream, endpoint_name="speech", open_timeout_s=0.2)
    loop = asyncio.get_running_loop()
    receiving = asyncio.create_task(connection.receive())
    await asyncio.sleep(0.5)  # longer than the timeout: nothing was sent, so nothing is late yet
    assert not receiving.done()
    await connection.send(Synthesize(text="Hello.", request_id="a"))
    with pytest.raises(SpeechTransportError) as caught:
        await receiving
    failed_after = loop.time() - stream.sent[0]
    assert caught.value.code is SpeechErrorCode.UNAVAILABLE
    assert caught.value.message.startswith("endpoint speech: no response within 0.2 s")
    assert 0.2 <= failed_after < 0.5 + 0.2
