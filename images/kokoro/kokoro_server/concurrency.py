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
(else three threads share two cores), and one on the wide thread (below) that started beside
another takes every core once it runs alone (else a core idles, at the end of a load). Measured
side by side, 4 sessions on the AVX-512 VM: see images/kokoro/README.md. This works because the
intra-op pool (OpenMP, and MKL through it) keeps its team size per calling thread:
`use_intra_op_threads` in a pool thread sets that thread's team only.

Teams have a cost of their own (`SynthesisThreads`). GNU OpenMP, torch's pool, keeps each
thread's team alive once made, and when its teams' threads outnumber the cores, every idle team
thread sleeps at once instead of spinning: each of the thousands of small parallel regions in a
synthesis then waits for a futex wake-up. Measured on the AVX-512 VM, the same first piece at 2
threads: 0.19-0.22 s while its team was the only one, 0.30-0.41 s once another thread had run at 2
threads too. So only one synthesis thread may use every core (the "wide" one, which takes a job
whenever it is free); the others get what is left of the cores (`ConcurrencyPlan.thread_caps`),
and the engine is loaded in a thread that ends (its team goes with it: `app`).

On a GPU the kernels run on the device; two syntheses at a time overlap one's CPU-side work (G2P,
the Python between kernels) with the other's kernels, and the CPU threads matter little.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Final, Literal

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

    def thread_caps(self) -> tuple[int, int]:
        """(wide, narrow): the most intra-op threads a job may use on the one wide synthesis thread,
        and on each of the others. Pure.

        GNU OpenMP spins its idle threads only while its teams' threads (the process's first thread
        counted once, every other team counted without its own caller) are no more than the cores:
        1 + (wide - 1) + (concurrency - 1) * (narrow - 1) <= cores. The narrow threads get the share
        of a full house (`threads_for(concurrency)`), the wide one every core that leaves."""
        narrow = self.threads_for(self.concurrency)
        wide = max(narrow, self.cores - (self.concurrency - 1) * (narrow - 1))
        return wide, narrow


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


class SynthesisThreads(Executor):
    """The synthesis threads of a plan: one wide thread, whose jobs may use every core, and
    `concurrency - 1` narrow ones (`ConcurrencyPlan.thread_caps`). A job runs on the wide thread
    whenever it is free, so a job that runs alone runs there. The caller keeps at most
    `concurrency` jobs running (the scheduler's slots): a narrow thread is then free whenever the
    wide one is busy."""

    def __init__(self, plan: ConcurrencyPlan) -> None:
        self._plan = plan
        self._wide_cap, self._narrow_cap = plan.thread_caps()
        self._wide = ThreadPoolExecutor(max_workers=1, thread_name_prefix="synthesis-wide")
        self._narrow = (
            ThreadPoolExecutor(max_workers=plan.concurrency - 1, thread_name_prefix="synthesis")
            if plan.concurrency > 1
            else None
        )
        self._lock = threading.Lock()
        self._wide_busy = False
        self._wide_thread: int | None = None

    def submit[**P, T](self, fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> Future[T]:
        with self._lock:
            on_wide = self._narrow is None or not self._wide_busy
            if on_wide:
                self._wide_busy = True
        if not on_wide and self._narrow is not None:
            return self._narrow.submit(fn, *args, **kwargs)

        def wide_job() -> T:
            self._wide_thread = threading.get_ident()
            return fn(*args, **kwargs)

        future = self._wide.submit(wide_job)
        # Freed when the job ends, and also if it is cancelled before it starts (a flag freed by the
        # job itself would stay set then, and every later job would run narrow).
        future.add_done_callback(self._wide_freed)
        return future

    def _wide_freed(self, _: Future[Any]) -> None:
        with self._lock:
            self._wide_busy = False

    def threads_here(self, running: int) -> int:
        """Intra-op threads for a job on the calling synthesis thread while `running` jobs run."""
        cap = self._wide_cap if threading.get_ident() == self._wide_thread else self._narrow_cap
        return min(cap, self._plan.threads_for(running))

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        for pool in (self._wide, self._narrow):
            if pool is not None:
                pool.shutdown(wait, cancel_futures=cancel_futures)
