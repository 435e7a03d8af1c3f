"""This server beside Kokoro-FastAPI, same texts, same run: `python -m bench.peers --peer-url URL`.

Starts this server (`python -m kokoro_server`, the generated checkpoint unless `--model-dir`), or
uses `--ours-url`, and measures both sides one after the other with the same client code shape:
- first audio and whole request of the four-sentence text (`bench.texts.FOUR_SENTENCES`), median of
  `--trials`, each on a new session (a new listener): ours over the WebSocket session,
  Kokoro-FastAPI over `POST /v1/audio/speech` with `stream: true` and raw PCM (its streaming mode);
- 4 sessions at once: each one's first audio (from the moment all sent), and the throughput
  (audio seconds produced per wall second);
- the health probe (ours `/ping`, Kokoro-FastAPI `/health`) polled back to back during a second,
  identical load phase (polling every 20 ms is load too: it would lower the throughput above).
Then the issue's target ratios (#15) with the measured values, and, when the server is started here,
the engine alone in the same run (`bench.threads`, before the server starts), which splits the
throughput target's ratio into what the machine gains from syntheses at once and how close the
server's sessions come to the engine alone (`engine_lines`).

Start Kokoro-FastAPI from its repository on the same checkpoint as the README describes
(images/kokoro/README.md, "Peers in the same run").
"""

from __future__ import annotations

import argparse
import asyncio
import platform
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import httpx
from websockets.asyncio.client import connect

from bench.speech import percentile, positive_int, request, server
from bench.texts import FOUR_SENTENCES
from speech_protocol import SAMPLE_RATE, WS_PATH

SESSIONS: Final = 4
VOICE: Final = "af_heart"


@dataclass(frozen=True, slots=True)
class Run:
    """One request as a client saw it."""

    first_audio_s: float
    total_s: float
    audio_s: float


@dataclass(frozen=True, slots=True)
class EngineAlone:
    """The engine alone in this process (`bench.threads.measure`, the benchmark's sentences back to
    back, audio seconds per second): one synthesis with every core, measured before and after the
    syntheses at once (a drift of the machine shows as two figures)."""

    device: str
    """Where it ran: the server's own device ("cpu" or "cuda")."""
    alone: str
    """The lone configuration, e.g. "1 x 2" (syntheses x threads)."""
    alone_rates: tuple[float, float]
    shared: str
    """The configuration of syntheses at once, e.g. "2 x 1"."""
    shared_rate: float

    @property
    def alone_rate(self) -> float:
        return sum(self.alone_rates) / 2


@dataclass(frozen=True, slots=True)
class Side:
    """Everything measured on one server."""

    name: str
    single: list[Run]
    load_first_audio_s: list[float]
    load_audio_s: float
    load_wall_s: float
    probes_ms: list[float]

    @property
    def first_audio_s(self) -> float:
        return statistics.median(r.first_audio_s for r in self.single)

    @property
    def whole_s(self) -> float:
        return statistics.median(r.total_s for r in self.single)

    @property
    def single_rate(self) -> float:
        """Audio seconds per wall second of one request alone."""
        return statistics.median(r.audio_s / r.total_s for r in self.single)

    @property
    def throughput(self) -> float:
        return self.load_audio_s / self.load_wall_s


# --- clients -----------------------------------------------------------------------------------

Request = Callable[[str], Coroutine[Any, Any, Run]]


def ours_client(base: str) -> Callable[[], Awaitable[tuple[Request, Callable[[], Awaitable[None]]]]]:
    """A factory of (request, close) pairs, one WebSocket session each, on this server at `base`."""

    async def open_session() -> tuple[Request, Callable[[], Awaitable[None]]]:
        ws = await connect(base.replace("http", "ws", 1) + WS_PATH, max_size=None)
        count = 0

        async def one(text: str) -> Run:
            nonlocal count
            count += 1
            trial = await request(ws, text, f"r{count}")
            return Run(trial.first_audio_ms / 1000, trial.total_ms / 1000, trial.audio_s)

        return one, ws.close

    return open_session


def peer_client(base: str) -> Callable[[], Awaitable[tuple[Request, Callable[[], Awaitable[None]]]]]:
    """Kokoro-FastAPI's OpenAI-style streaming route, raw 24 kHz PCM16."""

    async def open_session() -> tuple[Request, Callable[[], Awaitable[None]]]:
        client = httpx.AsyncClient(base_url=base, timeout=None)

        async def one(text: str) -> Run:
            body = {"model": "kokoro", "input": text, "voice": VOICE, "response_format": "pcm", "stream": True}
            started = time.perf_counter()
            first: float | None = None
            size = 0
            async with client.stream("POST", "/v1/audio/speech", json=body) as response:
                if response.status_code != 200:
                    raise RuntimeError(f"{base} answered {response.status_code}: {await response.aread()!r}")
                async for part in response.aiter_bytes():
                    if part and first is None:
                        first = time.perf_counter()
                    size += len(part)
            done = time.perf_counter()
            if first is None:
                raise RuntimeError(f"{base} sent no audio")
            return Run(first - started, done - started, size / 2 / SAMPLE_RATE)

        return one, client.aclose

    return open_session


