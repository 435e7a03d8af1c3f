"""Checks that say what they found, and when they fail what to do: one line each, then one verdict.

A command (`voicestack preflight` before `pulumi up`, `voicestack verify` after it) runs its checks,
each giving an `Outcome`, and prints `report(...)`:

    PASS  credentials: account 123456789012 as arn:aws:iam::123456789012:user/deployer
    FAIL  endpoint quota: "ml.g5.xlarge for endpoint usage" is 1 in us-east-1; the stack needs 2
          fix: aws service-quotas request-service-quota-increase --region us-east-1 ...
    SKIP  model access: needs credentials
    preflight: 1 of 3 checks failed (endpoint quota)

A failed outcome always carries its fix. SKIP is for a check that could not run because an earlier
one failed; it is never a pass. The exit code is 1 when any check failed (`ExitCode.FAILED`), 0
otherwise.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final, Literal

from voicestack.errors import ExitCode

Status = Literal["PASS", "FAIL", "SKIP"]
_FIX_INDENT: Final = " " * 6


@dataclass(frozen=True, slots=True)
class Outcome:
    """What one check found; `fix` (what to do) is set exactly when it failed."""

    name: str
    status: Status
    detail: str
    fix: str | None = None

    def __post_init__(self) -> None:
        if (self.status == "FAIL") != (self.fix is not None):
            raise ValueError(f"check {self.name!r}: a failed outcome needs a fix, and only a failed one has one")

    @classmethod
    def passed(cls, name: str, detail: str) -> Outcome:
        return cls(name, "PASS", detail)

    @classmethod
    def failed(cls, name: str, detail: str, fix: str) -> Outcome:
        return cls(name, "FAIL", detail, fix)

    @classmethod
    def skipped(cls, name: str, reason: str) -> Outcome:
        return cls(name, "SKIP", reason)

    def lines(self) -> list[str]:
        head = f"{self.status}  {self.name}: {self.detail}"
        return [head] if self.fix is None else [head, f"{_FIX_INDENT}fix: {self.fix}"]


def verdict(title: str, outcomes: Sequence[Outcome]) -> str:
    """One line: how many checks failed (naming them), else how many passed."""
    failed = [outcome.name for outcome in outcomes if outcome.status == "FAIL"]
    skipped = [outcome.name for outcome in outcomes if outcome.status == "SKIP"]
    total = len(outcomes)
    if failed:
        tail = f", {len(skipped)} skipped" if skipped else ""
        return f"{title}: {len(failed)} of {total} checks failed ({', '.join(failed)}){tail}"
    if skipped:
        return (
            f"{title}: {total - len(skipped)} of {total} checks passed, {len(skipped)} skipped ({', '.join(skipped)})"
        )
    return f"{title}: all {total} checks passed"


def report(title: str, outcomes: Sequence[Outcome]) -> list[str]:
    """Every outcome's lines, then the verdict."""
    return [line for outcome in outcomes for line in outcome.lines()] + [verdict(title, outcomes)]


def exit_code(outcomes: Sequence[Outcome]) -> ExitCode:
    """FAILED when any check failed; a skipped check is not a failure by itself (its cause is one)."""
    return ExitCode.FAILED if any(outcome.status == "FAIL" for outcome in outcomes) else ExitCode.OK
