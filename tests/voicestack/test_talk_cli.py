"""`voicestack talk`'s command line: every bad usage exits 2 naming the flag, before any connection."""

from __future__ import annotations

from pathlib import Path

import pytest

from voicestack.cli import build_parser, main

ARN = "arn:aws:bedrock-agentcore:us-east-1:000000000000:runtime/voicestack_local-localstand"


@pytest.fixture(autouse=True)
def no_aws(aws_home: Path) -> None:
    """Every test here runs without this machine's AWS configuration."""


def usage(args: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    assert main(["talk", *args]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    return captured.err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--runtime-arn", "arn:aws:bedrock-agentcore:us-east-1:1:runtime/x", "q"], "--runtime-arn: 'arn:aws:"),
        (
            ["--runtime-arn", ARN, "--region", "eu-west-1", "q"],
            f"--region eu-west-1 is not the runtime's region: {ARN} is in us-east-1",
        ),
        (["--runtime-arn", ARN, "--qualifier", "9x", "q"], "--qualifier: qualifier '9x' must match "),
        (
            ["--session", "short", "q"],
            "--session 'short': a conversation's session id is 33 to 100 characters matching "
            "[a-zA-Z0-9][a-zA-Z0-9-_]* (what AgentCore Runtime and AgentCore Memory both accept)",
        ),
        (["--session", "a" * 101, "q"], f"--session '{'a' * 101}': a conversation's session id is 33 to 100 "),
        (["--session", "_" + "a" * 40, "q"], f"--session '_{'a' * 40}': a conversation's session id is 33 to 100 "),
        (["--out", "answer.wav"], "--out needs a prompt: it writes the audio of one answer"),
        (
            ["--out", "/nonexistent/dir/answer.wav", "q"],
            "--out /nonexistent/dir/answer.wav: the folder /nonexistent/dir does not exist",
        ),
        (["--region", "eu-west-1", "q"], "--region applies to a runtime: pass --runtime-arn or --stack with it"),
        (["--profile", "dev", "q"], "--profile applies to a runtime: pass --runtime-arn or --stack with it"),
        (["--url", "ftp://agent", "q"], "--url 'ftp://agent' must be http://host:port (the agent's address, no path)"),
        (
            ["--url", "http://agent:8080/invocations", "q"],
            "--url 'http://agent:8080/invocations' must be http://host:port",
        ),
        (["   "], "the prompt is empty: give a question, or none for a conversation"),
        (
            ["--runtime-arn", ARN, "--profile", "nope", "q"],
            "--profile nope: no such profile in the AWS configuration (~/.aws/config)",
        ),
    ],
)
def test_bad_usage_exits_2_naming_the_flag(args: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    err = usage(args, capsys)
    assert err.startswith(f"voicestack talk: {message}"), err
    assert err.count("\n") == 1


def test_argparse_refuses_two_targets_and_unknown_choices(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["talk", "--url", "http://a:1", "--stack", "dev", "q"])
    assert exited.value.code == 2
    assert "argument --stack: not allowed with argument --url" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exited:
        main(["talk", "--transport", "grpc", "q"])
    assert exited.value.code == 2
    assert "argument --transport: invalid choice: 'grpc' (choose from 'websocket', 'sse')" in capsys.readouterr().err


def test_no_credentials_is_a_configuration_error(capsys: pytest.CaptureFixture[str]) -> None:
    err = usage(["--runtime-arn", ARN, "--no-play", "q"], capsys)
    assert err.splitlines()[-1] == (
        "voicestack talk: no AWS credentials (none in the environment, ~/.aws or a profile): pass --profile NAME, "
        "or set AWS_PROFILE or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY"
    )


def test_talk_is_a_voicestack_command() -> None:
    help_text = build_parser().format_help()
    assert "talk" in help_text
    parser = build_parser()
    args = parser.parse_args(["talk", "--stack", "dev"])
    assert (args.command, args.stack, args.transport, args.prompt) == ("talk", "dev", "websocket", None)
