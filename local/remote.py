"""The page's remote mode: which deployed AgentCore runtime it speaks to, and how calls are signed.

The web server holds the credentials; the browser never does. Everything AWS-shaped comes from
`voicestack.agentcore` (the AWS SDK's standard configuration: environment, `--profile`, SSO,
`AWS_ENDPOINT_URL_BEDROCK_AGENTCORE`, `AWS_CA_BUNDLE`; botocore's signers):

- `resolve_target(...)`: the runtime from `--stack NAME` (`pulumi stack output --json`:
  `agentRuntimeArn`, `region`) or `--runtime-arn ARN [--region R]`, with the SDK context that
  signs for it; a `UsageError` (exit 2) names the flag that is wrong;
- `sign_invocation(...)`: the SigV4 headers of one `InvokeAgentRuntime` (SSE mode, which the
  web server relays);
- `presign_socket(...)`: a SigV4-presigned `wss://` URL of the runtime's `/ws` for one session,
  which the browser opens itself. The signature covers the runtime ARN, the qualifier and the
  session id (all in the signed path and query), so the URL opens that session of that runtime
  and nothing else, and only until it expires (AgentCore checks it at the handshake only: an open
  connection outlives it, a reconnect needs a new URL);
- `page_view(target)`: what the page is told about its target (no credential material).

Credentials are read per call (`SdkContext.credentials()`, which refreshes temporary ones), off
the event loop by the caller: an SSO or assumed-role refresh is a network call.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal

from botocore.auth import SigV4Auth  # type: ignore[import-untyped]
from botocore.awsrequest import AWSRequest  # type: ignore[import-untyped]
from botocore.credentials import ReadOnlyCredentials  # type: ignore[import-untyped]
from botocore.exceptions import ProfileNotFound  # type: ignore[import-untyped]

from agent_app.frames import AGENTCORE_FRAME_LIMIT_BYTES
from voicestack.agentcore import (
    MAX_PRESIGN_EXPIRES_S,
    SERVICE,
    SdkContext,
    check_qualifier,
    invocation_url,
    parse_runtime_arn,
    presign_websocket_url,
    resolve_sdk,
    session_id_bounds,
    websocket_url,
)
from voicestack.errors import UsageError
from voicestack.pulumi_stack import StackView, read_stack

RUNTIME_ARN_OUTPUT: Final = "agentRuntimeArn"
REGION_OUTPUT: Final = "region"
"""The stack outputs the remote page reads (infra/program.py `StackOutputs.exported`)."""
DEFAULT_PRESIGN_EXPIRES_S: Final = MAX_PRESIGN_EXPIRES_S
"""How long a presigned URL stays valid: AgentCore's maximum (300 s, the bedrock-agentcore SDK's
default too). The page opens it within milliseconds; the margin is for a machine whose clock runs
behind AWS's (a URL is refused once its X-Amz-Date plus X-Amz-Expires has passed on AWS's clock)."""


WebSocketAuth = Literal["sigv4"]
"""How the page authenticates the runtime's WebSocket. `sigv4`: a presigned URL from this server.
(A JWT-authorized runtime would add `bearer`: the token as the `base64UrlBearerAuthorization`
subprotocol pair, which the page's `socket-target.js` is laid out to take.)"""


@dataclass(frozen=True, slots=True)
class RemoteTarget:
    """One deployed runtime and the SDK context that signs calls to it."""

    runtime_arn: str
    region: str
    sdk: SdkContext
    qualifier: str | None = None
    """The runtime endpoint to call; None: AgentCore's DEFAULT."""
    stack: str | None = None
    """The Pulumi stack it was read from (shown on the page); None with `--runtime-arn`."""
    websocket_auth: WebSocketAuth = "sigv4"

    @property
    def endpoint_url(self) -> str:
        return self.sdk.endpoint_url

    def credentials(self) -> ReadOnlyCredentials:
        """Frozen credentials now (blocking: may refresh them); botocore's errors propagate."""
        return self.sdk.credentials()


@functools.cache
def _memory_session_shape() -> dict[str, Any]:
    import botocore.session  # type: ignore[import-untyped]  # the model loader only: no client, no network

    loader = botocore.session.get_session().get_component("data_loader")
    shape: dict[str, Any] = loader.load_service_model(SERVICE, "service-2")["shapes"]["SessionId"]
    return shape


def session_problem(session: str, *, name: str) -> str | None:
    """Why `session` (named `name` in the message) cannot be signed for, or None.

    A session id the remote page may use is one both AgentCore Runtime (`runtimeSessionId`: 33 to
    256 characters) and AgentCore Memory (`SessionId`: at most 100, its pattern), where the agent
    keeps the conversation, accept; rules read from botocore's model. The page sends a UUID (36)."""
    low, _ = session_id_bounds()
    memory = _memory_session_shape()
    high = min(session_id_bounds()[1], int(memory["max"]))
    if not low <= len(session) <= high or re.fullmatch(memory["pattern"], session) is None:
        return f"'{name}' must be {low} to {high} characters matching {memory['pattern']}"
    return None


StackReader = Callable[[str], StackView]


def resolve_target(
    *,
    stack: str | None,
    runtime_arn: str | None,
    region: str | None = None,
    profile: str | None = None,
    qualifier: str | None = None,
    read: StackReader = read_stack,
    sdk: Callable[[str | None, str], SdkContext] = resolve_sdk,
) -> RemoteTarget:
    """The runtime named by `--stack` or `--runtime-arn` (exactly one), checked; `UsageError` otherwise."""
    if (stack is None) == (runtime_arn is None):
        raise UsageError("--remote needs exactly one of --stack NAME or --runtime-arn ARN")
    if stack is not None:
        view = read(stack)
        arn_value = view.output(RUNTIME_ARN_OUTPUT)
        stack_region = view.output(REGION_OUTPUT)
        source = f"stack {stack!r} output {RUNTIME_ARN_OUTPUT}"
        if not isinstance(arn_value, str) or not isinstance(stack_region, str):
            raise UsageError(f"stack {stack!r}: outputs {RUNTIME_ARN_OUTPUT} and {REGION_OUTPUT} must be strings")
    else:
        assert runtime_arn is not None
        arn_value, stack_region, source = runtime_arn, None, "--runtime-arn"
    try:
        arn = parse_runtime_arn(arn_value)
    except ValueError as exc:
        raise UsageError(f"{source}: {exc}") from None
    for name, given in (("--region", region), (f"stack {stack!r} output {REGION_OUTPUT}", stack_region)):
        if given is not None and given != arn.region:
            raise UsageError(f"{name} is {given!r} but the runtime ARN {arn.arn} is in {arn.region!r}")
    if qualifier is not None:
        try:
            check_qualifier(qualifier)
        except ValueError as exc:
            raise UsageError(f"--qualifier: {exc}") from None
    try:
        context = sdk(profile, arn.region)
    except ProfileNotFound as exc:
        raise UsageError(f"--profile: {exc}") from None
    return RemoteTarget(runtime_arn=arn.arn, region=arn.region, sdk=context, qualifier=qualifier, stack=stack)


def sign_invocation(
    target: RemoteTarget, credentials: ReadOnlyCredentials, body: bytes, headers: Mapping[str, str]
) -> tuple[str, dict[str, str]]:
    """The URL and headers of one signed `InvokeAgentRuntime`: `headers` (content type, accept, the
    session header) plus `Authorization`, `X-Amz-Date` and, for temporary credentials,
    `X-Amz-Security-Token`; all of them must be sent exactly as returned."""
    url = invocation_url(target.endpoint_url, target.runtime_arn, target.qualifier)
    request = AWSRequest(method="POST", url=url, data=body, headers=dict(headers))
    SigV4Auth(credentials, SERVICE, target.region).add_auth(request)
    return url, {name: str(value) for name, value in request.headers.items()}


def presign_socket(target: RemoteTarget, credentials: ReadOnlyCredentials, session_id: str, *, expires_s: int) -> str:
    """A presigned `wss://` URL of the runtime's `/ws` for `session_id`, valid `expires_s` seconds."""
    url = websocket_url(target.endpoint_url, target.runtime_arn, target.qualifier, session_id=session_id)
    return presign_websocket_url(url, credentials, target.region, expires_s=expires_s)


def page_view(target: RemoteTarget) -> dict[str, Any]:
    """What the page learns of its target (`GET /api/health`): where, and how to open the socket."""
    return {
        "kind": "agentcore",
        "stack": target.stack,
        "region": target.region,
        "runtime_arn": target.runtime_arn,
        "qualifier": target.qualifier,
        "websocket_auth": target.websocket_auth,
        # AgentCore's frame limit (the one the stand-in enforces): the page checks a prompt against
        # it before sending, so a long one gets an error instead of a closed connection.
        "max_frame_bytes": AGENTCORE_FRAME_LIMIT_BYTES,
    }
