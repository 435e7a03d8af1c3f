"""Barge-in benchmark: `python -m bench.bargein` (`make bench-bargein`).

For each way an answer is interrupted (the page's Stop button, a new question while one plays,
the caller hanging up by closing the tab), while the answer is playing in headless Chromium, it
prints how long until:

- **page silent**: in the page, from the Stop click (or the new question's submit) until the
  player's AudioWorklet confirms it has dropped its buffer (it outputs zeros from its next 128-
  sample render quantum), plus the output latency the browser reports (`baseLatency +
  outputLatency`; headless Chromium with no sound card reports its own figure). Not defined for a
  hang-up: the tab is gone. Goal: at most 300 ms.
- **speech session closed**: from the action (Python's clock, taken just before the browser is told
  to act) until the speech server's WebSocket session of that answer has ended. By then the
  container has dropped every queued request of it (the agent sent `cancel` for each first).
- **speech idle**: until, moreover, no engine job of that session is running (a job that is already
  running when the cancel arrives completes and is thrown away, so this includes the rest of that
  one chunk: it depends on the engine's speed and chunk size, not on the barge-in). Goal for the
  speech server having no work for the request: at most 1 s.
- **agent stopped**: until the agent's invocation has finished (model stream cancelled, speech left),
  from the agent's own log line.

The whole chain is real and runs in this process: the page's web server (its proxy), the AgentCore
app (`BedrockAgentCoreApp`, SSE route, the demo model streaming at 40 tokens per second, the
WebSocket speech transport), and the speech container's app with a probe on its sessions and
engine. The engine is the zero-cost test engine made as slow as a model (`--rtf`, compute per
second of audio), or the full-size Kokoro-82M (`--engine kokoro`, random weights unless
`--model-dir`).
"""

from __future__ import annotations

import argparse
import itertools
import logging
import platform
import statistics
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Final, Literal

from bench.speech_probe import ProbedEngine, SessionProbe, SessionRecord
from local.threaded_server import serve_in_thread
from speech_protocol import WS_PATH

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page

    from kokoro_server.engine import SpeechEngine

Path_ = Literal["stop", "new_question", "hang_up"]
PATHS: Final[tuple[Path_, ...]] = ("stop", "new_question", "hang_up")
Transport = Literal["sse", "websocket"]
TRANSPORTS: Final[tuple[Transport, ...]] = ("sse", "websocket")
PAGE_SILENT_GOAL_MS: Final = 300.0
SPEECH_IDLE_GOAL_MS: Final = 1000.0
CHROMIUM: Final = Path("/usr/bin/chromium")
CHROMIUM_ARGS: Final = ["--no-sandbox", "--disable-gpu", "--disable-background-networking"]
PROMPT: Final = "Tell me about streaming speech."
SECOND_PROMPT: Final = "Something else, please."
WAIT_MS: Final = 60_000


@dataclass
class Trial:
    path: Path_
    transport: Transport
    page_silent_ms: float | None
    session_closed_ms: float
    speech_idle_ms: float
    agent_stopped_ms: float | None
    agent_outcome: str | None
    cancels: int
    client_frames: list[str] = field(default_factory=list)


