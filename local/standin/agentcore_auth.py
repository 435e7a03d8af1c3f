"""SigV4 as AgentCore's front door checks it: the signature, its scope, its age, then IAM (pure).

A request is verified by recomputing its signature with botocore's own signer (`SigV4Auth`'s
canonical request, string to sign and key derivation) from the secret of a known test principal,
then compared in constant time; nothing is reimplemented. Both ways of signing are accepted:
the `Authorization` header (`SigV4Auth`) and the presigned query (`SigV4QueryAuth`, WebSocket
only, valid for at most 300 s).

Refusals are the ones every AWS JSON front door sends for SigV4 (AgentCore publishes no
variants): status 403 with `x-amzn-ErrorType` and a JSON body `{"message": ...}`, which botocore
turns into a `ClientError` with that code (`AccessDeniedException` is modeled, so boto3 raises
`client.exceptions.AccessDeniedException`). The messages are AWS's usual wording:

| case | error type |
|---|---|
| no signature at all | `MissingAuthenticationTokenException` |
| a malformed `Authorization` or incomplete query signature, or both at once | `IncompleteSignatureException` |
| an access key the stand-in does not know, or a missing/wrong session token | `UnrecognizedClientException` |
| a principal whose temporary credentials have expired | `ExpiredTokenException` |
| scope in another region or service, a wrong terminator, a date other than X-Amz-Date's | `InvalidSignatureException` |
| X-Amz-Date over 5 minutes off, a presigned URL past its X-Amz-Expires (or > 300 s) | `InvalidSignatureException` |
| a signature that does not match | `InvalidSignatureException` |
| a principal without the operation's IAM action on that runtime | `AccessDeniedException` |
"""

from __future__ import annotations

import datetime
import hmac
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Final
from urllib.parse import parse_qsl

from botocore.auth import SigV4Auth  # type: ignore[import-untyped]
from botocore.awsrequest import AWSRequest, HTTPHeaders  # type: ignore[import-untyped]
from botocore.credentials import Credentials  # type: ignore[import-untyped]

from local.standin.events import ErrorResponse
from voicestack.agentcore import ALGORITHM, INVOKE_ACTION, MAX_PRESIGN_EXPIRES_S, SERVICE, WEBSOCKET_ACTION

ACCOUNT_ID: Final = "000000000000"
"""The account the stand-in pretends to be (in ARNs and AccessDenied messages)."""
MAX_SKEW: Final = datetime.timedelta(minutes=5)
"""How far X-Amz-Date may be from the server's clock (AWS's SigV4 rule)."""
_TIMESTAMP_FORMAT: Final = "%Y%m%dT%H%M%SZ"
_SIGNATURE: Final = re.compile(r"[0-9a-f]{64}")
_AUTH_FIELD: Final = re.compile(r"\s*(Credential|SignedHeaders|Signature)=([^,\s]*)\s*")
_QUERY_AUTH_KEYS: Final = (
    "X-Amz-Algorithm",
    "X-Amz-Credential",
    "X-Amz-Date",
    "X-Amz-SignedHeaders",
    "X-Amz-Signature",
)

Headers = Mapping[str, str]
"""Request headers by lower-case name (one value each: the first one sent)."""


@dataclass(frozen=True, slots=True)
class Principal:
    """An IAM identity the stand-in knows: its key pair, and what its policy allows."""

    name: str
    access_key: str
    secret_key: str
    session_token: str | None = None
    """Temporary credentials (STS) carry a token that must be sent with every request."""
    expired: bool = False
    """Temporary credentials past their expiry: every request gets `ExpiredTokenException`."""
    allowed_actions: frozenset[str] = field(default_factory=lambda: frozenset({INVOKE_ACTION, WEBSOCKET_ACTION}))

    @property
    def arn(self) -> str:
        kind = "assumed-role" if self.session_token else "user"
        return f"arn:aws:iam::{ACCOUNT_ID}:{kind}/{self.name}"

    def credentials(self) -> Credentials:
        """botocore credentials that sign as this principal (for tests and the local stack)."""
        return Credentials(self.access_key, self.secret_key, self.session_token)


