"""How a first chunk's windows play at a given vocoder speed: `python -m bench.windows` (`make bench-windows`).

The speech server cuts a first chunk's vocoder work into windows (`kokoro_server.windowed`). The
sized plan (the server's) cuts each later window as long as the vocoder, at its measured speed, can
make it before the listener's buffered audio runs out, when that plays the rest of the chunk without
a gap, and the first one as short as allows that; the fixed plan (before it) cuts 0.9 s, then 3 s.
This plays both through the session's own `PlaybackClock` on a simulated clock, for the vocoder
speeds given (seconds per vocoded input step, contexts included), and prints the first window,
the windows, and the silence a listener would hear, so that machines this one is not (a laptop, a
GPU) can be read off the real planning code. `--measure` first measures this machine's speed on the
full-size model (random weights unless `--model-dir`) the way the server does.

Only the vocoder is simulated, and the work between the first window and the second
(`WindowPlan.handover_steps` of vocoder time: the rest of the chunk's frame-rate layers); the text
encoder, the first window's frame-rate layers and the network come on top of the first window's
work, the same for both plans.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Literal

from kokoro_server.schedule import PlaybackClock
from kokoro_server.windowed import STEP_S, WindowPlan

Plan = Literal["fixed", "sized"]
PLANS: Final[tuple[Plan, ...]] = ("fixed", "sized")
DEFAULT_SPEEDS: Final = (0.0005, 0.002, 0.004, 0.006, 0.0095, 0.02)
"""Seconds per vocoded step: a GPU-like engine, faster and slower CPUs, this 2-core CPU (0.0095 in
the server), one slower than real time."""
DEFAULT_CHUNKS_S: Final = (3.0, 5.0)
"""A first chunk's audio: the server cuts a first chunk at a clause, 30 to 60 characters."""


@dataclass(frozen=True, slots=True)
class Played:
    """One first chunk's windows as a listener hears them."""

    windows: tuple[int, ...]
    """Input steps per window, in order."""
    first_work_s: float
    """The first window's vocoder work (its first audio, less what comes before the vocoder)."""
    underruns: int
    silence_s: float


def play(plan: WindowPlan, kind: Plan, steps: int, s_per_step: float) -> Played:
    """The windows `kind` cuts for a chunk of `steps` at `s_per_step`, played from the moment the
    first one is ready; each later window starts when the one before was delivered. Pure."""
    if kind == "fixed":
        windows = [end - start for start, end in plan.windows(steps)]
    else:
        first = plan.first_for(0, steps, s_per_step)
        windows = [plan.first_window(steps, first)]
    clock, now = PlaybackClock(), s_per_step * plan.vocoded_steps(0, windows[0], steps)
    first_work = now
    clock.delivered(now, windows[0] * STEP_S)
    now += s_per_step * plan.handover_steps  # the rest of the chunk's frame-rate layers, before the second window
    position, index, underruns, silence = windows[0], 1, 0, 0.0
    while position < steps:
        if kind == "fixed":
            size = windows[index]
        else:
            size = plan.next_steps(steps - position, clock.ahead_s(now), s_per_step)
            windows.append(size)
        now += s_per_step * plan.vocoded_steps(position, position + size, steps)
        if clock.ends_at is not None and now > clock.ends_at:
            underruns, silence = underruns + 1, silence + now - clock.ends_at
        clock.delivered(now, size * STEP_S)
        position, index = position + size, index + 1
    return Played(tuple(windows), first_work, underruns, silence)


def render(plan: WindowPlan, speeds: Sequence[float], chunks_s: Sequence[float], measured: str | None) -> list[str]:
    """A markdown table: per speed and chunk, each plan's first window, windows and silence. Pure."""
    lines = [
        "First-chunk windows by vocoder speed (simulated with the server's planner and playback clock;"
        " the encoder, frame-rate layers and network come on top of the first window's work)",
    ]
    if measured is not None:
        lines.append(measured)
    lines += [
        "",
        "| s per step | vocoder RTF | chunk s | plan | first window s | its work s | windows (steps) | underruns"
        " | silence s |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for speed in speeds:
        for chunk_s in chunks_s:
            steps = round(chunk_s / STEP_S)
            for kind in PLANS:
                played = play(plan, kind, steps, speed)
                lines.append(
                    f"| {speed:g} | {speed / STEP_S:.2f} | {chunk_s:g} | {kind} | {played.windows[0] * STEP_S:.2f} |"
                    f" {played.first_work_s:.2f} | {' '.join(str(w) for w in played.windows)} |"
                    f" {played.underruns} | {played.silence_s:.2f} |"
                )
    return lines


def measure_speed(model_dir: Path | None) -> float:
    """This machine's vocoder speed as the server measures it: the engine's running average over the
    windows of two first chunks (the first one warms up). A lone chunk's plan counts on the slower of
    this and its recent first windows' slowest (`VocoderSpeed.alone`): on a quiet machine, about this."""
    from bench.texts import FOUR_SENTENCES
    from kokoro_server.fake_weights import ensure_random_weights
    from kokoro_server.kokoro_engine import KokoroEngine

    engine = KokoroEngine.load(ensure_random_weights() if model_dir is None else model_dir)
    text = FOUR_SENTENCES.split(".")[0] + "."
    for _ in range(2):
        for _piece in engine.synthesize_pieces(text, engine.default_voice, 1.0):
            pass
    speed = engine.vocoder_speed.typical
    if speed is None:
        raise RuntimeError("the engine measured no window")
    return speed


def positive_floats(raw: str) -> tuple[float, ...]:
    try:
        values = tuple(float(part) for part in raw.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated numbers, got {raw!r}") from None
    if not values or not all(v > 0 for v in values):
        raise argparse.ArgumentTypeError(f"every value must be > 0, got {raw!r}")
    return values


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.windows", description=__doc__.splitlines()[0])
    parser.add_argument("--speeds", type=positive_floats, default=DEFAULT_SPEEDS, help="s per vocoded step")
    parser.add_argument("--chunks", type=positive_floats, default=DEFAULT_CHUNKS_S, help="first chunks' audio, s")
    parser.add_argument("--measure", action="store_true", help="also measure this machine's speed and add it")
    parser.add_argument("--model-dir", type=Path, help="--measure: weights (default: generated random weights)")
    args = parser.parse_args(argv)
    speeds, measured = list(args.speeds), None
    if args.measure:
        import os

        from bench.peers import cpu_name

        speed = measure_speed(args.model_dir)
        measured = f"measured here ({cpu_name()}, {os.cpu_count()} cores): {speed:.4f} s per vocoded step"
        speeds = sorted({*speeds, round(speed, 4)})
    print("\n".join(render(WindowPlan(), speeds, args.chunks, measured)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
