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
