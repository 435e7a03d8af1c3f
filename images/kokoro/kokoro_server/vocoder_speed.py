"""The vocoder's measured speed: seconds per vocoded input step, from the windows an engine decoded.

Two figures, for two kinds of chunk (`kokoro_engine.synthesize_pieces`):

- `typical`, a running average over every window with half weight on the newest, sizes the windows
  of a chunk whose first window was cut for a crowd (`WindowPlan.first_for`): it follows the
  engine's load as jobs start and end beside it.
- `alone`, the slower of `typical` and the slowest of the last `FIRST_WINDOWS` first windows planned
  alone, sizes every window of a chunk planned alone. Such a chunk's listener has nothing but its
  first window's audio when the second is cut, and a window planned too fast arrives late: the
  listener hears silence. One planned too slow is a few steps longer (first audio later by those
  steps) or shorter (one more context to compute).

Why lone chunks have a memory of their own: in the page (`make bench-page`, stream and batch trials
alternating, 2-core AMD EPYC, 2026-12-01), a stream answer's windows ran while the agent and the
browser were busy beside the engine, slower than a batch answer's, whose long later windows then
pulled the running average down further. A stream answer after batch ones was planned at 0.0034
s/step: a 26-step first window and 0.07 s of silence after it; with the first window planned at the
slowest recent first window, its second window, planned at the average, still ran late (0.01-0.03
s of silence). Planning every window of every chunk at the slowest of the last 16 windows removed
both, but crowd windows run at one thread, and remembering them cost a quiet server its crowd's and
its lone sessions' first audio (images/kokoro/README.md, Performance).

Windows of different sessions are decoded on different threads: the figures are kept under a lock.
"""

from __future__ import annotations

import threading
from collections import deque
from typing import Final

FIRST_WINDOWS: Final = 4
"""First windows planned alone remembered for `alone`: about the last four answers."""


class VocoderSpeed:
    """Seconds per vocoded input step (contexts included), as measured window by window."""

    def __init__(self, first_windows: int = FIRST_WINDOWS) -> None:
        if first_windows < 1:
            raise ValueError(f"first_windows must be at least 1, got {first_windows}")
        self._lock = threading.Lock()
        self._typical: float | None = None
        self._first: deque[float] = deque(maxlen=first_windows)

    def record(self, steps: int, seconds: float, *, first_alone: bool = False) -> None:
        """One window's vocoder work: `steps` vocoded input steps took `seconds`; `first_alone` for a
        chunk's first window planned with nobody else waiting. A window of no steps says nothing
        about the speed and is ignored."""
        if steps <= 0:
            return
        rate = seconds / steps
        with self._lock:
            # Half weight: the speed follows the engine's load, which changes as other jobs start and end.
            self._typical = rate if self._typical is None else (self._typical + rate) / 2
            if first_alone:
                self._first.append(rate)

    @property
    def typical(self) -> float | None:
        """The running average over every window (None before the first): for later windows."""
        with self._lock:
            return self._typical

    @property
    def alone(self) -> float | None:
        """The slower of `typical` and the slowest recent first window planned alone (None before
        any window): for the windows of a chunk whose first window was planned alone."""
        with self._lock:
            known = [*self._first, *([] if self._typical is None else [self._typical])]
            return max(known) if known else None
