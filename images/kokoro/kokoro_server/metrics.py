"""The speech server's CloudWatch metrics, printed as Embedded Metric Format lines (`speech_protocol.emf`).

The names below are a contract: the Pulumi program's alarms, dashboard and autoscaling read
exactly these, in the namespace from `VOICESTACK_METRICS_NAMESPACE`, with the one dimension
`Service=speech`. Nothing is printed when that variable is unset (local development).

- `TimeToFirstAudio` (Milliseconds), per request: from its arrival to its first audio frame sent.
- `SynthesisRTF` (None), per request with audio: engine compute seconds / audio seconds.
- `Cancels` (Count), per cancel; `Errors` (Count), per `error` frame sent (and per failed HTTP request).
- every `metrics_interval_s`: `ActiveSessions` and `QueuedRequests` (Count), one record.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Final

from speech_protocol.emf import Metric, MetricsEmitter

logger = logging.getLogger(__name__)

SERVICE: Final = "speech"


class SpeechMetrics:
    """Typed recorders for each metric of the contract; a no-op when the emitter is disabled."""

    def __init__(self, emitter: MetricsEmitter) -> None:
        self._emitter = emitter

    @classmethod
    def from_env(cls) -> SpeechMetrics:
        return cls(MetricsEmitter.from_env(SERVICE))

    @classmethod
    def disabled(cls) -> SpeechMetrics:
        return cls(MetricsEmitter(None, SERVICE))

    @property
    def enabled(self) -> bool:
        return self._emitter.enabled

    def time_to_first_audio(self, ms: float) -> None:
        self._emitter.emit(Metric("TimeToFirstAudio", round(ms, 3), "Milliseconds"))

    def synthesis_rtf(self, compute_s: float, audio_s: float) -> None:
        if audio_s > 0:
            self._emitter.emit(Metric("SynthesisRTF", round(compute_s / audio_s, 4), "None"))

    def cancel(self) -> None:
        self._emitter.emit(Metric("Cancels", 1, "Count"))

    def error(self) -> None:
        self._emitter.emit(Metric("Errors", 1, "Count"))

    def gauges(self, active_sessions: int, queued_requests: int) -> None:
        self._emitter.emit(
            Metric("ActiveSessions", active_sessions, "Count"), Metric("QueuedRequests", queued_requests, "Count")
        )


async def report_gauges(metrics: SpeechMetrics, read: Callable[[], tuple[int, int]], interval_s: float) -> None:
    """Print the gauges (`read()` gives active sessions and queued requests) every `interval_s`, forever."""
    if not metrics.enabled:
        return
    while True:
        await asyncio.sleep(interval_s)
        active, queued = read()
        metrics.gauges(active, queued)
