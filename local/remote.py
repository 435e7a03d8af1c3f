"""The page's remote mode: which deployed AgentCore runtime it speaks to, and how calls are signed.

The web server holds the credentials; the browser never does. Everything AWS-shaped comes from
`voicestack.agentcore` (the AWS SDK's standard configuration: environment, `--profile`, SSO,
`AWS_ENDPOINT_URL_BEDROCK_AGENTCORE`, `AWS_CA_BUNDLE`; botocore's signers):

- the target itself is `voicestack.runtime_target.RuntimeTarget`, from `--stack NAME` or
  `--runtime-arn ARN` as for `voicestack talk` and the lab (`resolve_runtime`: one resolver, the
  same exit-2 errors naming the flag);
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

from collections.abc import Mapping
from typing import Any, Final

from botocore.credentials import ReadOnlyCredentials  # type: ignore[import-untyped]

from agent_app.frames import AGENTCORE_FRAME_LIMIT_BYTES
from voicestack.agentcore import (
    MAX_PRESIGN_EXPIRES_S,
    conversation_session_problem,
    invocation_url,
    presign_websocket_url,
    sign_request,
    websocket_url,
)
from voicestack.runtime_target import RuntimeTarget

DEFAULT_PRESIGN_EXPIRES_S: Final = MAX_PRESIGN_EXPIRES_S
"""How long a presigned URL stays valid: AgentCore's maximum (300 s, the bedrock-agentcore SDK's
default too). The page opens it within milliseconds; the margin is for a machine whose clock runs
behind AWS's (a URL is refused once its X-Amz-Date plus X-Amz-Expires has passed on AWS's clock)."""
WEBSOCKET_AUTH: Final = "sigv4"
"""How the page authenticates the runtime's WebSocket: a presigned URL from this server. (A
JWT-authorized runtime would add `bearer`: the token as the `base64UrlBearerAuthorization`
subprotocol pair, which the page's `socket-target.js` is laid out to take.)"""


def session_problem(session: str, *, name: str) -> str | None:
    """Why `session` (named `name` in the message) cannot be signed for, or None: a session id the
    page may use is one both AgentCore Runtime and AgentCore Memory, where the agent keeps the
    conversation, accept (`voicestack.agentcore.conversation_session_problem`). The page sends a UUID."""
    problem = conversation_session_problem(session)
    return None if problem is None else f"'{name}' must be {problem}"


def sign_invocation(
    target: RuntimeTarget, credentials: ReadOnlyCredentials, body: bytes, headers: Mapping[str, str]
) -> tuple[str, dict[str, str]]:
    """The URL and headers of one signed `InvokeAgentRuntime`: `headers` (content type, accept, the
    session header) plus `Authorization`, `X-Amz-Date` and, for temporary credentials,
    `X-Amz-Security-Token`; all of them must be sent exactly as returned."""
    url = invocation_url(target.endpoint_url, target.runtime_arn, target.qualifier)
    return url, sign_request("POST", url, credentials, target.region, headers=headers, body=body)


def presign_socket(target: RuntimeTarget, credentials: ReadOnlyCredentials, session_id: str, *, expires_s: int) -> str:
    """A presigned `wss://` URL of the runtime's `/ws` for `session_id`, valid `expires_s` seconds."""
    url = websocket_url(target.endpoint_url, target.runtime_arn, target.qualifier, session_id=session_id)
    return presign_websocket_url(url, credentials, target.region, expires_s=expires_s)


def page_view(target: RuntimeTarget) -> dict[str, Any]:
    """What the page learns of its target (`GET /api/health`): where, and how to open the socket."""
    return {
        "kind": "agentcore",
        "stack": target.stack,
        "region": target.region,
        "runtime_arn": target.runtime_arn,
        "qualifier": target.qualifier,
        "websocket_auth": WEBSOCKET_AUTH,
        # AgentCore's frame limit (the one the stand-in enforces): the page checks a prompt against
        # it before sending, so a long one gets an error instead of a closed connection.
        "max_frame_bytes": AGENTCORE_FRAME_LIMIT_BYTES,
    }
