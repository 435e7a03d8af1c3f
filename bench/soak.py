"""Soak benchmark: `python -m bench.soak` (`make bench-soak`). Not a timed test: it prints numbers.

Starts the real server (`python -m kokoro_server`) in a child process and runs many sessions at
once, each sending requests one after another and cancelling some of them at a random moment
(seeded). It checks every byte of audio and prints:
- audio bytes lost and frames out of order (both must be 0). With the zero-cost engine
  (`--engine zero`, the default) every chunk's audio is known exactly (sample k of a chunk is
  `(k % 251) - 125`), so each chunk announced by its `timestamps` frame is compared byte for byte;
  with the model (`--engine kokoro`) the bytes received are compared with the duration the server
  reports in `synthesis_complete`. Out of order: audio outside its request's start..end, a chunk
  index that skips or repeats, any frame of a request after its `cancelled`;
- the server's resident memory before and after (from /proc), and GET /ping p50/p99/max during the run.

Exit status 1 when anything was lost or out of order.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

import numpy as np
from websockets.asyncio.client import ClientConnection, connect

from bench.speech import REPO_ROOT, free_port, percentile, stop, wait_ready
from speech_protocol import SAMPLE_RATE, WS_PATH

SOAK_TEXTS: Final = (
    "Hello there.",
    "The weather is fine today, and the river is calm.",
    "Streaming speech lets a voice agent start talking before its answer is ready.",
    "One. Two. Three. Four.",
    "Each sentence is synthesized as soon as the language model finishes writing it, so the "
    "listener hears the first words quickly.",
)
"""Single spaces only: a chunk's text is then exactly its words joined by spaces (see `expected_pcm`)."""
ZERO_SECONDS_PER_CHAR: Final = 0.06
"""ZeroCostEngine's default audio length per character (what `--engine zero` serves)."""


# --- the server process --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ServerProcess:
    port: int
    pid: int

    @property
    def http_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def ws_url(self) -> str:
        return f"ws://127.0.0.1:{self.port}{WS_PATH}"

    def rss_mib(self) -> float:
        """Resident memory of the server process now."""
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
        raise RuntimeError(f"no VmRSS for process {self.pid}")


@contextmanager
def server_process(log_path: Path, *flags: str, root: Path = REPO_ROOT) -> Iterator[ServerProcess]:
    """`python -m kokoro_server` from the checkout at `root`, on a free port; yields once /ping answers 200."""
    port = free_port()
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(root), str(root / "images" / "kokoro")])
    env.setdefault("HF_HUB_OFFLINE", "1")
    command = [sys.executable, "-m", "kokoro_server", "--host", "127.0.0.1", "--port", str(port), *flags]
    with log_path.open("w") as log:
        process = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT)
        try:
            wait_ready(port, process)
            yield ServerProcess(port=port, pid=process.pid)
        finally:
            stop(process)


