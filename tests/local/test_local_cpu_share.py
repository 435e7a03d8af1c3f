"""`bench.cpu_share`: where the machine's CPU went while the page benchmark's trials ran."""

from __future__ import annotations

import os

import pytest

from bench.cpu_share import Snapshot, describe, machine_ticks, process_ticks, shares, snapshot

# /proc/PID/stat of a process whose name holds a space and parentheses: utime 250, stime 75.
STAT = "1234 (my (odd) name) S 1 1234 1234 0 -1 4194560 100 0 0 0 250 75 0 0 20 0 3 0 12345 0 0"
PROC_STAT = (
    "cpu  100 5 50 800 20 1 2 3 0 0\n"
    "cpu0 50 2 25 400 10 1 1 2 0 0\n"
    "cpu1 50 3 25 400 10 0 1 1 0 0\n"
    "intr 12345 0 0\n"
    "ctxt 999\n"
)


def test_process_ticks_count_fields_after_the_last_parenthesis() -> None:
    assert process_ticks(STAT) == 325


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("no parentheses here", r"^not a /proc/PID/stat line: 'no parentheses here'$"),
        ("1 (short) S 1 2", r"^a /proc/PID/stat line with 5 fields, expected at least 15$"),
    ],
)
def test_a_stat_line_that_is_not_one_is_refused(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        process_ticks(text)


def test_machine_ticks_leave_idle_and_iowait_out_of_busy() -> None:
    # all = 100+5+50+800+20+1+2+3 (guest columns are inside user), busy = all - idle 800 - iowait 20
    assert machine_ticks(PROC_STAT) == (161, 981, 2)
    with pytest.raises(ValueError, match=r"^/proc/stat has no aggregate cpu line"):
        machine_ticks("intr 1 2 3\n")


def test_shares_are_cores_per_process_then_the_rest_then_idle() -> None:
    before = Snapshot(0.0, 0, 0, 2, {"speech": 0, "agent": 0})
    after = Snapshot(10.0, 1500, 2000, 2, {"speech": 1100, "agent": 100})
    result = shares(before, after, 100.0)
    assert [name for name, _ in result] == ["speech", "agent", "the rest", "idle"]
    assert [value for _, value in result] == [1.1, 0.1, pytest.approx(0.3), 0.5]
    assert describe(result, 2) == "CPU (cores of 2): speech 1.10, agent 0.10, the rest 0.30, idle 0.50"
    with pytest.raises(ValueError, match=r"^the snapshots must be in order and some time apart$"):
        shares(after, before, 100.0)


def test_a_snapshot_of_this_process_reads_proc() -> None:
    first = snapshot({"me": os.getpid()})
    sum(i * i for i in range(200_000))  # some CPU work
    second = snapshot({"me": os.getpid()})
    assert first.cpus >= 1
    assert second.processes["me"] >= first.processes["me"] >= 0
    assert second.all_ticks >= first.all_ticks > 0
