"""voicestack talk's pure parts: the SSE parser, the turn recorder, the fixes it prints, the PCM
buffer, the WAV writer and the player's fallbacks (no sockets, no audio device)."""

from __future__ import annotations

import asyncio
import base64
import json
import wave
from pathlib import Path
from typing import Any, ClassVar

import pytest

from voicestack.errors import ExitCode
from voicestack.talk.audio import DevicePlayer, PcmBuffer, SilentPlayer, open_player, write_wav
from voicestack.talk.conversation import TurnLedger
from voicestack.talk.errors import RuntimeRef, fix_for, refused
from voicestack.talk.sse import SseError, SseParser
from voicestack.talk.turn import TurnProtocolError, TurnRecorder, TurnResult

ARN = "arn:aws:bedrock-agentcore:eu-west-1:123456789012:runtime/voicestack_dev-abcdefghij"
REF = RuntimeRef(
    ARN, "voicestack_dev-abcdefghij", "eu-west-1", "DEFAULT", "https://bedrock-agentcore.eu-west-1.amazonaws.com", "dev"
)


def events_of(*events: dict[str, Any]) -> bytes:
    return b"".join(b"data: " + json.dumps(e).encode() + b"\n\n" for e in events)


ANSWER: list[dict[str, Any]] = [
    {"type": "agent_start", "mode": "stream", "model": "demo", "demo": True},
    {"type": "text_delta", "text": "Hello"},
    {"type": "audio_start", "format": "pcm_s16le", "sample_rate": 24000, "channels": 1},
    {"type": "audio_chunk", "seq": 0, "audio": base64.b64encode(b"\x01\x00\x02\x00").decode()},
    {"type": "text_delta", "text": " there."},
    {"type": "words", "words": [{"word": "Hello", "start_s": 0.0, "end_s": 0.1}]},
    {"type": "audio_chunk", "seq": 1, "audio": base64.b64encode(b"\x03\x00").decode()},
    {"type": "audio_end", "chunks": 2, "bytes": 6},
    {"type": "metrics", "mode": "stream", "time_to_first_text_ms": 1.0, "time_to_first_audio_ms": 2.0, "total_ms": 3.0},
    {"type": "agent_end"},
]


# --- SSE -------------------------------------------------------------------------------------------


def test_sse_events_whatever_the_chunk_boundaries() -> None:
    body = events_of(*ANSWER)
    whole = SseParser().feed(body)
    assert [event for event, _ in whole] == ANSWER
    assert sum(size for _, size in whole) == len(body)
    for split in range(1, len(body)):
        parser = SseParser()
        parsed = parser.feed(body[:split]) + parser.feed(body[split:])
        assert parsed == whole, split
        assert parser.pending == b""


def test_sse_line_ends_comments_and_multiline_data() -> None:
    parser = SseParser()
    assert parser.feed(b': keep-alive\r\n\r\nevent: x\r\ndata: {"a":\r\ndata: 1}\r\n\r\n') == [({"a": 1}, 35)]
    assert parser.feed(b'data:{"b": 2}\r\r') == [({"b": 2}, 15)]
    assert parser.feed(b'data: {"c": 3}') == []
    assert parser.pending == b'data: {"c": 3}'


def test_sse_data_that_is_not_an_object() -> None:
    with pytest.raises(SseError, match=r"^an event's data must be a JSON object, got list$"):
        SseParser().feed(b"data: [1]\n\n")
    with pytest.raises(SseError, match=r"^an event's data is not JSON: "):
        SseParser().feed(b"data: {nope\n\n")
    with pytest.raises(SseError, match=r"^an event's data is not JSON: "):
        SseParser().feed(b"data: " + b"[" * 100_000 + b"\n\n")