class InvocationLog(logging.Handler):
    """Catches the pipeline's closing line of each invocation: its outcome and when it was logged."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.ends: list[tuple[float, str]] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.msg.startswith("invocation %s"):
            outcome = record.args[0] if isinstance(record.args, tuple) and record.args else ""
            self.ends.append((time.perf_counter(), str(outcome)))


@dataclass
class Stack:
    url: str
    probe: SessionProbe
    engine: ProbedEngine
    log: InvocationLog


@contextmanager
def local_stack(engine: SpeechEngine) -> Iterator[Stack]:
    """Speech server (probed), agent and web server, each on a free loopback port in a thread."""
    from agent_app.app import create_app as create_agent_app
    from agent_app.config import load_config
    from kokoro_server.app import create_app as create_speech_app
    from kokoro_server.settings import Settings
    from local.webserver import WebServerConfig
    from local.webserver import create_app as create_web_app

    probed = ProbedEngine(engine)
    probe = SessionProbe(create_speech_app(Settings(), probed))
    log = InvocationLog()
    pipeline_logger = logging.getLogger("agent_app.pipeline")
    pipeline_logger.addHandler(log)
    pipeline_logger.setLevel(logging.INFO)
    with ExitStack() as stack:
        speech = stack.enter_context(serve_in_thread(probe))
        config = load_config({"SPEECH_TRANSPORT": "websocket", "SPEECH_WS_URL": speech.ws_url(WS_PATH)})
        agent_app = create_agent_app(config)
        logging.getLogger("bedrock_agentcore").setLevel(logging.WARNING)  # a JSON line per request otherwise
        logging.getLogger("bedrock_agentcore.app").setLevel(logging.WARNING)
        agent = stack.enter_context(serve_in_thread(agent_app))
        web = stack.enter_context(serve_in_thread(create_web_app(WebServerConfig(agent_url=agent.http_url))))
        try:
            yield Stack(url=web.http_url, probe=probe, engine=probed, log=log)
        finally:
            pipeline_logger.removeHandler(log)


def _wait(condition: str, page: Page) -> None:
    page.wait_for_function(condition, timeout=WAIT_MS)


def _speech_times(stack: Stack, record: SessionRecord, t0: float) -> tuple[float, float]:
    """(session closed, speech idle) in ms from t0, once both happened."""
    deadline = time.perf_counter() + WAIT_MS / 1000
    while time.perf_counter() < deadline:
        closed = record.closed
        if closed is not None:
            jobs = [job for job in stack.engine.jobs if job.started <= closed]
            if all(job.ended is not None for job in jobs):
                idle = max([closed, *(job.ended for job in jobs if job.ended is not None)])
                return (closed - t0) * 1000, (idle - t0) * 1000
        time.sleep(0.002)
    raise TimeoutError("the speech session of the interrupted answer never ended")


def _agent_stop(stack: Stack, before: int, t0: float) -> tuple[float | None, str | None]:
    deadline = time.perf_counter() + 10
    while time.perf_counter() < deadline:
        ends = stack.log.ends[before:]
        if ends:
            at, outcome = ends[0]
            return (at - t0) * 1000, outcome
        time.sleep(0.002)
    return None, None


def run_trial(browser: Browser, stack: Stack, path: Path_, transport: Transport) -> Trial:
    context = browser.new_context()
    page = context.new_page()
    try:
        page.goto(stack.url + "/")
        _wait("document.getElementById('health').dataset.state === 'ok'", page)
        sessions_before = len(stack.probe.sessions)
        ends_before = len(stack.log.ends)
        page.check(f"input[name=transport][value={transport}]")
        page.fill("#prompt", PROMPT)
        page.click("#speak")
        # Interrupt while the answer is playing and the speech server still has work for it.
        _wait("window.voicestack.current?.samplesPlayed > 24000 * 0.3", page)
        record = stack.probe.sessions[sessions_before]
        if record.closed is not None:
            raise RuntimeError("the answer was fully synthesized before the interruption: use a slower engine")
        page_silent_ms: float | None = None
        if path == "stop":
            t0 = time.perf_counter()
            page.evaluate("document.getElementById('stop').click()")
        elif path == "new_question":
            page.fill("#prompt", SECOND_PROMPT)
            t0 = time.perf_counter()
            page.evaluate("document.getElementById('ask').requestSubmit()")
        else:
            t0 = time.perf_counter()
            page.close()  # the tab goes away; its connection closes
        if path != "hang_up":
            _wait("window.voicestack.lastStop?.silentMs != null", page)
            stop = page.evaluate("window.voicestack.lastStop")
            page_silent_ms = float(stop["silentMs"]) + float(stop["outputLatencyMs"])
        closed_ms, idle_ms = _speech_times(stack, record, t0)
        agent_ms, outcome = _agent_stop(stack, ends_before, t0)
        kinds = record.kinds()
        return Trial(
            path=path,
            transport=transport,
            page_silent_ms=page_silent_ms,
            session_closed_ms=closed_ms,
            speech_idle_ms=idle_ms,
            agent_stopped_ms=agent_ms,
            agent_outcome=outcome,
            cancels=kinds.count("cancel"),
            client_frames=kinds,
        )
    finally:
        context.close()


def _fmt(values: Sequence[float | None]) -> str:
    known = [v for v in values if v is not None]
    if not known:
        return "n/a"
    return f"{statistics.median(known):.0f} / {max(known):.0f}"


def report(trials: Sequence[Trial]) -> str:
    """A markdown table, median / max of each measure per path and connection, then the goals."""
    header = ["path", "connection", "page silent ms", "speech session closed ms", "speech idle ms"]
    header += ["agent stopped ms", "cancels"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for path, transport in itertools.product(PATHS, TRANSPORTS):
        rows = [t for t in trials if t.path == path and t.transport == transport]
        if not rows:
            continue
        cells = [
            path,
            transport,
            _fmt([t.page_silent_ms for t in rows]),
            _fmt([t.session_closed_ms for t in rows]),
            _fmt([t.speech_idle_ms for t in rows]),
            _fmt([t.agent_stopped_ms for t in rows]),
            f"{statistics.median(t.cancels for t in rows):.0f}",
        ]
        lines.append("| " + " | ".join(cells) + " |")
    silent = [t.page_silent_ms for t in trials if t.page_silent_ms is not None]
    lines.append("")
    lines.append("(median / max over the trials; times from the action)")
    if silent:
        lines.append(f"page silent, worst: {max(silent):.0f} ms (goal <= {PAGE_SILENT_GOAL_MS:.0f} ms)")
    worst_closed = max(t.session_closed_ms for t in trials)
    worst_idle = max(t.speech_idle_ms for t in trials)
    lines.append(f"speech session closed, worst: {worst_closed:.0f} ms (goal <= {SPEECH_IDLE_GOAL_MS:.0f} ms)")
    lines.append(
        f"speech idle incl. the running chunk, worst: {worst_idle:.0f} ms (goal <= {SPEECH_IDLE_GOAL_MS:.0f} ms)"
    )
    return "\n".join(lines)


def describe(trial: Trial) -> str:
    silent = "n/a" if trial.page_silent_ms is None else f"{trial.page_silent_ms:.0f} ms"
    agent = "?" if trial.agent_stopped_ms is None else f"{trial.agent_stopped_ms:.0f} ms"
    return (
        f"  {trial.path:<13} {trial.transport:<9} page silent {silent},"
        f" session closed {trial.session_closed_ms:.0f} ms, speech idle {trial.speech_idle_ms:.0f} ms,"
        f" agent {trial.agent_outcome} after {agent};"
        f" speech frames: {' '.join(trial.client_frames)}"
    )


def build_engine(args: argparse.Namespace) -> SpeechEngine:
    if args.engine == "zero":
        from kokoro_server.engine import ZeroCostEngine

        seconds_per_char = 0.06
        return ZeroCostEngine(seconds_per_char=seconds_per_char, compute_s_per_char=seconds_per_char * args.rtf)
    from kokoro_server.fake_weights import ensure_random_weights
    from kokoro_server.kokoro_engine import KokoroEngine

    model_dir = ensure_random_weights() if args.model_dir is None else args.model_dir
    return KokoroEngine.load(model_dir, precision="fp32", device=args.device)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.bargein", description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=3, help="trials per path (default 3)")
    parser.add_argument("--paths", default=",".join(PATHS), help=f"comma-separated subset of {','.join(PATHS)}")
    parser.add_argument(
        "--transports", default=",".join(TRANSPORTS), help=f"comma-separated subset of {','.join(TRANSPORTS)}"
    )
    parser.add_argument("--engine", choices=["zero", "kokoro"], default="zero")
    parser.add_argument("--rtf", type=float, default=0.5, help="zero engine: compute seconds per second of audio")
    parser.add_argument("--model-dir", type=Path, help="kokoro engine: weights (default: generated random weights)")
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    args = parser.parse_args(argv)
    requested = [p.strip() for p in args.paths.split(",") if p.strip()]
    unknown = [p for p in requested if p not in PATHS]
    paths = [p for p in PATHS if p in requested]
    if unknown or not paths:
        parser.error(f"--paths: unknown {', '.join(unknown) or '(empty)'}; allowed: {', '.join(PATHS)}")
    wanted = [t.strip() for t in args.transports.split(",") if t.strip()]
    transports = [t for t in TRANSPORTS if t in wanted]
    if not transports or any(t not in TRANSPORTS for t in wanted):
        parser.error(f"--transports: allowed: {', '.join(TRANSPORTS)}; got {args.transports!r}")
    if args.trials < 1:
        parser.error(f"--trials must be at least 1, got {args.trials}")
    if not args.rtf > 0:
        parser.error(f"--rtf must be > 0, got {args.rtf}")
    if not CHROMIUM.exists():
        print(f"{CHROMIUM} is missing: run `make system-deps` (apt-get install chromium)", file=sys.stderr)
        return 1

    from playwright.sync_api import sync_playwright

    engine = build_engine(args)
    label = f"zero-cost engine at RTF {args.rtf}" if args.engine == "zero" else f"Kokoro-82M on {args.device}"
    print(f"barge-in benchmark: {label}, demo model at 40 tokens/s, {args.trials} trial(s) per path")
    print(f"machine: {platform.processor() or platform.machine()}, Python {platform.python_version()}")
    trials: list[Trial] = []
    with local_stack(engine) as stack, sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS)
        try:
            for _ in range(args.trials):
                for path, transport in ((p, t) for p in paths for t in transports):
                    trial = run_trial(browser, stack, path, transport)
                    trials.append(trial)
                    print(describe(trial), flush=True)
        finally:
            browser.close()
    print()
    print(report(trials))
    return 0


if __name__ == "__main__":
    sys.exit(main())
