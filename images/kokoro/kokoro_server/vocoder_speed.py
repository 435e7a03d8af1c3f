"""The vocoder's measured speed: seconds per vocoded input step, from the windows an engine decoded.

Two figures, for two kinds of decision (`kokoro_engine.synthesize_pieces`):

- `typical`, a running average with half weight on the newest window, sizes each later window of a
  chunk. It follows the engine's load within a chunk, and a misprediction there is absorbed:
  `WindowPlan.margin`, and the plan's recovery when the listener's buffer runs thinner than planned.
- `cautious`, the slowest of the last `history` windows, sizes a chunk's first window, the one
  decision that cannot be revised: a first window too short for the real speed leaves a gap after
  it (the listener has started to play), one a few steps too long only delays first audio by those
  steps. Measured in the page (`make bench-page`, stream and batch trials alternating, 2 cores):
  the first windows of a stream answer ran at 0.0051-0.0066 s/step, while the agent and the
  browser were busy beside the engine; those of a batch answer at 0.0035-0.0046, its later ones at
  0.0031-0.0034. A stream answer after a batch one was planned at the average, 0.0034: a first
  window of 26 steps, and 0.07 s of silence after it. The slowest of the last 16 windows (about
  four first chunks) was 0.0056 there. The price: one slow window lengthens the next few first
  windows (first audio later by those steps), never the other way round.

Windows of different sessions are decoded on different threads: the figures are kept under a lock.
"""

from __future__ import annotations

import threading
from collections import deque
from typing import Final

HISTORY: Final = 16
"""Windows remembered for `cautious`: a first chunk is cut into three to five windows, so these
are about the last four first chunks' (a slow start in any of the last few answers is remembered)."""


class VocoderSpeed:
    """Seconds per vocoded input step (contexts included), as measured window by window."""

    def __init__(self, history: int = HISTORY) -> None:
        if history < 1:
            raise ValueError(f"history must be at least 1 window, got {history}")
        self._lock = threading.Lock()
        self._recent: deque[float] = deque(maxlen=history)
        self._typical: float | None = None

    def record(self, steps: int, seconds: float) -> None:
        """Fold one window's vocoder work in: `steps` vocoded input steps took `seconds`. A window of
        no steps says nothing about the speed and is ignored."""
        if steps <= 0:
            return
        rate = seconds / steps
        with self._lock:
            self._recent.append(rate)
            # Half weight: the speed follows the engine's load, which changes as other jobs start and end.
            self._typical = rate if self._typical is None else (self._typical + rate) / 2

    @property
    def typical(self) -> float | None:
        """The running average (None before the first window): for a chunk's later windows."""
        with self._lock:
            return self._typical

    @property
    def cautious(self) -> float | None:
        """The slowest of the last `history` windows (None before the first): for a first window."""
        with self._lock:
            return max(self._recent) if self._recent else None
