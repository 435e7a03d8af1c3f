"""Speech server benchmark: `python -m bench.speech` (`make bench`) prints one table.

Runs the real server (`python -m kokoro_server`) in child processes and talks to it over a socket
with the `websockets` and `httpx` clients, on the full-size Kokoro-82M architecture (a random-weight
checkpoint unless `--model-dir` names real weights: the audio is noise, the compute is the model's).
Side by side in one run:
- time to first audio for a 267-character, four-sentence text synthesized whole (one chunk, as
  the reference container does) versus streamed by sentence (`--chunking sentence`), N trials each;
- the real-time factor (synthesis time / audio duration) of both;
- GET /ping p50/p99 while several sessions synthesize at once, and each session's first audio;
- the server's own cost per message, measured with the zero-cost engine.

`--gapless` runs the gapless playback benchmark instead (`bench.gapless`: underrun silence of the
naive sentence split against the adaptive schedule, fp32 and bf16, 1 and 2 sessions).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import httpx
from websockets.asyncio.client import ClientConnection, connect

from bench.texts import FOUR_SENTENCES
from kokoro_server.concurrency import configured_plan
from kokoro_server.fake_weights import ensure_random_weights
from speech_protocol import WS_PATH, pcm_duration_s

REPO_ROOT: Final = Path(__file__).resolve().parents[1]

BENCH_TEXT: Final = FOUR_SENTENCES
"""267 characters, four sentences (the reference sample's comparison, reworded to its length)."""

AWS_WHOLE_MS: Final = 329.3
AWS_STREAMED_MS: Final = 156.7
OVERHEAD_TEXT: Final = "Hello there."


@dataclass(frozen=True, slots=True)
class Trial:
    """One request as a client sees it."""

    first_audio_ms: float
    total_ms: float
    audio_s: float


@dataclass(frozen=True, slots=True)
class LoadResult:
    pings_ms: list[float]
    first_audio_s: list[float]
    """Per session, from the moment all sessions sent their text."""
    total_s: float


@dataclass(frozen=True, slots=True)
class Results:
    whole: list[Trial]
    streamed: list[Trial]
    load: LoadResult
    sessions: int
    overhead_ms: list[float]
    setup: str


def positive_int(raw: str) -> int:
    """An argparse type: a count of at least 1 (a benchmark of 0 trials has no median to print)."""
    value = int(raw)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100) of a non-empty sample."""
    ordered = sorted(values)
    rank = max(1, round(q / 100 * len(ordered) + 0.5 - 1e-9))
    return ordered[min(rank, len(ordered)) - 1]


# --- the server process ------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@contextmanager
def server(log_dir: Path, name: str, *flags: str) -> Iterator[int]:
    """`python -m kokoro_server` on a free port; yields the port once /ping answers 200."""
    port = free_port()
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO_ROOT), str(REPO_ROOT / "images" / "kokoro")])
    env.setdefault("HF_HUB_OFFLINE", "1")
    command = [sys.executable, "-m", "kokoro_server", "--host", "127.0.0.1", "--port", str(port), *flags]
    with (log_dir / f"{name}.log").open("w") as log:
        process = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT)
        try:
            started = time.perf_counter()
            wait_ready(port, process)
            print(f"  server '{name}' ready in {time.perf_counter() - started:.1f} s", file=sys.stderr)
            yield port
        finally:
            stop(process)


def stop(process: subprocess.Popen[bytes]) -> None:
    """Terminate a server process, killing it when it has not exited within 30 s."""
    process.terminate()
    try:
        process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def wait_ready(port: int, process: subprocess.Popen[bytes], timeout_s: float = 300) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the server exited with status {process.returncode} (see its log)")
        try:
            if httpx.get(f"http://127.0.0.1:{port}/ping", timeout=1).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.1)
    raise TimeoutError(f"the server on port {port} was not ready after {timeout_s} s")


# --- clients -----------------------------------------------------------------------------------


async def request(ws: ClientConnection, text: str, request_id: str) -> Trial:
    """Send one synthesis request and read its frames to synthesis_complete."""
    started = time.perf_counter()
    await ws.send(json.dumps({"text": text, "request_id": request_id}))
    first_audio: float | None = None
    audio_bytes = 0
    while True:
        frame = await ws.recv()
        if isinstance(frame, bytes):
            first_audio = first_audio or time.perf_counter()
            audio_bytes += len(frame)
            continue
        event = json.loads(frame)
        if event["type"] == "error":
            raise RuntimeError(f"server error: {event}")
        if event["type"] == "synthesis_complete":
            done = time.perf_counter()
            if first_audio is None:
                raise RuntimeError("the request completed without audio")
            return Trial((first_audio - started) * 1000, (done - started) * 1000, pcm_duration_s(audio_bytes))


async def trials(port: int, text: str, count: int) -> list[Trial]:
    """`count` requests, each on a new session: a new listener, as the trials are meant to be (on one
    session, a request sent while the previous answer still plays is sized by that audio)."""
    out = []
    for n in range(count):
        async with connect(f"ws://127.0.0.1:{port}{WS_PATH}", max_size=None) as ws:
            out.append(await request(ws, text, f"trial-{n}"))
    return out


async def ping_under_load(port: int, sessions: int, text: str) -> LoadResult:
    """`sessions` sessions each synthesize `text` at once while /ping is polled back to back."""
    sockets = [await connect(f"ws://127.0.0.1:{port}{WS_PATH}", max_size=None) for _ in range(sessions)]
    pings: list[float] = []
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as client:
            await client.get("/ping")  # open the keep-alive connection before measuring
            started = time.perf_counter()
            jobs = [asyncio.create_task(request(ws, text, f"load-{i}")) for i, ws in enumerate(sockets)]
            while not all(job.done() for job in jobs):
                sent = time.perf_counter()
                response = await client.get("/ping")
                pings.append((time.perf_counter() - sent) * 1000)
                if response.status_code != 200:
                    raise RuntimeError(f"/ping answered {response.status_code} under load")
                await asyncio.sleep(0.02)
        results = [await job for job in jobs]
        total = time.perf_counter() - started
    finally:
        for ws in sockets:
            await ws.close()
    return LoadResult(pings, [r.first_audio_ms / 1000 for r in results], total)


async def message_overhead(port: int, messages: int) -> list[float]:
    """Round trip of each short request on the zero-cost engine: the server's own cost per message."""
    async with connect(f"ws://127.0.0.1:{port}{WS_PATH}", max_size=None) as ws:
        for n in range(20):  # warm the connection and the code paths
            await request(ws, OVERHEAD_TEXT, f"warm-{n}")
        return [(await request(ws, OVERHEAD_TEXT, f"m-{n}")).total_ms for n in range(messages)]