@contextmanager
def ping_sampler(url: str, interval_s: float = 0.02) -> Iterator[list[float]]:
    """GET /ping every `interval_s` while the block runs, from a separate process (`bench.pinger`, so
    that the benchmark's own clients cannot delay it); the list holds the latencies in ms at the end."""
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO_ROOT)
    with subprocess.Popen(
        [sys.executable, "-m", "bench.pinger", url, str(interval_s)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    ) as pinger:
        assert pinger.stdin is not None
        assert pinger.stdout is not None
        if pinger.stdout.readline().strip() != "ready":
            raise RuntimeError("the /ping sampler did not start")
        latencies: list[float] = []
        try:
            yield latencies
        finally:
            pinger.stdin.close()
            latencies.extend(json.loads(pinger.stdout.readline() or "[]"))


def ping_line(latencies: Sequence[float]) -> str:
    if not latencies:
        return "GET /ping: no sample"
    return (
        f"GET /ping ({len(latencies)} pings): p50 {percentile(latencies, 50):.1f} ms, "
        f"p99 {percentile(latencies, 99):.1f} ms, max {max(latencies):.1f} ms"
    )


# --- checking the audio ----------------------------------------------------------------------------


def expected_pcm(words: Sequence[str]) -> bytes:
    """The zero-cost engine's audio for the chunk made of `words` (single spaces between them)."""
    text = " ".join(words)
    samples = int(len(text) * ZERO_SECONDS_PER_CHAR * SAMPLE_RATE)
    pcm: bytes = ((np.arange(samples) % 251) - 125).astype("<i2").tobytes()
    return pcm


@dataclass
class Tally:
    requests: int = 0
    completed: int = 0
    cancelled: int = 0
    audio_bytes: int = 0
    lost_bytes: int = 0
    out_of_order: int = 0
    problems: list[str] = field(default_factory=list)

    def problem(self, kind: str, detail: str) -> None:
        if kind == "order":
            self.out_of_order += 1
        if len(self.problems) < 20:
            self.problems.append(detail)


@dataclass
class _Chunk:
    expected: bytes | None
    received: bytearray = field(default_factory=bytearray)


async def one_request(
    ws: ClientConnection, request_id: str, text: str, *, cancel_after_frames: int | None, exact: bool, tally: Tally
) -> None:
    """Send one request (cancel it after that many audio frames, if given) and check every frame."""
    await ws.send(json.dumps({"text": text, "request_id": request_id, "timestamps": True}))
    tally.requests += 1
    started, audio_frames, cancel_sent = False, 0, False
    chunks: list[_Chunk] = []
    received_bytes = 0
    while True:
        frame = await asyncio.wait_for(ws.recv(), timeout=120)
        if isinstance(frame, bytes):
            if not started or not chunks:
                tally.problem("order", f"{request_id}: audio before synthesis_start or its first timestamps")
                continue
            chunks[-1].received += frame
            received_bytes += len(frame)
            tally.audio_bytes += len(frame)
            audio_frames += 1
            if cancel_after_frames is not None and audio_frames >= cancel_after_frames and not cancel_sent:
                await ws.send(json.dumps({"type": "cancel", "request_id": request_id}))
                cancel_sent = True
            continue
        event = json.loads(frame)
        if event.get("request_id") != request_id:
            tally.problem("order", f"{request_id}: got a frame of {event.get('request_id')!r}: {event['type']}")
            continue
        kind = event["type"]
        if kind == "synthesis_start":
            if started:
                tally.problem("order", f"{request_id}: second synthesis_start")
            started = True
            if cancel_after_frames == 0:
                await ws.send(json.dumps({"type": "cancel", "request_id": request_id}))
                cancel_sent = True
        elif kind == "timestamps":
            if event["chunk"] != len(chunks):
                tally.problem("order", f"{request_id}: chunk {event['chunk']} after {len(chunks)} chunks")
            words = [w["word"] for w in event["words"]]
            chunks.append(_Chunk(expected_pcm(words) if exact else None))
        elif kind in ("synthesis_complete", "cancelled"):
            break
        else:
            tally.problem("other", f"{request_id}: unexpected {frame}")
    if kind == "synthesis_complete" and cancel_sent:
        # The cancel crossed the last frame: the server answers it with unknown_request.
        late = json.loads(await asyncio.wait_for(ws.recv(), timeout=120))
        if (late["type"], late.get("code"), late.get("request_id")) != ("error", "unknown_request", request_id):
            tally.problem("other", f"{request_id}: after a late cancel: {late}")
    if kind == "synthesis_complete":
        tally.completed += 1
        reported = round(event["audio_duration_s"] * SAMPLE_RATE * 2)
        if exact:
            for index, chunk in enumerate(chunks):
                if bytes(chunk.received) != chunk.expected:
                    lost = len(chunk.expected or b"") - len(chunk.received)
                    tally.lost_bytes += max(lost, 0)
                    what = "order" if lost <= 0 else "lost"
                    tally.problem(what, f"{request_id}: chunk {index} differs ({lost} bytes short)")
        elif abs(reported - received_bytes) > SAMPLE_RATE * 2 // 1000:  # the report is rounded to 1 ms
            tally.lost_bytes += max(reported - received_bytes, 0)
            tally.problem("lost", f"{request_id}: {received_bytes} bytes received, {reported} reported")
    else:
        tally.cancelled += 1
        # What arrived before `cancelled` must still be the audio's exact start.
        for index, chunk in enumerate(chunks):
            if exact and chunk.expected is not None and not chunk.expected.startswith(bytes(chunk.received)):
                tally.problem("order", f"{request_id}: cancelled chunk {index} is not a prefix of its audio")


async def one_session(
    url: str, number: int, *, messages: int, cancel_rate: float, rng: random.Random, exact: bool, tally: Tally
) -> None:
    async with connect(url, max_size=None) as ws:
        for m in range(messages):
            cancel_after = rng.randint(0, 3) if rng.random() < cancel_rate else None
            text = rng.choice(SOAK_TEXTS)
            await one_request(ws, f"s{number}-m{m}", text, cancel_after_frames=cancel_after, exact=exact, tally=tally)
        await ws.send(json.dumps({"type": "close"}))
        async for frame in ws:
            tally.problem("order", f"s{number}: frame after every request ended: {frame!r:.80}")


@dataclass(frozen=True, slots=True)
class SoakResult:
    tally: Tally
    rss_before_mib: float
    rss_after_mib: float
    pings_ms: list[float]
    wall_s: float


async def soak(server: ServerProcess, args: argparse.Namespace) -> SoakResult:
    tally = Tally()
    rss_before = server.rss_mib()
    started = time.perf_counter()
    with ping_sampler(server.http_url) as pings:
        await asyncio.gather(
            *(
                one_session(
                    server.ws_url,
                    n,
                    messages=args.messages,
                    cancel_rate=args.cancel_rate,
                    rng=random.Random(args.seed * 1000 + n),
                    exact=args.engine == "zero",
                    tally=tally,
                )
                for n in range(args.sessions)
            )
        )
    wall = time.perf_counter() - started
    await asyncio.sleep(0.5)  # let the server release what the sessions held
    return SoakResult(tally, rss_before, server.rss_mib(), list(pings), wall)


def report(result: SoakResult, args: argparse.Namespace) -> str:
    t = result.tally
    lines = [
        f"Soak: {args.sessions} sessions x {args.messages} messages at once, engine {args.engine}, "
        f"cancel rate {args.cancel_rate:.0%}, seed {args.seed}",
        f"  requests {t.requests}: completed {t.completed}, cancelled {t.cancelled}; "
        f"audio received {t.audio_bytes / (SAMPLE_RATE * 2):.1f} s; wall time {result.wall_s:.1f} s",
        f"  audio bytes lost: {t.lost_bytes}; frames out of order: {t.out_of_order}  (both must be 0)",
        f"  server RSS: before {result.rss_before_mib:.1f} MiB, after {result.rss_after_mib:.1f} MiB "
        f"({result.rss_after_mib - result.rss_before_mib:+.1f} MiB)",
        f"  {ping_line(result.pings_ms)}",
    ]
    lines += [f"  problem: {p}" for p in t.problems]
    return "\n".join(lines)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.soak", description=__doc__.splitlines()[0])
    parser.add_argument("--engine", choices=["zero", "kokoro"], default="zero")
    parser.add_argument("--sessions", type=int, default=50)
    parser.add_argument("--messages", type=int, default=20, help="requests per session, one after another")
    parser.add_argument("--cancel-rate", type=float, default=0.25, help="share of requests cancelled mid-way")
    parser.add_argument("--seed", type=int, default=12)
    parser.add_argument("--model-dir", type=Path, default=None, help="--engine kokoro: weights (default: random)")
    parser.add_argument("--device", default="cpu")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    flags = ["--engine", args.engine, "--max-sessions", str(max(args.sessions, 1))]
    if args.engine == "kokoro":
        from kokoro_server.fake_weights import ensure_random_weights

        flags += ["--model-dir", str(args.model_dir or ensure_random_weights()), "--device", args.device]
    with (
        tempfile.TemporaryDirectory(prefix="bench-soak-") as logs,
        server_process(Path(logs) / "server.log", *flags) as proc,
    ):
        result = asyncio.run(soak(proc, args))
    print(report(result, args))
    return 0 if result.tally.lost_bytes == 0 and result.tally.out_of_order == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
