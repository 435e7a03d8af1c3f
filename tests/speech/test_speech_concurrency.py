"""The 'auto' concurrency rule: syntheses at once from the cores, and each job's intra-op threads
from the jobs running when it starts."""

from __future__ import annotations

import threading

import pytest

from kokoro_server.concurrency import ConcurrencyPlan, auto_plan, plan_for, use_intra_op_threads


@pytest.mark.parametrize(
    ("cores", "expected"),
    [
        (1, ConcurrencyPlan(1, 1)),
        # Two at a time: measured +33 % throughput on 2 cores with 1 thread each (issue #15).
        (2, ConcurrencyPlan(2, 2)),
        (3, ConcurrencyPlan(2, 3)),
        (4, ConcurrencyPlan(2, 4)),
        (8, ConcurrencyPlan(4, 8)),
        (16, ConcurrencyPlan(8, 16)),
        (64, ConcurrencyPlan(8, 64)),
    ],
)
def test_cpu_plan(cores: int, expected: ConcurrencyPlan) -> None:
    assert auto_plan("cpu", cores) == expected


@pytest.mark.parametrize(
    ("plan", "threads"),
    [
        # A job alone gets every core: one thread would put a lone session behind real time on
        # 2 cores (RTF 1.5 vs 0.9, measured side by side); with others the cores are shared out.
        (ConcurrencyPlan(2, 2), {0: 2, 1: 2, 2: 1, 3: 1}),
        (ConcurrencyPlan(2, 3), {1: 3, 2: 1}),
        (ConcurrencyPlan(4, 8), {1: 8, 2: 4, 3: 2, 4: 2, 5: 2}),
        (ConcurrencyPlan(8, 64), {1: 64, 8: 8}),
        (ConcurrencyPlan(4, 2), {1: 2, 2: 1, 4: 1}),
        (ConcurrencyPlan(1, 1), {1: 1}),
    ],
)
def test_threads_share_the_cores_between_the_jobs_running(plan: ConcurrencyPlan, threads: dict[int, int]) -> None:
    assert {running: plan.threads_for(running) for running in threads} == threads
    # The product never exceeds the cores once the slots are full.
    assert plan.threads_for(plan.concurrency) * plan.concurrency <= max(plan.cores, plan.concurrency)


def test_gpu_plan_is_two_at_a_time() -> None:
    assert auto_plan("cuda", 16) == ConcurrencyPlan(2, 16)
    assert auto_plan("cuda", 1) == ConcurrencyPlan(2, 1)


def test_a_configured_concurrency_keeps_the_cores() -> None:
    assert plan_for("cpu", 2, 1) == ConcurrencyPlan(1, 2)  # one synthesis, every core
    assert plan_for("cpu", 2, 4) == ConcurrencyPlan(4, 2)
    assert plan_for("cpu", 8, None) == auto_plan("cpu", 8)


def test_bad_inputs_are_refused() -> None:
    with pytest.raises(ValueError, match=r"^need at least one core, got 0$"):
        auto_plan("cpu", 0)
    with pytest.raises(ValueError, match=r"^need at least one synthesis at a time, got 0$"):
        plan_for("cpu", 2, 0)


def test_intra_op_threads_are_set_per_calling_thread() -> None:
    """What the per-job sizing relies on: one pool thread's team size does not change another's,
    and a thread's own setting survives torch's lazy per-thread initialisation."""
    import torch

    before = torch.get_num_threads()
    seen: dict[str, int] = {}
    both_set = threading.Barrier(2)

    def worker(name: str, threads: int) -> None:
        use_intra_op_threads(threads)
        both_set.wait()  # each has set its own size before either reads it back
        seen[name] = torch.get_num_threads()

    pool = [threading.Thread(target=worker, args=(f"t{n}", n)) for n in (1, 3)]
    for thread in pool:
        thread.start()
    for thread in pool:
        thread.join()
    assert seen == {"t1": 1, "t3": 3}
    assert torch.get_num_threads() == before  # the calling thread's team is untouched


async def test_a_running_job_follows_the_jobs_beside_it_at_each_stage(monkeypatch: pytest.MonkeyPatch) -> None:
    """The service's wiring of the engine's stages: a job that started alone takes its share at its
    next stage once another job has started beside it, and every core again once it runs alone;
    each size is set on the job's own thread."""
    import asyncio
    from collections.abc import Callable

    from kokoro_server import concurrency
    from kokoro_server.engine import ZeroCostEngine
    from kokoro_server.service import LoadedEngine, SpeechService
    from kokoro_server.settings import Settings

    monkeypatch.setattr(concurrency, "usable_cores", lambda: 4)
    stages: list[Callable[[], None]] = []
    sizes: list[tuple[str, int]] = []

    def use_threads(threads: int) -> None:
        sizes.append((threading.current_thread().name, threads))

    def at_each_stage(callback: Callable[[], None]) -> None:
        stages.append(callback)

    service = SpeechService(Settings(max_concurrent=2))
    service.start(LoadedEngine(ZeroCostEngine(), "cpu", use_threads=use_threads, at_each_stage=at_each_stage))
    try:
        assert len(stages) == 1
        stage = stages[0]
        step = [threading.Event() for _ in range(3)]
        stepped = [threading.Event() for _ in range(3)]
        other_may_end = threading.Event()

        def long_job() -> str:
            for go, done in zip(step, stepped, strict=True):
                assert go.wait(10)
                stage()  # the engine reaching its next stage
                done.set()
            return threading.current_thread().name

        async def until(event: threading.Event) -> None:
            assert await asyncio.to_thread(event.wait, 10)

        first = asyncio.create_task(service.scheduler.lane("a").run(long_job))
        step[0].set()
        await until(stepped[0])  # alone: 4 threads
        other = asyncio.create_task(service.scheduler.lane("b").run(lambda: other_may_end.wait(10)))
        async with asyncio.timeout(10):
            while service.scheduler.running < 2:  # noqa: ASYNC110 - jobs start in pool threads
                await asyncio.sleep(0.001)
        step[1].set()
        await until(stepped[1])  # beside the other: its share, 2
        other_may_end.set()
        await other
        step[2].set()
        await until(stepped[2])  # alone again: 4
        job_thread = await first
    finally:
        service.shutdown()
    mine = [threads for thread, threads in sizes if thread == job_thread]
    # at its start (the scheduler's on_start), then at each of its three stages
    assert mine == [4, 4, 2, 4]
