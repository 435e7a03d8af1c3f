"""The 'auto' concurrency rule: syntheses at once from the cores, each job's intra-op threads from
the jobs running, and the synthesis threads' shares of the cores (one wide thread, the rest narrow)."""

from __future__ import annotations

import threading

import pytest

from kokoro_server.concurrency import ConcurrencyPlan, SynthesisThreads, auto_plan, plan_for, use_intra_op_threads


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

    removed: list[bool] = []

    def at_each_stage(callback: Callable[[], None]) -> Callable[[], None]:
        stages.append(callback)
        return lambda: removed.append(True)

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
        await until(stepped[0])  # alone: the wide thread's 3
        other = asyncio.create_task(service.scheduler.lane("b").run(lambda: other_may_end.wait(10)))
        async with asyncio.timeout(10):
            while service.scheduler.running < 2:  # noqa: ASYNC110 - jobs start in pool threads
                await asyncio.sleep(0.001)
        step[1].set()
        await until(stepped[1])  # beside the other: its share, 2
        other_may_end.set()
        await other
        step[2].set()
        await until(stepped[2])  # alone again: 3
        job_thread = await first
    finally:
        service.shutdown()
    assert removed == [True]  # the stages no longer call this service once it is shut down
    assert job_thread.startswith("synthesis-wide")  # it started alone: on the wide thread
    mine = [threads for thread, threads in sizes if thread == job_thread]
    # at its start (the scheduler's on_start), then at each of its three stages: alone, the wide
    # thread's cap (3 of 4 cores: the narrow thread keeps a team of 2), beside the other its share
    assert mine == [3, 3, 2, 3]
    # the other job ran on the narrow thread, within its cap of 2
    assert {threads for thread, threads in sizes if thread != job_thread} == {2}


@pytest.mark.parametrize(
    ("plan", "caps"),
    [
        (ConcurrencyPlan(2, 2), (2, 1)),  # the 2-core VM: one thread may use both cores, the other one
        (ConcurrencyPlan(2, 3), (3, 1)),
        (ConcurrencyPlan(2, 4), (3, 2)),
        (ConcurrencyPlan(4, 8), (5, 2)),
        (ConcurrencyPlan(8, 16), (9, 2)),
        (ConcurrencyPlan(8, 64), (15, 8)),
        (ConcurrencyPlan(1, 2), (2, 2)),  # one synthesis at a time: no narrow thread
        (ConcurrencyPlan(4, 2), (2, 1)),
        (ConcurrencyPlan(2, 16), (9, 8)),  # the GPU plan on 16 cores
    ],
)
def test_the_threads_caps_keep_openmp_teams_within_the_cores(plan: ConcurrencyPlan, caps: tuple[int, int]) -> None:
    """GNU OpenMP keeps its idle threads spinning only while 1 + the teams' other threads <= cores."""
    wide, narrow = plan.thread_caps()
    assert (wide, narrow) == caps
    assert 1 + (wide - 1) + (plan.concurrency - 1) * (narrow - 1) <= plan.cores
    assert narrow == plan.threads_for(plan.concurrency)  # a full house keeps its share


def test_a_job_runs_on_the_wide_thread_whenever_it_is_free() -> None:
    """Alone, a job gets the wide thread (every core); beside it, the others run on narrow threads
    with their cap, whatever the jobs running would allow."""
    threads = SynthesisThreads(ConcurrencyPlan(3, 6))  # caps: wide 4, narrow 2
    release = threading.Event()
    try:

        def where(running: int) -> tuple[str, int]:
            return threading.current_thread().name, threads.threads_here(running)

        def held(running: int) -> tuple[str, int]:
            assert release.wait(10)
            return where(running)

        first = threads.submit(held, 1)
        second = threads.submit(where, 1)  # as if alone: still the narrow cap
        third = threads.submit(where, 3)
        second_name, second_threads = second.result(10)
        third_name, third_threads = third.result(10)
        release.set()
        first_name, first_threads = first.result(10)
        after_name, after_threads = threads.submit(where, 2).result(10)
    finally:
        threads.shutdown()
    assert first_name.startswith("synthesis-wide")
    assert first_threads == 4
    assert not second_name.startswith("synthesis-wide")
    assert second_threads == 2
    assert not third_name.startswith("synthesis-wide")
    assert third_threads == 2
    assert after_name.startswith("synthesis-wide")
    assert after_threads == 3
    assert threads.threads_here(1) == 2  # not a synthesis thread: the narrow cap


def test_one_synthesis_at_a_time_runs_every_job_on_the_wide_thread() -> None:
    threads = SynthesisThreads(ConcurrencyPlan(1, 2))
    try:
        names = [threads.submit(lambda: threading.current_thread().name).result(10) for _ in range(3)]
    finally:
        threads.shutdown()
    assert len(set(names)) == 1
    assert names[0].startswith("synthesis-wide")


def test_the_engine_loads_in_a_thread_that_ends() -> None:
    """Its intra-op team (every core, for loading and warm-up) ends with it: one that stayed would
    put the synthesis threads' teams over the cores (`concurrency`)."""
    from kokoro_server.engine import ZeroCostEngine
    from kokoro_server.service import EngineLoader, LoadedEngine
    from tests.speech.speech_support import serve_in_process, wait_until

    loading: list[threading.Thread] = []

    def load() -> LoadedEngine:
        loading.append(threading.current_thread())
        return LoadedEngine(ZeroCostEngine(), "cpu")

    with serve_in_process(EngineLoader(load)) as (client, _):
        wait_until(lambda: client.get("/ping").status_code == 200, "the engine to load")
        wait_until(lambda: not loading[0].is_alive(), "the loading thread to end")
    assert loading[0].name.startswith("engine-load")


def test_a_wide_job_cancelled_before_it_starts_frees_the_wide_thread() -> None:
    """Else every later job would run on a narrow thread, a lone session at one core."""
    threads = SynthesisThreads(ConcurrencyPlan(2, 2))
    release = threading.Event()
    try:
        # The wide thread made busy behind the executor's back, so that the next job waits in its queue.
        blocker = threads._wide.submit(release.wait, 10)
        queued = threads.submit(threading.current_thread)
        assert queued.cancel()
        release.set()
        blocker.result(10)
        name = threads.submit(lambda: threading.current_thread().name).result(10)
    finally:
        threads.shutdown()
    assert name.startswith("synthesis-wide")
