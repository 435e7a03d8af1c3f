"""How many syntheses run at once, and how many intra-op threads each gets: the 'auto' rule.

Measured on a 2-core AMD EPYC (AVX2), full-size model, 4 sessions: one synthesis at a time with
2 intra-op threads gave 1.14 audio-seconds per second; two at a time gave 1.52 (+33 %). Kokoro's
decoder is a stack of batch-1 1-D convolutions, which split poorly across threads, so several
syntheses with fewer threads each use the cores better than one with all of them.

`torch.set_num_threads` is process-global, but the intra-op pool (OpenMP) builds one team per
calling thread: with `concurrency` Python threads computing at once, up to `concurrency x threads`
threads run. On up to 3 cores each synthesis still keeps every core: measured side by side on that
machine, one synthesis with 1 thread ran at real-time factor 1.48-1.56 against 0.86-0.94 with 2, so a
lone session would fall behind real time (and its playback stutter) to spare cores nobody else uses;
the +33 % above was measured with 2 syntheses of 2 threads each. On more cores the threads are shared
out so that the product stays at the core count.

On a GPU the kernels run on the device; two syntheses at a time overlap one's CPU-side work (G2P,
the Python between kernels) with the other's kernels, and the CPU threads matter little.

Fairness between sessions comes from `scheduler.FairScheduler` (round-robin per chunk) and from the
first chunk being decoded in windows (`windowed`): a newcomer's first audio waits for at most one
chunk per running slot, not for whole requests.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal

MAX_AUTO_CONCURRENCY: Final = 8
"""More slots than this only deepens the wait of each chunk (the scheduler queues the rest)."""
GPU_CONCURRENCY: Final = 2


@dataclass(frozen=True, slots=True)
class ConcurrencyPlan:
    concurrency: int
    """Syntheses running at once (the scheduler's slots)."""
    threads: int
    """torch intra-op threads (process-global), used by each synthesis."""


def auto_plan(device: Literal["cpu", "cuda"], cores: int) -> ConcurrencyPlan:
    """The 'auto' plan for `device` on a machine with `cores` usable cores. Pure.

    CPU: two syntheses with every core's threads each on up to 3 cores (measured +33 % on 2, and a
    lone session stays faster than real time), else one per 2 cores, at most `MAX_AUTO_CONCURRENCY`,
    with threads that share the cores out. GPU: 2 at a time, each with the cores' threads for its
    CPU-side work.
    """
    if cores < 1:
        raise ValueError(f"need at least one core, got {cores}")
    if device == "cuda":
        return ConcurrencyPlan(concurrency=GPU_CONCURRENCY, threads=max(1, cores // GPU_CONCURRENCY))
    if cores == 1:
        return ConcurrencyPlan(concurrency=1, threads=1)
    if cores <= 3:
        return ConcurrencyPlan(concurrency=2, threads=cores)
    concurrency = min(MAX_AUTO_CONCURRENCY, cores // 2)
    return ConcurrencyPlan(concurrency=concurrency, threads=max(1, cores // concurrency))


def plan_for(device: Literal["cpu", "cuda"], cores: int, configured: int | None) -> ConcurrencyPlan:
    """`configured` syntheses at once (None: 'auto'), with threads that share the cores out. Pure."""
    if configured is None:
        return auto_plan(device, cores)
    if configured < 1:
        raise ValueError(f"need at least one synthesis at a time, got {configured}")
    return ConcurrencyPlan(concurrency=configured, threads=max(1, cores // configured))


def configured_plan(max_concurrent: int | Literal["auto"], device: Literal["cpu", "cuda"]) -> ConcurrencyPlan:
    """The plan for the `max_concurrent` setting on this machine's usable cores."""
    return plan_for(device, usable_cores(), None if max_concurrent == "auto" else max_concurrent)


def usable_cores() -> int:
    """Cores this process may run on (the affinity mask: a container's CPU set), at least 1."""
    import os

    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)
