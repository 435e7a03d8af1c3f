"""The SSE event builders: exact dicts, JSON-serialisable, base64 audio that decodes to the input."""

from __future__ import annotations

import base64
import json

import pytest

from agent_app import events
from agent_app.events import AgentErrorCode
from agent_app.speech.transport import SpeechErrorCode


def test_agent_start() -> None:
    assert events.agent_start("stream", "demo", demo=True) == {
        "type": "agent_start",
        "mode": "stream",
        "model": "demo",
        "demo": True,
    }


def test_text_delta_keeps_the_text_as_is() -> None:
    assert events.text_delta(" Hello,") == {"type": "text_delta", "text": " Hello,"}


def test_audio_start_announces_the_containers_format() -> None:
    assert events.audio_start() == {"type": "audio_start", "format": "pcm_s16le", "sample_rate": 24000, "channels": 1}


def test_audio_chunk_is_base64_of_exactly_the_pcm() -> None:
    pcm = bytes(range(256)) * 3
    event = events.audio_chunk(7, pcm)
    assert event == {"type": "audio_chunk", "seq": 7, "audio": base64.b64encode(pcm).decode("ascii")}
    assert base64.b64decode(event["audio"], validate=True) == pcm


def test_audio_chunk_rejects_a_negative_seq() -> None:
    with pytest.raises(ValueError, match="seq must be >= 0"):
        events.audio_chunk(-1, b"\x00\x00")


def test_audio_end() -> None:
    assert events.audio_end(3, 9600) == {"type": "audio_end", "chunks": 3, "bytes": 9600}


def test_metrics_in_milliseconds_rounded_to_a_tenth() -> None:
    assert events.metrics("batch", first_text_s=0.01234, first_audio_s=1.5, total_s=2.00049) == {
        "type": "metrics",
        "mode": "batch",
        "time_to_first_text_ms": 12.3,
        "time_to_first_audio_ms": 1500.0,
        "total_ms": 2000.5,
    }


def test_metrics_without_audio_is_null_not_zero() -> None:
    event = events.metrics("stream", first_text_s=0.1, first_audio_s=None, total_s=0.2)
    assert event["time_to_first_audio_ms"] is None
    assert json.loads(json.dumps(event))["time_to_first_audio_ms"] is None


def test_agent_end() -> None:
    assert events.agent_end() == {"type": "agent_end"}


def test_error_carries_the_stable_code() -> None:
    assert events.error(AgentErrorCode.DEADLINE_EXCEEDED, "too slow") == {
        "type": "error",
        "code": "deadline_exceeded",
        "message": "too slow",
    }


def test_speech_error_codes_are_the_transports_codes() -> None:
    for code in SpeechErrorCode:
        assert AgentErrorCode(code.value).value == code.value


def test_every_event_is_plain_json() -> None:
    every = [
        events.agent_start("stream", "m", demo=False),
        events.text_delta("é ✓"),
        events.audio_start(),
        events.audio_chunk(0, b"\x01\x00"),
        events.audio_end(1, 2),
        events.metrics("stream", first_text_s=0.1, first_audio_s=0.2, total_s=0.3),
        events.agent_end(),
        events.error(AgentErrorCode.MODEL_ERROR, "x"),
    ]
    for event in every:
        assert json.loads(json.dumps(event)) == event
