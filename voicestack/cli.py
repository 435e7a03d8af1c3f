"""`voicestack <command>`: one console command for what a deployer does around `pulumi up`.

Each command lives in its own module, which adds its sub-parser (`register`) and runs it, and
raises `voicestack.errors.CommandError` when it cannot go on: its message is printed and its exit
code returned (0 done, 1 a check failed, 2 bad usage naming the flag, 3 unreachable or refused
naming the AWS error code; `voicestack.errors`). Command modules import nothing from here.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from typing import Protocol

from voicestack.errors import CommandError

Run = Callable[[argparse.Namespace], int]


class Command(Protocol):
    """A command module: adds its sub-parser, whose `run` default is what runs it."""

    def register(self, commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None: ...


def _commands() -> list[Command]:
    # Imported here, not at module level: `voicestack --help` should not pay for every command's
    # dependencies (boto3, websockets), and one command's import cannot break the others' tests.
    from voicestack import preflight, talk, users

    return [talk, preflight, users]


def build_parser(commands: Sequence[Command] | None = None) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="voicestack", description=__doc__.splitlines()[0] if __doc__ else None)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for command in _commands() if commands is None else commands:
        command.register(sub)
    return parser


def main(argv: Sequence[str] | None = None, commands: Sequence[Command] | None = None) -> int:
    """Parses `argv`, runs the command, and turns a `CommandError` into its message and exit code."""
    args = build_parser(commands).parse_args(argv)
    run: Run = args.run
    try:
        return run(args)
    except CommandError as exc:
        print(f"voicestack {args.command}: {exc}", file=sys.stderr)
        return int(exc.code)
