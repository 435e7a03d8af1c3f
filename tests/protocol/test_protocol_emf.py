"""CloudWatch Embedded Metric Format lines: exact records, and what CloudWatch would drop refused."""

from __future__ import annotations

import json
import re

import pytest

from speech_protocol.emf import NAMESPACE_ENV, Metric, MetricsEmitter, emf_line, emf_record


def test_record_has_the_exact_emf_shape() -> None:
    record = emf_record(
        "voicestack/dev",
        {"Service": "speech"},
        [Metric("TimeToFirstAudio", 412.5, "Milliseconds"), Metric("ActiveSessions", 3, "Count")],
        1_700_000_000_123,
    )
    assert record == {
        "_aws": {
            "Timestamp": 1_700_000_000_123,
            "CloudWatchMetrics": [
                {
                    "Namespace": "voicestack/dev",
                    "Dimensions": [["Service"]],
                    "Metrics": [
                        {"Name": "TimeToFirstAudio", "Unit": "Milliseconds"},
                        {"Name": "ActiveSessions", "Unit": "Count"},
                    ],
                }
            ],
        },
        "Service": "speech",
        "TimeToFirstAudio": 412.5,
        "ActiveSessions": 3,
    }


def test_line_is_one_compact_json_line() -> None:
    line = emf_line("ns", {"Service": "agent", "Outcome": "ok"}, [Metric("Invocations", 1, "Count")], 5)
    assert "\n" not in line
    assert line == (
        '{"_aws":{"Timestamp":5,"CloudWatchMetrics":[{"Namespace":"ns","Dimensions":[["Service","Outcome"]],'
        '"Metrics":[{"Name":"Invocations","Unit":"Count"}]}]},"Service":"agent","Outcome":"ok","Invocations":1}'
    )


@pytest.mark.parametrize(
    ("namespace", "dimensions", "metrics", "message"),
    [
        ("", {"Service": "s"}, [Metric("A", 1)], "namespace must not be empty"),
        ("ns", {"Service": "s"}, [], "at least one metric is required"),
        ("ns", {"Service": "s"}, [Metric("A", 1), Metric("A", 2)], "metric names must be unique, got ['A', 'A']"),
        ("ns", {"Service": "s"}, [Metric("Service", 1)], "metric names clash with dimension names: ['Service']"),
        ("ns", {"Service": "s"}, [Metric("A", float("nan"))], "metric 'A' has a non-finite value nan"),
        ("ns", {"Service": "s"}, [Metric("A", float("inf"))], "metric 'A' has a non-finite value inf"),
        ("ns", {f"d{i}": "v" for i in range(31)}, [Metric("A", 1)], "at most 30 dimensions per record, got 31"),
        ("ns", {"Service": "s"}, [Metric(f"m{i}", 1) for i in range(101)], "at most 100 metrics per record, got 101"),
    ],
)
def test_records_cloudwatch_would_drop_are_refused(namespace, dimensions, metrics, message) -> None:
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$") as info:
        emf_record(namespace, dimensions, metrics, 0)
    assert str(info.value) == message


def test_emitter_prints_with_its_service_dimension() -> None:
    lines: list[str] = []
    emitter = MetricsEmitter("voicestack/prod", "speech", write=lines.append, clock_ms=lambda: 42)
    emitter.emit(Metric("Cancels", 1, "Count"), dimensions={"Reason": "client"})
    assert [json.loads(line) for line in lines] == [
        {
            "_aws": {
                "Timestamp": 42,
                "CloudWatchMetrics": [
                    {
                        "Namespace": "voicestack/prod",
                        "Dimensions": [["Service", "Reason"]],
                        "Metrics": [{"Name": "Cancels", "Unit": "Count"}],
                    }
                ],
            },
            "Service": "speech",
            "Reason": "client",
            "Cancels": 1,
        }
    ]


@pytest.mark.parametrize("environ", [{}, {NAMESPACE_ENV: ""}])
def test_no_namespace_in_the_environment_disables_metrics(environ) -> None:
    assert MetricsEmitter.from_env("agent", environ).enabled is False


def test_emitter_without_a_namespace_prints_nothing() -> None:
    lines: list[str] = []
    emitter = MetricsEmitter(None, "agent", write=lines.append)
    emitter.emit(Metric("Invocations", 1, "Count"))
    assert lines == []


def test_emitter_reads_the_namespace_from_the_environment() -> None:
    emitter = MetricsEmitter.from_env("agent", {NAMESPACE_ENV: "voicestack/dev"})
    assert (emitter.enabled, emitter.namespace, emitter.service) == (True, "voicestack/dev", "agent")
