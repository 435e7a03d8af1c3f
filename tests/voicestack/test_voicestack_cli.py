"""The `voicestack` console command: dispatch, exit codes, and the stack reader (no Pulumi CLI needed)."""

from __future__ import annotations

import argparse
import subprocess
from collections.abc import Sequence

import pytest

from voicestack.cli import main
from voicestack.errors import CommandError, ExitCode, UsageError
from voicestack.pulumi_stack import parse_config, parse_outputs, read_stack


class _Echo:
    """A command that returns the exit code it is given, or raises the error it is told to."""

    def register(self, commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
        parser = commands.add_parser("echo")
        parser.add_argument("--code", type=int, default=0)
        parser.add_argument("--unreachable", action="store_true")
        parser.set_defaults(run=self.run)

    def run(self, args: argparse.Namespace) -> int:
        if args.unreachable:
            raise CommandError(ExitCode.UNREACHABLE, "the runtime refused the call (AccessDeniedException)")
        return int(args.code)


def test_main_returns_the_commands_exit_code() -> None:
    assert main(["echo", "--code", "1"], commands=[_Echo()]) == 1
    assert main(["echo"], commands=[_Echo()]) == 0


def test_a_command_error_prints_its_message_and_returns_its_code(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["echo", "--unreachable"], commands=[_Echo()]) == 3
    assert capsys.readouterr().err == "voicestack echo: the runtime refused the call (AccessDeniedException)\n"


def test_bad_usage_exits_2_naming_the_flag(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["echo", "--code", "x"], commands=[_Echo()])
    assert exited.value.code == 2
    assert "argument --code: invalid int value: 'x'" in capsys.readouterr().err


def test_usage_error_is_exit_2() -> None:
    assert UsageError("--stack: no such stack").code is ExitCode.USAGE
    assert int(ExitCode.USAGE) == 2


def test_outputs_are_one_json_object() -> None:
    assert parse_outputs("dev", '{"agentRuntimeArn": "arn:x", "memoryId": "m"}') == {
        "agentRuntimeArn": "arn:x",
        "memoryId": "m",
    }
    with pytest.raises(UsageError, match=r"^`pulumi stack output --json` for stack 'dev' printed list, not an object$"):
        parse_outputs("dev", "[]")
    with pytest.raises(UsageError, match=r"^`pulumi stack output --json` for stack 'dev' did not print JSON: "):
        parse_outputs("dev", "warning: x")


def test_config_values_are_unwrapped() -> None:
    text = (
        '{"aws:region": {"value": "eu-west-1", "secret": false},'
        ' "voicestack:tags": {"value": "{\\"team\\":\\"voice\\"}", "objectValue": {"team": "voice"}, "secret": false},'
        ' "voicestack:alarmEmail": {"value": "[secret]", "secret": true}}'
    )
    assert parse_config("dev", text) == {
        "aws:region": "eu-west-1",
        "voicestack:tags": {"team": "voice"},
        "voicestack:alarmEmail": "[secret]",
    }


def _runner(responses: dict[str, tuple[int, str, str]]):
    calls: list[list[str]] = []

    def run(argv: Sequence[str]) -> subprocess.CompletedProcess[str]:
        calls.append(list(argv))
        code, out, err = responses[argv[1]]
        return subprocess.CompletedProcess(list(argv), code, out, err)

    return run, calls


def test_read_stack_asks_the_cli_for_outputs_then_config() -> None:
    run, calls = _runner({"stack": (0, '{"agentRuntimeArn": "arn:x"}', ""), "config": (0, "{}", "")})
    view = read_stack("dev", runner=run, pulumi="/bin/pulumi")
    assert calls == [
        ["/bin/pulumi", "stack", "output", "--json", "--stack", "dev"],
        ["/bin/pulumi", "config", "--json", "--stack", "dev"],
    ]
    assert view.output("agentRuntimeArn") == "arn:x"
    with pytest.raises(UsageError, match=r"^stack 'dev' has no output 'pageUrl' \(its outputs: agentRuntimeArn\); "):
        view.output("pageUrl")


def test_a_missing_stack_names_the_flag_and_the_cli_message() -> None:
    run, _ = _runner({"stack": (255, "", "error: no stack named 'prod' found\n")})
    expected = r"^--stack prod: `stack output --json` failed: error: no stack named 'prod' found$"
    with pytest.raises(UsageError, match=expected):
        read_stack("prod", runner=run, pulumi="/bin/pulumi")


def test_no_pulumi_cli_says_what_to_pass_instead(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(UsageError, match=r"or pass --runtime-arn and --region instead$"):
        read_stack("dev")
