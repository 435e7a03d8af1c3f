"""The pure builders of a stack open to people: the two contracts (the agent's environment, the page's
config.json), the content security policy, the page bucket's policy, the page's files, the sign-in URLs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agent_app.config import load_config as load_agent_config
from infra.agent import JwtAuth, agent_environment, auth_environment, jwt_authorizer
from infra.page import (
    ASSET_CACHE,
    CONTENT_TYPES,
    CSP_MAX_CHARACTERS,
    REVALIDATE,
    PageFile,
    PageSourceError,
    config_json,
    content_security_policy,
    page_bucket_policy,
    page_config,
    page_file,
    page_files,
    page_url,
)
from infra.program import REPO_ROOT
from infra.signin import (
    MFA_CONFIGURATION,
    OAUTH_SCOPES,
    discovery_url,
    invite_message,
    issuer_url,
    jwks_url,
    sign_in_domain_url,
)

POOL = "us-east-1_AbCdEf123"
ISSUER = f"https://cognito-idp.us-east-1.amazonaws.com/{POOL}"
CLIENT = "3468db777b516ff0b0f4eded94"
PAGE = "https://d111111abcdef8.cloudfront.net/"
DOMAIN = "https://voicestack-dev-d5fc29ccf1.auth.us-east-1.amazoncognito.com"
RUNTIME = "arn:aws:bedrock-agentcore:us-east-1:123456789012:runtime/voicestack_dev_public-AbCdE12345"

# --- sign-in ----------------------------------------------------------------------------------------


def test_the_issuer_and_what_hangs_below_it() -> None:
    assert issuer_url("us-east-1", POOL) == ISSUER
    assert discovery_url(ISSUER) == f"{ISSUER}/.well-known/openid-configuration"
    assert jwks_url(ISSUER) == f"{ISSUER}/.well-known/jwks.json"
    assert sign_in_domain_url("voicestack-dev-d5fc29ccf1", "us-east-1") == DOMAIN


def test_the_invitation_names_the_page_and_carries_cognitos_placeholders() -> None:
    assert invite_message(PAGE) == (
        "Your voice agent account",
        f"You can now talk to the voice agent at {PAGE}<br><br>Sign in with {{username}} and the temporary "
        "password {####} (valid for 7 days); you will choose your own password then.",
    )


def test_mfa_modes_map_to_the_pools_mfa_configuration() -> None:
    assert MFA_CONFIGURATION == {"off": "OFF", "optional": "OPTIONAL", "required": "ON"}
    assert OAUTH_SCOPES == ("openid", "email")


# --- the agent contract -----------------------------------------------------------------------------


def test_the_iam_runtime_says_iam() -> None:
    assert auth_environment(None) == {"AGENT_AUTH": "iam"}


def test_the_public_runtime_gets_the_issuer_the_clients_and_the_session_limit() -> None:
    assert auth_environment(JwtAuth(ISSUER, (CLIENT,), 2)) == {
        "AGENT_AUTH": "jwt",
        "AGENT_JWT_ISSUER": ISSUER,
        "AGENT_JWT_CLIENT_IDS": CLIENT,
        "AGENT_MAX_SESSIONS_PER_USER": "2",
    }
    assert auth_environment(JwtAuth(ISSUER, ("a1", "b2"), 5))["AGENT_JWT_CLIENT_IDS"] == "a1,b2"


@pytest.mark.parametrize("clients", [(), ("",), ("a,b",)])
def test_client_ids_that_cannot_be_listed_are_refused(clients: tuple[str, ...]) -> None:
    with pytest.raises(ValueError, match=r"^a JWT runtime needs one or more client ids without commas, got "):
        auth_environment(JwtAuth(ISSUER, clients, 2))


def test_the_public_runtimes_whole_environment() -> None:
    environment = agent_environment(
        endpoint_name="voicestack-dev-speech-g5-xlarge",
        region="us-east-1",
        speech_mode="stream",
        model_id="us.anthropic.claude-haiku-4-5-20251001-v1:0",
        voice=None,
        memory_id="voicestack_dev_memory-AbCdE12345",
        metrics_namespace="voicestack/dev",
        auth=JwtAuth(ISSUER, (CLIENT,), 3),
    )
    assert environment == {
        "SPEECH_TRANSPORT": "sagemaker",
        "SPEECH_ENDPOINT_NAME": "voicestack-dev-speech-g5-xlarge",
        "SPEECH_MODE": "stream",
        "AWS_REGION": "us-east-1",
        "BEDROCK_MODEL_ID": "us.anthropic.claude-haiku-4-5-20251001-v1:0",
        "AGENTCORE_MEMORY_ID": "voicestack_dev_memory-AbCdE12345",
        "VOICESTACK_METRICS_NAMESPACE": "voicestack/dev",
        "AGENT_AUTH": "jwt",
        "AGENT_JWT_ISSUER": ISSUER,
        "AGENT_JWT_CLIENT_IDS": CLIENT,
        "AGENT_MAX_SESSIONS_PER_USER": "3",
    }
    # The agent of today starts with it (the names it does not know yet are left to it).
    assert load_agent_config(environment).speech_endpoint_name == "voicestack-dev-speech-g5-xlarge"


def test_the_jwt_authorizer_reads_the_pools_discovery_document_and_allows_the_page_client() -> None:
    assert jwt_authorizer(ISSUER, [CLIENT]) == {
        "custom_jwt_authorizer": {
            "discovery_url": f"{ISSUER}/.well-known/openid-configuration",
            "allowed_clients": [CLIENT],
        }
    }


# --- the page contract ------------------------------------------------------------------------------


def test_config_json_is_exactly_the_page_contract() -> None:
    config = page_config(
        stack="dev",
        region="us-east-1",
        runtime_arn=RUNTIME,
        issuer=ISSUER,
        client_id=CLIENT,
        page_url=PAGE,
        sign_in_domain=DOMAIN,
        scopes=OAUTH_SCOPES,
    )
    assert config == {
        "stack": "dev",
        "region": "us-east-1",
        "runtimeArn": RUNTIME,
        "qualifier": "DEFAULT",
        "auth": {
            "kind": "oidc",
            "authority": ISSUER,
            "clientId": CLIENT,
            "redirectUri": PAGE,
            "postLogoutRedirectUri": PAGE,
            "scope": "openid email",
            "signInDomain": DOMAIN,
        },
    }
    text = config_json(config)
    assert text.endswith("}\n")
    assert json.loads(text) == config


def test_the_page_is_the_distributions_root() -> None:
    assert page_url("d111111abcdef8.cloudfront.net") == PAGE


# --- the content security policy --------------------------------------------------------------------


def test_the_content_security_policy_allows_the_page_cognito_and_agentcore_only() -> None:
    assert content_security_policy(region="eu-west-1", sign_in_domain=DOMAIN) == (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; font-src 'self'; "
        "manifest-src 'self'; connect-src 'self' https://cognito-idp.eu-west-1.amazonaws.com "
        f"{DOMAIN} https://bedrock-agentcore.eu-west-1.amazonaws.com wss://bedrock-agentcore.eu-west-1.amazonaws.com; "
        "base-uri 'none'; form-action 'self'; frame-ancestors 'none'; object-src 'none'"
    )


def test_the_content_security_policy_fits_cloudfronts_quota() -> None:
    longest = "https://" + "x" * 63 + ".auth.ap-southeast-7.amazoncognito.com"
    assert len(content_security_policy(region="ap-southeast-7", sign_in_domain=longest)) < CSP_MAX_CHARACTERS
    with pytest.raises(ValueError, match=r"^the content security policy is \d+ characters, CloudFront takes 1783$"):
        content_security_policy(region="us-east-1", sign_in_domain="https://" + "x" * 2000)


# --- the page bucket's policy ------------------------------------------------------------------------


def test_the_bucket_refuses_plain_http_and_lets_one_distribution_read() -> None:
    bucket = "arn:aws:s3:::page-bucket-d4d1647"
    distribution = "arn:aws:cloudfront::123456789012:distribution/E6B2ABCDEF1234"
    assert page_bucket_policy(bucket, distribution) == {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Sid": "DenyInsecureTransport",
                "Effect": "Deny",
                "Principal": "*",
                "Action": "s3:*",
                "Resource": [bucket, f"{bucket}/*"],
                "Condition": {"Bool": {"aws:SecureTransport": "false"}},
            },
            {
                "Sid": "CloudFrontReadsThePage",
                "Effect": "Allow",
                "Principal": {"Service": "cloudfront.amazonaws.com"},
                "Action": "s3:GetObject",
                "Resource": f"{bucket}/*",
                "Condition": {"StringEquals": {"AWS:SourceArn": distribution}},
            },
        ],
    }


# --- the page's files ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("relative", "content_type", "cache"),
    [
        ("index.html", "text/html; charset=utf-8", REVALIDATE),
        ("app.js", "text/javascript; charset=utf-8", ASSET_CACHE),
        ("player-worklet.js", "text/javascript; charset=utf-8", ASSET_CACHE),
        ("vendor/oidc-client-ts.mjs", "text/javascript; charset=utf-8", ASSET_CACHE),
        ("style.css", "text/css; charset=utf-8", ASSET_CACHE),
        ("icons/app.SVG", "image/svg+xml", ASSET_CACHE),
        ("vendor/LICENSE", "text/plain; charset=utf-8", ASSET_CACHE),
        ("docs/index.html", "text/html; charset=utf-8", ASSET_CACHE),
    ],
)
def test_each_browser_file_gets_its_type_and_caching(relative: str, content_type: str, cache: str) -> None:
    assert page_file(relative) == PageFile(relative, content_type, cache)
    assert REVALIDATE == "no-cache"
    assert ASSET_CACHE == "public, max-age=300"


def test_a_file_no_browser_type_fits_is_named() -> None:
    with pytest.raises(PageSourceError) as raised:
        page_file("sounds/beep.flac")
    assert str(raised.value) == (
        "sounds/beep.flac: no browser content type for '.flac'; give it one in infra/page.py CONTENT_TYPES, "
        "or leave it out (NOT_FOR_THE_BROWSER)"
    )
    with pytest.raises(PageSourceError, match=r"^Makefile: no browser content type for 'a file without extension'"):
        page_file("Makefile")


def write(root: Path, relative: str, text: str = "x") -> None:
    (root / relative).parent.mkdir(parents=True, exist_ok=True)
    (root / relative).write_text(text, encoding="utf-8")


def test_the_page_is_globbed_and_what_is_not_for_the_browser_is_left_out(tmp_path: Path) -> None:
    for relative in (
        "index.html",
        "app.js",
        "vendor/oidc.mjs",
        "vendor/LICENSE",
        "style.css",
        # Not for the browser:
        "package.json",
        "package-lock.json",
        "node_modules/oidc-client-ts/dist/index.js",
        "README.md",
        "notes.md",
        "app.test.js",
        "types.ts",
        ".eslintrc.json",
        ".cache/x.js",
        "config.json",
    ):
        write(tmp_path, relative)
    assert [file.relative for file in page_files(tmp_path)] == [
        "app.js",
        "index.html",
        "style.css",
        "vendor/LICENSE",
        "vendor/oidc.mjs",
    ]


def test_only_the_top_level_config_json_is_the_stacks(tmp_path: Path) -> None:
    write(tmp_path, "index.html")
    write(tmp_path, "vendor/config.json")
    assert [file.relative for file in page_files(tmp_path)] == ["index.html", "vendor/config.json"]


def test_a_page_without_index_html_cannot_be_hosted(tmp_path: Path) -> None:
    write(tmp_path, "app.js")
    with pytest.raises(PageSourceError) as raised:
        page_files(tmp_path)
    assert str(raised.value) == f"{tmp_path} has no index.html: the hosted page's root object"


def test_the_repositorys_page_can_be_hosted() -> None:
    files = {file.relative: file for file in page_files(REPO_ROOT / "local" / "web")}
    assert files["index.html"] == PageFile("index.html", "text/html; charset=utf-8", REVALIDATE)
    assert files["player-worklet.js"].content_type == "text/javascript; charset=utf-8"
    assert "config.json" not in files


@settings(derandomize=True, max_examples=300)
@given(st.text(st.characters(codec="utf-8", exclude_characters="\x00"), min_size=1, max_size=60))
def test_any_file_name_gets_a_browser_type_or_a_named_error(relative: str) -> None:
    try:
        file = page_file(relative)
    except PageSourceError as error:
        message = str(error)
    else:
        assert file.relative == relative
        assert file.content_type in CONTENT_TYPES.values()
        assert file.cache_control in (REVALIDATE, ASSET_CACHE)
        return
    assert message.startswith(f"{relative}: no browser content type for ")
