"""Gapless speech benchmark: `python -m bench.gapless` (or `python -m bench.speech --gapless`).

What a listener hears, side by side in one run: for the 267-character four-sentence text and a
700-character answer, 1 and 2 sessions at once, fp32 and bf16, the naive sentence split against
the adaptive schedule, each session's time to first audio, the silence inserted by underruns and
how many there were (`bench.playback` plays each recorded frame stream in real time from its first
byte). Then the bf16 audio against fp32 and its speed-up (`bench.precision`).

The servers run in this process (uvicorn in a thread, one app per chunking and precision, on
127.0.0.1) on the full-size Kokoro-82M architecture (a random-weight checkpoint unless
`--model-dir` names real weights). Both precisions are built with kokoro's real-valued iSTFT (see
`bench.precision.load_engine`), so that bf16 runs on a CPU and only the precision differs.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Final, Literal

from bench.playback import PlaybackReport
from bench.recording import record_session
from bench.texts import FOUR_SENTENCES, LONG_ANSWER
from local.threaded_server import serve_in_thread
from speech_protocol import WS_PATH

if TYPE_CHECKING:
    from starlette.applications import Starlette

    from kokoro_server.kokoro_engine import KokoroEngine

Policy = Literal["sentence", "adaptive"]
POLICIES: Final[tuple[Policy, ...]] = ("sentence", "adaptive")
POLICY_LABELS: Final = {"sentence": "naive sentence split", "adaptive": "adaptive schedule"}
TEXTS: Final = {"four sentences": FOUR_SENTENCES, "answer": LONG_ANSWER}


@dataclass(frozen=True, slots=True)
class Case:
    text_name: str
    sessions: int
    precision: str


@dataclass(frozen=True, slots=True)
class Outcome:
    """Every session of one case under one policy."""

    playbacks: tuple[PlaybackReport, ...]
    chunks: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class Row:
    case: Case
    outcomes: dict[Policy, Outcome]


# --- the table (pure) ----------------------------------------------------------------------------


def _per_session(values: Sequence[float], fmt: str) -> str:
    return "/".join(format(v, fmt) for v in values)


def render_table(rows: Sequence[Row]) -> list[str]:
    """One line per case; per policy: first audio (s), underrun silence (s), underruns, chunks.

    With several sessions each value is given per session, in the order they were opened.
    """
    head = f"{'text':<16}{'sessions':>9}{'precision':>10}"
    cells = f"{'first audio s':>16}{'silence s':>14}{'underruns':>10}{'chunks':>8}"
    lines = [
        head + "".join(f" | {POLICY_LABELS[p]:<{len(cells) - 1}}" for p in POLICIES),
        " " * len(head) + f" |{cells}" * len(POLICIES),
    ]
    for row in rows:
        line = f"{row.case.text_name:<16}{row.case.sessions:>9}{row.case.precision:>10}"
        for policy in POLICIES:
            outcome = row.outcomes[policy]
            ttfa = _per_session([p.time_to_first_audio_s for p in outcome.playbacks], ".2f")
            silence = _per_session([p.silence_s for p in outcome.playbacks], ".2f")
            underruns = "/".join(str(p.underruns) for p in outcome.playbacks)
            chunks = "/".join(str(n) for n in outcome.chunks)
            line += f" |{ttfa:>16}{silence:>14}{underruns:>10}{chunks:>8}"
        lines.append(line)
    return [line.rstrip() for line in lines]


def gap_lines(rows: Sequence[Row]) -> list[str]:
    """Where each underrun fell: per case, policy and session with any, the audio heard before each
    gap and the gap's silence (a gap after the first piece is the first chunk's plan; one after
    seconds of audio, a later chunk's). Pure."""
    lines: list[str] = []
    for row in rows:
        for policy in POLICIES:
            for number, playback in enumerate(row.outcomes[policy].playbacks, start=1):
                if playback.gaps:
                    where = ", ".join(
                        f"after {g.audio_played_s:.2f} s of audio {g.silence_s:.2f} s" for g in playback.gaps
                    )
                    lines.append(
                        f"{row.case.text_name}, {row.case.sessions} session(s), {row.case.precision}, "
                        f"{POLICY_LABELS[policy]}, session {number}: {where}"
                    )
    return lines


# --- servers and sessions ------------------------------------------------------------------------


@contextmanager
def serving(app: Starlette) -> Iterator[str]:
    """`app` served by uvicorn on 127.0.0.1 at a free port, in a thread; yields the WebSocket URL
    once `/ping` answers 200 (an app given a loader loads it in the background)."""
    import httpx

    with serve_in_thread(app, ws="websockets-sansio") as server:
        deadline = time.monotonic() + 60
        while httpx.get(server.http_url + "/ping").status_code != 200:
            if time.monotonic() > deadline:
                raise TimeoutError("the benchmark's speech app did not become ready within 60 s")
            time.sleep(0.01)
        yield server.ws_url(WS_PATH)


