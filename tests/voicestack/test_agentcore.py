"""voicestack.agentcore: the SDK's standard configuration (profiles, service endpoints, CA bundles),
the signed WebSocket handshake and invocation, and the session-id rule, without a network."""

from __future__ import annotations

import ssl
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest
from botocore.credentials import ReadOnlyCredentials  # type: ignore[import-untyped]
from botocore.exceptions import ProfileNotFound  # type: ignore[import-untyped]

from agent_app import memory
from local.tls import generate_tls_material, write_tls_files
from voicestack.agentcore import (
    SESSION_HEADER,
    conversation_session_problem,
    conversation_session_rule,
    presign_websocket_url,
    resolve_sdk,
    sign_request,
    sign_websocket_headers,
    websocket_url,
)

ARN = "arn:aws:bedrock-agentcore:eu-west-1:123456789012:runtime/voicestack_dev-abcdefghij"


def test_the_default_endpoint_is_the_regions(aws_home: Path) -> None:
    sdk = resolve_sdk(region="us-west-2")
    assert (sdk.region, sdk.endpoint_url, sdk.ca_bundle) == (
        "us-west-2",
        "https://bedrock-agentcore.us-west-2.amazonaws.com",
        None,
    )


def test_a_profile_brings_region_service_endpoint_and_ca_bundle(aws_home: Path) -> None:
    bundle = write_tls_files(generate_tls_material(), aws_home / "pki").ca_path
    (aws_home / "config").write_text(
        "[profile lab]\n"
        "region = eu-west-1\n"
        f"ca_bundle = {bundle}\n"
        "services = lab-endpoints\n"
        "[services lab-endpoints]\n"
        "bedrock_agentcore =\n"
        "  endpoint_url = https://agentcore.lab.internal:9443\n"
    )
    (aws_home / "credentials").write_text("[lab]\naws_access_key_id = AKIDLAB\naws_secret_access_key = lab-secret\n")
    sdk = resolve_sdk(profile="lab")
    assert (sdk.region, sdk.endpoint_url, sdk.ca_bundle) == ("eu-west-1", "https://agentcore.lab.internal:9443", bundle)
    assert sdk.credentials().access_key == "AKIDLAB"
    context = sdk.ssl_context()
    assert context.verify_mode == ssl.CERT_REQUIRED
    assert [cert["subject"] for cert in context.get_ca_certs()] == [
        ((("organizationName", "voicestack local"),), (("commonName", "voicestack throwaway CA"),))
    ]


def test_the_environment_overrides_the_endpoint_and_bundle(aws_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bundle = write_tls_files(generate_tls_material(), aws_home / "pki").ca_path
    monkeypatch.setenv("AWS_ENDPOINT_URL_BEDROCK_AGENTCORE", "https://127.0.0.1:8444")
    monkeypatch.setenv("AWS_CA_BUNDLE", str(bundle))
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    sdk = resolve_sdk()
    assert (sdk.region, sdk.endpoint_url, sdk.ca_bundle) == ("us-east-1", "https://127.0.0.1:8444", bundle)


def test_missing_profile_region_or_credentials(aws_home: Path) -> None:
    with pytest.raises(ProfileNotFound):
        resolve_sdk(profile="nope")
    with pytest.raises(ValueError, match=r"^no AWS region: pass --region, or set AWS_DEFAULT_REGION"):
        resolve_sdk()
    from botocore.exceptions import NoCredentialsError

    with pytest.raises(NoCredentialsError):
        resolve_sdk(region="us-east-1").credentials()


def test_signed_and_presigned_handshakes_carry_what_agentcore_reads() -> None:
    temporary = ReadOnlyCredentials("ASIAEXAMPLE", "secret", "the-token")
    url = websocket_url("https://bedrock-agentcore.eu-west-1.amazonaws.com", ARN, "DEFAULT")
    headers = sign_websocket_headers(url, temporary, "eu-west-1", session_id="s" * 36)
    assert headers["Authorization"].startswith("AWS4-HMAC-SHA256 Credential=ASIAEXAMPLE/")
    assert (
        "/eu-west-1/bedrock-agentcore/aws4_request, SignedHeaders=host;x-amz-date;x-amz-security-token, Signature="
        in (headers["Authorization"])
    )
    assert (headers["X-Amz-Security-Token"], headers[SESSION_HEADER]) == ("the-token", "s" * 36)

    session_url = websocket_url("https://bedrock-agentcore.eu-west-1.amazonaws.com", ARN, "DEFAULT", "s" * 36)
    presigned = urlsplit(presign_websocket_url(session_url, temporary, "eu-west-1", expires_s=120))
    query = parse_qs(presigned.query)
    assert presigned.scheme == "wss"
    assert query["qualifier"] == ["DEFAULT"]
    assert query[SESSION_HEADER] == ["s" * 36]
    assert query["X-Amz-Expires"] == ["120"]
    assert query["X-Amz-Security-Token"] == ["the-token"]
    assert query["X-Amz-SignedHeaders"] == ["host"]
    assert query["X-Amz-Credential"][0].endswith("/eu-west-1/bedrock-agentcore/aws4_request")


def test_one_signer_for_the_websocket_upgrade_and_the_relayed_invocation() -> None:
    temporary = ReadOnlyCredentials("ASIAEXAMPLE", "secret", "the-token")
    url = websocket_url("https://bedrock-agentcore.eu-west-1.amazonaws.com", ARN, "DEFAULT")
    upgrade = sign_websocket_headers(url, temporary, "eu-west-1", session_id="s" * 36)
    assert sorted(upgrade) == ["Authorization", "X-Amz-Date", "X-Amz-Security-Token", SESSION_HEADER]
    sent = {"Content-Type": "application/json", SESSION_HEADER: "s" * 36}
    invocation = sign_request(
        "POST", url.replace("wss://", "https://"), temporary, "eu-west-1", headers=sent, body=b"{}"
    )
    assert sorted(invocation) == sorted(
        ["Content-Type", SESSION_HEADER, "Authorization", "X-Amz-Date", "X-Amz-Security-Token"]
    )
    signed = invocation["Authorization"].split("SignedHeaders=", 1)[1].split(",", 1)[0]
    assert signed == "content-type;host;x-amz-date;x-amz-security-token;x-amzn-bedrock-agentcore-runtime-session-id"


def test_the_conversation_session_rule_is_botocores_and_the_agents() -> None:
    """Runtime's runtimeSessionId and Memory's SessionId, read from botocore's models; the agent, whose
    image has no voicestack/, holds the same rule in agent_app/memory.py."""
    assert conversation_session_rule() == (33, 100, "[a-zA-Z0-9][a-zA-Z0-9-_]*")
    low, high, pattern = conversation_session_rule()
    assert (low, high) == memory.SESSION_ID_CHARS
    assert pattern == memory.MEMORY_SESSION_ID_PATTERN
    assert conversation_session_problem("a1b2c3d4-e5f6-4789-8abc-def012345678") is None
    for bad in ("a" * 32, "a" * 101, "_" + "a" * 40, "a" * 40 + "/"):
        assert conversation_session_problem(bad) == "33 to 100 characters matching [a-zA-Z0-9][a-zA-Z0-9-_]*"
