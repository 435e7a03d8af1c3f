"""Where a machine's CPU went while a benchmark ran: each named process, the rest, and idle (Linux /proc).

A benchmark that runs a whole stack on one small machine (the page: speech server, agent, stand-in,
web server and a browser on the same cores) measures the stack's share of the machine as much as the
stack. Two snapshots around the timed part give, in cores: what each named process used, what
everything else on the machine used (the browser, the benchmark itself), and what sat idle. Parsing
and arithmetic are pure; only `snapshot` reads /proc.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final

PROC: Final = Path("/proc")


def process_ticks(stat_text: str) -> int:
    """User + system clock ticks of a `/proc/PID/stat` line (fields 14 and 15). The command name,
    field 2, is in parentheses and may itself hold spaces and parentheses: fields are counted after
    its last `)`."""
    head, sep, tail = stat_text.rpartition(")")
    if not sep or not head:
        raise ValueError(f"not a /proc/PID/stat line: {stat_text[:60]!r}")
    fields = tail.split()
    if len(fields) < 13:
        raise ValueError(f"a /proc/PID/stat line with {len(fields) + 2} fields, expected at least 15")
    return int(fields[11]) + int(fields[12])


def machine_ticks(proc_stat_text: str) -> tuple[int, int, int]:
    """(busy ticks, all ticks, CPUs) from `/proc/stat`: its aggregate `cpu` line, where idle and
    iowait are not busy (guest time is already inside user time), and its `cpuN` lines."""
    aggregate: list[int] | None = None
    cpus = 0
    for line in proc_stat_text.splitlines():
        name, _, rest = line.partition(" ")
        if name == "cpu":
            aggregate = [int(v) for v in rest.split()]
        elif name.startswith("cpu") and name[3:].isdigit():
            cpus += 1
    if aggregate is None or len(aggregate) < 8 or cpus == 0:
        raise ValueError("/proc/stat has no aggregate cpu line with 8 counters, or no cpuN line")
    total = sum(aggregate[:8])  # user nice system idle iowait irq softirq steal
    return total - aggregate[3] - aggregate[4], total, cpus


@dataclass(frozen=True, slots=True)
class Snapshot:
    at_s: float
    busy_ticks: int
    all_ticks: int
    cpus: int
    processes: Mapping[str, int]
    """Ticks used so far by each named process."""


def snapshot(pids: Mapping[str, int]) -> Snapshot:
    """The machine's and each named process's CPU ticks now."""
    busy, total, cpus = machine_ticks((PROC / "stat").read_text())
    processes = {name: process_ticks((PROC / str(pid) / "stat").read_text()) for name, pid in pids.items()}
    return Snapshot(time.monotonic(), busy, total, cpus, processes)


def shares(before: Snapshot, after: Snapshot, ticks_per_s: float) -> list[tuple[str, float]]:
    """Cores used between two snapshots: each named process (in `after`'s order), then "the rest"
    (every other process on the machine), then "idle". Pure."""
    wall = after.at_s - before.at_s
    all_ticks = after.all_ticks - before.all_ticks
    if wall <= 0 or all_ticks <= 0:
        raise ValueError("the snapshots must be in order and some time apart")
    busy_cores = (after.busy_ticks - before.busy_ticks) / all_ticks * after.cpus
    named = [(name, (ticks - before.processes[name]) / ticks_per_s / wall) for name, ticks in after.processes.items()]
    rest = max(0.0, busy_cores - sum(cores for _, cores in named))
    return [*named, ("the rest", rest), ("idle", after.cpus - busy_cores)]


def describe(cores: list[tuple[str, float]], cpus: int) -> str:
    """One line: `CPU (cores of N): a 1.10, b 0.02, the rest 0.35, idle 0.53`. Pure."""
    return f"CPU (cores of {cpus}): " + ", ".join(f"{name} {value:.2f}" for name, value in cores)


def ticks_per_second() -> float:
    return float(os.sysconf("SC_CLK_TCK"))