# --- the turn ----------------------------------------------------------------------------------------


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_turn_is_timed_and_its_audio_checked() -> None:
    clock = Clock()
    recorder = TurnRecorder(started=100.0, clock=clock, keep_audio=True)
    shown, heard = [], []
    for step, event in enumerate(ANSWER):
        clock.now = 100.0 + 0.1 * (step + 1)
        update = recorder.apply(event, 50)
        shown.append(update.text)
        heard.append(update.pcm)
    result = recorder.finish(
        turn=1, session_id="s" * 36, transport="websocket", target=ARN, stopped=False, connect_ms=12.5
    )
    assert "".join(shown) == "Hello there."
    assert b"".join(heard) == result.pcm == b"\x01\x00\x02\x00\x03\x00"
    assert (result.outcome, result.first_text_ms, result.first_audio_ms, result.end_ms) == ("ok", 200.0, 400.0, 1000.0)
    assert (result.audio_bytes, result.audio_chunks, result.audio_events) == (6, 2, ((4, 50), (2, 50)))
    assert json.loads(result.json_line()) == {
        "turn": 1,
        "session_id": "s" * 36,
        "transport": "websocket",
        "target": ARN,
        "mode": "stream",
        "outcome": "ok",
        "error": None,
        "text": "Hello there.",
        "first_text_ms": 200.0,
        "first_audio_ms": 400.0,
        "end_ms": 1000.0,
        "connect_ms": 12.5,
        "audio_bytes": 6,
        "audio_chunks": 2,
        "sample_rate": 24000,
        "channels": 1,
        "agent_metrics": {
            "mode": "stream",
            "time_to_first_text_ms": 1.0,
            "time_to_first_audio_ms": 2.0,
            "total_ms": 3.0,
        },
        "stopped_by": None,
    }
    assert result.summary() == (
        "(first text 0.20 s, first audio 0.40 s, end 1.00 s, 0.0 s of audio, connected in 0.01 s; "
        "stream mode, websocket)"
    )


@pytest.mark.parametrize(
    ("events", "message"),
    [
        ([{"type": "audio_chunk", "seq": 1, "audio": ""}], "audio_chunk seq 1 where 0 was due"),
        ([{"type": "audio_chunk", "seq": 0, "audio": "%%%"}], "audio_chunk 0 is not base64: "),
        (
            [{"type": "audio_end", "chunks": 1, "bytes": 2}],
            "audio_end says 1 chunks, 2 bytes; 0 chunks, 0 bytes arrived",
        ),
        ([{"type": "audio_start", "format": "mp3", "sample_rate": 24000, "channels": 1}], "audio format 'mp3'"),
        ([{"type": "dance"}], "unknown event type 'dance'"),
        ([{"type": "text_delta", "text": 3}], "a text_delta without a string 'text'"),
        ([{"type": "agent_end"}, {"type": "text_delta", "text": "late"}], "an event after the end of the turn"),
    ],
)
def test_events_that_break_the_contract(events: list[dict[str, Any]], message: str) -> None:
    recorder = TurnRecorder(started=0.0, clock=Clock())
    *before, last = events
    for event in before:
        recorder.apply(event, 10)
    with pytest.raises(TurnProtocolError) as raised:
        recorder.apply(last, 10)
    assert str(raised.value).startswith(message)


def test_error_events_end_the_turn_with_their_code() -> None:
    recorder = TurnRecorder(started=0.0, clock=Clock())
    assert recorder.apply({"type": "text_delta", "text": "Hi"}, 10).text == "Hi"
    assert recorder.apply({"type": "error", "code": "model_error", "message": "throttled"}, 10).done
    result = recorder.finish(turn=2, session_id="s", transport="sse", target="t", stopped=False)
    assert (result.outcome, result.error_code, result.error_message, result.text) == (
        "error",
        "model_error",
        "throttled",
        "Hi",
    )
    # What the SDK sends when the entrypoint raises mid-stream.
    sdk = TurnRecorder(started=0.0, clock=Clock())
    sdk.apply({"error": "boom", "error_type": "RuntimeError"}, 10)
    assert sdk.finish(turn=1, session_id="s", transport="sse", target="t", stopped=False).error_code == "RuntimeError"
    # A stream that ends without agent_end did not answer.
    cut = TurnRecorder(started=0.0, clock=Clock())
    cut.apply({"type": "text_delta", "text": "Hi"}, 10)
    assert (
        cut.finish(turn=1, session_id="s", transport="sse", target="t", stopped=False).error_code == "connection_closed"
    )
    assert cut.finish(turn=1, session_id="s", transport="sse", target="t", stopped=True).outcome == "stopped"


