"""`voicestack <command>`: one console command for what a deployer does around `pulumi up`.

Each command lives in its own module, which adds its sub-parser (`register`) and runs it. Exit
codes are shared by every command, so a script can branch on them:

- 0: done (a check passed);
- 1: a check ran and failed (preflight, verify);
- 2: bad usage or configuration: the message names the flag or key and what it accepts;
- 3: the stack or a service could not be reached, or refused the call: the message names the AWS
  error code and what to do about it.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from enum import IntEnum
from typing import Protocol


class ExitCode(IntEnum):
    OK = 0
    FAILED = 1
    USAGE = 2
    UNREACHABLE = 3


class CommandError(Exception):
    """A command cannot go on; `code` is the exit code and the message says what to do."""

    def __init__(self, code: ExitCode, message: str) -> None:
        super().__init__(message)
        self.code = code


class UsageError(CommandError):
    """Bad usage or configuration (exit 2); the message names the flag or key."""

    def __init__(self, message: str) -> None:
        super().__init__(ExitCode.USAGE, message)


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
