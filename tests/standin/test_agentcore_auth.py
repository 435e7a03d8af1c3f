"""SigV4 as the AgentCore stand-in checks it, against requests signed by botocore's own signers (no sockets)."""

from __future__ import annotations

import datetime

import pytest
from botocore.auth import SigV4Auth, SigV4QueryAuth  # type: ignore[import-untyped]
from botocore.awsrequest import AWSRequest  # type: ignore[import-untyped]
from botocore.credentials import Credentials  # type: ignore[import-untyped]

from local.standin.agentcore_auth import (
    ALLOWED,
    DENIED,
    EXPIRED,
    SSE_ONLY,
    TEST_PRINCIPALS,
    Caller,
    Principal,
    SignedRequest,
    authorize,
    verify,
)
from local.standin.events import ErrorResponse
from voicestack.agentcore import (
    INVOKE_ACTION,
    SERVICE,
    WEBSOCKET_ACTION,
    presign_websocket_url,
    runtime_path,
    sign_websocket_headers,
    websocket_url,
)

HOST = "127.0.0.1:8444"
REGION = "us-east-1"
ARN = "arn:aws:bedrock-agentcore:us-east-1:000000000000:runtime/voicestack_local-localstand"
INVOKE_PATH = runtime_path(ARN, "invocations")
MISMATCH = (
    "The request signature we calculated does not match the signature you provided. "
    "Check your AWS Secret Access Key and signing method. Consult the service documentation for details."
)
TEMPORARY = Principal("voicestack-role", "ASIAAGENTCORETEMP", "temp-secret", session_token="a-session-token")


def now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


def signed_invocation(
    *,
    credentials: Credentials | None = None,
    region: str = REGION,
    service: str = SERVICE,
    body: bytes = b'{"prompt": "hi"}',
    query: str = "qualifier=DEFAULT",
) -> SignedRequest:
    """A POST signed by botocore's SigV4Auth, as boto3 sends InvokeAgentRuntime."""
    url = f"https://{HOST}{INVOKE_PATH}?{query}"
    request = AWSRequest(method="POST", url=url, data=body, headers={"Content-Type": "application/json"})
    SigV4Auth(credentials or ALLOWED.credentials(), service, region).add_auth(request)
    headers = {name.lower(): value for name, value in request.headers.items()}
    headers["host"] = HOST
    return SignedRequest("POST", HOST, INVOKE_PATH, query, headers, body)


def ws_request(url: str, headers: dict[str, str] | None = None) -> SignedRequest:
    path, _, query = url.split(HOST, 1)[1].partition("?")
    lower = {name.lower(): value for name, value in (headers or {}).items()}
    lower["host"] = HOST
    return SignedRequest("GET", HOST, path, query, lower)


def check(
    request: SignedRequest, *, at: datetime.datetime | None = None, presigned: bool = False
) -> Caller | ErrorResponse:
    return verify(
        request, principals=(*TEST_PRINCIPALS, TEMPORARY), region=REGION, now=at or now(), allow_presigned=presigned
    )


def refusal(result: Caller | ErrorResponse) -> tuple[int, str, str]:
    assert isinstance(result, ErrorResponse), result
    return result.status, result.error_type, result.message


def test_a_request_signed_by_botocore_passes_and_names_its_principal() -> None:
    assert check(signed_invocation()) == Caller(ALLOWED, presigned=False)
    assert check(signed_invocation(credentials=TEMPORARY.credentials())) == Caller(TEMPORARY, presigned=False)


def test_a_wrong_secret_does_not_match() -> None:
    forged = Credentials(ALLOWED.access_key, "not-the-secret")
    assert refusal(check(signed_invocation(credentials=forged))) == (403, "InvalidSignatureException", MISMATCH)


@pytest.mark.parametrize(
    ("part", "tamper"),
    [
        ("body", lambda r: SignedRequest(r.method, r.host, r.raw_path, r.raw_query, r.headers, b'{"prompt": "ho"}')),
        ("query", lambda r: SignedRequest(r.method, r.host, r.raw_path, "qualifier=OTHER", r.headers, r.body)),
        (
            "path",
            lambda r: SignedRequest(
                r.method, r.host, r.raw_path.replace("localstand", "localstane"), r.raw_query, r.headers, r.body
            ),
        ),
        ("method", lambda r: SignedRequest("PUT", r.host, r.raw_path, r.raw_query, r.headers, r.body)),
        (
            "signed header",
            lambda r: SignedRequest(
                r.method, r.host, r.raw_path, r.raw_query, {**r.headers, "content-type": "text/plain"}, r.body
            ),
        ),
    ],
)
def test_any_change_to_a_signed_part_breaks_the_signature(part: str, tamper: object) -> None:
    assert callable(tamper)
    assert refusal(check(tamper(signed_invocation()))) == (403, "InvalidSignatureException", MISMATCH), part


