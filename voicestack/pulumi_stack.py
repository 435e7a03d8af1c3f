"""A deployed stack's outputs and configuration, read through the Pulumi CLI.

Commands that act on a stack (`--stack NAME`) read its outputs (`pulumi stack output --json`) and
its configuration (`pulumi config --json`) here, never from Pulumi's state files: the CLI knows
where the state lives (Pulumi Cloud, S3, a local backend) and how to decrypt it. The parsing is
pure, so it is tested without the CLI.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from voicestack.errors import UsageError

Runner = Callable[[Sequence[str]], "subprocess.CompletedProcess[str]"]
"""Runs a command line and returns its completed process (text mode, output captured)."""


def run_cli(argv: Sequence[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(argv), capture_output=True, text=True, check=False)


@dataclass(frozen=True, slots=True)
class StackView:
    """What one Pulumi stack says of itself: its outputs and its configuration (`namespace:key`)."""

    name: str
    outputs: Mapping[str, Any]
    config: Mapping[str, Any]

    def output(self, key: str) -> Any:
        """One output; a `UsageError` naming the stack and the key when the stack has none."""
        if key not in self.outputs:
            known = ", ".join(sorted(self.outputs)) or "none"
            raise UsageError(
                f"stack {self.name!r} has no output {key!r} (its outputs: {known}); run `pulumi up` on it first"
            )
        return self.outputs[key]


def parse_outputs(stack: str, text: str) -> dict[str, Any]:
    """`pulumi stack output --json`: one JSON object of output name to value."""
    return _json_object(stack, "pulumi stack output --json", text)


def parse_config(stack: str, text: str) -> dict[str, Any]:
    """`pulumi config --json`: `{"ns:key": {"value": ..., "secret": bool}}` to `{"ns:key": value}`.

    A secret shows as `"[secret]"` unless `--show-secrets` was given; objects keep their JSON value
    (`objectValue`, which the CLI adds for structured config) when there is one.
    """
    raw = _json_object(stack, "pulumi config --json", text)
    values: dict[str, Any] = {}
    for key, entry in raw.items():
        if not isinstance(entry, dict):
            raise UsageError(f"`pulumi config --json` for stack {stack!r}: {key!r} is not an object")
        values[key] = entry["objectValue"] if "objectValue" in entry else entry.get("value")
    return values


def _json_object(stack: str, command: str, text: str) -> dict[str, Any]:
    try:
        parsed = json.loads(text)
    except ValueError as exc:
        raise UsageError(f"`{command}` for stack {stack!r} did not print JSON: {exc}") from None
    if not isinstance(parsed, dict):
        raise UsageError(f"`{command}` for stack {stack!r} printed {type(parsed).__name__}, not an object")
    return parsed


def read_stack(stack: str, *, runner: Runner = run_cli, pulumi: str | None = None) -> StackView:
    """The stack's outputs and configuration; `UsageError` (exit 2) when the CLI or the stack is missing."""
    binary = pulumi or shutil.which("pulumi")
    if binary is None:
        raise UsageError(
            "--stack needs the Pulumi CLI, which is not on the PATH (https://www.pulumi.com/docs/install/); "
            "or pass --runtime-arn and --region instead"
        )
    outputs = parse_outputs(stack, _run(runner, [binary, "stack", "output", "--json", "--stack", stack], stack))
    config = parse_config(stack, _run(runner, [binary, "config", "--json", "--stack", stack], stack))
    return StackView(name=stack, outputs=outputs, config=config)


def _run(runner: Runner, argv: list[str], stack: str) -> str:
    done = runner(argv)
    if done.returncode != 0:
        detail = (done.stderr or done.stdout).strip().splitlines()
        last = detail[-1] if detail else f"exit status {done.returncode}"
        raise UsageError(f"--stack {stack}: `{' '.join(argv[1:4])}` failed: {last}")
    return done.stdout
