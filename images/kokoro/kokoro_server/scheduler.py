"""Sharing the synthesis engine between sessions: most urgent job first, bounded concurrency.

Every client of the engine (a WebSocket session, an HTTP request) gets a `Lane`. A lane's jobs run
in the order it submitted them; between lanes, the scheduler starts the lane whose next job has
the earliest deadline: the moment its listener runs out of audio (earliest-deadline-first). A
listener already waiting in silence has a deadline in the past (when the silence began), so a
newcomer's first piece goes before the next chunk of a session whose listener still has seconds
of audio to hear, and one session's long text never starves another. A job without a deadline
counts from when it was submitted (first come, first served). At most `max_concurrent` jobs run
at once, in a thread pool (the engine releases the GIL while it computes, so the event loop keeps
serving); the rest wait here, where they can still be dropped, rather than in the pool's queue,
where they could not.

`on_start`, when given, runs in the pool thread before each job with the number of jobs running
(that one included): the service sizes the job's intra-op threads there, and again from `running`
at each stage of the model while the job runs (`concurrency`).

A job that runs past `job_timeout_s` fails its caller with `SynthesisTimeoutError` at once, but
its thread cannot be stopped: the slot stays taken (and counted as `stuck`) until the call returns.
When every slot is stuck the scheduler is `stalled`: nothing can run, so the server reports itself
unhealthy (/ping 503) and the orchestrator replaces it.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import threading
import time
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
    due: float | None
    """When its listener runs out of audio (`time.perf_counter` seconds): earliest runs first.
    A job without a deadline is due when it becomes its lane's next job (see `Lane.run`)."""
    order: int
    """Submission order: breaks ties between equal deadlines."""
    timer: asyncio.TimerHandle | None = None
    timed_out: bool = False
    started: float = 0.0
    thread: str = ""
    """The pool thread it ran on (for the job log)."""


@dataclass(eq=False)
class Lane:
    """One client's queue of engine jobs. Close it when the client is gone: queued jobs are dropped."""

    name: str
    _scheduler: FairScheduler
    _jobs: deque[_Job] = field(default_factory=deque)
    closed: bool = False

    async def run[T](self, fn: Callable[[], T], *, deadline: float | None = None) -> T:
        """Run `fn` in the pool when this lane's turn comes; return its result.

        `deadline` (`time.perf_counter` seconds) is when the listener needs the result: the most
        urgent job of all lanes starts first. None: due when it becomes this lane's next job, so
        that lanes without deadlines take turns, one job each (first come, first served).

        Cancelling the caller before the job starts removes the job: it never runs. Once started,
        a job runs to its end (a thread cannot be interrupted) and its result is discarded.
        """
        if self.closed:
            raise LaneClosedError(f"lane {self.name!r} is closed")
        job = _Job(
            fn=fn,
            future=asyncio.get_running_loop().create_future(),
            lane=self,
            due=time.perf_counter() if deadline is None and not self._jobs else deadline,
            order=next(self._scheduler._orders),
        )
        self._jobs.append(job)
        self._scheduler._submitted(self)
        try:
            result: T = await job.future
        except asyncio.CancelledError:
            if job in self._jobs:
                self._jobs.remove(job)
                if self._jobs and self._jobs[0].due is None:
                    self._jobs[0].due = time.perf_counter()
                self._scheduler._refresh()
            raise
        return result

    @property
    def queued(self) -> int:
        return len(self._jobs)

    def others_in_silence(self) -> int:
        """How many other lanes have a job queued or running whose deadline has passed (their
        listeners wait in silence). Safe to call from a job's thread."""
        return self._scheduler.in_silence(excluding=self)

    def close(self) -> None:
        """Drop every queued job (their callers see CancelledError) and refuse new ones."""
        self.closed = True
        while self._jobs:
            self._jobs.popleft().future.cancel()
        self._scheduler._closed(self)
        self._scheduler._refresh()


def _urgency(lane: Lane) -> tuple[float, int]:
    head = lane._jobs[0]
    return (head.due if head.due is not None else float("inf"), head.order)