# --- what the user is told ----------------------------------------------------------------------------


def test_refusals_name_the_code_the_message_and_the_fix() -> None:
    error = refused("AccessDeniedException", "User: x is not authorized", 403, REF, "sse")
    assert error.code is ExitCode.UNREACHABLE
    assert str(error) == (
        "the runtime refused the call: AccessDeniedException (403): User: x is not authorized. Fix: allow "
        f"bedrock-agentcore:InvokeAgentRuntime on {ARN} in the IAM policy of the identity you call with "
        "(`aws sts get-caller-identity --profile dev` shows which)"
    )
    assert fix_for("AccessDeniedException", "", REF, "websocket").startswith(
        f"allow bedrock-agentcore:InvokeAgentRuntimeWithWebSocketStream on {ARN} "
    )
    assert fix_for("ExpiredTokenException", "", REF, "sse").startswith(
        "your AWS credentials have expired: renew them (`aws sso login --profile dev` for an SSO profile"
    )
    assert fix_for("InvalidSignatureException", "Signature expired: 20261202T000000Z is now earlier", REF, "sse") == (
        "this machine's clock is more than 5 minutes off: sync it (NTP) and run again"
    )
    assert fix_for("InvalidSignatureException", "The request signature we calculated does not match", REF, "sse") == (
        "the secret key does not match the access key: check AWS_SECRET_ACCESS_KEY or the profile's credentials"
    )
    assert fix_for("ResourceNotFoundException", "No endpoint", REF, "sse") == (
        f"no runtime {ARN} with endpoint DEFAULT in eu-west-1, or it is not READY yet: `aws bedrock-agentcore-control "
        "get-agent-runtime --agent-runtime-id voicestack_dev-abcdefghij --region eu-west-1 --profile dev --query "
        "status` must say READY (after `pulumi up`)"
    )
    assert "retried once" in fix_for("RetryableConflictException", "", REF, "sse")
    assert fix_for("RuntimeClientError", "", REF, "sse") == (
        "the agent's container failed or refused the call: read its logs with `aws logs tail "
        "/aws/bedrock-agentcore/runtimes/voicestack_dev-abcdefghij-DEFAULT --region eu-west-1 --profile dev "
        "--since 10m`"
    )
    assert fix_for("SomethingNew", "", REF, "sse") == "see AWS's message"


# --- audio -------------------------------------------------------------------------------------------------


def test_pcm_buffer_reads_oldest_first_and_clears() -> None:
    buffer = PcmBuffer()
    buffer.append(b"abc")
    buffer.append(b"")
    buffer.append(b"defg")
    assert buffer.pending == 7
    assert buffer.read(2) == b"ab"
    assert buffer.read(4) == b"cdef"
    assert buffer.pending == 1
    buffer.clear()
    assert (buffer.read(10), buffer.pending) == (b"", 0)


def test_the_wav_data_chunk_is_the_pcm_unchanged(tmp_path: Path) -> None:
    pcm = bytes(range(256)) * 100
    write_wav(tmp_path / "a.wav", pcm, sample_rate=24000, channels=1)
    with wave.open(str(tmp_path / "a.wav"), "rb") as wav:
        assert (wav.getnchannels(), wav.getsampwidth(), wav.getframerate(), wav.getnframes()) == (1, 2, 24000, 12800)
        assert wav.readframes(wav.getnframes()) == pcm
    assert (tmp_path / "a.wav").read_bytes()[44:] == pcm


