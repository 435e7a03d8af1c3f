"""The vocoder's measured speed: seconds per vocoded input step, from the windows an engine decoded.

Two figures, for the two kinds of window (`kokoro_engine.synthesize_pieces`):

- `typical`, a running average over every window with half weight on the newest, sizes a chunk's
  later windows: within a chunk it follows the engine's load, and a misprediction there is absorbed
  (`WindowPlan.margin`, and the plan's recovery when the listener's buffer runs thinner than planned).
- `for_first_window` sizes a first window planned alone: the slower of `typical` and the slowest of
  the last `FIRST_WINDOWS` such first windows. A first window is planned before anything of its
  chunk has been measured, and it cannot be revised: too short, and a gap follows it.

Why first windows have a memory of their own: in the page (`make bench-page`, stream and batch
trials alternating, 2-core AMD EPYC, 2026-12-01), a stream answer's first windows ran while the
agent and the browser were busy beside the engine, at about twice the seconds per step of a batch
answer's, whose long later windows then pulled the running average down further. A stream answer
after batch ones was planned at 0.0034-0.0043 s/step and its first window ran at about 0.0077 (the
job's time): 26- to 33-step first windows and 0.07-0.17 s of silence after them. Planning every
window at the slowest of the last 16 windows removed those silences (0 of 8 trials against 9 of 16)
but cost a quiet server its first audio (0.42-0.46 s against 0.36-0.40 s) and a crowd its later
windows' speed (the 4th of 4 sessions' first audio 1.39-1.46 s against 1.16-1.19 s): crowd windows
run at one thread, and the slowest of all windows remembered those. First windows planned alone
remember only their own kind.

Windows of different sessions are decoded on different threads: the figures are kept under a lock.
"""

from __future__ import annotations

import threading
from collections import deque
from typing import Final

FIRST_WINDOWS: Final = 4
"""First windows planned alone remembered for `for_first_window`: about the last four answers."""


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
    def for_first_window(self) -> float | None:
        """The slower of `typical` and the slowest recent first window planned alone (None before
        any window): for a first window planned alone."""
        with self._lock:
            known = [*self._first, *([] if self._typical is None else [self._typical])]
            return max(known) if known else None
