"""Which deployed AgentCore runtime a command speaks to, from its flags: the one resolver.

`voicestack talk`, the page's remote mode (`python -m local.webserver --remote`) and the latency
lab's deployed target (`python -m bench.lab --target deployed`) all take the same flags and turn
them into a `RuntimeTarget` here:

- `--stack NAME`: the runtime ARN and region from the stack's outputs (`agentRuntimeArn`, `region`:
  infra/program.py's `StackOutputs`), read through the Pulumi CLI (`voicestack.pulumi_stack`);
- `--runtime-arn ARN`: that runtime, without Pulumi (exactly one of the two);
- `--region R`: must be the ARN's (a runtime lives in one region); by default it is;
- `--profile P`: the AWS profile the SDK signs with (default: its usual chain);
- `--qualifier Q`: the runtime endpoint (default: AgentCore's `DEFAULT`).

A wrong flag is a `UsageError` (exit 2) naming it; nothing is called over the network here (the
SDK resolves its endpoint offline; credentials are read when a call is made).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from botocore.credentials import ReadOnlyCredentials  # type: ignore[import-untyped]
from botocore.exceptions import ProfileNotFound  # type: ignore[import-untyped]

from voicestack.agentcore import SdkContext, check_qualifier, parse_runtime_arn, resolve_sdk
from voicestack.errors import UsageError
from voicestack.pulumi_stack import StackView, read_stack

RUNTIME_ARN_OUTPUT: Final = "agentRuntimeArn"
REGION_OUTPUT: Final = "region"
"""The stack outputs that name the runtime (infra/program.py `StackOutputs.exported`)."""

StackReader = Callable[[str], StackView]
SdkResolver = Callable[[str | None, str], SdkContext]


@dataclass(frozen=True, slots=True)
class RuntimeTarget:
    """One deployed runtime and the SDK context that calls it."""

    runtime_arn: str
    region: str
    sdk: SdkContext
    qualifier: str | None = None
    """The runtime endpoint to call; None: AgentCore's DEFAULT."""
    stack: str | None = None
    """The Pulumi stack it was read from; None with `--runtime-arn`."""
    profile: str | None = None
    """The AWS profile it was resolved with (named in the fixes of refused calls)."""

    @property
    def endpoint_url(self) -> str:
        return self.sdk.endpoint_url

    def credentials(self) -> ReadOnlyCredentials:
        """Frozen credentials now (blocking: may refresh them); botocore's errors propagate."""
        return self.sdk.credentials()


def resolve_runtime(
    *,
    stack: str | None,
    runtime_arn: str | None,
    region: str | None = None,
    profile: str | None = None,
    qualifier: str | None = None,
    read: StackReader = read_stack,
    sdk: SdkResolver = resolve_sdk,
) -> RuntimeTarget:
    """The runtime named by `--stack` or `--runtime-arn` (exactly one), checked; `UsageError` naming the
    flag otherwise."""
    if (stack is None) == (runtime_arn is None):
        raise UsageError("pass exactly one of --stack NAME or --runtime-arn ARN")
    if stack is not None:
        view = read(stack)
        arn_value, stack_region = view.output(RUNTIME_ARN_OUTPUT), view.output(REGION_OUTPUT)
        if not isinstance(arn_value, str) or not isinstance(stack_region, str):
            raise UsageError(f"--stack {stack}: outputs {RUNTIME_ARN_OUTPUT} and {REGION_OUTPUT} must be strings")
        source = f"--stack {stack}: output {RUNTIME_ARN_OUTPUT}"
    else:
        assert runtime_arn is not None
        arn_value, stack_region, source = runtime_arn, None, "--runtime-arn"
    try:
        arn = parse_runtime_arn(arn_value)
    except ValueError as exc:
        raise UsageError(f"{source}: {exc}") from None
    for name, given in (("--region", region), (f"--stack {stack}: output {REGION_OUTPUT}", stack_region)):
        if given is not None and given != arn.region:
            raise UsageError(f"{name} {given} is not the runtime's region: {arn.arn} is in {arn.region}")
    if qualifier is not None:
        try:
            check_qualifier(qualifier)
        except ValueError as exc:
            raise UsageError(f"--qualifier: {exc}") from None
    try:
        context = sdk(profile, arn.region)
    except ProfileNotFound:
        raise UsageError(f"--profile {profile}: no such profile in the AWS configuration (~/.aws/config)") from None
    return RuntimeTarget(arn.arn, arn.region, context, qualifier=qualifier, stack=stack, profile=profile)
