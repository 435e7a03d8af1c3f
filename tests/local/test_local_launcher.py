"""The process launcher: readiness (JSON line, HTTP), failed starts, stop with escalation, exits."""

from __future__ import annotations

import io
import os
import socket
import sys
import textwrap

import pytest

from local.launcher import (
    HttpProbe,
    JsonLineProbe,
    LaunchError,
    PrefixedLog,
    ProcessGroup,
    ProcessSpec,
    describe_exit,
)


class Lines:
    """A log sink that keeps (name, line) pairs."""

    def __init__(self) -> None:
        self.lines: list[tuple[str, str]] = []

    def __call__(self, name: str, line: str) -> None:
        self.lines.append((name, line))


def python(name: str, code: str, *, probe: JsonLineProbe | HttpProbe | None = None, **kw: float) -> ProcessSpec:
    return ProcessSpec(
        name=name,
        argv=(sys.executable, "-u", "-c", textwrap.dedent(code)),
        env=dict(os.environ),
        probe=probe or JsonLineProbe("event", "ready"),
        ready_timeout_s=kw.get("ready_timeout_s", 20.0),
        stop_timeout_s=kw.get("stop_timeout_s", 5.0),
    )


SERVES_FOREVER = """
    import json, time
    print("starting")
    print("{not json, but starts with a brace")
    print(json.dumps({"event": "ready", "url": "https://127.0.0.1:1"}))
    while True:
        time.sleep(1)
"""


async def test_ready_line_then_sigterm_on_close() -> None:
    log = Lines()
    group = ProcessGroup(log)
    try:
        running = await group.start(python("svc", SERVES_FOREVER))
        assert running.ready_line == {"event": "ready", "url": "https://127.0.0.1:1"}
        assert running.returncode is None
    finally:
        await group.aclose()
    assert running.returncode == -15
    assert log.lines[:3] == [
        ("svc", "starting"),
        ("svc", "{not json, but starts with a brace"),
        ("svc", '{"event": "ready", "url": "https://127.0.0.1:1"}'),
    ]
    assert log.lines[3][1].startswith("ready in ")
    assert log.lines[-1] == ("svc", "stopped (SIGTERM)")
    assert group.processes == []


async def test_a_process_that_exits_before_ready_explains_why() -> None:
    group = ProcessGroup(Lines())
    try:
        with pytest.raises(LaunchError) as failure:
            await group.start(python("broken", "import sys; print('boom: no config'); sys.exit(3)"))
    finally:
        await group.aclose()
    assert (failure.value.name, failure.value.reason) == ("broken", "exit status 3 before it was ready")
    assert failure.value.recent == ("boom: no config",)
    assert str(failure.value) == "broken: exit status 3 before it was ready"


async def test_a_process_never_ready_times_out_and_is_stopped() -> None:
    log = Lines()
    group = ProcessGroup(log)
    try:
        with pytest.raises(LaunchError) as failure:
            await group.start(python("slow", "import time; print('loading'); time.sleep(60)", ready_timeout_s=0.5))
        assert group.processes[0].returncode is None  # still running until the group closes
    finally:
        await group.aclose()
    assert failure.value.reason == "not ready after 0.5 s"
    assert failure.value.recent == ("loading",)
    assert log.lines[-1] == ("slow", "stopped (SIGTERM)")


async def test_stop_kills_a_process_that_ignores_sigterm() -> None:
    code = """
        import json, signal, time
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        print(json.dumps({"event": "ready"}))
        while True:
            time.sleep(1)
    """
    log = Lines()
    group = ProcessGroup(log)
    try:
        running = await group.start(python("stubborn", code, stop_timeout_s=0.5))
    finally:
        await group.aclose()
    assert running.returncode == -9
    assert log.lines[-2:] == [
        ("stubborn", "still running 0.5 s after SIGTERM: killing it"),
        ("stubborn", "stopped (SIGKILL)"),
    ]


async def test_http_probe_waits_until_the_server_answers() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    # Listens only after a second: the probe must keep trying through refused connections.
    code = f"""
        import http.server, time
        time.sleep(1)
        http.server.HTTPServer(("127.0.0.1", {port}), http.server.SimpleHTTPRequestHandler).serve_forever()
    """
    group = ProcessGroup(Lines())
    try:
        running = await group.start(python("http", code, probe=HttpProbe(f"http://127.0.0.1:{port}/")))
        assert running.returncode is None
    finally:
        await group.aclose()


async def test_wait_for_exit_names_the_process_that_died() -> None:
    dies = """
        import json, sys, time
        print(json.dumps({"event": "ready"}))
        time.sleep(0.3)
        sys.exit(4)
    """
    group = ProcessGroup(Lines())
    try:
        await group.start(python("steady", SERVES_FOREVER))
        await group.start(python("flaky", dies))
        died = await group.wait_for_exit()
        assert (died.spec.name, died.returncode) == ("flaky", 4)
    finally:
        await group.aclose()


def test_describe_exit_and_prefixed_log() -> None:
    assert [describe_exit(s) for s in (0, 3, -15, -9, -200)] == [
        "exit status 0",
        "exit status 3",
        "SIGTERM",
        "SIGKILL",
        "exit status -200",
    ]
    out = io.StringIO()
    log = PrefixedLog(out)
    log("speech", "hello")
    log("standin", "x")
    assert out.getvalue() == "speech  | hello\nstandin | x\n"  # no colour codes off a terminal
