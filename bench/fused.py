"""Kokoro's modules as published beside the server's fused ones: `python -m bench.fused` (`make bench-fused`).

The engine alone, in this process, on the full-size Kokoro-82M (random weights unless
`--model-dir`): two engines loaded from the same checkpoint, one with `fused=False`. For each
intra-op thread count (all cores: a lone session; 1: two at a time on 2 cores), `--rounds` rounds
synthesize the benchmark's four sentences on both engines, alternating which goes first, so a drift
of the machine falls on both. Two measures per engine, medians over the rounds:
- whole sentences: compute seconds per audio second (a real-time factor);
- the first piece of a first chunk, as a lone listener waits for it at an unmeasured speed (the
  default 0.9 s window moved back to a word end, `WindowPlan.at_word_end`): seconds.
And the largest difference between the two engines' PCM samples (same noise draws), in PCM steps.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Final

import numpy as np

from bench.threads import SENTENCES
from kokoro_server.concurrency import usable_cores, use_intra_op_threads
from kokoro_server.vocoder_speed import VocoderSpeed

if TYPE_CHECKING:
    from kokoro_server.kokoro_engine import KokoroEngine


@dataclass(frozen=True, slots=True)
class Round:
    """One engine's round: compute and audio seconds over the sentences, and its first piece's seconds."""

    compute_s: float
    audio_s: float
    first_piece_s: float

    @property
    def rtf(self) -> float:
        return self.compute_s / self.audio_s


MEASURES: Final[tuple[tuple[str, str, Callable[[Round], float]], ...]] = (
    ("whole sentences, s per audio s", "", lambda r: r.rtf),
    ("first piece of a first chunk", " s", lambda r: r.first_piece_s),
)
"""Each table row's label, unit and the figure it takes from a round."""


@dataclass(frozen=True, slots=True)
class Row:
    threads: int
    published: list[Round]
    fused: list[Round]
    max_pcm_step: int


def one_round(engine: KokoroEngine) -> Round:
    """The four sentences synthesized whole, then a first chunk's first piece at an unmeasured speed."""
    compute = audio = 0.0
    for sentence in SENTENCES:
        started = time.perf_counter()
        chunk = engine.synthesize(sentence, engine.default_voice, 1.0)
        compute += time.perf_counter() - started
        audio += chunk.duration_s
    engine.vocoder_speed = VocoderSpeed()  # unmeasured: both engines cut the same first window (the default)
    started = time.perf_counter()
    pieces = engine.synthesize_pieces(SENTENCES[0], engine.default_voice, 1.0)
    next(pieces)
    first = time.perf_counter() - started
    del pieces  # the rest of the chunk is not needed
    return Round(compute_s=compute, audio_s=audio, first_piece_s=first)


def max_pcm_step(published: KokoroEngine, fused: KokoroEngine) -> int:
    """The largest sample difference between the engines' PCM for the sentences, same noise draws."""
    import torch

    worst = 0
    for sentence in SENTENCES:
        pcm = []
        for engine in (published, fused):
            torch.manual_seed(1)
            raw = engine.synthesize(sentence, engine.default_voice, 1.0).pcm
            pcm.append(np.frombuffer(raw, dtype=np.int16).astype(np.int32))
        if pcm[0].shape != pcm[1].shape:
            raise AssertionError(f"the engines made {pcm[0].size} and {pcm[1].size} samples for {sentence!r}")
        worst = max(worst, int(np.abs(pcm[0] - pcm[1]).max()))
    return worst


def render(rows: Sequence[Row], setup: str) -> str:
    """One table: medians per engine and the fused / published ratio of each measure. Pure."""
    lines = [
        setup,
        "",
        "| threads | measure | published | fused | fused / published |",
        "|---|---|---|---|---|",
    ]
    for row in rows:
        for label, unit, measure in MEASURES:
            a = statistics.median(measure(r) for r in row.published)
            b = statistics.median(measure(r) for r in row.fused)
            lines.append(f"| {row.threads} | {label} | {a:.3f}{unit} | {b:.3f}{unit} | {b / a:.3f} |")
    steps = ", ".join(f"{row.max_pcm_step} at {row.threads} thread{'s' if row.threads > 1 else ''}" for row in rows)
    lines += ["", f"largest PCM difference (int16 steps, same noise draws): {steps}"]
    return "\n".join(lines)


def positive_rounds(raw: str) -> int:
    try:
        value = int(raw)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--rounds must be a whole number from 1, got {raw!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"--rounds must be a whole number from 1, got {raw!r}")
    return value


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model-dir", type=Path, help="weights (default: the generated random-weight checkpoint)")
    parser.add_argument("--rounds", type=positive_rounds, default=5, help="rounds per thread count (default 5)")
    args = parser.parse_args(argv)
    from bench.peers import cpu_name
    from kokoro_server.fake_weights import ensure_random_weights
    from kokoro_server.kokoro_engine import KokoroEngine

    model_dir = args.model_dir or ensure_random_weights()
    published = KokoroEngine.load(model_dir, fused=False)
    fused = KokoroEngine.load(model_dir)
    cores = usable_cores()
    rows = []
    for threads in dict.fromkeys((cores, 1)):
        use_intra_op_threads(threads)
        for engine in (published, fused):
            one_round(engine)  # warm-up at this thread count
        rounds: tuple[list[Round], list[Round]] = ([], [])
        for number in range(args.rounds):
            for which in (0, 1) if number % 2 == 0 else (1, 0):
                rounds[which].append(one_round((published, fused)[which]))
        rows.append(Row(threads, *rounds, max_pcm_step(published, fused)))
    print(render(rows, f"{cpu_name()}, {cores} usable cores, {args.rounds} rounds per thread count"))


if __name__ == "__main__":
    main()
