"""The 'auto' concurrency rule: syntheses at once and intra-op threads each, from the cores."""

from __future__ import annotations

import pytest

from kokoro_server.concurrency import ConcurrencyPlan, auto_plan, plan_for


@pytest.mark.parametrize(
    ("cores", "expected"),
    [
        (1, ConcurrencyPlan(1, 1)),
        # Two at a time, each keeping every core: measured +33 % throughput on 2 cores, and one thread
        # would put a lone session behind real time (RTF 1.5 vs 0.9, measured side by side).
        (2, ConcurrencyPlan(2, 2)),
        (3, ConcurrencyPlan(2, 3)),
        (4, ConcurrencyPlan(2, 2)),
        (8, ConcurrencyPlan(4, 2)),
        (16, ConcurrencyPlan(8, 2)),
        (64, ConcurrencyPlan(8, 8)),
    ],
)
def test_cpu_plan(cores: int, expected: ConcurrencyPlan) -> None:
    plan = auto_plan("cpu", cores)
    assert plan == expected
    # Above 3 cores the threads are shared out: the product never exceeds the cores.
    if cores > 3:
        assert plan.concurrency * plan.threads <= cores


def test_gpu_plan_is_two_at_a_time() -> None:
    assert auto_plan("cuda", 16) == ConcurrencyPlan(2, 8)
    assert auto_plan("cuda", 1) == ConcurrencyPlan(2, 1)


def test_a_configured_concurrency_shares_the_cores_out() -> None:
    assert plan_for("cpu", 2, 1) == ConcurrencyPlan(1, 2)  # the old default: one synthesis, every core
    assert plan_for("cpu", 2, 4) == ConcurrencyPlan(4, 1)
    assert plan_for("cpu", 8, None) == auto_plan("cpu", 8)


def test_bad_inputs_are_refused() -> None:
    with pytest.raises(ValueError, match=r"^need at least one core, got 0$"):
        auto_plan("cpu", 0)
    with pytest.raises(ValueError, match=r"^need at least one synthesis at a time, got 0$"):
        plan_for("cpu", 2, 0)
