"""The latency lab's arithmetic and presentation: statistics, sizes, the table and the chart.

Pure functions over measured numbers (no sockets, no processes), so every figure the lab prints is
unit-tested. The AWS figures the lab reproduces are kept here, next to the code that compares.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from bench.speech import AWS_STREAMED_MS, AWS_WHOLE_MS

# What the AWS write-up measured (the lab prints them beside the local figures).
AWS_TRANSPORT_WHOLE_MS: Final = AWS_WHOLE_MS
AWS_TRANSPORT_FIRST_SENTENCE_MS: Final = AWS_STREAMED_MS
AWS_TRANSPORT_CHANGE_PCT: Final = -52.4
AWS_E2E_SPEEDUP_LOCAL: Final = 2.4
AWS_E2E_SPEEDUP_DEPLOYED: Final = 3.5
AWS_SIZE_NOTE: Final = "about a third larger"


@dataclass(frozen=True, slots=True)
class Summary:
    """Distribution of one measurement (milliseconds unless said otherwise)."""

    n: int
    mean: float
    median: float
    stdev: float
    minimum: float
    maximum: float

    @classmethod
    def of(cls, values: Sequence[float]) -> Summary:
        """Summary of at least one value; stdev is 0 for a single value."""
        if not values:
            raise ValueError("no values to summarize")
        if any(not math.isfinite(v) for v in values):
            raise ValueError(f"values must be finite numbers, got {list(values)}")
        return cls(
            n=len(values),
            mean=statistics.fmean(values),
            median=statistics.median(values),
            stdev=statistics.stdev(values) if len(values) > 1 else 0.0,
            minimum=min(values),
            maximum=max(values),
        )


def percent_change(before: float, after: float) -> float:
    """How much `after` differs from `before`, in percent (329.3 -> 156.7 is -52.4)."""
    if before <= 0:
        raise ValueError(f"the reference must be positive, got {before}")
    return (after - before) / before * 100.0


def speedup(slow: float, fast: float) -> float:
    """How many times sooner `fast` is than `slow` (2.4 means: in 1/2.4 of the time)."""
    if slow <= 0 or fast <= 0:
        raise ValueError(f"times must be positive, got {slow} and {fast}")
    return slow / fast


@dataclass(frozen=True, slots=True)
class SizeReport:
    """Raw PCM against the same audio as base64 inside JSON SSE events."""

    clips: int
    raw_bytes: int
    encoded_bytes: int

    @property
    def overhead_pct(self) -> float:
        return percent_change(self.raw_bytes, self.encoded_bytes)


def size_report(clips: Sequence[tuple[int, int]]) -> SizeReport:
    """`clips` are (raw PCM bytes, bytes of its SSE event) pairs."""
    if not clips:
        raise ValueError("no clips to compare")
    return SizeReport(
        clips=len(clips), raw_bytes=sum(raw for raw, _ in clips), encoded_bytes=sum(enc for _, enc in clips)
    )


# --- results and the table ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TransportResults:
    """Time to first audio byte (ms) over the speech transport, per way of sending the text."""

    text_chars: int
    sentences: int
    whole_text_ms: tuple[float, ...]
    first_sentence_ms: tuple[float, ...]


@dataclass(frozen=True, slots=True)
class AgentTrial:
    """One invocation of the agent, timed by the caller."""

    first_text_ms: float
    first_audio_ms: float
    total_ms: float


@dataclass(frozen=True, slots=True)
class EndToEndResults:
    batch: tuple[AgentTrial, ...]
    stream: tuple[AgentTrial, ...]


@dataclass(frozen=True, slots=True)
class LabResults:
    title: str
    notes: tuple[str, ...]
    deployed: bool
    transport: TransportResults
    end_to_end: EndToEndResults
    sizes: SizeReport
    agent_route: str = "SSE"
    """How the agent's events travelled (SSE or WebSocket), which the size figures measured."""


