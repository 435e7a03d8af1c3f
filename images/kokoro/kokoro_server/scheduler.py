"""Fair sharing of the synthesis engine between sessions: round-robin per chunk, bounded concurrency.

Every client of the engine (a WebSocket session, an HTTP request) gets a `Lane`. A lane's jobs run
in the order it submitted them; between lanes, the scheduler takes one job from each lane that
has work, in turn, so one session's long text never starves another session's first chunk. At most
`max_concurrent` jobs run at once, in a thread pool (the engine releases the GIL while it
computes, so the event loop keeps serving); the rest wait here, where they can still be dropped,
rather than in the pool's queue, where they could not.

A job that runs past `job_timeout_s` fails its caller with `SynthesisTimeoutError` at once, but
its thread cannot be stopped: the slot stays taken (and counted as `stuck`) until the call returns.
When every slot is stuck the scheduler is `stalled`: nothing can run, so the server reports itself
unhealthy (/ping 503) and the orchestrator replaces it.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Callable
from concurrent.futures import Executor
from dataclasses import dataclass, field
from typing import Any

logger = logging.getLogger(__name__)


class LaneClosedError(RuntimeError):
    """A job was submitted to a lane that its owner already closed."""


class SynthesisTimeoutError(RuntimeError):
    """An engine job ran longer than the scheduler's time limit (it may still be running)."""


@dataclass(eq=False, slots=True)
class _Job:
    fn: Callable[[], Any]
    future: asyncio.Future[Any]
    lane: Lane
    deadline: asyncio.TimerHandle | None = None
    timed_out: bool = False


@dataclass(eq=False)
class Lane:
    """One client's queue of engine jobs. Close it when the client is gone: queued jobs are dropped."""

    name: str
    _scheduler: FairScheduler
    _jobs: deque[_Job] = field(default_factory=deque)
    closed: bool = False

    async def run[T](self, fn: Callable[[], T]) -> T:
        """Run `fn` in the pool when this lane's turn comes; return its result.

        Cancelling the caller before the job starts removes the job: it never runs. Once started,
        a job runs to its end (a thread cannot be interrupted) and its result is discarded.
        """
        if self.closed:
            raise LaneClosedError(f"lane {self.name!r} is closed")
        job = _Job(fn=fn, future=asyncio.get_running_loop().create_future(), lane=self)
        self._jobs.append(job)
        self._scheduler._submitted(self)
        try:
            result: T = await job.future
        except asyncio.CancelledError:
            if job in self._jobs:
                self._jobs.remove(job)
            raise
        return result

    @property
    def queued(self) -> int:
        return len(self._jobs)

    def close(self) -> None:
        """Drop every queued job (their callers see CancelledError) and refuse new ones."""
        self.closed = True
        while self._jobs:
            self._jobs.popleft().future.cancel()
        self._scheduler._closed(self)


class FairScheduler:
    """Runs engine jobs from many lanes, round-robin, at most `max_concurrent` at a time."""

    def __init__(self, max_concurrent: int, executor: Executor, job_timeout_s: float | None = None) -> None:
        if max_concurrent < 1:
            raise ValueError(f"max_concurrent must be at least 1, got {max_concurrent}")
        if job_timeout_s is not None and job_timeout_s <= 0:
            raise ValueError(f"job_timeout_s must be positive, got {job_timeout_s}")
        self.max_concurrent = max_concurrent
        self.job_timeout_s = job_timeout_s
        self._executor = executor
        self._stuck = 0
        self._lanes: set[Lane] = set()
        self._turns: deque[Lane] = deque()
        """Lanes with queued jobs, in the order they get their next turn."""
        self._running = 0

    def lane(self, name: str) -> Lane:
        lane = Lane(name=name, _scheduler=self)
        self._lanes.add(lane)
        return lane

    @property
    def running(self) -> int:
        """Jobs executing now (including ones whose caller has gone away)."""
        return self._running

    @property
    def queued(self) -> int:
        return sum(lane.queued for lane in self._lanes)

    @property
    def stuck(self) -> int:
        """Jobs past their time limit whose thread has not returned yet (each holds a slot)."""
        return self._stuck

    @property
    def stalled(self) -> bool:
        """Every slot is held by a stuck job: no new job can start until one of them returns."""
        return self._stuck >= self.max_concurrent

    @property
    def open_lanes(self) -> int:
        return len(self._lanes)

    def _submitted(self, lane: Lane) -> None:
        if lane not in self._turns:
            self._turns.append(lane)
        self._dispatch()

    def _closed(self, lane: Lane) -> None:
        self._lanes.discard(lane)
        if lane in self._turns:
            self._turns.remove(lane)

    def _dispatch(self) -> None:
        while self._running < self.max_concurrent and self._turns:
            lane = self._turns.popleft()
            if not lane._jobs:
                continue  # its only job was cancelled while it waited for its turn
            job = lane._jobs.popleft()
            if lane._jobs:
                self._turns.append(lane)
            self._start(job)

    def _start(self, job: _Job) -> None:
        self._running += 1
        loop = asyncio.get_running_loop()
        done = loop.run_in_executor(self._executor, job.fn)
        done.add_done_callback(lambda outcome: self._finished(job, outcome))
        if self.job_timeout_s is not None:
            job.deadline = loop.call_later(self.job_timeout_s, self._timed_out, job)

    def _timed_out(self, job: _Job) -> None:
        job.timed_out = True
        self._stuck += 1
        logger.error(
            "engine job of lane %s has run for more than %.1f s; its slot stays taken until it returns "
            "(%d of %d slots stuck)",
            job.lane.name,
            self.job_timeout_s,
            self._stuck,
            self.max_concurrent,
        )
        if not job.future.done():
            job.future.set_exception(SynthesisTimeoutError(f"synthesis took longer than {self.job_timeout_s:g} s"))

    def _finished(self, job: _Job, outcome: asyncio.Future[Any]) -> None:
        self._running -= 1
        if job.deadline is not None:
            job.deadline.cancel()
        if job.timed_out:
            self._stuck -= 1
            logger.warning("engine job of lane %s returned after its time limit; its slot is free again", job.lane.name)
        if job.future.done():
            # The caller left (or was answered with a timeout) while the job ran; nobody will read
            # the outcome, so report failures here.
            if not outcome.cancelled() and (exc := outcome.exception()) is not None:
                logger.warning("engine job of lane %s failed after its caller left: %r", job.lane.name, exc)
        elif outcome.cancelled():
            job.future.cancel()
        elif (exc := outcome.exception()) is not None:
            job.future.set_exception(exc)
        else:
            job.future.set_result(outcome.result())
        self._dispatch()