async def measure(
    name: str,
    base: str,
    probe_path: str,
    open_session: Callable[[], Awaitable[tuple[Request, Callable[[], Awaitable[None]]]]],
    trials: int,
) -> Side:
    single: list[Run] = []
    for trial in range(trials + 1):  # the first is a warm-up: the first call at a new length is slower
        # A new session (a new listener) each time: on one session, a request sent while the
        # previous answer still plays is rightly sized by that audio (ours: `schedule.PlaybackClock`).
        one, close = await open_session()
        try:
            run = await one(FOUR_SENTENCES)
        finally:
            await close()
        if trial:
            single.append(run)
    runs, _ = await load(base, open_session, probe_path=None)
    # The probe loop is load of its own (a request every 20 ms on both ends), so the throughput and
    # first audio above are measured without it, and the probe in a second, identical load phase.
    _, probes = await load(base, open_session, probe_path=probe_path)
    wall = max(r.total_s for r in runs)
    return Side(
        name=name,
        single=single,
        load_first_audio_s=sorted(r.first_audio_s for r in runs),
        load_audio_s=sum(r.audio_s for r in runs),
        load_wall_s=wall,
        probes_ms=probes,
    )


async def load(
    base: str,
    open_session: Callable[[], Awaitable[tuple[Request, Callable[[], Awaitable[None]]]]],
    *,
    probe_path: str | None,
) -> tuple[list[Run], list[float]]:
    """`SESSIONS` sessions send the text at once; with `probe_path`, it is polled back to back (every
    20 ms after each answer) until they are done. Their runs, and the probe latencies (ms)."""
    sessions = [await open_session() for _ in range(SESSIONS)]
    probes: list[float] = []
    try:
        async with httpx.AsyncClient(base_url=base, timeout=None) as client:
            if probe_path is not None:
                await client.get(probe_path)  # a connection ready before the load starts
            jobs = [asyncio.create_task(run(FOUR_SENTENCES)) for run, _ in sessions]
            if probe_path is None:
                await asyncio.wait(jobs)
            else:
                while not all(job.done() for job in jobs):
                    sent = time.perf_counter()
                    await client.get(probe_path)
                    probes.append((time.perf_counter() - sent) * 1000)
                    await asyncio.sleep(0.02)
            runs = [await job for job in jobs]
    finally:
        for _, close_one in sessions:
            await close_one()
    return runs, probes


# --- report ------------------------------------------------------------------------------------


def render(ours: Side, peer: Side, setup: str, engine: EngineAlone | None = None) -> str:
    """The side-by-side table, the target ratios and the engine alone beside them. Pure."""

    def fa(side: Side) -> str:
        return ", ".join(f"{s:.2f}" for s in side.load_first_audio_s)

    def probe(side: Side) -> str:
        if not side.probes_ms:
            return "n/a"
        return f"p50 {percentile(side.probes_ms, 50):.0f} / p99 {percentile(side.probes_ms, 99):.0f} ms"

    rows = [
        ("first audio, four sentences (median)", f"{ours.first_audio_s:.2f} s", f"{peer.first_audio_s:.2f} s"),
        ("whole request, same text (median)", f"{ours.whole_s:.2f} s", f"{peer.whole_s:.2f} s"),
        (f"{SESSIONS} sessions, first audio of each", f"{fa(ours)} s", f"{fa(peer)} s"),
        (f"{SESSIONS}-session throughput (audio-s per s)", f"{ours.throughput:.2f}", f"{peer.throughput:.2f}"),
        ("health probe under that load", probe(ours), probe(peer)),
    ]
    width = max(len(r[0]) for r in rows)
    lines = [setup, "", f"| {'measure':<{width}} | {ours.name} | {peer.name} |", f"|{'-' * (width + 2)}|---|---|"]
    lines += [f"| {m:<{width}} | {a} | {b} |" for m, a, b in rows]
    lines += ["", "targets (#15):"]
    for label, value, goal, ok in target_ratios(ours, peer):
        lines.append(f"  {label}: {value:.3f} (target {goal}) {'met' if ok else 'NOT met'}")
    return "\n".join(lines + engine_lines(ours, engine))


def engine_lines(ours: Side, engine: EngineAlone | None) -> list[str]:
    """The engine alone beside the throughput target: its ratio as the product of three measured
    factors. Pure.

    4-session throughput / one session's rate = (4 sessions / the engine's syntheses at once) x
    (the engine's syntheses at once / its lone synthesis) x (its lone synthesis / one session).
    The middle factor is what running syntheses at once gains on this machine, whatever the server
    does; the outer two are how close the server's 4 sessions and its one session come to the
    engine alone on the same machine, in the same run."""
    if engine is None:
        why = "the server was not started here, runs no model, or --engine-seconds 0"
        return ["", f"engine alone: not measured ({why})"]
    crowd = ours.throughput / engine.shared_rate
    gain = engine.shared_rate / engine.alone_rate
    single = engine.alone_rate / ours.single_rate  # crowd x gain x single is the target's own ratio
    alone = " / ".join(f"{rate:.2f}" for rate in engine.alone_rates)
    return [
        "",
        f"engine alone on {engine.device}, this run (audio-s per s): {engine.alone} {alone} (before / after), "
        f"{engine.shared} {engine.shared_rate:.2f}",
        f"  4-session throughput / one session's audio rate {ours.throughput / ours.single_rate:.3f}"
        f" = 4 sessions / engine {engine.shared} {crowd:.3f}"
        f" x engine {engine.shared} / {engine.alone} {gain:.3f}"
        f" x engine {engine.alone} / one session {single:.3f}",
    ]