ALLOWED: Final = Principal("voicestack-local", "AKIDAGENTCORESTANDIN", "agentcore-stand-in-test-secret")
"""May invoke every runtime the stand-in serves, over both routes."""
DENIED: Final = Principal(
    "voicestack-no-invoke", "AKIDAGENTCORENOINVOKE", "agentcore-stand-in-denied-secret", allowed_actions=frozenset()
)
"""Signs correctly but its policy allows nothing (AccessDeniedException)."""
SSE_ONLY: Final = Principal(
    "voicestack-sse-only",
    "AKIDAGENTCORESSEONLY",
    "agentcore-stand-in-sse-only-secret",
    allowed_actions=frozenset({INVOKE_ACTION}),
)
"""May call InvokeAgentRuntime but not open the WebSocket route."""
EXPIRED: Final = Principal(
    "voicestack-expired",
    "ASIAAGENTCOREEXPIRED",
    "agentcore-stand-in-expired-secret",
    session_token="agentcore-stand-in-expired-session-token",
    expired=True,
)
"""Temporary credentials that have expired (what a stale SSO or assumed-role session sends)."""
TEST_PRINCIPALS: Final = (ALLOWED, DENIED, SSE_ONLY, EXPIRED)


@dataclass(frozen=True, slots=True)
class SignedRequest:
    """What the front door sees of one request, raw: the path and query exactly as sent."""

    method: str
    host: str
    raw_path: str
    raw_query: str
    headers: Headers
    body: bytes = b""


@dataclass(frozen=True, slots=True)
class Caller:
    """An authenticated principal, and how it signed."""

    principal: Principal
    presigned: bool


def _invalid(message: str) -> ErrorResponse:
    return ErrorResponse(403, "InvalidSignatureException", {"message": message})


def _incomplete(message: str) -> ErrorResponse:
    return ErrorResponse(403, "IncompleteSignatureException", {"message": message})


def _unrecognized() -> ErrorResponse:
    return ErrorResponse(
        403, "UnrecognizedClientException", {"message": "The security token included in the request is invalid."}
    )


def access_denied(principal: Principal, action: str, resource: str) -> ErrorResponse:
    return ErrorResponse(
        403,
        "AccessDeniedException",
        {
            "message": f"User: {principal.arn} is not authorized to perform: {action} on resource: {resource} "
            f"because no identity-based policy allows the {action} action"
        },
    )


def authorize(caller: Caller, action: str, resource: str) -> ErrorResponse | None:
    """None when the caller's policy allows `action` on `resource`, else the AccessDenied response."""
    if action in caller.principal.allowed_actions:
        return None
    return access_denied(caller.principal, action, resource)


@dataclass(frozen=True, slots=True)
class _Scope:
    access_key: str
    date: str
    region: str
    service: str
    terminator: str


def _parse_scope(credential: str) -> _Scope | ErrorResponse:
    parts = credential.split("/")
    if len(parts) != 5 or not all(parts):
        return _incomplete(
            f"Credential should have exactly 5 slash-separated parts: 'ACCESS_KEY/DATE/REGION/SERVICE/aws4_request', "
            f"got {len(parts)}"
        )
    return _Scope(*parts)


def _parse_authorization(value: str) -> tuple[_Scope, list[str], str] | ErrorResponse:
    algorithm, _, rest = value.partition(" ")
    if algorithm != ALGORITHM:
        return _incomplete(f"Unsupported Authorization Type: only {ALGORITHM} is accepted")
    fields: dict[str, str] = {}
    for item in rest.split(","):
        match = _AUTH_FIELD.fullmatch(item)
        if match is None:
            return _incomplete(
                "Authorization header requires 'Credential', 'SignedHeaders' and 'Signature'; "
                f"got {item.strip()[:80]!r}"
            )
        fields[match.group(1)] = match.group(2)
    missing = [name for name in ("Credential", "SignedHeaders", "Signature") if not fields.get(name)]
    if missing:
        return _incomplete("Authorization header requires " + ", ".join(f"'{m}'" for m in missing) + " parameter(s).")
    scope = _parse_scope(fields["Credential"])
    if isinstance(scope, ErrorResponse):
        return scope
    return scope, fields["SignedHeaders"].split(";"), fields["Signature"]


