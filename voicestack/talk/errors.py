"""What to tell a user whose call was refused: the AWS error code, AWS's message and the fix (pure).

Every refusal of a runtime is exit 3 (`ExitCode.UNREACHABLE`): the code is the one AWS sent in
`x-amzn-ErrorType` (botocore's `Error.Code`), over InvokeAgentRuntime or the WebSocket handshake
alike; the fix depends on the code and, for a few, on AWS's message (an aged signature is a
clock to sync, a region-scoped one an endpoint to check). Problems found before any call (no
credentials, an unknown profile) are configuration: exit 2, naming what to set.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal

from voicestack.agentcore import INVOKE_ACTION, WEBSOCKET_ACTION
from voicestack.errors import CommandError, ExitCode, UsageError

Route = Literal["websocket", "sse"]

RETRIED_CODE: Final = "RetryableConflictException"
"""Retried once (with jitter) before it is reported."""


@dataclass(frozen=True, slots=True)
class RuntimeRef:
    """The runtime a refused call was for, as the fixes name it."""

    arn: str
    runtime_id: str
    region: str
    qualifier: str
    endpoint: str
    profile: str | None = None


def _profile(ref: RuntimeRef) -> str:
    return f" --profile {ref.profile}" if ref.profile else ""


def fix_for(code: str, message: str, ref: RuntimeRef, route: Route) -> str:
    """The one sentence that says what to do about `code`."""
    if code == "AccessDeniedException":
        if "Authorization method mismatch" in message:
            return "this runtime is configured for another authorization method (OAuth/JWT, not IAM SigV4)"
        action = WEBSOCKET_ACTION if route == "websocket" else INVOKE_ACTION
        hint = " (or use --transport sse, which needs only bedrock-agentcore:InvokeAgentRuntime)"
        return (
            f"allow {action} on {ref.arn} in the IAM policy of the identity you call with "
            f"(`aws sts get-caller-identity{_profile(ref)}` shows which)" + (hint if route == "websocket" else "")
        )
    if code in ("ExpiredTokenException", "ExpiredToken", "RequestExpired", "TokenRefreshRequired"):
        return (
            f"your AWS credentials have expired: renew them (`aws sso login{_profile(ref)}` for an SSO profile, "
            "or a new session for assumed-role or environment credentials) and run again"
        )
    if code in ("UnrecognizedClientException", "InvalidClientTokenId"):
        return (
            "AWS does not know this access key (or its session token): check AWS_ACCESS_KEY_ID / "
            f"AWS_SESSION_TOKEN or the profile's credentials (`aws sts get-caller-identity{_profile(ref)}`)"
        )
    if code == "InvalidSignatureException":
        if message.startswith(("Signature expired", "Signature not yet current")):
            return "this machine's clock is more than 5 minutes off: sync it (NTP) and run again"
        if "scoped to a valid region" in message:
            return (
                f"{ref.endpoint} does not serve {ref.region}: check AWS_ENDPOINT_URL_BEDROCK_AGENTCORE and the "
                "profile's endpoint_url, or pass the runtime's region with --region"
            )
        return "the secret key does not match the access key: check AWS_SECRET_ACCESS_KEY or the profile's credentials"
    if code in ("IncompleteSignatureException", "MissingAuthenticationTokenException"):
        return (
            f"{ref.endpoint} did not get a complete SigV4 signature: is it AgentCore's data plane? "
            "(check AWS_ENDPOINT_URL_BEDROCK_AGENTCORE)"
        )
    if code == "ResourceNotFoundException":
        return (
            f"no runtime {ref.arn} with endpoint {ref.qualifier} in {ref.region}, or it is not READY yet: "
            f"`aws bedrock-agentcore-control get-agent-runtime --agent-runtime-id {ref.runtime_id} "
            f"--region {ref.region}{_profile(ref)} --query status` must say READY (after `pulumi up`)"
        )
    if code == RETRIED_CODE:
        return (
            "the session was still starting or stopping (retried once): wait a few seconds and run again, "
            "or leave out --session to start a new one"
        )
    if code == "ThrottlingException":
        return "too many calls: AgentCore allows 25 invocations per second per endpoint; wait and retry"
    if code == "ServiceQuotaExceededException":
        return (
            "the account's quota of active sessions is reached: sessions end after 15 minutes idle, "
            "or ask AWS for a higher quota"
        )
    if code == "ValidationException":
        return "AgentCore found the call invalid (its message says which field)"
    if code == "RuntimeClientError":
        return (
            "the agent's container failed or refused the call: read its logs with "
            f"`aws logs tail /aws/bedrock-agentcore/runtimes/{ref.runtime_id}-{ref.qualifier} --region {ref.region}"
            f"{_profile(ref)} --since 10m`"
        )
    if code == "InternalServerException":
        return "AgentCore failed on its side: retry in a moment"
    return "see AWS's message"


def refused(code: str, message: str, status: int | None, ref: RuntimeRef, route: Route) -> CommandError:
    """Exit 3 naming the code, AWS's message and the fix."""
    shown = f"{code} ({status})" if status is not None else code
    said = message.strip().rstrip(".") or "no message"
    return CommandError(
        ExitCode.UNREACHABLE,
        f"the runtime refused the call: {shown}: {said}. Fix: {fix_for(code, message, ref, route)}",
    )


def unreachable(endpoint: str, reason: str, *, certificate: bool = False) -> CommandError:
    """Exit 3: no answer at all (DNS, refused connection, TLS)."""
    if certificate:
        fix = (
            "its TLS certificate is not trusted: behind a TLS-inspecting proxy, point AWS_CA_BUNDLE (or the "
            "profile's ca_bundle) at the proxy's CA"
        )
    else:
        fix = "check the network, the region and AWS_ENDPOINT_URL_BEDROCK_AGENTCORE"
    return CommandError(ExitCode.UNREACHABLE, f"cannot reach {endpoint}: {reason}. Fix: {fix}")


def agent_unreachable(url: str, reason: str) -> CommandError:
    return CommandError(
        ExitCode.UNREACHABLE,
        f"cannot reach the agent at {url}: {reason}. Fix: start the local stack (`make local`) or pass --url",
    )


def agent_refused(url: str, status: int, code: str, message: str) -> CommandError:
    return CommandError(ExitCode.UNREACHABLE, f"the agent at {url} refused the call ({status}): {code}: {message}")


def no_credentials(profile: str | None) -> UsageError:
    where = f"profile {profile!r} has none" if profile else "none in the environment, ~/.aws or a profile"
    return UsageError(
        f"no AWS credentials ({where}): pass --profile NAME, or set AWS_PROFILE or AWS_ACCESS_KEY_ID and "
        "AWS_SECRET_ACCESS_KEY"
    )
