"""The benchmark behind the concurrency rule: `python -m bench.threads` (`make bench-threads`).

The engine alone (no server, no sockets), in this process, on the full-size Kokoro-82M (random
weights unless `--model-dir`): for each configuration of syntheses at once x intra-op threads
each, every synthesis thread synthesizes the benchmark's sentences back to back for `--seconds`,
and the table gives the audio seconds made per wall second, side by side in one run. It is what
`kokoro_server.concurrency` is derived from:
- `1 x all cores` is a lone session's speed (its real-time factor is the inverse);
- `2 x 1` (on 2 cores) against it is the throughput that running two at a time gains;
- `2 x all cores` shows what oversubscribing the cores costs or gains.

`--busy F` runs the same beside another process that keeps F of one core busy (busy for F of every
10 ms, asleep the rest), the way a browser or an agent shares a laptop's cores with the model: a
multi-thread synthesis waits at every barrier for whichever of its threads that process preempted,
single-thread ones do not (images/kokoro/README.md, Performance: why the page's model slows, and the
session look-ahead this suggested, measured in the page and not adopted).
"""

from __future__ import annotations

import argparse
import multiprocessing
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from multiprocessing.process import BaseProcess
from pathlib import Path
from typing import Final

from bench.texts import FOUR_SENTENCES
from kokoro_server.concurrency import usable_cores, use_intra_op_threads
from kokoro_server.engine import SpeechEngine

SENTENCES: Final = tuple(s.strip() + "." for s in FOUR_SENTENCES.split(".") if s.strip())


@dataclass(frozen=True, slots=True)
class Config:
    jobs: int
    threads: int

    def __str__(self) -> str:
        return f"{self.jobs} x {self.threads}"


@dataclass(frozen=True, slots=True)
class Outcome:
    config: Config
    audio_s: float
    wall_s: float

    @property
    def rate(self) -> float:
        """Audio seconds made per wall second, all syntheses together."""
        return self.audio_s / self.wall_s


def lone_and_shared(cores: int) -> tuple[Config, Config]:
    """A lone session's configuration on `cores` cores (every core) and two syntheses sharing them. Pure."""
    return Config(1, cores), Config(2, max(1, cores // 2))


def configs(cores: int) -> list[Config]:
    """The configurations compared on `cores` cores, the lone session's first and last (so that a
    drift of the machine during the run shows as two different figures for it). Pure."""
    lone, shared = lone_and_shared(cores)
    rest = [shared, Config(2, cores), Config(1, 1)]
    return [lone, *dict.fromkeys(c for c in rest if c != lone), lone]


def measure(engine: SpeechEngine, config: Config, seconds: float) -> Outcome:
    """`config.jobs` threads, each with `config.threads` intra-op threads, synthesizing for `seconds`."""
    audio = [0.0] * config.jobs
    ready = threading.Barrier(config.jobs + 1)
    """Every thread has its intra-op threads set (the first one imports torch) before the clock starts."""
    stop_at = [0.0]
    go = threading.Event()

    def work(slot: int) -> None:
        use_intra_op_threads(config.threads)
        ready.wait()
        go.wait()
        turn = slot
        while time.perf_counter() < stop_at[0]:
            audio[slot] += engine.synthesize(SENTENCES[turn % len(SENTENCES)], engine.default_voice, 1.0).duration_s
            turn += 1

    workers = [threading.Thread(target=work, args=(slot,)) for slot in range(config.jobs)]
    for worker in workers:
        worker.start()
    ready.wait()
    started = time.perf_counter()
    stop_at[0] = started + seconds
    go.set()
    for worker in workers:
        worker.join()
    return Outcome(config, sum(audio), time.perf_counter() - started)


def loaded_in_a_thread_that_ends[E: SpeechEngine](load: Callable[[], E]) -> E:
    """The engine `load` makes, warmed up, in a thread that then ends, as the server does: its
    intra-op team ends with it. One left behind (this process's first thread, had it loaded the
    model) would put the measured threads' teams over the cores, and GNU OpenMP then puts idle
    threads to sleep at once: `1 x all cores` measured 4.54 audio-s/s that way, 5.14 without, on the
    AVX-512 VM (kokoro_server.concurrency)."""
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="engine-load") as loading:
        engine = loading.submit(_load_and_warm_up, load).result()  # its error, if any, raised here
    return engine  # the pool's thread has ended: `with` joined it


def _load_and_warm_up[E: SpeechEngine](load: Callable[[], E]) -> E:
    use_intra_op_threads(usable_cores())
    engine = load()
    engine.synthesize(SENTENCES[0], engine.default_voice, 1.0)  # warm-up
    return engine


BUSY_PERIOD_S: Final = 0.01


def busy_loop(duty: float) -> None:
    """Keep `duty` of one core busy, forever: busy for that share of every `BUSY_PERIOD_S`, asleep the rest."""
    while True:
        started = time.perf_counter()
        while time.perf_counter() - started < duty * BUSY_PERIOD_S:
            pass
        time.sleep((1 - duty) * BUSY_PERIOD_S)


@contextmanager
def background_load(duty: float) -> Iterator[BaseProcess | None]:
    """Another process keeping `duty` of a core busy while the block runs (none when `duty` is 0)."""
    if duty == 0:
        yield None
        return
    process = multiprocessing.get_context("spawn").Process(target=busy_loop, args=(duty,), daemon=True)
    process.start()
    try:
        yield process
    finally:
        process.terminate()
        process.join(timeout=5)


def busy_fraction(raw: str) -> float:
    """The `--busy` value: a share of one core in [0, 0.95]."""
    try:
        value = float(raw)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--busy must be a number from 0 to 0.95, got {raw!r}") from None
    if not 0 <= value <= 0.95:
        raise argparse.ArgumentTypeError(f"--busy must be a number from 0 to 0.95, got {raw!r}")
    return value


def render(outcomes: Sequence[Outcome], setup: str) -> str:
    """One table: each configuration's rate and its ratio to the first (a lone session). Pure."""
    base = outcomes[0].rate
    lines = [setup, "", "| syntheses x threads | audio-s per s | vs 1 alone |", "|---|---|---|"]
    lines += [f"| {o.config} | {o.rate:.3f} | {o.rate / base:.2f} |" for o in outcomes]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model-dir", type=Path, help="weights (default: the generated random-weight checkpoint)")
    parser.add_argument("--seconds", type=float, default=15.0, help="seconds per configuration (default 15)")
    parser.add_argument(
        "--busy", type=busy_fraction, default=0.0, help="share of a core another process keeps busy meanwhile (0)"
    )
    args = parser.parse_args(argv)
    if args.seconds <= 0:
        parser.error(f"--seconds must be positive, got {args.seconds}")
    from bench.peers import cpu_name
    from kokoro_server.fake_weights import ensure_random_weights
    from kokoro_server.kokoro_engine import KokoroEngine

    cores = usable_cores()
    engine = loaded_in_a_thread_that_ends(lambda: KokoroEngine.load(args.model_dir or ensure_random_weights()))
    with background_load(args.busy):
        outcomes = [measure(engine, config, args.seconds) for config in configs(cores)]
    beside = f"; another process keeping {args.busy:.0%} of a core busy" if args.busy else ""
    print(render(outcomes, f"{cpu_name()}, {cores} usable cores, {args.seconds:g} s per configuration{beside}"))


if __name__ == "__main__":
    main()