def test_an_unsigned_header_may_change() -> None:
    request = signed_invocation()
    extra = SignedRequest(
        request.method,
        request.host,
        request.raw_path,
        request.raw_query,
        {**request.headers, "x-extra": "1"},
        request.body,
    )
    assert check(extra) == Caller(ALLOWED, presigned=False)


def test_scope_in_another_region_or_service_is_refused() -> None:
    assert refusal(check(signed_invocation(region="eu-west-1"))) == (
        403,
        "InvalidSignatureException",
        "Credential should be scoped to a valid region. ",
    )
    assert refusal(check(signed_invocation(service="bedrock"))) == (
        403,
        "InvalidSignatureException",
        "Credential should be scoped to correct service: 'bedrock-agentcore'. ",
    )


def test_a_signature_older_or_newer_than_five_minutes_is_refused() -> None:
    request = signed_invocation()
    signed_at = datetime.datetime.strptime(request.headers["x-amz-date"], "%Y%m%dT%H%M%SZ").replace(tzinfo=datetime.UTC)
    assert check(request, at=signed_at + datetime.timedelta(minutes=5)) == Caller(ALLOWED, presigned=False)
    late = signed_at + datetime.timedelta(minutes=5, seconds=1)
    status, error_type, message = refusal(check(request, at=late))
    assert (status, error_type) == (403, "InvalidSignatureException")
    assert message == (
        f"Signature expired: {request.headers['x-amz-date']} is now earlier than "
        f"{(late - datetime.timedelta(minutes=5)).strftime('%Y%m%dT%H%M%SZ')} "
        f"({late.strftime('%Y%m%dT%H%M%SZ')} - 5 min.)"
    )
    early = signed_at - datetime.timedelta(minutes=5, seconds=1)
    status, error_type, message = refusal(check(request, at=early))
    assert (status, error_type) == (403, "InvalidSignatureException")
    assert message.startswith(f"Signature not yet current: {request.headers['x-amz-date']} is still later than ")


def test_unknown_keys_tokens_and_expired_credentials() -> None:
    unknown = Credentials("AKIDNOBODY", "x")
    assert refusal(check(signed_invocation(credentials=unknown))) == (
        403,
        "UnrecognizedClientException",
        "The security token included in the request is invalid.",
    )
    no_token = Credentials(TEMPORARY.access_key, TEMPORARY.secret_key)
    assert refusal(check(signed_invocation(credentials=no_token)))[1] == "UnrecognizedClientException"
    assert refusal(check(signed_invocation(credentials=EXPIRED.credentials()))) == (
        403,
        "ExpiredTokenException",
        "The security token included in the request is expired",
    )


def test_no_signature_a_malformed_one_or_two_at_once() -> None:
    request = signed_invocation()
    bare = {k: v for k, v in request.headers.items() if k != "authorization"}
    unsigned = SignedRequest("POST", HOST, INVOKE_PATH, "", bare, b"")
    assert refusal(check(unsigned)) == (403, "MissingAuthenticationTokenException", "Missing Authentication Token")
    for value, expected in [
        ("Basic dXNlcjpwYXNz", "Unsupported Authorization Type: only AWS4-HMAC-SHA256 is accepted"),
        (
            "AWS4-HMAC-SHA256 Credential=AKID/20261202/us-east-1/bedrock-agentcore/aws4_request",
            "Authorization header requires 'SignedHeaders', 'Signature' parameter(s).",
        ),
        (
            "AWS4-HMAC-SHA256 Credential=AKID, SignedHeaders=host, Signature=00",
            "Credential should have exactly 5 slash-separated parts: "
            "'ACCESS_KEY/DATE/REGION/SERVICE/aws4_request', got 1",
        ),
    ]:
        malformed = SignedRequest("POST", HOST, INVOKE_PATH, "", {**bare, "authorization": value}, b"")
        assert refusal(check(malformed)) == (403, "IncompleteSignatureException", expected)
    both = SignedRequest("GET", HOST, INVOKE_PATH, "X-Amz-Algorithm=AWS4-HMAC-SHA256", request.headers, b"")
    assert refusal(check(both, presigned=True))[1] == "IncompleteSignatureException"