# --- report ------------------------------------------------------------------------------------


def render(results: Results) -> str:
    """The benchmark table."""
    whole = [t.first_audio_ms for t in results.whole]
    streamed = [t.first_audio_ms for t in results.streamed]
    whole_ms, streamed_ms = statistics.median(whole), statistics.median(streamed)
    reduction = (streamed_ms - whole_ms) / whole_ms * 100
    aws_reduction = (AWS_STREAMED_MS - AWS_WHOLE_MS) / AWS_WHOLE_MS * 100

    def rtf(ts: list[Trial]) -> float:
        return statistics.median(t.total_ms / 1000 / t.audio_s for t in ts)

    pings = results.load.pings_ms
    lines = [
        f"Kokoro-82M speech server benchmark: {results.setup}",
        "",
        f"Time to first audio, {len(BENCH_TEXT)}-character four-sentence text, {len(whole)} trials per mode (ms)",
        f"  {'mode':<34}{'median':>10}{'min':>10}{'max':>10}",
        f"  {'whole text (one chunk)':<34}{whole_ms:>10.1f}{min(whole):>10.1f}{max(whole):>10.1f}",
        f"  {'streamed by sentence':<34}{streamed_ms:>10.1f}{min(streamed):>10.1f}{max(streamed):>10.1f}",
        f"  {'change':<34}{reduction:>+9.1f}%   (AWS sample, g5 GPU: {AWS_WHOLE_MS} -> {AWS_STREAMED_MS} ms, "
        f"{aws_reduction:+.1f} %)",
        f"  {'streamed / whole':<34}{streamed_ms / whole_ms * 100:>9.1f}%   (target <= 25 %)",
        "",
        f"Real-time factor (request time / audio duration, median): whole {rtf(results.whole):.2f}, "
        f"streamed {rtf(results.streamed):.2f}; audio {statistics.median(t.audio_s for t in results.whole):.2f} s",
        "",
        f"GET /ping while {results.sessions} sessions synthesize the text at once ({len(pings)} pings): "
        f"p50 {percentile(pings, 50):.1f} ms, p99 {percentile(pings, 99):.1f} ms, max {max(pings):.1f} ms "
        "(target p99 < 250 ms)",
        "  first audio per session (s): "
        + ", ".join(f"{s:.2f}" for s in sorted(results.load.first_audio_s))
        + f"; all done after {results.load.total_s:.1f} s",
        "",
        f"Server cost per message, zero-cost engine ({len(results.overhead_ms)} requests of "
        f"'{OVERHEAD_TEXT}' in one session, round trip): p50 {percentile(results.overhead_ms, 50):.2f} ms, "
        f"p99 {percentile(results.overhead_ms, 99):.2f} ms",
    ]
    return "\n".join(lines)


