"""Runs a group of server processes: start, wait until each is ready, prefix their logs, stop them all.

Generic (nothing voicestack-specific): `local.stack` describes the services, `bench.lab` reuses them.
Each child runs in its own session, so a Ctrl-C in the terminal reaches only the launcher, which
then stops the children in reverse start order: SIGTERM to the child's process group, a grace
period, SIGKILL for stragglers. On Linux a child also receives SIGTERM if the launcher dies
without cleaning up (PR_SET_PDEATHSIG), so no orphan keeps a port.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import json
import os
import signal
import sys
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TextIO

import httpx

RECENT_LINES = 40
"""Lines of a child's log kept to explain a failed start."""

LINE_LIMIT = 1 << 20
"""Longest log line read from a child (asyncio's default, 64 KiB, is too small for some tracebacks)."""


@dataclass(frozen=True, slots=True)
class HttpProbe:
    """Ready when `GET url` answers `status` (other answers and refused connections mean: not yet)."""

    url: str
    status: int = 200


@dataclass(frozen=True, slots=True)
class JsonLineProbe:
    """Ready when the process prints a JSON object line whose `key` is `value` (e.g. `"event": "ready"`)."""

    key: str
    value: str


ReadinessProbe = HttpProbe | JsonLineProbe


@dataclass(frozen=True, slots=True)
class ProcessSpec:
    """One service: how to start it and how to know it is ready."""

    name: str
    argv: tuple[str, ...]
    env: Mapping[str, str]
    probe: ReadinessProbe
    ready_timeout_s: float
    stop_timeout_s: float = 10.0
    cwd: str | None = None


class LogSink(Protocol):
    def __call__(self, name: str, line: str) -> None: ...


class LaunchError(RuntimeError):
    """A service failed to start: it exited, or was not ready in time. Carries its last log lines."""

    def __init__(self, name: str, reason: str, recent: Sequence[str] = ()) -> None:
        super().__init__(f"{name}: {reason}")
        self.name = name
        self.reason = reason
        self.recent = tuple(recent)


_COLOURS = ("36", "35", "33", "32", "34", "31")


@dataclass
class PrefixedLog:
    """Writes `name | line` to a stream, one colour per name when the stream is a terminal."""

    stream: TextIO = field(default_factory=lambda: sys.stdout)
    width: int = 8
    _colours: dict[str, str] = field(default_factory=dict)

    def __call__(self, name: str, line: str) -> None:
        prefix = f"{name:<{self.width}}|"
        if self.stream.isatty():
            colour = self._colours.setdefault(name, _COLOURS[len(self._colours) % len(_COLOURS)])
            prefix = f"\x1b[{colour}m{prefix}\x1b[0m"
        self.stream.write(f"{prefix} {line}\n")
        self.stream.flush()


def describe_exit(status: int) -> str:
    """`exit status 1`, or `SIGTERM` for a process ended by a signal (asyncio reports -15)."""
    if status < 0:
        with contextlib.suppress(ValueError):
            return signal.Signals(-status).name
    return f"exit status {status}"


def _die_with_parent() -> None:
    """In the child, before exec: ask Linux to SIGTERM it when the launcher's thread dies."""
    libc = ctypes.CDLL(None, use_errno=True)
    pr_set_pdeathsig = 1
    libc.prctl(pr_set_pdeathsig, signal.SIGTERM)