def _parse_timestamp(value: str) -> datetime.datetime | None:
    try:
        return datetime.datetime.strptime(value, _TIMESTAMP_FORMAT).replace(tzinfo=datetime.UTC)
    except ValueError:
        return None


def _stamp(moment: datetime.datetime) -> str:
    return moment.strftime(_TIMESTAMP_FORMAT)


class _Verifier(SigV4Auth):  # type: ignore[misc]  # botocore is untyped
    """botocore's signer, asked to sign exactly the headers the client says it signed."""

    def __init__(self, principal: Principal, region: str, signed: list[str]) -> None:
        super().__init__(principal.credentials(), SERVICE, region)
        self._signed = signed

    def headers_to_sign(self, request: AWSRequest) -> HTTPHeaders:
        headers = HTTPHeaders()
        for name in self._signed:
            value = request.headers.get(name)
            if value is not None:
                headers[name] = value
        return headers


def verify(
    request: SignedRequest,
    *,
    principals: Iterable[Principal],
    region: str,
    now: datetime.datetime,
    allow_presigned: bool,
) -> Caller | ErrorResponse:
    """The caller who signed `request`, or the refusal AgentCore's front door would answer."""
    query = parse_qsl(request.raw_query, keep_blank_values=True)
    query_keys = {key for key, _ in query}
    authorization = request.headers.get("authorization")
    presigned = "X-Amz-Algorithm" in query_keys or "X-Amz-Signature" in query_keys
    if authorization is None and not presigned:
        return ErrorResponse(403, "MissingAuthenticationTokenException", {"message": "Missing Authentication Token"})
    if authorization is not None and presigned:
        return _incomplete(
            "Only one auth mechanism allowed; only the X-Amz-Algorithm query parameter, "
            "Signature query string parameter or the Authorization header should be specified"
        )
    if authorization is not None and authorization.lower().startswith("bearer "):
        return ErrorResponse(
            403,
            "AccessDeniedException",
            {"message": "Authorization method mismatch: this runtime accepts SigV4 (IAM), not a bearer token."},
        )

    expires_s: int | None = None
    if presigned:
        if not allow_presigned:
            return _incomplete("Presigned URLs are accepted on the WebSocket route only; sign the Authorization header")
        values = dict(query)
        missing = [key for key in _QUERY_AUTH_KEYS if not values.get(key)]
        if missing:
            return _incomplete("AWS query-string parameters must include " + ", ".join(f"'{m}'" for m in missing) + ".")
        if values["X-Amz-Algorithm"] != ALGORITHM:
            return _incomplete(f"X-Amz-Algorithm only supports '{ALGORITHM}'")
        scope = _parse_scope(values["X-Amz-Credential"])
        if isinstance(scope, ErrorResponse):
            return scope
        signed = values["X-Amz-SignedHeaders"].split(";")
        signature = values["X-Amz-Signature"]
        raw_expires = values.get("X-Amz-Expires", "")
        if not raw_expires.isdigit():
            return _incomplete("X-Amz-Expires must be a whole number of seconds")
        expires_s = int(raw_expires)
        if expires_s > MAX_PRESIGN_EXPIRES_S:
            return _invalid(f"X-Amz-Expires must be less than or equal to {MAX_PRESIGN_EXPIRES_S} seconds")
        date_value = values["X-Amz-Date"]
        token = values.get("X-Amz-Security-Token") or None
    else:
        assert authorization is not None
        parsed = _parse_authorization(authorization)
        if isinstance(parsed, ErrorResponse):
            return parsed
        scope, signed, signature = parsed
        date_value = request.headers.get("x-amz-date", "")
        if not date_value:
            return _incomplete("Authorization header requires existence of either a 'X-Amz-Date' or a 'Date' header.")
        token = request.headers.get("x-amz-security-token")

    principal = next((p for p in principals if p.access_key == scope.access_key), None)
    if principal is None or token != principal.session_token:
        return _unrecognized()
    if principal.expired:
        return ErrorResponse(
            403, "ExpiredTokenException", {"message": "The security token included in the request is expired"}
        )

    if scope.terminator != "aws4_request":
        return _invalid(
            f"Credential should be scoped with a valid terminator: 'aws4_request', not '{scope.terminator}'."
        )
    if scope.service != SERVICE:
        return _invalid(f"Credential should be scoped to correct service: '{SERVICE}'. ")
    if scope.region != region:
        return _invalid("Credential should be scoped to a valid region. ")
    signed_at = _parse_timestamp(date_value)
    if signed_at is None:
        return _incomplete(
            f"X-Amz-Date must be in the ISO 8601 basic format YYYYMMDD'T'HHMMSS'Z'; got {date_value[:40]!r}"
        )
    if scope.date != date_value[:8]:
        return _invalid(
            f"Date in Credential scope does not match YYYYMMDD from ISO-8601 version of date from HTTP: "
            f"'{scope.date}' != '{date_value[:8]}', from '{date_value}'."
        )
    if "host" not in signed:
        return _invalid("Signature must include the host header (SignedHeaders has no 'host').")
    if not presigned and "x-amz-date" not in signed:
        return _invalid("SignedHeaders must include 'x-amz-date' when the date travels in that header.")
    if _SIGNATURE.fullmatch(signature) is None:
        return _incomplete("The signature must be 64 lower-case hexadecimal characters")

    if expires_s is not None:
        if now > signed_at + datetime.timedelta(seconds=expires_s):
            return _invalid(
                f"Signature expired: {date_value} is now earlier than "
                f"{_stamp(now - datetime.timedelta(seconds=expires_s))} ({_stamp(now)} - {expires_s} sec.)"
            )
        if signed_at > now + MAX_SKEW:
            return _invalid(f"Signature not yet current: {date_value} is still later than {_stamp(now + MAX_SKEW)}")
    else:
        if signed_at < now - MAX_SKEW:
            return _invalid(
                f"Signature expired: {date_value} is now earlier than {_stamp(now - MAX_SKEW)} ({_stamp(now)} - 5 min.)"
            )
        if signed_at > now + MAX_SKEW:
            return _invalid(
                f"Signature not yet current: {date_value} is still later than {_stamp(now + MAX_SKEW)} "
                f"({_stamp(now)} + 5 min.)"
            )

    expected = _expected_signature(request, principal, region, signed, date_value, presigned=presigned)
    if not hmac.compare_digest(expected, signature):
        return _invalid(
            "The request signature we calculated does not match the signature you provided. "
            "Check your AWS Secret Access Key and signing method. Consult the service documentation for details."
        )
    return Caller(principal, presigned=presigned)


def _expected_signature(
    request: SignedRequest, principal: Principal, region: str, signed: list[str], date_value: str, *, presigned: bool
) -> str:
    query = request.raw_query
    if presigned:
        # The canonical query string holds every parameter but the signature itself.
        query = "&".join(p for p in query.split("&") if not p.startswith("X-Amz-Signature="))
    url = f"https://{request.host}{request.raw_path}" + (f"?{query}" if query else "")
    headers = {name: request.headers[name] for name in signed if name in request.headers}
    aws_request = AWSRequest(method=request.method, url=url, headers=headers, data=request.body)
    aws_request.context["timestamp"] = date_value
    signer = _Verifier(principal, region, signed)
    canonical = signer.canonical_request(aws_request)
    signature: str = signer.signature(signer.string_to_sign(aws_request, canonical), aws_request)
    return signature