async def run_sessions(url: str, text: str, sessions: int) -> Outcome:
    """`sessions` sessions each send `text` at the same moment; their playback as a listener hears it."""
    recordings = await asyncio.gather(*(record_session(url, text) for _ in range(sessions)))
    return Outcome(
        playbacks=tuple(r.playback() for r in recordings),
        chunks=tuple(r.complete.chunks for r in recordings),
    )


def build_app(engine: KokoroEngine, policy: Policy) -> Starlette:
    """The speech server's app serving the loaded `engine` as the server does: its threads sized per
    job and per stage on the server's synthesis threads (precision and device are the engine's)."""
    from kokoro_server.app import create_app
    from kokoro_server.concurrency import use_intra_op_threads
    from kokoro_server.service import EngineLoader, LoadedEngine
    from kokoro_server.settings import Settings

    loaded = LoadedEngine(engine, "cpu", use_threads=use_intra_op_threads, at_each_stage=engine.at_each_stage)
    return create_app(Settings(chunking=policy, log_level="warning"), EngineLoader(lambda: loaded))


def run_precision(engine: KokoroEngine, precision: str, cases: Sequence[Case], progress: bool = True) -> list[Row]:
    """Every case of `precision`, policy after policy within each case (so load drifts hit both).
    One app at a time: two apps' synthesis threads would make more OpenMP teams than the cores
    (`kokoro_server.concurrency`), which the server never does."""
    rows: list[Row] = []
    for case in cases:
        outcomes: dict[Policy, Outcome] = {}
        for policy in POLICIES:
            with serving(build_app(engine, policy)) as url:
                started = time.perf_counter()
                outcomes[policy] = asyncio.run(run_sessions(url, TEXTS[case.text_name], case.sessions))
            if progress:
                print(
                    f"  {case.text_name}, {case.sessions} session(s), {precision}, {policy}: "
                    f"{time.perf_counter() - started:.1f} s",
                    file=sys.stderr,
                )
        rows.append(Row(case, outcomes))
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.gapless", description=__doc__.splitlines()[0] if __doc__ else None
    )
    parser.add_argument("--model-dir", type=Path, help="real weights; default: the generated random-weight checkpoint")
    parser.add_argument("--precisions", default="fp32,bf16", help="comma-separated (default fp32,bf16)")
    parser.add_argument("--sessions", default="1,2", help="comma-separated session counts (default 1,2)")
    parser.add_argument("--repeats", type=int, default=2, help="timed runs per precision for the speed-up")
    args = parser.parse_args(argv)
    from bench.precision import load_engine, measure_precision
    from bench.threads import loaded_in_a_thread_that_ends
    from kokoro_server.fake_weights import ensure_random_weights

    started = time.perf_counter()
    model_dir = ensure_random_weights() if args.model_dir is None else args.model_dir
    precisions = [p.strip() for p in args.precisions.split(",") if p.strip()]
    session_counts = [int(n) for n in args.sessions.split(",")]
    engines = {}
    for precision in precisions:
        # As the server does: in a thread that ends, its intra-op team with it (`bench.threads`).
        loading = time.perf_counter()
        engines[precision] = loaded_in_a_thread_that_ends(partial(load_engine, model_dir, precision=precision))
        print(
            f"gapless: {precision} engine loaded and warmed up in {time.perf_counter() - loading:.1f} s",
            file=sys.stderr,
        )
    rows: list[Row] = []
    for precision, engine in engines.items():
        cases = [Case(name, n, precision) for name in TEXTS for n in session_counts]
        rows += run_precision(engine, precision, cases)
    weights = "random-weight" if args.model_dir is None else "given"
    print(
        f"Gapless playback: {weights} full-size Kokoro-82M, CPU, {os.cpu_count()} cores "
        f"({platform.processor() or platform.machine()}), 1 synthesis at a time"
    )
    print(f"texts: four sentences = {len(FOUR_SENTENCES)} characters, answer = {len(LONG_ANSWER)} characters")
    print("\n".join(render_table(rows)))
    if gaps := gap_lines(rows):
        print("\nwhere the underruns fell:")
        print("\n".join(gaps))
    if "fp32" in engines and len(engines) > 1:
        reduced = next(p for p in engines if p != "fp32")
        print()
        print("\n".join(measure_precision(engines["fp32"], engines[reduced], repeats=args.repeats).lines()))
    print(f"\n(gapless benchmark wall time {time.perf_counter() - started:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
