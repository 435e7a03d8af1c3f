"""What every `voicestack` command can end with: its exit code, or the error that says why it stops.

The exit codes, shared by every command so that a script can branch on them:

- 0: done (a check passed);
- 1: a check ran and failed (preflight, verify);
- 2: bad usage or configuration: the message names the flag or key and what it accepts;
- 3: the stack or a service could not be reached, or refused the call: the message names the AWS
  error code and what to do about it.

A command module raises `CommandError` (or `UsageError`); `voicestack.cli` prints its message and
exits with its code. This module imports nothing of the package, so that every command (and the
page's web server, the latency lab) can use it without importing the console's dispatcher.
"""

from __future__ import annotations

from enum import IntEnum


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