async def run(args: argparse.Namespace, model_dir: Path, log_dir: Path) -> Results:
    model = [
        "--model-dir",
        str(model_dir),
        "--device",
        args.device,
        "--precision",
        args.precision,
        "--log-level",
        "warning",
    ]
    print("benchmark: whole-text server", file=sys.stderr)
    with server(log_dir, "whole", *model, "--chunking", "none") as port:
        whole = await trials(port, BENCH_TEXT, args.trials)
    print("benchmark: streaming server", file=sys.stderr)
    with server(log_dir, "streamed", *model, "--chunking", "sentence") as port:
        streamed = await trials(port, BENCH_TEXT, args.trials)
        load = await ping_under_load(port, args.sessions, BENCH_TEXT)
    print("benchmark: zero-cost engine", file=sys.stderr)
    with server(log_dir, "zero", "--engine", "zero", "--log-level", "warning") as port:
        overhead = await message_overhead(port, args.messages)
    weights = "random-weight" if args.model_dir is None else "given"
    at_once = configured_plan("auto", args.device).concurrency  # the servers above run with the default, 'auto'
    setup = (
        f"{weights} full-size checkpoint, {args.device} {args.precision}, "
        f"{os.cpu_count()} CPUs ({platform.processor() or platform.machine()}), {at_once} syntheses at once at most"
    )
    return Results(whole, streamed, load, args.sessions, overhead, setup)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.speech", description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=positive_int, default=5, help="requests per mode (default 5)")
    parser.add_argument(
        "--sessions", type=positive_int, default=4, help="concurrent sessions for the /ping test (default 4)"
    )
    parser.add_argument(
        "--messages", type=positive_int, default=200, help="requests for the overhead test (default 200)"
    )
    parser.add_argument("--model-dir", type=Path, help="real weights; default: the generated random-weight checkpoint")
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    parser.add_argument("--precision", choices=["fp32", "bf16", "fp16"], default="fp32")
    parser.add_argument(
        "--gapless",
        action="store_true",
        help="run the gapless playback benchmark (python -m bench.gapless) instead",
    )
    args = parser.parse_args(argv)
    if args.gapless:
        from bench import gapless

        gapless_args = [] if args.model_dir is None else ["--model-dir", str(args.model_dir)]
        raise SystemExit(gapless.main(gapless_args))
    if len(BENCH_TEXT) != 267:
        raise SystemExit(f"the benchmark text must have 267 characters, it has {len(BENCH_TEXT)}")
    model_dir = ensure_random_weights() if args.model_dir is None else args.model_dir
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="bench-speech-") as logs:
        results = asyncio.run(run(args, model_dir, Path(logs)))
    print(render(results))
    print(f"\n(benchmark wall time {time.perf_counter() - started:.0f} s)")


if __name__ == "__main__":
    main()