class RunningProcess:
    """A started child: its log pump, readiness, and stop."""

    def __init__(self, spec: ProcessSpec, process: asyncio.subprocess.Process, sink: LogSink) -> None:
        self.spec = spec
        self.process = process
        self.recent: deque[str] = deque(maxlen=RECENT_LINES)
        self.ready_line: dict[str, Any] | None = None
        self._ready_line_seen = asyncio.Event()
        self._sink = sink
        self.started_at = time.monotonic()
        self._pump = asyncio.create_task(self._pump_logs(), name=f"log-{spec.name}")

    @property
    def pid(self) -> int:
        return self.process.pid

    @property
    def returncode(self) -> int | None:
        return self.process.returncode

    async def _pump_logs(self) -> None:
        stream = self.process.stdout
        if stream is None:
            return
        probe = self.spec.probe
        while True:
            try:
                raw = await stream.readline()
            except ValueError:  # a line over LINE_LIMIT: keep what fits, carry on
                raw = await stream.read(LINE_LIMIT)
            if not raw:
                return
            line = raw.decode("utf-8", errors="replace").rstrip("\r\n")
            self.recent.append(line)
            self._sink(self.spec.name, line)
            if isinstance(probe, JsonLineProbe) and self.ready_line is None and line.startswith("{"):
                self._check_ready_line(line, probe)

    def _check_ready_line(self, line: str, probe: JsonLineProbe) -> None:
        try:
            obj = json.loads(line)
        except ValueError:
            return  # a log line that merely starts with "{"
        if isinstance(obj, dict) and obj.get(probe.key) == probe.value:
            self.ready_line = obj
            self._ready_line_seen.set()

    async def wait_ready(self) -> None:
        """Return once the probe succeeds; LaunchError when the process exits first or time runs out."""
        deadline = time.monotonic() + self.spec.ready_timeout_s
        exited = asyncio.create_task(self.process.wait())
        try:
            if isinstance(self.spec.probe, JsonLineProbe):
                await self._race(self._ready_line_seen.wait(), exited, deadline)
            else:
                await self._race(self._poll_http(self.spec.probe), exited, deadline)
        finally:
            exited.cancel()

    async def _race(self, ready: Any, exited: asyncio.Task[int], deadline: float) -> None:
        ready_task = asyncio.ensure_future(ready)
        try:
            done, _ = await asyncio.wait(
                {ready_task, exited}, timeout=max(0.0, deadline - time.monotonic()), return_when="FIRST_COMPLETED"
            )
        finally:
            ready_task.cancel()
        if ready_task in done and not ready_task.cancelled():
            ready_task.result()
            return
        if exited in done:
            await self._pump  # the last lines usually say why
            raise LaunchError(self.spec.name, f"{describe_exit(exited.result())} before it was ready", self.recent)
        raise LaunchError(self.spec.name, f"not ready after {self.spec.ready_timeout_s:g} s", self.recent)

    @staticmethod
    async def _poll_http(probe: HttpProbe) -> None:
        async with httpx.AsyncClient(timeout=2.0) as client:
            while True:
                try:
                    response = await client.get(probe.url)
                    if response.status_code == probe.status:
                        return
                except httpx.TransportError:
                    pass  # not listening yet
                await asyncio.sleep(0.2)

    def _signal_group(self, sig: signal.Signals) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, sig)

    async def stop(self) -> int:
        """SIGTERM, wait up to stop_timeout_s, then SIGKILL; returns the exit status."""
        if self.process.returncode is None:
            self._signal_group(signal.SIGTERM)
            try:
                await asyncio.wait_for(self.process.wait(), self.spec.stop_timeout_s)
            except TimeoutError:
                self._sink(self.spec.name, f"still running {self.spec.stop_timeout_s:g} s after SIGTERM: killing it")
                self._signal_group(signal.SIGKILL)
                await self.process.wait()
        else:
            # The child is gone, but anything it started in its group may not be.
            self._signal_group(signal.SIGKILL)
        await self._pump
        return self.process.returncode if self.process.returncode is not None else -1


class ProcessGroup:
    """Starts processes, and stops every one of them (in reverse order) on `aclose`."""

    def __init__(self, sink: LogSink | None = None) -> None:
        self.sink: LogSink = sink or PrefixedLog()
        self.processes: list[RunningProcess] = []

    async def spawn(self, spec: ProcessSpec) -> RunningProcess:
        """Start the process (registered for cleanup at once) without waiting for it to be ready."""
        preexec: Callable[[], None] | None = _die_with_parent if sys.platform == "linux" else None
        process = await asyncio.create_subprocess_exec(
            *spec.argv,
            env=dict(spec.env),
            cwd=spec.cwd,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=preexec,
            limit=LINE_LIMIT,
        )
        running = RunningProcess(spec, process, self.sink)
        self.processes.append(running)
        return running

    async def start(self, spec: ProcessSpec) -> RunningProcess:
        """Start the process and wait until it is ready (LaunchError otherwise)."""
        return await self.wait_ready(await self.spawn(spec))

    async def wait_ready(self, running: RunningProcess) -> RunningProcess:
        """Wait until a spawned process is ready, and say so (LaunchError otherwise)."""
        await running.wait_ready()
        self.sink(running.spec.name, f"ready in {time.monotonic() - running.started_at:.1f} s (pid {running.pid})")
        return running

    async def wait_for_exit(self) -> RunningProcess:
        """The first process that exits (the caller decides whether that is a failure)."""
        waits = {asyncio.create_task(p.process.wait()): p for p in self.processes}
        try:
            done, _ = await asyncio.wait(waits, return_when="FIRST_COMPLETED")
        finally:
            for task in waits:
                task.cancel()
        return waits[next(iter(done))]

    async def aclose(self) -> None:
        """Stop every process, newest first. Safe to call twice."""
        while self.processes:
            running = self.processes.pop()
            status = await running.stop()
            self.sink(running.spec.name, f"stopped ({describe_exit(status)})")
