"""The fair scheduler on its own: most urgent deadline first, round-robin without deadlines, the
concurrency bound, per-job thread sizing, dropped jobs."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import AsyncIterator, Callable
from concurrent.futures import ThreadPoolExecutor

import pytest

from kokoro_server.scheduler import FairScheduler, LaneClosedError

pytestmark = pytest.mark.timeout(30)


class Recorder:
    """Jobs that record their name when they start and block until released."""

    def __init__(self) -> None:
        self.started: list[str] = []
        self.gate = threading.Semaphore(0)
        self.in_flight = 0
        self.max_in_flight = 0
        self._lock = threading.Lock()

    def job(self, name: str) -> Callable[[], str]:
        def run() -> str:
            with self._lock:
                self.started.append(name)
                self.in_flight += 1
                self.max_in_flight = max(self.max_in_flight, self.in_flight)
            try:
                if not self.gate.acquire(timeout=10):
                    raise TimeoutError(name)
                return name
            finally:
                with self._lock:
                    self.in_flight -= 1

        return run


@pytest.fixture
async def pool() -> AsyncIterator[ThreadPoolExecutor]:
    executor = ThreadPoolExecutor(max_workers=4)
    yield executor
    executor.shutdown(wait=False, cancel_futures=True)


async def until(condition: Callable[[], bool]) -> None:
    async with asyncio.timeout(10):
        while not condition():  # noqa: ASYNC110 - the state changes in pool threads, which cannot set an Event
            await asyncio.sleep(0.001)


async def test_lanes_take_turns_one_job_each(pool: ThreadPoolExecutor) -> None:
    rec = Recorder()
    scheduler = FairScheduler(1, pool)
    a, b, c = scheduler.lane("a"), scheduler.lane("b"), scheduler.lane("c")
    blocker = asyncio.create_task(a.run(rec.job("a0")))
    await until(lambda: rec.started == ["a0"])
    # While a0 runs, A queues three jobs, then B two, then C one.
    tasks = [asyncio.create_task(lane.run(rec.job(name))) for lane, name in [(a, "a1"), (a, "a2"), (a, "a3")]]
    tasks += [asyncio.create_task(lane.run(rec.job(name))) for lane, name in [(b, "b1"), (b, "b2"), (c, "c1")]]
    await until(lambda: scheduler.queued == 6)
    rec.gate.release(7)
    results = await asyncio.gather(blocker, *tasks)

    assert rec.started == ["a0", "a1", "b1", "c1", "a2", "b2", "a3"]
    assert results == ["a0", "a1", "a2", "a3", "b1", "b2", "c1"]


async def test_at_most_max_concurrent_jobs_run_and_the_rest_wait(pool: ThreadPoolExecutor) -> None:
    rec = Recorder()
    scheduler = FairScheduler(2, pool)
    tasks = [asyncio.create_task(scheduler.lane(f"l{i}").run(rec.job(f"j{i}"))) for i in range(5)]
    await until(lambda: scheduler.running == 2)
    assert (scheduler.running, scheduler.queued, rec.in_flight) == (2, 3, 2)
    rec.gate.release(5)
    assert await asyncio.gather(*tasks) == [f"j{i}" for i in range(5)]
    assert rec.max_in_flight == 2
    assert scheduler.running == 0


async def test_a_cancelled_caller_job_never_starts_when_it_was_still_queued(pool: ThreadPoolExecutor) -> None:
    rec = Recorder()
    scheduler = FairScheduler(1, pool)
    lane = scheduler.lane("a")
    running = asyncio.create_task(lane.run(rec.job("running")))
    await until(lambda: rec.started == ["running"])
    waiting = asyncio.create_task(lane.run(rec.job("waiting")))
    await until(lambda: scheduler.queued == 1)
    waiting.cancel()
    await until(lambda: scheduler.queued == 0)
    rec.gate.release(2)
    assert await running == "running"
    await until(lambda: scheduler.running == 0)

    assert waiting.cancelled()
    assert rec.started == ["running"]


async def test_closing_a_lane_drops_its_queued_jobs_and_refuses_new_ones(pool: ThreadPoolExecutor) -> None:
    rec = Recorder()
    scheduler = FairScheduler(1, pool)
    lane, other = scheduler.lane("closing"), scheduler.lane("other")
    first = asyncio.create_task(lane.run(rec.job("first")))
    await until(lambda: rec.started == ["first"])
    dropped = [asyncio.create_task(lane.run(rec.job(f"dropped{i}"))) for i in range(2)]
    kept = asyncio.create_task(other.run(rec.job("other")))
    await until(lambda: scheduler.queued == 3)
    lane.close()
    rec.gate.release(3)

    assert await kept == "other"
    # The running job's caller still gets its result: a started job always runs to its end.
    assert await first == "first"
    for task in dropped:
        with pytest.raises(asyncio.CancelledError):
            await task
    assert rec.started == ["first", "other"]
    assert scheduler.open_lanes == 1
    with pytest.raises(LaneClosedError, match="lane 'closing' is closed"):
        await lane.run(rec.job("late"))


async def test_a_job_failure_reaches_its_caller_and_the_next_job_runs(pool: ThreadPoolExecutor) -> None:
    scheduler = FairScheduler(1, pool)
    lane = scheduler.lane("a")

    def boom() -> str:
        raise ValueError("engine broke")

    failing = asyncio.create_task(lane.run(boom))
    following = asyncio.create_task(lane.run(lambda: "next"))
    with pytest.raises(ValueError, match="engine broke"):
        await failing
    assert await following == "next"


async def test_the_job_with_the_earliest_deadline_starts_first(pool: ThreadPoolExecutor) -> None:
    """A listener already in silence (deadline in the past) goes before one with audio left, and
    among those with audio left the one whose audio runs out first: earliest-deadline-first."""
    rec = Recorder()
    scheduler = FairScheduler(1, pool)
    busy, playing_long, playing_short, silent, fresh = (
        scheduler.lane(name) for name in ("busy", "long", "short", "silent", "fresh")
    )
    blocker = asyncio.create_task(busy.run(rec.job("busy")))
    await until(lambda: rec.started == ["busy"])
    now = time.perf_counter()
    tasks = [
        asyncio.create_task(playing_long.run(rec.job("long"), deadline=now + 20)),
        asyncio.create_task(playing_short.run(rec.job("short"), deadline=now + 10)),
        asyncio.create_task(fresh.run(rec.job("fresh"))),  # no deadline: due when submitted
        asyncio.create_task(silent.run(rec.job("silent"), deadline=now - 3)),  # silent for 3 s
    ]
    await until(lambda: scheduler.queued == 4)
    rec.gate.release(5)
    await asyncio.gather(blocker, *tasks)
    assert rec.started == ["busy", "silent", "fresh", "short", "long"]


async def test_equal_deadlines_go_in_submission_order(pool: ThreadPoolExecutor) -> None:
    rec = Recorder()
    scheduler = FairScheduler(1, pool)
    lanes = [scheduler.lane(f"l{n}") for n in range(4)]
    blocker = asyncio.create_task(lanes[0].run(rec.job("first")))
    await until(lambda: rec.started == ["first"])
    tasks = [asyncio.create_task(lane.run(rec.job(lane.name), deadline=7.0)) for lane in reversed(lanes)]
    await until(lambda: scheduler.queued == 4)
    rec.gate.release(5)
    await asyncio.gather(blocker, *tasks)
    assert rec.started == ["first", "l3", "l2", "l1", "l0"]


async def test_on_start_gets_the_jobs_running_in_the_job_thread(pool: ThreadPoolExecutor) -> None:
    """The service sizes each job's intra-op threads there: it must run on the job's own thread,
    before the job, with the count of jobs running once it has started."""
    rec = Recorder()
    seen: list[tuple[int, str]] = []

    def on_start(running: int) -> None:
        seen.append((running, threading.current_thread().name))

    job_threads: list[str] = []

    def job(name: str) -> Callable[[], str]:
        inner = rec.job(name)

        def run() -> str:
            job_threads.append(threading.current_thread().name)
            return inner()

        return run

    scheduler = FairScheduler(2, pool, on_start=on_start)
    a, b, c = scheduler.lane("a"), scheduler.lane("b"), scheduler.lane("c")
    first = asyncio.create_task(a.run(job("a")))
    await until(lambda: rec.started == ["a"])
    rest = [asyncio.create_task(b.run(job("b"))), asyncio.create_task(c.run(job("c")))]
    await until(lambda: rec.started == ["a", "b"])
    rec.gate.release(1)  # a ends: c starts while b still runs
    await until(lambda: len(rec.started) == 3)
    rec.gate.release(2)
    await asyncio.gather(first, *rest)
    assert [running for running, _ in seen] == [1, 2, 2]
    assert [thread for _, thread in seen] == job_threads
    assert threading.current_thread().name not in job_threads


async def test_others_in_silence_counts_other_lanes_jobs_past_their_deadline(pool: ThreadPoolExecutor) -> None:
    """What a first window is cut by: other listeners waiting in silence, running or queued, not
    this lane's own job and not listeners that still have audio to hear."""
    rec = Recorder()
    scheduler = FairScheduler(1, pool)
    me, silent_running, silent_queued, playing = (scheduler.lane(n) for n in ("me", "run", "queued", "playing"))
    assert me.others_in_silence() == 0
    now = time.perf_counter()
    running = asyncio.create_task(silent_running.run(rec.job("run"), deadline=now - 1))
    await until(lambda: rec.started == ["run"])
    mine = asyncio.create_task(me.run(rec.job("me"), deadline=now - 2))
    queued = asyncio.create_task(silent_queued.run(rec.job("queued"), deadline=now))
    ahead = asyncio.create_task(playing.run(rec.job("playing"), deadline=now + 60))
    await until(lambda: scheduler.queued == 3)
    assert me.others_in_silence() == 2  # "run" (running) and "queued"; not "playing", not itself
    assert playing.others_in_silence() == 3
    assert scheduler.in_silence() == 3  # every lane's: what a new first chunk is planned by
    queued.cancel()
    await until(lambda: scheduler.queued == 2)
    assert me.others_in_silence() == 1
    rec.gate.release(3)
    await asyncio.gather(running, mine, ahead)
    assert me.others_in_silence() == 0


def test_max_concurrent_below_one_is_refused() -> None:
    with pytest.raises(ValueError, match="max_concurrent must be at least 1, got 0"):
        FairScheduler(0, ThreadPoolExecutor(max_workers=1))