def format_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A plain-text table: first column left-aligned, the others right-aligned, two spaces apart."""
    widths = [len(h) for h in headers]
    for row in rows:
        if len(row) != len(headers):
            raise ValueError(f"row {list(row)} has {len(row)} cells, expected {len(headers)}")
        widths = [max(w, len(cell)) for w, cell in zip(widths, row, strict=True)]

    def line(cells: Sequence[str]) -> str:
        first = cells[0].ljust(widths[0])
        rest = [cell.rjust(width) for cell, width in zip(cells[1:], widths[1:], strict=True)]
        return "  ".join([first, *rest]).rstrip()

    rule = "  ".join("-" * w for w in widths)
    return "\n".join([line(headers), rule, *(line(row) for row in rows)])


def ms(value: float) -> str:
    return f"{value:,.1f} ms"


def pct(value: float) -> str:
    return f"{value:+.1f} %"


def times(value: float) -> str:
    return f"{value:.1f}x"


def render(results: LabResults) -> str:
    """The lab's report: three tables, local figures beside the AWS ones."""
    t = results.transport
    whole, first = Summary.of(t.whole_text_ms), Summary.of(t.first_sentence_ms)
    change = percent_change(whole.median, first.median)
    transport = format_table(
        ["time to first audio byte", "median", "mean", "min", "max", "trials", "AWS"],
        [
            ["whole text", *_spread(whole), ms(AWS_TRANSPORT_WHOLE_MS)],
            ["first sentence first", *_spread(first), ms(AWS_TRANSPORT_FIRST_SENTENCE_MS)],
            ["change", pct(change), "", "", "", "", pct(AWS_TRANSPORT_CHANGE_PCT)],
        ],
    )

    e = results.end_to_end
    batch_audio = Summary.of([trial.first_audio_ms for trial in e.batch])
    stream_audio = Summary.of([trial.first_audio_ms for trial in e.stream])
    aws_speedup = AWS_E2E_SPEEDUP_DEPLOYED if results.deployed else AWS_E2E_SPEEDUP_LOCAL
    where = "deployed runtime" if results.deployed else "local test"
    end_to_end = format_table(
        ["first audio at the caller", "median", "mean", "min", "max", "trials", "first text", "total"],
        [
            ["batch", *_spread(batch_audio), *_text_and_total(e.batch)],
            ["stream", *_spread(stream_audio), *_text_and_total(e.stream)],
            ["stream sooner by", times(speedup(batch_audio.median, stream_audio.median)), *[""] * 6],
            [f"reference: AWS write-up, {where}", times(aws_speedup), *[""] * 6],
        ],
    )

    s = results.sizes
    sizes = format_table(
        [f"transport size, {s.clips} clips", "bytes", "vs raw", "AWS"],
        [
            ["raw PCM", f"{s.raw_bytes:,}", "", ""],
            [f"base64 in JSON ({results.agent_route})", f"{s.encoded_bytes:,}", pct(s.overhead_pct), AWS_SIZE_NOTE],
        ],
    )
    header = [results.title, *(f"  {note}" for note in results.notes)]
    sections = [
        f"Transport: {t.text_chars}-character, {t.sentences}-sentence text, whole versus first sentence first",
        transport,
        "",
        "End to end: the same prompt through the agent, batch versus stream, alternating (first text, total: medians)",
        end_to_end,
        "",
        sizes,
    ]
    return "\n".join([*header, "", *sections])


def _spread(summary: Summary) -> list[str]:
    return [ms(summary.median), ms(summary.mean), ms(summary.minimum), ms(summary.maximum), str(summary.n)]


def _text_and_total(trials: Sequence[AgentTrial]) -> list[str]:
    """Medians of the time to first text and of the whole answer."""
    return [
        ms(Summary.of([t.first_text_ms for t in trials]).median),
        ms(Summary.of([t.total_ms for t in trials]).median),
    ]


def write_chart(results: LabResults, path: Path) -> Path:
    """Three panels of distributions (transport, end to end, sizes) as a PNG."""
    import matplotlib  # imported here: heavy, and only the chart needs it

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax_t, ax_e, ax_s) = plt.subplots(1, 3, figsize=(15, 4.8), constrained_layout=True)
    t = results.transport
    _distribution(ax_t, ["whole text", "first sentence\nfirst"], [t.whole_text_ms, t.first_sentence_ms])
    ax_t.scatter(
        [1, 2],
        [AWS_TRANSPORT_WHOLE_MS, AWS_TRANSPORT_FIRST_SENTENCE_MS],
        marker="D",
        color="tab:orange",
        label="AWS (reported)",
    )
    ax_t.set_title("Transport: time to first audio byte")
    ax_t.set_ylabel("ms")
    ax_t.legend(loc="upper right")

    e = results.end_to_end
    _distribution(
        ax_e, ["batch", "stream"], [[x.first_audio_ms for x in e.batch], [x.first_audio_ms for x in e.stream]]
    )
    ax_e.set_title("End to end: first audio at the caller")
    ax_e.set_ylabel("ms")

    s = results.sizes
    bars = ax_s.bar(["raw PCM", "base64 in JSON"], [s.raw_bytes, s.encoded_bytes], color=["tab:blue", "tab:red"])
    ax_s.bar_label(bars, labels=[f"{s.raw_bytes:,}", f"{s.encoded_bytes:,} ({pct(s.overhead_pct)})"])
    ax_s.set_title(f"Transport size, {s.clips} clips")
    ax_s.set_ylabel("bytes")

    fig.suptitle(results.title)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _distribution(ax: Any, labels: Sequence[str], series: Sequence[Sequence[float]]) -> None:
    ax.boxplot([list(values) for values in series], tick_labels=list(labels), widths=0.5)
    for i, values in enumerate(series, start=1):
        ax.scatter([i] * len(values), values, alpha=0.6, color="tab:blue", s=18)
