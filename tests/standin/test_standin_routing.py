"""Which container a request goes to, or the exact error SageMaker would answer (no sockets)."""

from __future__ import annotations

import datetime
import stat
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.x509.oid import ExtendedKeyUsageOID

from local.standin.events import ErrorResponse
from local.standin.routing import BridgeTarget, StandInConfig, parse_endpoint_specs, resolve_request
from local.tls import generate_tls_material, write_tls_files

CONFIG = StandInConfig(endpoints={"speech": "ws://127.0.0.1:8080", "other": "wss://speech.internal:9000"})
PATH = "/endpoints/speech/invocations-bidirectional-stream"
SIGNED = [
    (
        b"authorization",
        b"AWS4-HMAC-SHA256 Credential=AKID/20261129/us-east-1/sagemaker/aws4_request, "
        b"SignedHeaders=host;x-amz-date, Signature=abc123",
    ),
    (b"x-amz-date", b"20261129T120000Z"),
    (b"content-type", b"application/vnd.amazon.eventstream"),
]


def resolve(headers: list[tuple[bytes, bytes]] | None = None, *, path: str = PATH, method: str = "POST") -> object:
    return resolve_request(method, path, [*SIGNED, *(headers or [])], CONFIG)


def error(result: object) -> tuple[int, str, str]:
    assert isinstance(result, ErrorResponse), result
    return result.status, result.error_type, result.message


def test_default_route_is_the_container_websocket_path() -> None:
    assert resolve() == BridgeTarget(
        endpoint_name="speech",
        variant="AllTraffic",
        container_url="ws://127.0.0.1:8080/invocations-bidirectional-stream",
    )


def test_invocation_path_and_query_string_are_honoured() -> None:
    result = resolve(
        [
            (b"x-amzn-sagemaker-target-variant", b"AllTraffic"),
            (b"x-amzn-sagemaker-model-invocation-path", b"v2/stream"),
            (b"x-amzn-sagemaker-model-query-string", b"voice=af_heart&speed=1.5"),
        ],
        path="/endpoints/other/invocations-bidirectional-stream",
    )
    assert result == BridgeTarget(
        endpoint_name="other",
        variant="AllTraffic",
        container_url="wss://speech.internal:9000/v2/stream?voice=af_heart&speed=1.5",
    )


def test_unknown_endpoint_is_a_validation_error() -> None:
    assert error(resolve(path="/endpoints/nope/invocations-bidirectional-stream")) == (
        400,
        "InputValidationError",
        "Endpoint nope of account 000000000000 not found.",
    )


def test_unknown_variant_is_a_validation_error() -> None:
    assert error(resolve([(b"x-amzn-sagemaker-target-variant", b"Blue")])) == (
        400,
        "InputValidationError",
        "Variant Blue not found for Endpoint speech of account 000000000000.",
    )


@pytest.mark.parametrize(
    ("header", "value", "fragment"),
    [
        (b"x-amzn-sagemaker-target-variant", b"-bad", "TargetVariant '-bad'"),
        (b"x-amzn-sagemaker-model-invocation-path", b"/abs", "ModelInvocationPath '/abs'"),
        (b"x-amzn-sagemaker-model-invocation-path", b"a" * 101, "at most 100 characters"),
        (b"x-amzn-sagemaker-model-query-string", b"a=b&", "ModelQueryString 'a=b&'"),
    ],
)
def test_malformed_sagemaker_headers_are_validation_errors(header: bytes, value: bytes, fragment: str) -> None:
    status, kind, message = error(resolve([(header, value)]))
    assert (status, kind) == (400, "InputValidationError")
    assert fragment in message


def test_unsigned_request_is_refused_before_anything_else() -> None:
    result = resolve_request("POST", "/endpoints/nope/invocations-bidirectional-stream", SIGNED[1:], CONFIG)
    message = "Missing Authentication Token: the request must be signed with AWS Signature Version 4"
    assert error(result) == (403, "MissingAuthenticationTokenException", message)
    assert isinstance(result, ErrorResponse)
    assert result.body == {"message": message}  # lower-case, like other AWS front doors