def test_no_portaudio_or_no_device_is_one_line() -> None:
    def missing() -> Any:
        raise OSError("PortAudio library not found")

    player, notice = open_player(24000, 1, load=missing)
    assert isinstance(player, SilentPlayer)
    assert (
        notice
        == "no audio playback: PortAudio library not found (install PortAudio, e.g. apt-get install libportaudio2)"
    )

    class NoDevice:
        class PortAudioError(Exception):
            pass

        @staticmethod
        def query_devices(kind: str) -> Any:
            raise NoDevice.PortAudioError("Error querying device -1")

    player, notice = open_player(24000, 1, load=lambda: NoDevice)
    assert isinstance(player, SilentPlayer)
    assert notice == "no audio playback: no usable output device (Error querying device -1)"


async def test_the_device_player_feeds_the_callback_and_drains() -> None:
    class Stream:
        latency = 0.0

        def __init__(self, *, samplerate: int, channels: int, dtype: str, callback: Any) -> None:
            self.args = (samplerate, channels, dtype)
            self.callback = callback
            self.started = self.closed = False

        def start(self) -> None:
            self.started = True

        def stop(self) -> None:
            pass

        def close(self) -> None:
            self.closed = True

    class Device:
        PortAudioError = OSError
        streams: ClassVar[list[Stream]] = []

        @staticmethod
        def query_devices(kind: str) -> dict[str, str]:
            return {"name": "speaker"}

        @staticmethod
        def RawOutputStream(**kwargs: Any) -> Stream:  # sounddevice's name
            stream = Stream(**kwargs)
            Device.streams.append(stream)
            return stream

    player, notice = open_player(24000, 1, load=lambda: Device)
    assert notice is None
    assert isinstance(player, DevicePlayer)
    stream = Device.streams[0]
    assert (stream.args, stream.started) == ((24000, 1, "int16"), True)
    player.play(b"\x01\x02\x03\x04\x05\x06")
    block = bytearray(4)
    stream.callback(block, 2, None, None)
    assert block == b"\x01\x02\x03\x04"
    draining = asyncio.create_task(player.drain())
    await asyncio.sleep(0.05)
    assert not draining.done()
    stream.callback(block, 2, None, None)
    assert block == b"\x05\x06\x00\x00"  # the rest, then silence
    await asyncio.wait_for(draining, 1.0)
    player.play(b"\x07\x08")
    player.clear()  # barge-in
    stream.callback(block, 2, None, None)
    assert block == b"\x00\x00\x00\x00"
    await asyncio.wait_for(player.drain(), 1.0)
    player.close()
    assert stream.closed


def test_turn_stopped_ends_a_turn_stopped_by_the_caller_or_the_agent() -> None:
    def stopped_turn(*, caller: bool) -> TurnResult:
        recorder = TurnRecorder(started=0.0, clock=Clock())
        for event in ({"type": "agent_start"}, {"type": "text_delta", "text": "Hel"}, {"type": "turn_stopped"}):
            update = recorder.apply(event, 10)
        assert update.done
        return recorder.finish(turn=1, session_id="s", transport="websocket", target="t", stopped=caller)

    ours, theirs = stopped_turn(caller=True), stopped_turn(caller=False)
    assert (ours.outcome, ours.stopped_by, ours.error_code, ours.text) == ("stopped", "caller", None, "Hel")
    assert (theirs.outcome, theirs.stopped_by, theirs.error_code, theirs.text) == ("stopped", "agent", None, "Hel")
    assert json.loads(theirs.json_line())["stopped_by"] == "agent"
    ended = TurnRecorder(started=0.0, clock=Clock())
    ended.apply({"type": "agent_end"}, 10)
    assert ended.finish(turn=1, session_id="s", transport="websocket", target="t", stopped=False).stopped_by is None


def test_the_ledger_gives_each_prompt_the_nth_answer() -> None:
    """The agent answers prompts in order: a new turn number, or a refusal without one."""
    ledger = TurnLedger()
    prompts = [ledger.asked() for _ in range(4)]
    answers = [ledger.answer(turn) for turn in (1, 1, None, 2, 2, 3)]
    assert prompts == [1, 2, 3, 4]
    # turn 1 answers prompt 1 (its later events continue it), the refusal prompt 2, turns 2 and 3 prompts 3 and 4
    assert answers == [1, None, 2, 3, None, 4]