def test_a_bearer_token_is_an_authorization_method_mismatch() -> None:
    request = SignedRequest("POST", HOST, INVOKE_PATH, "", {"host": HOST, "authorization": "Bearer eyJhbGciOi"}, b"")
    assert refusal(check(request)) == (
        403,
        "AccessDeniedException",
        "Authorization method mismatch: this runtime accepts SigV4 (IAM), not a bearer token.",
    )


def test_websocket_headers_signed_by_voicestack_agentcore_pass() -> None:
    url = websocket_url(f"https://{HOST}", ARN, "DEFAULT")
    headers = sign_websocket_headers(url, ALLOWED.credentials().get_frozen_credentials(), REGION, session_id="s" * 40)
    assert set(headers) == {"Authorization", "X-Amz-Date", "X-Amzn-Bedrock-AgentCore-Runtime-Session-Id"}
    assert check(ws_request(url, headers)) == Caller(ALLOWED, presigned=False)
    temporary = sign_websocket_headers(url, TEMPORARY.credentials().get_frozen_credentials(), REGION)
    assert temporary["X-Amz-Security-Token"] == "a-session-token"
    assert check(ws_request(url, temporary)) == Caller(TEMPORARY, presigned=False)


def test_a_presigned_url_passes_within_its_expiry_and_is_refused_after() -> None:
    url = websocket_url(f"https://{HOST}", ARN, "DEFAULT", session_id="s" * 40)
    presigned = presign_websocket_url(url, ALLOWED.credentials().get_frozen_credentials(), REGION, expires_s=60)
    assert presigned.startswith(f"wss://{HOST}{runtime_path(ARN, 'ws')}?qualifier=DEFAULT&")
    request = ws_request(presigned)
    assert check(request, presigned=True) == Caller(ALLOWED, presigned=True)
    assert refusal(check(request, presigned=False)) == (
        403,
        "IncompleteSignatureException",
        "Presigned URLs are accepted on the WebSocket route only; sign the Authorization header",
    )
    later = now() + datetime.timedelta(seconds=61)
    status, error_type, message = refusal(check(request, at=later, presigned=True))
    assert (status, error_type) == (403, "InvalidSignatureException")
    assert message.startswith("Signature expired: ")
    assert message.endswith(f"({later.strftime('%Y%m%dT%H%M%SZ')} - 60 sec.)")
    tampered = ws_request(presigned.replace("qualifier=DEFAULT", "qualifier=OTHER"))
    assert refusal(check(tampered, presigned=True)) == (403, "InvalidSignatureException", MISMATCH)


def test_a_presigned_url_valid_for_more_than_300_seconds_is_refused() -> None:
    url = websocket_url(f"https://{HOST}", ARN)
    request = AWSRequest(method="GET", url=url.replace("wss://", "https://"))
    SigV4QueryAuth(ALLOWED.credentials(), SERVICE, REGION, expires=301).add_auth(request)
    assert refusal(check(ws_request(request.url.replace("https://", "wss://")), presigned=True)) == (
        403,
        "InvalidSignatureException",
        "X-Amz-Expires must be less than or equal to 300 seconds",
    )
    with pytest.raises(ValueError, match=r"^expires_s must be 1 to 300 seconds \(AgentCore's limit\); got 301$"):
        presign_websocket_url(url, ALLOWED.credentials().get_frozen_credentials(), REGION, expires_s=301)


def test_iam_actions_per_route() -> None:
    assert authorize(Caller(ALLOWED, False), INVOKE_ACTION, ARN) is None
    assert authorize(Caller(ALLOWED, False), WEBSOCKET_ACTION, ARN) is None
    assert authorize(Caller(SSE_ONLY, False), INVOKE_ACTION, ARN) is None
    denied = authorize(Caller(SSE_ONLY, False), WEBSOCKET_ACTION, ARN)
    assert denied is not None
    assert (denied.status, denied.error_type, denied.message) == (
        403,
        "AccessDeniedException",
        "User: arn:aws:iam::000000000000:user/voicestack-sse-only is not authorized to perform: "
        f"bedrock-agentcore:InvokeAgentRuntimeWithWebSocketStream on resource: {ARN} because no identity-based "
        "policy allows the bedrock-agentcore:InvokeAgentRuntimeWithWebSocketStream action",
    )
    assert authorize(Caller(DENIED, False), INVOKE_ACTION, ARN) is not None
