"""CloudWatch Embedded Metric Format (EMF): metrics as one JSON log line, no agent, no API call.

Both containers (speech and agent) print their metrics this way on stdout; CloudWatch Logs turns
each line into metric data points. One module serves both images, so the record shape, the
namespace variable and the units are defined once. Formatting is pure; `MetricsEmitter` only
adds the clock and the output stream.

Format: https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/CloudWatch_Embedded_Metric_Format_Specification.html
"""

from __future__ import annotations

import json
import math
import os
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Final, Literal

NAMESPACE_ENV: Final = "VOICESTACK_METRICS_NAMESPACE"
"""Environment variable holding the CloudWatch namespace (the Pulumi program sets it per stack);
when it is unset or empty, no metric line is printed (local development stays quiet)."""

Unit = Literal["Milliseconds", "Seconds", "Count", "Percent", "Bytes", "None"]

MAX_DIMENSIONS: Final = 30
"""CloudWatch's limit on dimensions in one dimension set."""
MAX_METRICS: Final = 100
"""CloudWatch's limit on metrics in one EMF directive."""


@dataclass(frozen=True, slots=True)
class Metric:
    name: str
    value: float
    unit: Unit = "None"


def emf_record(
    namespace: str,
    dimensions: Mapping[str, str],
    metrics: tuple[Metric, ...] | list[Metric],
    timestamp_ms: int,
) -> dict[str, object]:
    """The EMF object for `metrics`, all under one dimension set made of every key of `dimensions`.

    Raises ValueError on what CloudWatch would drop silently: an empty namespace or metric list,
    a name used twice, a non-finite value, too many dimensions or metrics, or a metric named like
    a dimension.
    """
    if not namespace:
        raise ValueError("namespace must not be empty")
    if not metrics:
        raise ValueError("at least one metric is required")
    if len(metrics) > MAX_METRICS:
        raise ValueError(f"at most {MAX_METRICS} metrics per record, got {len(metrics)}")
    if len(dimensions) > MAX_DIMENSIONS:
        raise ValueError(f"at most {MAX_DIMENSIONS} dimensions per record, got {len(dimensions)}")
    names = [m.name for m in metrics]
    if len(set(names)) != len(names):
        raise ValueError(f"metric names must be unique, got {names}")
    if clash := sorted(set(names) & set(dimensions)):
        raise ValueError(f"metric names clash with dimension names: {clash}")
    for metric in metrics:
        if not math.isfinite(metric.value):
            raise ValueError(f"metric {metric.name!r} has a non-finite value {metric.value!r}")
    record: dict[str, object] = {
        "_aws": {
            "Timestamp": timestamp_ms,
            "CloudWatchMetrics": [
                {
                    "Namespace": namespace,
                    "Dimensions": [list(dimensions)],
                    "Metrics": [{"Name": m.name, "Unit": m.unit} for m in metrics],
                }
            ],
        },
    }
    record.update(dimensions)
    record.update({m.name: m.value for m in metrics})
    return record


def emf_line(
    namespace: str, dimensions: Mapping[str, str], metrics: tuple[Metric, ...] | list[Metric], timestamp_ms: int
) -> str:
    """One compact JSON line (no newline inside, so a log line is exactly one record)."""
    return json.dumps(emf_record(namespace, dimensions, metrics, timestamp_ms), separators=(",", ":"))


class MetricsEmitter:
    """Prints EMF lines for one service (`Service` dimension) when a namespace is configured."""

    def __init__(
        self,
        namespace: str | None,
        service: str,
        write: Callable[[str], object] | None = None,
        clock_ms: Callable[[], int] | None = None,
    ) -> None:
        self.namespace = namespace or None
        self.service = service
        self._write = write if write is not None else _print_line
        self._clock_ms = clock_ms if clock_ms is not None else _now_ms

    @classmethod
    def from_env(cls, service: str, environ: Mapping[str, str] | None = None) -> MetricsEmitter:
        env = os.environ if environ is None else environ
        return cls(env.get(NAMESPACE_ENV), service)

    @property
    def enabled(self) -> bool:
        return self.namespace is not None

    def emit(self, *metrics: Metric, dimensions: Mapping[str, str] | None = None) -> None:
        """Print one record of `metrics` with dimensions `Service` plus `dimensions`."""
        if self.namespace is None:
            return
        dims = {"Service": self.service, **(dimensions or {})}
        self._write(emf_line(self.namespace, dims, list(metrics), self._clock_ms()))


def _print_line(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def _now_ms() -> int:
    return int(time.time() * 1000)
