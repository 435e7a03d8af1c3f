"""voicestack/checks.py: one line per outcome (a fix under each failure), one verdict, the exit code."""

from __future__ import annotations

import pytest

from voicestack.checks import Outcome, exit_code, report, verdict
from voicestack.errors import ExitCode
from voicestack.tool_checks import parse_aws_cli_version, parse_buildx_platforms, parse_pulumi_version


def test_a_failure_is_its_line_and_its_fix_under_it() -> None:
    failed = Outcome.failed("endpoint quota", "is 1; needs 2", "aws service-quotas request-service-quota-increase ...")
    assert failed.lines() == [
        "FAIL  endpoint quota: is 1; needs 2",
        "      fix: aws service-quotas request-service-quota-increase ...",
    ]
    assert Outcome.passed("credentials", "account 1").lines() == ["PASS  credentials: account 1"]
    assert Outcome.skipped("model access", "needs credentials").lines() == ["SKIP  model access: needs credentials"]


@pytest.mark.parametrize(("status", "fix"), [("FAIL", None), ("PASS", "do this"), ("SKIP", "do this")])
def test_a_fix_exactly_on_failures(status: str, fix: str | None) -> None:
    with pytest.raises(ValueError, match="a failed outcome needs a fix, and only a failed one has one"):
        Outcome("x", status, "detail", fix)  # type: ignore[arg-type]


def test_the_verdict_names_what_failed_then_what_was_skipped() -> None:
    ok, bad, skipped = Outcome.passed("a", "."), Outcome.failed("b", ".", "fix b"), Outcome.skipped("c", "needs b")
    assert verdict("preflight", [ok, ok]) == "preflight: all 2 checks passed"
    assert verdict("preflight", [ok, bad, skipped]) == "preflight: 1 of 3 checks failed (b), 1 skipped"
    assert verdict("verify", [ok, skipped]) == "verify: 1 of 2 checks passed, 1 skipped (c)"
    assert report("preflight", [ok, bad]) == [
        "PASS  a: .",
        "FAIL  b: .",
        "      fix: fix b",
        "preflight: 1 of 2 checks failed (b)",
    ]


def test_the_exit_code_is_failed_only_when_a_check_failed() -> None:
    assert exit_code([Outcome.passed("a", ".")]) is ExitCode.OK
    assert exit_code([Outcome.passed("a", "."), Outcome.skipped("c", ".")]) is ExitCode.OK
    assert exit_code([Outcome.failed("b", ".", "fix")]) is ExitCode.FAILED


def test_tool_versions_and_platforms_are_parsed_from_what_the_tools_print() -> None:
    assert str(parse_pulumi_version("v3.272.0\n")) == "3.272.0"
    assert str(parse_pulumi_version("v3.273.0-alpha.x1234\n")) == "3.273.0"
    assert parse_pulumi_version("warning: A new version of Pulumi is available") is None
    assert str(parse_aws_cli_version("aws-cli/2.31.13 Python/3.13.7 Linux/6.8.0 exe/x86_64.ubuntu.24")) == "2.31.13"
    assert parse_aws_cli_version("command not found") is None
    two_nodes = "Platforms: linux/amd64*, linux/arm64\nName: b\nPlatforms: linux/arm64, linux/riscv64\n"
    assert parse_buildx_platforms(two_nodes) == ("linux/amd64", "linux/arm64", "linux/riscv64")
    assert parse_buildx_platforms("Name: default\nStatus: inactive\n") == ()
