"""The vocoder's speed the window plan counts on: the slowest of the engine's last windows.

A chunk's windows (`windowed.WindowPlan`) are sized so that each arrives before the listener's
audio runs out, from seconds per vocoded input step. The error is not symmetric: a window planned
at too fast a speed arrives late, and the listener hears silence; one planned too slow is a few
steps shorter (one more window's context to compute) or, for a first window, a few steps longer
(first audio later by those steps). So the plan counts on the slowest of the last `HISTORY`
windows, not on their average.

Measured in the page (`make bench-page`, stream and batch trials alternating, 2-core AMD EPYC,
2026-12-01): windows of a stream answer ran at 0.0045-0.0075 s/step, while the agent and the
browser were busy beside the engine, those of a batch answer at 0.0031-0.0046. Planned at a
running average (half weight on the newest window), which batch answers had pulled down, stream
answers heard silence after their first or second window: a 26-step first window planned at
0.0034 s/step, 0.07 s of silence; a second window planned at 0.0038 that ran at 0.0049, 0.05 s.
Stream answers with an underrun, page runs side by side: 6 of 14 at the average, 3 of 12 with the
first window at the slowest recent speed (images/kokoro/README.md, Performance).

Windows of different sessions are decoded on different threads: the history is kept under a lock.
"""

from __future__ import annotations

import threading
from collections import deque
from typing import Final

HISTORY: Final = 16
"""Windows remembered: a first chunk is cut into three to five windows, so these are about the last
four answers' (a slow start in any of them is remembered; one slow outlier is forgotten after 16)."""


class VocoderSpeed:
    """Seconds per vocoded input step (contexts included), as measured window by window."""

    def __init__(self, history: int = HISTORY) -> None:
        if history < 1:
            raise ValueError(f"history must be at least 1 window, got {history}")
        self._lock = threading.Lock()
        self._recent: deque[float] = deque(maxlen=history)

    def record(self, steps: int, seconds: float) -> None:
        """One window's vocoder work: `steps` vocoded input steps took `seconds`. A window of no
        steps says nothing about the speed and is ignored."""
        if steps <= 0:
            return
        with self._lock:
            self._recent.append(seconds / steps)

    @property
    def s_per_step(self) -> float | None:
        """The slowest of the last `history` windows, None before the first."""
        with self._lock:
            return max(self._recent) if self._recent else None
