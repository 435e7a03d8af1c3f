"""How many syntheses run at once, and how many intra-op threads each gets: the 'auto' rule.

Measured on a 2-core AMD EPYC (AVX2), full-size model, 4 sessions (issue #15): one synthesis at a
time with 2 intra-op threads gave 1.14 audio-seconds per second; two at a time with 1 thread each
gave 1.52 (+33 %). Kokoro's decoder is a stack of batch-1 1-D convolutions, which split poorly
across threads, so several syntheses with fewer threads each use the cores better than one with
all of them. But a lone synthesis with 1 thread runs at real-time factor 1.48-1.56 there, against
0.86-0.94 with 2 (measured side by side): a lone session would fall behind real time to spare cores
nobody else uses.

So the threads are chosen from the jobs running (`ConcurrencyPlan.threads_for`): alone, a job gets
every core; with others, the cores are shared out. They are chosen when a job starts, and again
before each stage of the model while it runs (`kokoro_engine.stage_modules`, at most 0.16 s apart
at one thread): a job that started alone gives its second core up as soon as another starts
(else three threads share two cores), and one that started beside another takes every core once
it runs alone (else a core idles, at the end of a load). Measured side by side, 4 sessions on the
AVX-512 VM: see images/kokoro/README.md. This works because the intra-op pool (OpenMP, and MKL
through it) keeps its team size per calling thread: `use_intra_op_threads` in a pool thread sets
that thread's team only.

On a GPU the kernels run on the device; two syntheses at a time overlap one's CPU-side work (G2P,
the Python between kernels) with the other's kernels, and the CPU threads matter little.
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
    cores: int
    """Cores shared out between the syntheses running at a time."""

    def threads_for(self, running: int) -> int:
        """Intra-op threads for a job that starts while `running` jobs run (itself included). Pure."""
        return max(1, self.cores // max(1, min(running, self.concurrency)))


def auto_plan(device: Literal["cpu", "cuda"], cores: int) -> ConcurrencyPlan:
    """The 'auto' plan for `device` on a machine with `cores` usable cores. Pure.

    CPU: two syntheses on 2 or 3 cores (measured +33 % on 2), else one per 2 cores, at most
    `MAX_AUTO_CONCURRENCY`; each job's threads share the cores out between the jobs running
    (`threads_for`). GPU: 2 at a time.
    """
    if cores < 1:
        raise ValueError(f"need at least one core, got {cores}")
    if device == "cuda":
        return ConcurrencyPlan(concurrency=GPU_CONCURRENCY, cores=cores)
    if cores <= 3:
        return ConcurrencyPlan(concurrency=min(cores, 2), cores=cores)
    return ConcurrencyPlan(concurrency=min(MAX_AUTO_CONCURRENCY, cores // 2), cores=cores)


def plan_for(device: Literal["cpu", "cuda"], cores: int, configured: int | None) -> ConcurrencyPlan:
    """`configured` syntheses at once (None: 'auto') on `cores` cores. Pure."""
    if configured is None:
        return auto_plan(device, cores)
    if configured < 1:
        raise ValueError(f"need at least one synthesis at a time, got {configured}")
    return ConcurrencyPlan(concurrency=configured, cores=cores)


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


def use_intra_op_threads(threads: int) -> None:
    """Give the calling thread's intra-op team `threads` threads (torch's OpenMP pool; MKL follows).

    `torch.set_num_threads` sets the calling thread's team, and a remembered default: the first
    torch call of a thread that never set its own adopts that default. Reading the count first
    makes sure that adoption has happened, so it cannot later undo the size set here.
    """
    import torch

    if torch.get_num_threads() != threads:
        torch.set_num_threads(threads)
