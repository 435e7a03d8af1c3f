"""Pathological texts: `python -m bench.hostile` (`make bench-hostile`). Prints one table.

Issue 12 found that sentence detection rescanned the text from its start for every period: 5,000
characters of "a. a. a." cost about 2.9 s of CPU on the event loop per request, and three such
sessions pushed GET /ping to a 621 ms maximum (SageMaker replaces an instance that misses its
health checks). This starts the real server (`python -m kokoro_server`, the zero-cost engine by
default, so that what is measured is the server's own text work; `--engine kokoro` for the model)
and, for each text, runs `--sessions` sessions that synthesize it at once while a separate
process probes /ping every 20 ms; it prints /ping p50, p99 and max, and the time until every
session's request completed. A normal text of the same length is the baseline.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Final

from websockets.asyncio.client import connect

from bench.soak import ServerProcess, ping_sampler, server_process
from bench.speech import REPO_ROOT, percentile
from bench.texts import FOUR_SENTENCES

LENGTH: Final = 5000
"""The server's default text limit: the longest request a client may send."""


def _repeat(unit: str) -> str:
    return (unit * (LENGTH // len(unit) + 1))[:LENGTH]


TEXTS: Final = {
    "normal sentences (baseline)": _repeat(FOUR_SENTENCES + " "),
    '"a. " x 1,667 (lowercase after each period)': _repeat("a. "),
    '"A. " x 1,667 (initials)': _repeat("A. "),
    '"Mr. " x 1,250 (abbreviations)': _repeat("Mr. "),
    '"e.g. " x 1,000': _repeat("e.g. "),
    "one 5,000-character word": "a" * LENGTH,
    '". " x 2,500 (empty sentences)': _repeat(". "),
}


async def one_session(url: str, text: str, request_id: str) -> tuple[int, float]:
    """Synthesize `text`; returns (chunks, seconds until synthesis_complete)."""
    async with connect(url, max_size=None) as ws:
        started = time.perf_counter()
        await ws.send(json.dumps({"text": text, "request_id": request_id}))
        async for frame in ws:
            if isinstance(frame, str):
                event = json.loads(frame)
                if event["type"] == "synthesis_complete":
                    return int(event["chunks"]), time.perf_counter() - started
                if event["type"] == "error":
                    raise RuntimeError(f"the server refused the text: {event}")
    raise RuntimeError("the session ended before the request completed")


async def run_text(server: ServerProcess, text: str, sessions: int) -> tuple[list[float], int, float]:
    with ping_sampler(server.http_url) as pings:
        results = await asyncio.gather(*(one_session(server.ws_url, text, f"r{n}") for n in range(sessions)))
    return list(pings), results[0][0], max(seconds for _, seconds in results)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.hostile", description=__doc__.splitlines()[0])
    parser.add_argument("--engine", choices=["zero", "kokoro"], default="zero")
    parser.add_argument("--sessions", type=int, default=3, help="sessions synthesizing each text at once")
    parser.add_argument("--chunking", choices=["adaptive", "sentence"], default="adaptive")
    parser.add_argument("--model-dir", type=Path, default=None, help="--engine kokoro: weights (default: random)")
    parser.add_argument(
        "--server-root",
        type=Path,
        default=REPO_ROOT,
        help="run the server from this checkout (e.g. a `git worktree` of an older commit, for before/after)",
    )
    return parser.parse_args(argv)


async def run_all(server: ServerProcess, args: argparse.Namespace) -> list[str]:
    rows = [
        f"{args.sessions} sessions at once per text, {LENGTH} characters each, engine {args.engine}, "
        f"chunking {args.chunking}, server from {args.server_root}; GET /ping from a separate process every 20 ms",
        f"  {'text':46} {'chunks':>7} {'done s':>8} {'pings':>6} {'p50 ms':>8} {'p99 ms':>8} {'max ms':>8}",
    ]
    for name, text in TEXTS.items():
        pings, chunks, done_s = await run_text(server, text, args.sessions)
        p50 = percentile(pings, 50) if pings else float("nan")
        p99 = percentile(pings, 99) if pings else float("nan")
        top = max(pings) if pings else float("nan")
        rows.append(f"  {name:46} {chunks:7d} {done_s:8.2f} {len(pings):6d} {p50:8.1f} {p99:8.1f} {top:8.1f}")
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    flags = ["--engine", args.engine, "--chunking", args.chunking, "--max-text-chars", str(LENGTH)]
    if args.engine == "kokoro":
        from kokoro_server.fake_weights import ensure_random_weights

        flags += ["--model-dir", str(args.model_dir or ensure_random_weights())]
    with (
        tempfile.TemporaryDirectory(prefix="bench-hostile-") as logs,
        server_process(Path(logs) / "server.log", *flags, root=args.server_root) as server,
    ):
        rows = asyncio.run(run_all(server, args))
    print("\n".join(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
