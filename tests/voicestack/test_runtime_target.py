"""The one resolver of a deployed runtime (`voicestack talk`, the page's remote mode, the lab): the
target from a stack or an ARN, and every bad flag an exit-2 error naming it (no network)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from voicestack.errors import ExitCode, UsageError
from voicestack.pulumi_stack import StackView
from voicestack.runtime_target import RuntimeTarget, resolve_runtime

ARN = "arn:aws:bedrock-agentcore:us-east-1:000000000000:runtime/voicestack_dev-abcdefghij"


@pytest.fixture(autouse=True)
def no_aws(aws_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """This machine's AWS configuration is never read; the SDK resolves AWS's own endpoint offline."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDRESOLVERTEST0000")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "resolver-test-secret")


def stack_reader(outputs: dict[str, Any]) -> Any:
    def read(stack: str) -> StackView:
        if stack != "dev":
            raise UsageError(f"--stack {stack}: no such stack")
        return StackView(name=stack, outputs=outputs, config={})

    return read


def test_a_stack_or_an_arn_names_the_runtime() -> None:
    from_stack = resolve_runtime(
        stack="dev", runtime_arn=None, read=stack_reader({"agentRuntimeArn": ARN, "region": "us-east-1"})
    )
    from_arn = resolve_runtime(stack=None, runtime_arn=ARN, region="us-east-1", qualifier="canary", profile=None)
    assert isinstance(from_stack, RuntimeTarget)
    assert (from_stack.runtime_arn, from_stack.region, from_stack.qualifier, from_stack.stack) == (
        ARN,
        "us-east-1",
        None,
        "dev",
    )
    assert (from_arn.runtime_arn, from_arn.region, from_arn.qualifier, from_arn.stack) == (
        ARN,
        "us-east-1",
        "canary",
        None,
    )
    assert from_arn.endpoint_url == from_arn.sdk.endpoint_url == "https://bedrock-agentcore.us-east-1.amazonaws.com"
    assert from_arn.credentials().access_key == "AKIDRESOLVERTEST0000"


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({}, "pass exactly one of --stack NAME or --runtime-arn ARN"),
        ({"stack": "dev", "runtime_arn": ARN}, "pass exactly one of --stack NAME or --runtime-arn ARN"),
        (
            {"stack": "dev", "outputs": {"region": "us-east-1"}},
            "stack 'dev' has no output 'agentRuntimeArn' (its outputs: region); run `pulumi up` on it first",
        ),
        (
            {"stack": "dev", "outputs": {"agentRuntimeArn": ["x"], "region": "us-east-1"}},
            "--stack dev: outputs agentRuntimeArn and region must be strings",
        ),
        (
            {"stack": "dev", "outputs": {"agentRuntimeArn": "arn:x", "region": "us-east-1"}},
            "--stack dev: output agentRuntimeArn: 'arn:x' is not an AgentCore runtime ARN (botocore's pattern: ",
        ),
        (
            {"stack": "dev", "outputs": {"agentRuntimeArn": ARN, "region": "eu-west-1"}},
            f"--stack dev: output region eu-west-1 is not the runtime's region: {ARN} is in us-east-1",
        ),
        ({"stack": "prod"}, "--stack prod: no such stack"),
        ({"runtime_arn": "nope"}, "--runtime-arn: 'nope' is not an AgentCore runtime ARN (botocore's pattern: "),
        (
            {"runtime_arn": ARN, "region": "eu-west-1"},
            f"--region eu-west-1 is not the runtime's region: {ARN} is in us-east-1",
        ),
        ({"runtime_arn": ARN, "qualifier": "no way"}, "--qualifier: qualifier 'no way' must match "),
        (
            {"runtime_arn": ARN, "profile": "nowhere"},
            "--profile nowhere: no such profile in the AWS configuration (~/.aws/config)",
        ),
    ],
)
def test_every_bad_flag_is_an_exit_2_naming_it(options: dict[str, Any], message: str) -> None:
    read = stack_reader(options.pop("outputs", {}))
    options.setdefault("stack", None)
    options.setdefault("runtime_arn", None)
    with pytest.raises(UsageError) as raised:
        resolve_runtime(read=read, **options)
    assert raised.value.code == ExitCode.USAGE
    assert str(raised.value).startswith(message), str(raised.value)