def target_ratios(ours: Side, peer: Side) -> list[tuple[str, float, str, bool]]:
    """(label, measured ratio, target, met) for each target of issue #15 measurable here. Pure."""
    first_vs_whole = ours.first_audio_s / ours.whole_s
    fourth_vs_single = ours.load_first_audio_s[-1] / ours.first_audio_s
    vs_single = ours.throughput / ours.single_rate
    vs_peer = ours.throughput / peer.throughput
    return [
        ("first audio / whole request", first_vs_whole, "<= 0.08", first_vs_whole <= 0.08),
        ("4th of 4 sessions' first audio / single", fourth_vs_single, "<= 2", fourth_vs_single <= 2),
        ("4-session throughput / one session's audio rate", vs_single, ">= 1.3", vs_single >= 1.3),
        ("4-session throughput / Kokoro-FastAPI's", vs_peer, ">= 1.2", vs_peer >= 1.2),
    ]


def cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


async def run_both(ours_url: str, peer_url: str, trials: int) -> tuple[Side, Side]:
    ours = await measure("this server", ours_url, "/ping", ours_client(ours_url), trials)
    peer = await measure("Kokoro-FastAPI", peer_url, "/health", peer_client(peer_url), trials)
    return ours, peer


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--peer-url", required=True, help="Kokoro-FastAPI base URL, e.g. http://127.0.0.1:8880")
    parser.add_argument("--ours-url", help="this server's base URL (default: start one here)")
    parser.add_argument("--model-dir", type=Path, help="weights for the server started here (default: generated)")
    parser.add_argument("--trials", type=positive_int, default=5, help="single requests per server (default 5)")
    parser.add_argument("--server-flag", action="append", default=[], help="extra flag for the server started here")
    parser.add_argument(
        "--engine-seconds",
        type=float,
        default=10.0,
        help="seconds per configuration of the engine alone, measured with the server's device and "
        "precision before the server starts here (default 10; 0 skips it)",
    )
    args = parser.parse_args(argv)
    if args.engine_seconds < 0:
        parser.error(f"--engine-seconds must be 0 or more, got {args.engine_seconds}")
    import os

    setup = f"{cpu_name()}, {os.cpu_count()} cores, {args.trials} trials, voice {VOICE}"
    engine: EngineAlone | None = None
    if args.ours_url:
        ours, peer = asyncio.run(run_both(args.ours_url, args.peer_url, args.trials))
    else:
        from kokoro_server.fake_weights import ensure_random_weights

        model_dir = args.model_dir or ensure_random_weights()
        flags = ("--model-dir", str(model_dir), *args.server_flag)
        if args.engine_seconds:
            engine = engine_alone(flags, args.engine_seconds)
        with tempfile.TemporaryDirectory() as logs, server(Path(logs), "ours", *flags) as port:
            ours, peer = asyncio.run(run_both(f"http://127.0.0.1:{port}", args.peer_url, args.trials))
    print(render(ours, peer, setup, engine))


def engine_alone(server_flags: Sequence[str], seconds: float) -> EngineAlone | None:
    """The engine alone in this process, before the server starts (the two would share the cores),
    with the device, precision and weights the server's flags and environment give it (None for
    the zero-cost engine): a lone synthesis with every core, the syntheses at once of
    `bench.threads`, the lone one again. The engine is dropped afterwards; its threads have ended."""
    import os

    from bench.threads import loaded_in_a_thread_that_ends, lone_and_shared
    from bench.threads import measure as measure_engine
    from kokoro_server.concurrency import usable_cores
    from kokoro_server.kokoro_engine import KokoroEngine
    from kokoro_server.loader import resolve_device
    from kokoro_server.settings import load_settings

    settings = load_settings(server_flags, os.environ)
    if settings.engine != "kokoro":
        return None
    device = resolve_device(settings.device)
    cores = usable_cores()
    engine = loaded_in_a_thread_that_ends(
        lambda: KokoroEngine.load(settings.model_dir, device=device, precision=settings.precision)
    )
    alone, shared = lone_and_shared(cores)
    before = measure_engine(engine, alone, seconds)
    together = measure_engine(engine, shared, seconds)
    after = measure_engine(engine, alone, seconds)
    return EngineAlone(device, str(alone), (before.rate, after.rate), str(shared), together.rate)


if __name__ == "__main__":
    main()