def test_request_without_a_date_is_refused() -> None:
    result = resolve_request("POST", PATH, [SIGNED[0], SIGNED[2]], CONFIG)
    assert isinstance(result, ErrorResponse)
    assert (result.status, result.error_type) == (403, "MissingAuthenticationTokenException")


def test_wrong_content_type_is_a_validation_error() -> None:
    result = resolve_request("POST", PATH, [*SIGNED[:2], (b"content-type", b"application/json")], CONFIG)
    assert error(result) == (
        400,
        "InputValidationError",
        "Content-Type must be application/vnd.amazon.eventstream, got 'application/json'",
    )


@pytest.mark.parametrize(("method", "path"), [("GET", PATH), ("POST", "/endpoints/speech/invocations"), ("POST", "/")])
def test_other_routes_are_not_found(method: str, path: str) -> None:
    status, kind, _ = error(resolve(method=method, path=path))
    assert (status, kind) == (404, "UnknownOperationException")


def test_endpoint_specs() -> None:
    assert parse_endpoint_specs(["a=ws://127.0.0.1:1/", "b-2=wss://h:2"]) == {
        "a": "ws://127.0.0.1:1",
        "b-2": "wss://h:2",
    }


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("speech", "expected NAME=ws://host:port"),
        ("speech=http://127.0.0.1:8080", "must be ws://host:port or wss://host:port"),
        ("speech=ws://127.0.0.1:8080/invocations-bidirectional-stream", "must have no path or query"),
        ("bad_name=ws://127.0.0.1:1", "endpoint name 'bad_name' must match"),
    ],
)
def test_bad_endpoint_specs_name_the_flag_value(spec: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_endpoint_specs([spec])


def test_duplicate_endpoint_spec() -> None:
    with pytest.raises(ValueError, match="endpoint 'a' is given twice"):
        parse_endpoint_specs(["a=ws://h:1", "a=ws://h:2"])


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("ping_interval_s", 0.0, "ping_interval_s must be > 0"),
        ("max_missed_pongs", 0, "max_missed_pongs must be >= 1"),
        ("connect_timeout_s", -1.0, "connect_timeout_s must be > 0"),
        ("variant_name", "not valid", "variant_name: 'not valid'"),
    ],
)
def test_config_validation(field: str, value: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        StandInConfig(endpoints={"speech": "ws://h:1"}, **{field: value})  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="at least one NAME=URL"):
        StandInConfig(endpoints={})


def test_throwaway_pki(tmp_path: Path) -> None:
    now = datetime.datetime(2026, 11, 29, 12, tzinfo=datetime.UTC)
    files = write_tls_files(generate_tls_material(("127.0.0.1", "localhost"), now=now), tmp_path / "certs")
    ca = x509.load_pem_x509_certificate(files.ca_path.read_bytes())
    server = x509.load_pem_x509_certificate(files.cert_path.read_bytes())

    assert ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca is True
    assert server.issuer == ca.subject
    server.verify_directly_issued_by(ca)
    san = server.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert [str(ip) for ip in san.get_values_for_type(x509.IPAddress)] == ["127.0.0.1"]
    assert san.get_values_for_type(x509.DNSName) == ["localhost"]
    usage = server.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert list(usage) == [ExtendedKeyUsageOID.SERVER_AUTH]
    assert server.not_valid_before_utc == now - datetime.timedelta(hours=1)
    assert server.not_valid_after_utc == now + datetime.timedelta(days=2) - datetime.timedelta(hours=1)
    assert stat.S_IMODE(files.key_path.stat().st_mode) == 0o600
    assert b"PRIVATE KEY" not in files.ca_path.read_bytes() + files.cert_path.read_bytes()
