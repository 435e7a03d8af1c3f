"""The agent's CloudWatch metrics: two EMF lines per invocation, printed when it has stopped.

The contract the stack's alarms and dashboard are built on (namespace from
`VOICESTACK_METRICS_NAMESPACE`; nothing is printed when it is unset):

- `TimeToFirstText` and `TimeToFirstAudio` (Milliseconds, dimensions `Service=agent`), from the
  start of the invocation; a metric is left out when the answer had no text or no audio;
- `Invocations` (Count, value 1, dimensions `Service=agent`, `Outcome=<pipeline.Outcome>`).
"""

from __future__ import annotations

from typing import Final

from speech_protocol.emf import Metric, MetricsEmitter

SERVICE: Final = "agent"


class InvocationMetrics:
    """Prints the metrics of finished invocations through one emitter."""

    def __init__(self, emitter: MetricsEmitter) -> None:
        self._emitter = emitter

    @classmethod
    def from_env(cls) -> InvocationMetrics:
        return cls(MetricsEmitter.from_env(SERVICE))

    def record(self, outcome: str, *, first_text_s: float | None, first_audio_s: float | None) -> None:
        latencies = [
            Metric(name, round(seconds * 1000.0, 1), "Milliseconds")
            for name, seconds in (("TimeToFirstText", first_text_s), ("TimeToFirstAudio", first_audio_s))
            if seconds is not None
        ]
        if latencies:
            self._emitter.emit(*latencies)
        self._emitter.emit(Metric("Invocations", 1, "Count"), dimensions={"Outcome": outcome})
