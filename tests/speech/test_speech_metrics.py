"""The speech server's CloudWatch EMF lines: the exact records of the contract, and when each is printed."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from kokoro_server.app import create_app
from kokoro_server.engine import ZeroCostEngine
from kokoro_server.metrics import SpeechMetrics, report_gauges
from kokoro_server.settings import Settings
from speech_protocol import WS_PATH
from speech_protocol.emf import MetricsEmitter
from tests.speech.speech_support import GatedEngine, is_event, receive_until, wait_until

pytestmark = pytest.mark.timeout(30)


def recorder() -> tuple[SpeechMetrics, list[str]]:
    lines: list[str] = []
    emitter = MetricsEmitter("voicestack/dev", "speech", write=lines.append, clock_ms=lambda: 1_700_000_000_000)
    return SpeechMetrics(emitter), lines


def line(metrics: list[tuple[str, str]], values: dict[str, Any]) -> str:
    """The exact EMF line for `metrics` (name, unit) with `values`, as the contract defines it."""
    names = ",".join(f'{{"Name":"{name}","Unit":"{unit}"}}' for name, unit in metrics)
    body = ",".join(f'"{k}":{json.dumps(v)}' for k, v in values.items())
    return (
        '{"_aws":{"Timestamp":1700000000000,"CloudWatchMetrics":[{"Namespace":"voicestack/dev",'
        f'"Dimensions":[["Service"]],"Metrics":[{names}]}}]}},"Service":"speech",{body}}}'
    )


def test_each_recorder_prints_its_exact_line() -> None:
    metrics, lines = recorder()
    metrics.time_to_first_audio(412.34567)
    metrics.synthesis_rtf(compute_s=1.5, audio_s=6.0)
    metrics.cancel()
    metrics.error()
    metrics.gauges(active_sessions=3, queued_requests=7)
    assert lines == [
        line([("TimeToFirstAudio", "Milliseconds")], {"TimeToFirstAudio": 412.346}),
        line([("SynthesisRTF", "None")], {"SynthesisRTF": 0.25}),
        line([("Cancels", "Count")], {"Cancels": 1}),
        line([("Errors", "Count")], {"Errors": 1}),
        line([("ActiveSessions", "Count"), ("QueuedRequests", "Count")], {"ActiveSessions": 3, "QueuedRequests": 7}),
    ]


def test_no_rtf_for_a_request_without_audio_and_nothing_when_disabled() -> None:
    metrics, lines = recorder()
    metrics.synthesis_rtf(compute_s=0.2, audio_s=0.0)
    assert lines == []
    disabled = SpeechMetrics.disabled()
    assert not disabled.enabled
    disabled.error()  # prints nothing, raises nothing


def test_from_env_reads_the_namespace(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("VOICESTACK_METRICS_NAMESPACE", raising=False)
    assert not SpeechMetrics.from_env().enabled
    monkeypatch.setenv("VOICESTACK_METRICS_NAMESPACE", "voicestack/prod")
    assert SpeechMetrics.from_env().enabled


def _names(lines: list[str]) -> list[str]:
    out = []
    for raw in lines:
        record = json.loads(raw)
        out += [m["Name"] for m in record["_aws"]["CloudWatchMetrics"][0]["Metrics"]]
    return out


def test_a_session_prints_first_audio_rtf_cancels_and_errors(gated: GatedEngine) -> None:
    from starlette.testclient import TestClient

    metrics, lines = recorder()
    app = create_app(Settings(chunking="sentence"), gated, metrics)
    with TestClient(app) as client, client.websocket_connect(WS_PATH) as ws:
        gated.release(2)  # the two chunks of request "a"; request "b" waits in the engine until cancelled
        ws.send_text(json.dumps({"text": "One sentence. Two sentences.", "request_id": "a"}))
        receive_until(ws, is_event("synthesis_complete"))
        ws.send_text("{bad json")
        receive_until(ws, is_event("error"))
        ws.send_text(json.dumps({"type": "cancel", "request_id": "nobody"}))
        receive_until(ws, is_event("error"))
        gated._gated = True
        ws.send_text(json.dumps({"text": "Held.", "request_id": "b"}))
        gated.wait_calls(3)
        ws.send_text(json.dumps({"type": "cancel", "request_id": "b"}))
        receive_until(ws, is_event("cancelled"))
        gated.open()

    assert _names(lines) == ["TimeToFirstAudio", "SynthesisRTF", "Errors", "Errors", "Cancels"]
    ttfa, rtf = json.loads(lines[0]), json.loads(lines[1])
    assert 0 <= ttfa["TimeToFirstAudio"] < 10_000
    assert ttfa["_aws"]["CloudWatchMetrics"][0]["Metrics"] == [{"Name": "TimeToFirstAudio", "Unit": "Milliseconds"}]
    assert rtf["SynthesisRTF"] >= 0
    assert lines[2] == lines[3] == line([("Errors", "Count")], {"Errors": 1})
    assert lines[4] == line([("Cancels", "Count")], {"Cancels": 1})


def test_an_http_request_prints_first_audio_and_rtf_and_a_refusal_an_error() -> None:
    from starlette.testclient import TestClient

    metrics, lines = recorder()
    app = create_app(Settings(chunking="sentence"), ZeroCostEngine(), metrics)
    with TestClient(app) as client:
        assert client.post("/invocations", json={"text": "Hello there. Bye."}).status_code == 200
        assert client.post("/invocations", json={"text": ""}).status_code == 400
    assert _names(lines) == ["TimeToFirstAudio", "SynthesisRTF", "Errors"]


async def test_gauges_are_printed_every_interval() -> None:
    metrics, lines = recorder()
    reads = iter([(2, 5), (1, 0), (0, 0)])
    task = asyncio.create_task(report_gauges(metrics, lambda: next(reads), 0.05))
    await asyncio.to_thread(wait_until, lambda: len(lines) >= 2, "two gauge records")
    task.cancel()
    assert lines[:2] == [
        line([("ActiveSessions", "Count"), ("QueuedRequests", "Count")], {"ActiveSessions": 2, "QueuedRequests": 5}),
        line([("ActiveSessions", "Count"), ("QueuedRequests", "Count")], {"ActiveSessions": 1, "QueuedRequests": 0}),
    ]


async def test_no_gauge_loop_when_disabled() -> None:
    # Returns at once instead of waking up every interval for nothing.
    await asyncio.wait_for(report_gauges(SpeechMetrics.disabled(), lambda: (0, 0), 3600), timeout=1)
