"""The agent's EMF lines: exact records, metrics left out when there was nothing to time."""

from __future__ import annotations

import json

from agent_app.metrics import InvocationMetrics
from speech_protocol.emf import MetricsEmitter


def recorder(namespace: str | None) -> tuple[InvocationMetrics, list[str]]:
    lines: list[str] = []
    emitter = MetricsEmitter(namespace, "agent", write=lines.append, clock_ms=lambda: 1234)
    return InvocationMetrics(emitter), lines


def test_a_completed_invocation_prints_its_latencies_and_outcome() -> None:
    metrics, lines = recorder("voicestack-dev")
    metrics.record("completed", first_text_s=0.0264, first_audio_s=0.33349)
    assert lines == [
        '{"_aws":{"Timestamp":1234,"CloudWatchMetrics":[{"Namespace":"voicestack-dev","Dimensions":[["Service"]],'
        '"Metrics":[{"Name":"TimeToFirstText","Unit":"Milliseconds"},{"Name":"TimeToFirstAudio","Unit":"Milliseconds"}]}]},'
        '"Service":"agent","TimeToFirstText":26.4,"TimeToFirstAudio":333.5}',
        '{"_aws":{"Timestamp":1234,"CloudWatchMetrics":[{"Namespace":"voicestack-dev","Dimensions":[["Service","Outcome"]],'
        '"Metrics":[{"Name":"Invocations","Unit":"Count"}]}]},"Service":"agent","Outcome":"completed","Invocations":1}',
    ]


def test_an_answer_without_audio_has_no_audio_latency() -> None:
    metrics, lines = recorder("ns")
    metrics.record("text_only", first_text_s=0.5, first_audio_s=None)
    records = [json.loads(line) for line in lines]
    assert [m["Name"] for m in records[0]["_aws"]["CloudWatchMetrics"][0]["Metrics"]] == ["TimeToFirstText"]
    assert "TimeToFirstAudio" not in records[0]
    assert records[1]["Outcome"] == "text_only"


def test_a_failure_before_any_text_prints_only_the_count() -> None:
    metrics, lines = recorder("ns")
    metrics.record("failed", first_text_s=None, first_audio_s=None)
    assert [json.loads(line)["Outcome"] for line in lines] == ["failed"]


def test_nothing_is_printed_without_a_namespace() -> None:
    metrics, lines = recorder(None)
    metrics.record("completed", first_text_s=0.1, first_audio_s=0.2)
    assert lines == []
