"""Which runtime a data-plane request reaches, with what, or why it is refused (pure, no sockets).

The stand-in's configuration maps runtime ARNs to local agents (`http://host:port`, the AgentCore
contract: `POST /invocations`, `WS /ws`). A request names its runtime in the path, URL-encoded
(`/runtimes/{agentRuntimeArn}/invocations` as botocore's model routes it, `/runtimes/{arn}/ws` for
the WebSocket route), or by runtime id with an `accountId` query parameter; `qualifier` names an
endpoint (default `DEFAULT`). The rules are botocore's models' (runtime ARN and endpoint name
patterns, session id 33-256 characters) and the runtime's documented behaviour:

- the session id comes from the `X-Amzn-Bedrock-AgentCore-Runtime-Session-Id` header or, on the
  WebSocket route, the query parameter of the same name; without one the runtime starts a new
  session (a UUID); an invalid one is a 400 `ValidationException` (reason `FieldValidationFailed`);
- the container gets only: the session header, the runtime's request id header, the headers named
  in the runtime's request header allowlist (query parameters named
  `X-Amzn-Bedrock-AgentCore-Runtime-Custom-*` count as headers on the WebSocket route), and for
  invocations the payload's `Content-Type` and `Accept`. Everything else the caller sent
  (its `Authorization`, `X-Amz-*`, cookies, any other header) is stripped.
- an unknown runtime or qualifier is a 404 `ResourceNotFoundException`; an unknown path a 404
  `UnknownOperationException`; a wrong method a 405 `UnknownOperationException`.
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Final, Literal
from urllib.parse import parse_qsl, unquote, urlsplit

from bedrock_agentcore.runtime.models import is_forwardable_header

from agent_app.frames import AGENTCORE_FRAME_LIMIT_BYTES, AGENTCORE_FRAMES_PER_S
from local.standin.agentcore_auth import TEST_PRINCIPALS, Principal
from local.standin.events import ErrorResponse
from voicestack.agentcore import (
    CUSTOM_HEADER_PREFIX,
    DEFAULT_QUALIFIER,
    REQUEST_ID_HEADER,
    SESSION_HEADER,
    check_qualifier,
    check_session_id,
    new_session_id,
    parse_runtime_arn,
    session_id_bounds,
)

Operation = Literal["invocations", "ws"]

DEFAULT_IDLE_TIMEOUT_S: Final = 900.0
"""A runtime session with no activity for 15 minutes ends (AgentCore's default idle timeout)."""
MAX_PAYLOAD_BYTES: Final = 100_000_000
"""InvokeAgentRuntime's `payload` (botocore: at most 100,000,000 bytes; the quota says 100 MB)."""
_HEADER_NAME: Final = re.compile(r"[A-Za-z][A-Za-z0-9_-]{0,255}")
"""The control plane's `HeaderName` pattern for a request header allowlist entry."""
_MAX_ALLOWLIST: Final = 20
_ROUTE: Final = re.compile(r"/runtimes/(?P<runtime>[^/]+)/(?P<operation>invocations|ws)")
_ACCOUNT: Final = re.compile(r"[0-9]{12}")


def _utc_now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


@dataclass(frozen=True, slots=True)
class AgentCoreConfig:
    """What the stand-in serves and how strictly; read once at start-up."""

    runtimes: Mapping[str, str]
    """Runtime ARN -> base URL of the local agent (`http://host:port`)."""
    region: str = "us-east-1"
    qualifiers: tuple[str, ...] = (DEFAULT_QUALIFIER,)
    """Endpoint names every runtime answers to."""
    header_allowlist: tuple[str, ...] = ()
    """Request headers passed to the container (the runtime's `requestHeaderAllowlist`)."""
    idle_timeout_s: float = DEFAULT_IDLE_TIMEOUT_S
    max_frame_bytes: int = AGENTCORE_FRAME_LIMIT_BYTES
    """AWS's frame limit (`agent_app.frames`, where AgentCore's numbers are written once)."""
    max_frames_per_s: int = AGENTCORE_FRAMES_PER_S
    """AWS's frame rate per connection, counted here over both directions together: the stricter
    reading (AgentCore does not say whether it counts one direction or both)."""
    conflicts_per_new_session: int = 0
    """Test switch: a new session id gets this many `RetryableConflictException` (409) answers, as
    while AgentCore starts its microVM, before it is served."""
    max_payload_bytes: int = MAX_PAYLOAD_BYTES
    connect_timeout_s: float = 5.0
    """How long the agent may take to accept a connection before the call fails (424)."""
    principals: tuple[Principal, ...] = TEST_PRINCIPALS
    clock: Callable[[], datetime.datetime] = field(default=_utc_now, compare=False)
    """The front door's clock for signature dates (tests move it to age a signature)."""

    def __post_init__(self) -> None:
        if not self.runtimes:
            raise ValueError("runtimes: at least one ARN=URL mapping is required")
        for arn, url in self.runtimes.items():
            check_runtime(arn, url, self.region)
        for qualifier in self.qualifiers:
            check_qualifier(qualifier)
        if len(self.header_allowlist) > _MAX_ALLOWLIST:
            raise ValueError(f"header_allowlist: at most {_MAX_ALLOWLIST} headers (the control plane's limit)")
        for name in self.header_allowlist:
            if _HEADER_NAME.fullmatch(name) is None or not is_forwardable_header(name):
                raise ValueError(f"header_allowlist: {name!r} cannot be allowlisted on AgentCore Runtime")
        for name, value in (
            ("idle_timeout_s", self.idle_timeout_s),
            ("max_frame_bytes", self.max_frame_bytes),
            ("max_frames_per_s", self.max_frames_per_s),
            ("max_payload_bytes", self.max_payload_bytes),
            ("connect_timeout_s", self.connect_timeout_s),
        ):
            if not value > 0:
                raise ValueError(f"{name} must be > 0, got {value}")
        if self.conflicts_per_new_session < 0:
            raise ValueError(f"conflicts_per_new_session must be >= 0, got {self.conflicts_per_new_session}")


def check_runtime(arn: str, url: str, region: str) -> None:
    """Raise ValueError unless `arn` is a runtime ARN in `region` and `url` an agent base URL."""
    parsed = parse_runtime_arn(arn)
    if parsed.region != region:
        raise ValueError(f"runtime {arn}: its region {parsed.region} is not the stand-in's ({region})")
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname or parts.path not in ("", "/") or parts.query:
        raise ValueError(f"runtime {arn}: agent URL {url!r} must be http://host:port (no path)")


def parse_runtime_specs(specs: Iterable[str]) -> dict[str, str]:
    """`ARN=URL` strings (the `--runtime` flag) to a mapping; ValueError names the bad one."""
    runtimes: dict[str, str] = {}
    for spec in specs:
        arn, sep, url = spec.partition("=")
        if not sep:
            raise ValueError(f"--runtime {spec!r}: expected ARN=http://host:port")
        if arn in runtimes:
            raise ValueError(f"--runtime {spec!r}: runtime {arn} is given twice")
        runtimes[arn] = url.rstrip("/")
    return runtimes


@dataclass(frozen=True, slots=True)
class Route:
    operation: Operation
    runtime: str
    """The runtime as the path names it (an ARN, or an id with `accountId`), URL-decoded."""


def parse_route(method: str, raw_path: str) -> Route | ErrorResponse:
    """The operation a raw (still URL-encoded) path names, or a 404/405 UnknownOperation."""
    match = _ROUTE.fullmatch(raw_path)
    if match is None:
        return ErrorResponse(
            404, "UnknownOperationException", {"message": f"{method} {raw_path[:200]} is not an operation of this API"}
        )
    operation: Operation = "ws" if match.group("operation") == "ws" else "invocations"
    expected = "GET" if operation == "ws" else "POST"
    if method != expected:
        return ErrorResponse(
            405, "UnknownOperationException", {"message": f"{operation} takes {expected}, not {method}"}
        )
    return Route(operation, unquote(match.group("runtime")))


def query_params(raw_query: str) -> dict[str, str]:
    """The query's parameters, decoded; a repeated name keeps its first value."""
    params: dict[str, str] = {}
    for key, value in parse_qsl(raw_query, keep_blank_values=True):
        params.setdefault(key, value)
    return params


def not_found(runtime: str, qualifier: str) -> ErrorResponse:
    return ErrorResponse(
        404,
        "ResourceNotFoundException",
        {"message": f"No endpoint or agent found with qualifier '{qualifier}' for agent '{runtime}'"},
    )


def validation_error(field_name: str, message: str) -> ErrorResponse:
    """400 ValidationException in the model's shape (`message`, `reason`, `fieldList`)."""
    return ErrorResponse(
        400,
        "ValidationException",
        {
            "message": f"1 validation error detected: Value at '{field_name}' failed to satisfy constraint: {message}",
            "reason": "FieldValidationFailed",
            # ErrorResponse (shared with the SageMaker stand-in) types its body for flat JSON objects.
            "fieldList": [{"name": field_name, "message": message}],  # type: ignore[dict-item]
        },
    )


@dataclass(frozen=True, slots=True)
class Target:
    """An accepted call: the runtime, where its agent is, and the session it belongs to."""

    arn: str
    qualifier: str
    agent_url: str
    session_id: str
    new_session: bool
    """True when the caller named no session (the runtime made one up)."""


def runtime_arn(route: Route, params: Mapping[str, str], region: str) -> str | ErrorResponse:
    """The ARN a call names: the path's, or `arn:...:runtime/<id>` from an id and `accountId`."""
    if route.runtime.startswith("arn:"):
        return route.runtime
    account = params.get("accountId")
    if account is None:
        return validation_error("accountId", "Member must be given when agentRuntimeArn is an agent id")
    if _ACCOUNT.fullmatch(account) is None:
        return validation_error("accountId", "Member must satisfy regular expression pattern: [0-9]{12}")
    return f"arn:aws:bedrock-agentcore:{region}:{account}:runtime/{route.runtime}"


def resolve_target(
    arn: str, operation: Operation, params: Mapping[str, str], headers: Mapping[str, str], config: AgentCoreConfig
) -> Target | ErrorResponse:
    """The runtime and session of an authorized call, or AgentCore's 400/404 refusal."""
    qualifier = params.get("qualifier", DEFAULT_QUALIFIER)
    agent_url = config.runtimes.get(arn)
    if agent_url is None or qualifier not in config.qualifiers:
        return not_found(arn, qualifier)

    raw_session = headers.get(SESSION_HEADER.lower())
    if raw_session is None and operation == "ws":
        raw_session = params.get(SESSION_HEADER)
    if raw_session is None:
        return Target(arn, qualifier, agent_url, new_session_id(), new_session=True)
    try:
        session_id = check_session_id(raw_session)
    except ValueError:
        low, high = session_id_bounds()
        if len(raw_session) < low:
            rule = f"Member must have length greater than or equal to {low}"
        elif len(raw_session) > high:
            rule = f"Member must have length less than or equal to {high}"
        else:
            rule = "Member must contain visible ASCII characters only"
        return validation_error("runtimeSessionId", rule)
    return Target(arn, qualifier, agent_url, session_id, new_session=False)


def forwarded_headers(
    headers: Mapping[str, str],
    params: Mapping[str, str],
    config: AgentCoreConfig,
    target: Target,
    request_id: str,
    *,
    operation: Operation,
) -> dict[str, str]:
    """Exactly the headers the container receives; everything else the caller sent is stripped."""
    forwarded = {SESSION_HEADER: target.session_id, REQUEST_ID_HEADER: request_id}
    if operation == "invocations":
        for name in ("Content-Type", "Accept"):
            value = headers.get(name.lower())
            if value is not None:
                forwarded[name] = value
    for name in config.header_allowlist:
        value = headers.get(name.lower())
        if value is None and operation == "ws" and name.lower().startswith(CUSTOM_HEADER_PREFIX.lower()):
            value = next((v for k, v in params.items() if k.lower() == name.lower()), None)
        if value is not None:
            forwarded[name] = value
    return forwarded
