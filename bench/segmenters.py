"""Sentence segmenters for the voice, compared: exact-match score and CPU cost per delta.

For each candidate splitter (pySBD always; sentencex, blingfire and nupunkt when installed):
- `whole`: the library on the whole text, the way its own benchmarks score it;
- `driven`: the library behind this project's incremental driver (`SentenceSegmenter` with that
  splitter), fed whole and fed one character at a time (the two must agree);
- the CPU cost of the driven segmenter per delta, over a long answer fed token by token: mean and
  the largest single delta.
Cases: this project's own (`bench/segmenter_cases.py`), plus pySBD's English golden rules when given
a local copy of `benchmarks/english_golden_rules.py` from its repository (not shipped here):

    python -m bench.segmenters [--golden PATH] [--repeat N]
"""

from __future__ import annotations

import argparse
import ast
import functools
import importlib
import re
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from agent_app.segmenter import SegmenterConfig, SentenceSegmenter, Splitter, new_pysbd_splitter
from agent_app.spoken import SpokenSegmenter
from bench.segmenter_cases import CASES, Case
from bench.texts import LONG_ANSWER

SCORING = SegmenterConfig(min_chars=1, max_chars=2000)
"""No merging of short sentences and no length cuts: sentences only, as the cases state them."""


@dataclass(frozen=True, slots=True)
class Score:
    whole: int
    driven: int
    driven_by_character: int
    total: int


def load_golden(path: Path) -> list[Case]:
    """`GOLDEN_EN_RULES` from pySBD's file, read as data (the file is not imported or executed)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(target, ast.Name) and target.id == "GOLDEN_EN_RULES" for target in node.targets
        ):
            rules: list[Case] = ast.literal_eval(node.value)
            return rules
    raise SystemExit(f"{path}: no GOLDEN_EN_RULES list found")


def available_splitters() -> dict[str, Splitter]:
    # No cache for pySBD: the cost column measures the splitter, not the cache.
    splitters: dict[str, Splitter] = {"pysbd 0.3.4": new_pysbd_splitter(cache_size=0)}
    optional: dict[str, Callable[[Any], Splitter]] = {
        "sentencex": lambda module: lambda text: list(module.segment("en", text)),
        "blingfire": lambda module: lambda text: module.text_to_sentences(text).split("\n"),
        "nupunkt": lambda module: lambda text: list(module.sent_tokenize(text)),
    }
    for name, wrap in optional.items():
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                module = importlib.import_module(name)
        except ImportError:
            print(f"{name}: not installed, skipped")
            continue
        splitters[name] = wrap(module)
    return splitters


def driven(splitter: Splitter, text: str, *, by_character: bool = False) -> list[str]:
    segmenter = SentenceSegmenter(SCORING, splitter=splitter)
    deltas: Sequence[str] = list(text) if by_character else [text]
    chunks = [chunk for delta in deltas for chunk in segmenter.feed(delta)]
    return chunks + segmenter.finish()


def score(splitter: Splitter, cases: list[Case]) -> Score:
    whole = sum([s.strip() for s in splitter(text) if s.strip()] == expected for text, expected in cases)
    fed_whole = sum(driven(splitter, text) == expected for text, expected in cases)
    fed_by_character = sum(driven(splitter, text, by_character=True) == expected for text, expected in cases)
    return Score(whole, fed_whole, fed_by_character, len(cases))


def tokens(text: str) -> list[str]:
    """Deltas the size of a model's tokens: a word with its leading space, or a punctuation mark."""
    return re.findall(r"\s*[\w']+|\s*[^\w\s]", text)


class _Segments(Protocol):
    def feed(self, delta: str) -> list[str]: ...
    def finish(self) -> list[str]: ...


def cost_per_delta(make: Callable[[], _Segments], answer: str, repeat: int) -> tuple[float, float, int]:
    """Mean CPU milliseconds per delta, the largest single delta's wall milliseconds, and the deltas."""
    deltas = tokens(answer)
    worst = 0.0
    cpu_start = time.process_time()
    for _ in range(repeat):
        segmenter = make()
        for delta in deltas:
            start = time.perf_counter()
            segmenter.feed(delta)
            worst = max(worst, time.perf_counter() - start)
        segmenter.finish()
    cpu = time.process_time() - cpu_start
    return cpu / (repeat * len(deltas)) * 1000, worst * 1000, len(deltas)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--golden", type=Path, help="local copy of pySBD's benchmarks/english_golden_rules.py")
    parser.add_argument("--repeat", type=int, default=2, help="passes over the long answer for the cost")
    args = parser.parse_args()

    sets = {"own cases": CASES}
    if args.golden is not None:
        sets["golden rules"] = load_golden(args.golden)
    answer = " ".join([LONG_ANSWER] * 4)
    splitters = available_splitters()
    print(f"long answer: {len(answer)} characters, {len(tokens(answer))} token deltas; cost with the default config")
    header = f"{'splitter':<12} " + " ".join(f"{name + ': whole / driven / by char':>40}" for name in sets)
    print(header + f" {'CPU ms/delta':>13} {'worst ms':>9}")
    for name, splitter in splitters.items():
        cells = []
        for cases in sets.values():
            result = score(splitter, cases)
            cells.append(f"{result.whole:>2} / {result.driven:>2} / {result.driven_by_character:>2} of {result.total}")
        mean, worst, _ = cost_per_delta(functools.partial(SentenceSegmenter, splitter=splitter), answer, args.repeat)
        print(f"{name:<12} " + " ".join(f"{cell:>40}" for cell in cells) + f" {mean:>13.3f} {worst:>9.2f}")
    pysbd = new_pysbd_splitter(cache_size=0)
    mean, worst, _ = cost_per_delta(functools.partial(SpokenSegmenter, splitter=pysbd), answer, args.repeat)
    print(f"the agent's chain (markdown to spoken text, then pySBD): {mean:.3f} CPU ms per delta, worst {worst:.2f} ms")


if __name__ == "__main__":
    main()