class FairScheduler:
    """Runs engine jobs from many lanes, most urgent first, at most `max_concurrent` at a time."""

    def __init__(
        self,
        max_concurrent: int,
        executor: Executor,
        job_timeout_s: float | None = None,
        on_start: Callable[[int], None] | None = None,
    ) -> None:
        if max_concurrent < 1:
            raise ValueError(f"max_concurrent must be at least 1, got {max_concurrent}")
        if job_timeout_s is not None and job_timeout_s <= 0:
            raise ValueError(f"job_timeout_s must be positive, got {job_timeout_s}")
        self.max_concurrent = max_concurrent
        self.job_timeout_s = job_timeout_s
        self._executor = executor
        self._on_start = on_start
        self._stuck = 0
        self._lanes: set[Lane] = set()
        self._waiting: set[Lane] = set()
        """Lanes with queued jobs."""
        self._orders = itertools.count()
        self._running_jobs: set[_Job] = set()
        self._dues: tuple[tuple[float, Lane], ...] = ()
        """(deadline, lane) of every job queued or running: a snapshot that job threads may read
        (replaced whole on the event loop, never mutated)."""

    def lane(self, name: str) -> Lane:
        lane = Lane(name=name, _scheduler=self)
        self._lanes.add(lane)
        return lane

    @property
    def running(self) -> int:
        """Jobs executing now (including ones whose caller has gone away). Safe to read from a job's
        thread (the length of a set, read whole under the GIL): jobs size their threads by it."""
        return len(self._running_jobs)

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

    def in_silence(self, excluding: Lane | None = None) -> int:
        """Jobs queued or running whose deadline has passed (listeners waiting in silence), those of
        `excluding` left out. Safe to call from a job's thread: it reads one immutable snapshot."""
        now = time.perf_counter()
        return sum(1 for due, lane in self._dues if due <= now and lane is not excluding)

    @property
    def open_lanes(self) -> int:
        return len(self._lanes)

    def _submitted(self, lane: Lane) -> None:
        self._waiting.add(lane)
        self._dispatch()
        self._refresh()

    def _refresh(self) -> None:
        jobs = [*self._running_jobs, *(job for lane in self._waiting for job in lane._jobs)]
        self._dues = tuple((job.due, job.lane) for job in jobs if job.due is not None)

    def _closed(self, lane: Lane) -> None:
        self._lanes.discard(lane)
        self._waiting.discard(lane)

    def _dispatch(self) -> None:
        while self.running < self.max_concurrent:
            for lane in [lane for lane in self._waiting if not lane._jobs]:
                self._waiting.discard(lane)  # its jobs were cancelled while they waited
            if not self._waiting:
                return
            # A linear scan: lanes are bounded by the session limit, and a heap would need
            # re-keying whenever a lane's head job changes.
            lane = min(self._waiting, key=_urgency)
            job = lane._jobs.popleft()
            if not lane._jobs:
                self._waiting.discard(lane)
            elif lane._jobs[0].due is None:
                lane._jobs[0].due = time.perf_counter()  # its turn comes after those already waiting
            self._start(job)

    def _start(self, job: _Job) -> None:
        self._running_jobs.add(job)
        running = self.running
        loop = asyncio.get_running_loop()
        on_start = self._on_start
        job.started = time.perf_counter()

        def call() -> Any:
            job.thread = threading.current_thread().name
            if on_start is not None:
                on_start(running)
            return job.fn()

        done = loop.run_in_executor(self._executor, call)
        done.add_done_callback(lambda outcome: self._finished(job, outcome))
        if self.job_timeout_s is not None:
            job.timer = loop.call_later(self.job_timeout_s, self._timed_out, job)

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
        logger.debug(
            "job of lane %s on %s: %.3f s late at start, ran %.3f s; %d running after it",
            job.lane.name,
            job.thread,
            job.started - job.due if job.due is not None else 0.0,
            time.perf_counter() - job.started,
            self.running - 1,
        )
        self._running_jobs.discard(job)
        if job.timer is not None:
            job.timer.cancel()
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
        self._refresh()
