"""`python -m bench.paced_speech`: the speech container's server on the zero-cost engine, paced like a model.

The same app, settings and uvicorn configuration as `python -m kokoro_server` (it takes every flag of
it, and requires `--engine zero`), but the engine is `ZeroCostEngine` with a compute cost: `--rtf`
seconds per second of audio (0.5: a second of audio takes half a second), `--seconds-per-char` of
audio per character of text. The engine sleeps instead of computing (the sleep releases the GIL, as
torch does), so a benchmark of the whole local chain keeps a model's timing shape while costing
almost no CPU on a small machine that others share.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Sequence

import uvicorn

from kokoro_server.__main__ import server_config
from kokoro_server.engine import ZeroCostEngine
from kokoro_server.settings import SettingsError, load_settings

DEFAULT_RTF = 0.5
DEFAULT_SECONDS_PER_CHAR = 0.06
"""The zero-cost engine's default: about the real model's speaking rate."""


def positive_float(raw: str) -> float:
    value = float(raw)
    if not value > 0:  # also refuses NaN
        raise argparse.ArgumentTypeError(f"must be > 0, got {raw}")
    return value


def pacing_args(rtf: float, seconds_per_char: float) -> tuple[str, ...]:
    """This module's own flags, as a launcher appends them to the speech server's."""
    return ("--rtf", repr(rtf), "--seconds-per-char", repr(seconds_per_char))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.paced_speech",
        description=__doc__.splitlines()[0],
        epilog="Every other flag is the speech server's (python -m kokoro_server --help).",
    )
    parser.add_argument("--rtf", type=positive_float, default=DEFAULT_RTF, help="compute s per audio s (%(default)s)")
    parser.add_argument(
        "--seconds-per-char", type=positive_float, default=DEFAULT_SECONDS_PER_CHAR, help="audio s per character"
    )
    args, server_argv = parser.parse_known_args(sys.argv[1:] if argv is None else argv)
    try:
        settings = load_settings(server_argv, os.environ)
    except SettingsError as exc:
        print(f"bench.paced_speech: {exc}", file=sys.stderr)
        return 2
    if settings.engine != "zero":
        print(
            f"bench.paced_speech: needs --engine zero (got {settings.engine!r}): it paces the zero-cost engine",
            file=sys.stderr,
        )
        return 2
    logging.basicConfig(level=settings.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    engine = ZeroCostEngine(seconds_per_char=args.seconds_per_char, compute_s_per_char=args.seconds_per_char * args.rtf)
    uvicorn.Server(server_config(settings, engine)).run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
