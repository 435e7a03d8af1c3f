"""The token checks as pure functions: tokens minted here (a real RSA key, PyJWT), the exact code and
message of every bad token, the token's two carriers, and user ids as AgentCore Memory takes them."""

from __future__ import annotations

import re
import time
from datetime import UTC, datetime
from typing import Any

import botocore.session  # type: ignore[import-untyped]
import jwt
import pytest
from botocore.validate import ParamValidator  # type: ignore[import-untyped]
from hypothesis import given
from hypothesis import strategies as st
from jwt import PyJWK

from agent_app.auth import (
    BEARER_SUBPROTOCOL,
    CLOCK_LEEWAY_S,
    MAX_TOKEN_CHARS,
    USER_ID_CHARS,
    USER_ID_PATTERN,
    TokenRefused,
    accepted_subprotocol,
    bearer_token,
    check_user_id,
    key_id,
    unknown_key,
    verify_token,
)
from agent_app.memory import ACTOR_ID, MEMORY_LEGACY_ACTOR_PREFIXES
from speech_protocol import quote
from tests.agent.token_support import (
    CLIENT_ID,
    OTHER_CLIENT_ID,
    SigningKey,
    UserPool,
    b64url,
    subprotocols,
    unsigned,
)

POOL = UserPool()
KEYS = {key.kid: PyJWK(key.jwk()) for key in POOL.keys}
SUB = "0b7e6c52-3f1e-4d0a-9a53-5e2f1d9c4b11"


def user_of(token: str) -> str:
    """The whole pure chain, as the agent runs it: shape and kid, the key, the signature and claims."""
    kid = key_id(token)
    if kid not in KEYS:
        raise unknown_key(kid)
    return verify_token(token, KEYS[kid], issuer=POOL.issuer, client_ids={CLIENT_ID})


def refusal(token: str) -> tuple[str, str]:
    with pytest.raises(TokenRefused) as refused:
        user_of(token)
    return refused.value.code.value, refused.value.message


def test_a_cognito_access_token_names_its_user() -> None:
    assert user_of(POOL.mint(SUB)) == SUB


def now() -> int:
    return int(time.time())


BAD_SUBJECT = (
    "the token's user id ('sub') cannot name a conversation's owner: 1 to 128 letters, digits, '-' or '_', "
    "starting with a letter or digit, not a reserved name; got "
)


@pytest.mark.parametrize(
    ("token", "code", "message"),
    [
        (POOL.mint(SUB, exp=now() - 3600), "token_expired", "the token has expired; sign in again"),
        (POOL.mint(SUB, exp=now() - CLOCK_LEEWAY_S - 5), "token_expired", "the token has expired; sign in again"),
        (
            POOL.mint(SUB, iat=now() + 3600),
            "token_not_yet_valid",
            "the token is not valid yet (issued in the future: check the clocks)",
        ),
        (
            POOL.mint(SUB, nbf=now() + 3600),
            "token_not_yet_valid",
            "the token is not valid yet (issued in the future: check the clocks)",
        ),
        (
            POOL.mint(SUB, key=SigningKey("key-1")),  # another private key under the pool's kid: forged
            "token_bad_signature",
            "the token's signature does not verify with the user pool's key",
        ),
        (
            POOL.mint(SUB).rsplit(".", 1)[0] + ".",  # the signature stripped
            "token_bad_signature",
            "the token's signature does not verify with the user pool's key",
        ),
        (
            POOL.mint(SUB, key=SigningKey("key-9")),
            "token_unknown_key",
            "the token's signing key 'key-9' is not one of the user pool's keys",
        ),
        (
            unsigned({"alg": "RS256"}, POOL.claims(SUB), b"x" * 256),
            "token_unknown_key",
            "the token names no signing key ('kid')",
        ),
        (
            POOL.mint(SUB, iss="https://cognito-idp.us-east-1.amazonaws.com/us-east-1_Other0000"),
            "token_wrong_issuer",
            "the token was not issued by this stack's user pool",
        ),
        (POOL.mint(SUB, iss=None), "token_wrong_issuer", "the token names no issuer ('iss')"),
        (
            POOL.mint(SUB, client_id=OTHER_CLIENT_ID),
            "token_wrong_client",
            "the token's app client '1h57kf5cpq17m0eml12EXAMPLE' is not one this agent accepts",
        ),
        (POOL.mint(SUB, client_id=None), "token_wrong_client", "the token names no app client ('client_id')"),
        (
            POOL.id_token(SUB),
            "token_wrong_use",
            "the token is for 'id' use; send the access token, not the ID token",
        ),
        (
            POOL.mint(SUB, token_use=None),
            "token_wrong_use",
            "the token has no token_use; send the access token, not the ID token",
        ),
        (
            unsigned({"alg": "none", "kid": "key-1"}, POOL.claims(SUB)),
            "token_algorithm_not_allowed",
            "the token is signed with 'none'; only RS256 is accepted",
        ),
        (
            POOL.hs256_with_public_key(SUB),
            "token_algorithm_not_allowed",
            "the token is signed with 'HS256'; only RS256 is accepted",
        ),
        (
            jwt.encode(POOL.claims(SUB), POOL.keys[0].private, algorithm="RS512", headers={"kid": "key-1"}),
            "token_algorithm_not_allowed",
            "the token is signed with 'RS512'; only RS256 is accepted",
        ),
        (
            jwt.encode(POOL.claims(SUB), POOL.keys[0].private, algorithm="PS256", headers={"kid": "key-1"}),
            "token_algorithm_not_allowed",
            "the token is signed with 'PS256'; only RS256 is accepted",
        ),
        (
            unsigned({"kid": "key-1"}, POOL.claims(SUB), b"x" * 256),
            "token_algorithm_not_allowed",
            "the token is signed with None; only RS256 is accepted",
        ),
        (POOL.mint(None), "token_no_subject", "the token names no user ('sub')"),
        (POOL.mint(""), "token_no_subject", "the token names no user ('sub')"),
        (POOL.mint(42), "token_bad_subject", BAD_SUBJECT + "42"),
        (POOL.mint("../../etc"), "token_bad_subject", BAD_SUBJECT + "'../../etc'"),
        (POOL.mint("a/b"), "token_bad_subject", BAD_SUBJECT + "'a/b'"),
        (POOL.mint("tenant:alice"), "token_bad_subject", BAD_SUBJECT + "'tenant:alice'"),
        (POOL.mint(ACTOR_ID), "token_bad_subject", BAD_SUBJECT + "'voicestack-caller'"),
        (POOL.mint(f"session_{SUB}"), "token_bad_subject", BAD_SUBJECT + quote(f"session_{SUB}")),
        (POOL.mint("agent_default"), "token_bad_subject", BAD_SUBJECT + "'agent_default'"),
        (POOL.mint("a" * 129), "token_bad_subject", BAD_SUBJECT + quote("a" * 129)),
        (POOL.mint(SUB, exp=None), "token_malformed", "the token has no 'exp' claim"),
        (
            POOL.mint(SUB, exp="tomorrow"),
            "token_malformed",
            "the token's payload is not a JSON object of valid JWT claims",
        ),
        (
            POOL.mint(SUB, iat="today"),
            "token_malformed",
            "the token's payload is not a JSON object of valid JWT claims",
        ),
        (
            jwt.api_jws.encode(b"not json", POOL.keys[0].private, algorithm="RS256", headers={"kid": "key-1"}),
            "token_malformed",
            "the token's payload is not a JSON object of valid JWT claims",
        ),
        (
            jwt.api_jws.encode(b"[1, 2]", POOL.keys[0].private, algorithm="RS256", headers={"kid": "key-1"}),
            "token_malformed",
            "the token's payload is not a JSON object of valid JWT claims",
        ),
        (
            unsigned({"alg": "RS256", "kid": 7}, POOL.claims(SUB), b"x" * 256),
            "token_malformed",
            "the token's parts do not decode, or its header is not a JSON object of valid JWT parameters",
        ),
        (
            b64url(b"not json") + "." + b64url(b"{}") + "." + b64url(b"sig"),
            "token_malformed",
            "the token's parts do not decode, or its header is not a JSON object of valid JWT parameters",
        ),
        (
            POOL.mint(SUB)[:-1],  # a signature of a length no base64 has
            "token_malformed",
            "the token's parts do not decode, or its header is not a JSON object of valid JWT parameters",
        ),
        ("not-a-jwt", "token_malformed", "the token is not a JWT (three base64url parts separated by dots)"),
        ("a.b", "token_malformed", "the token is not a JWT (three base64url parts separated by dots)"),
        ("a.b.c.d", "token_malformed", "the token is not a JWT (three base64url parts separated by dots)"),
        ("eyJh..c2ln", "token_malformed", "the token is not a JWT (three base64url parts separated by dots)"),
        ("eyJ+.eyJ/.abc=", "token_malformed", "the token is not a JWT (three base64url parts separated by dots)"),
        (
            "a" * (MAX_TOKEN_CHARS + 1),
            "token_too_large",
            f"the token has 4097 characters; the limit is {MAX_TOKEN_CHARS}",
        ),
    ],
    ids=lambda value: value if isinstance(value, str) and value.startswith("token_") else "",
)
def test_each_bad_token_gets_its_code_and_message(token: str, code: str, message: str) -> None:
    assert refusal(token) == (code, message)


def test_a_token_within_the_clock_leeway_is_accepted() -> None:
    assert user_of(POOL.mint(SUB, exp=now() - CLOCK_LEEWAY_S + 5, iat=now() + CLOCK_LEEWAY_S - 5)) == SUB


def test_an_altered_payload_does_not_verify() -> None:
    header, _, signature = POOL.mint(SUB).split(".")
    other_payload = POOL.mint("1c0e8d0a-0000-4000-8000-00000000beef").split(".")[1]
    assert refusal(f"{header}.{other_payload}.{signature}") == (
        "token_bad_signature",
        "the token's signature does not verify with the user pool's key",
    )


def test_a_signature_is_checked_before_the_claims() -> None:
    """A forged token that is also expired and for another client is refused as forged."""
    forged = POOL.mint(SUB, key=SigningKey("key-1"), exp=now() - 3600, client_id=OTHER_CLIENT_ID)
    assert refusal(forged)[0] == "token_bad_signature"


# --- the token's carriers ---------------------------------------------------------------------------------


def refused_carrier(authorization: str | None, offered: list[str]) -> tuple[str, str]:
    with pytest.raises(TokenRefused) as refused:
        bearer_token(authorization, offered)
    return refused.value.code.value, refused.value.message


def test_the_authorization_header_carries_a_bearer_token() -> None:
    token = POOL.mint(SUB)
    assert bearer_token(f"Bearer {token}") == token
    assert bearer_token(f"  bearer   {token} ") == token  # the scheme is case-insensitive (RFC 7235)


def test_a_browser_carries_it_in_the_subprotocols() -> None:
    token = POOL.mint(SUB)
    assert bearer_token(None, subprotocols(token)) == token
    assert bearer_token("  ", subprotocols(token)) == token  # a blank header carries nothing
    assert bearer_token(None, [f"{BEARER_SUBPROTOCOL}.{b64url(token.encode())}"]) == token


def test_the_header_wins_over_the_subprotocol() -> None:
    header_token, protocol_token = POOL.mint(SUB), POOL.mint("other-user")
    assert bearer_token(f"Bearer {header_token}", subprotocols(protocol_token)) == header_token


@pytest.mark.parametrize(
    ("authorization", "offered", "code", "message"),
    [
        (
            None,
            [],
            "token_missing",
            "sign in first: send an access token (Authorization: Bearer <token>, or the base64UrlBearerAuthorization "
            "WebSocket subprotocols)",
        ),
        (
            None,
            [BEARER_SUBPROTOCOL, "chat"],
            "token_missing",
            "sign in first: send an access token (Authorization: Bearer <token>, or the base64UrlBearerAuthorization "
            "WebSocket subprotocols)",
        ),
        ("Basic dXNlcjpwYXNz", [], "token_malformed", "the Authorization header must be 'Bearer <token>'"),
        ("Bearer", [], "token_malformed", "the Authorization header must be 'Bearer <token>'"),
        (
            "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20261202/us-east-1/bedrock-agentcore/aws4_request",
            [],
            "token_malformed",
            "the Authorization header must be 'Bearer <token>'",
        ),
        (
            "Bearer " + "a" * (MAX_TOKEN_CHARS + 1),
            [],
            "token_too_large",
            "the token has 4097 characters; the limit is 4096",
        ),
        (
            None,
            [f"{BEARER_SUBPROTOCOL}.YQ", f"{BEARER_SUBPROTOCOL}.Yg", BEARER_SUBPROTOCOL],
            "token_malformed",
            "more than one base64UrlBearerAuthorization token subprotocol",
        ),
        (
            None,
            [f"{BEARER_SUBPROTOCOL}.not+base64/url=", BEARER_SUBPROTOCOL],
            "token_malformed",
            "the base64UrlBearerAuthorization subprotocol does not hold a base64url token",
        ),
        (
            None,
            [f"{BEARER_SUBPROTOCOL}.abcde", BEARER_SUBPROTOCOL],  # 5 characters: no base64 has that length
            "token_malformed",
            "the base64UrlBearerAuthorization subprotocol does not hold a base64url token",
        ),
        (
            None,
            [f"{BEARER_SUBPROTOCOL}.{b64url('é'.encode())}", BEARER_SUBPROTOCOL],
            "token_malformed",
            "the base64UrlBearerAuthorization subprotocol does not hold a base64url token",
        ),
        (
            None,
            [f"{BEARER_SUBPROTOCOL}.{b64url(b'a' * 5000)}", BEARER_SUBPROTOCOL],
            "token_too_large",
            "the token has 5000 characters; the limit is 4096",
        ),
    ],
)
def test_bad_carriers_get_their_code_and_message(
    authorization: str | None, offered: list[str], code: str, message: str
) -> None:
    assert refused_carrier(authorization, offered) == (code, message)


def test_the_upgrade_is_answered_with_the_sentinel_never_the_token() -> None:
    assert accepted_subprotocol(subprotocols(POOL.mint(SUB))) == BEARER_SUBPROTOCOL
    assert accepted_subprotocol([f"{BEARER_SUBPROTOCOL}.YQ"]) is None
    assert accepted_subprotocol(["chat"]) is None
    assert accepted_subprotocol([]) is None


# --- user ids, with botocore's bedrock-agentcore model as the oracle ---------------------------------------

CREATE_EVENT = botocore.session.get_session().get_service_model("bedrock-agentcore").operation_model("CreateEvent")
ACTOR = CREATE_EVENT.input_shape.members["actorId"]


def memory_accepts_actor(actor: str) -> bool:
    """CreateEvent's `actorId`: botocore's validator (type, minimum length) and the model's max and pattern."""
    params: dict[str, Any] = {
        "memoryId": "voicestack_memory-AbC123",
        "actorId": actor,
        "sessionId": SUB,
        "eventTimestamp": datetime(2026, 12, 2, tzinfo=UTC),
        "payload": [{"conversational": {"content": {"text": "Hi"}, "role": "USER"}}],
    }
    meta = ACTOR.metadata
    return (
        not ParamValidator().validate(params, CREATE_EVENT.input_shape).has_errors()
        and len(actor) <= meta["max"]
        and re.fullmatch(meta["pattern"], actor) is not None
    )


def test_the_user_id_rule_is_within_memorys_actor_id() -> None:
    assert USER_ID_CHARS[0] >= ACTOR.metadata["min"]
    assert USER_ID_CHARS[1] <= ACTOR.metadata["max"]
    assert memory_accepts_actor(SUB)
    assert check_user_id(SUB) == SUB
    assert memory_accepts_actor("a/b")
    assert memory_accepts_actor("tenant:alice")


@given(st.text(alphabet="aZ09-_/:.@é ", min_size=0, max_size=140))
def test_every_user_id_accepted_is_an_actor_id_memory_accepts(sub: str) -> None:
    try:
        user = check_user_id(sub)
    except TokenRefused:
        return
    assert memory_accepts_actor(user), user
    assert re.fullmatch(USER_ID_PATTERN, user)


@pytest.mark.filterwarnings("ignore:strands.experimental.hooks.multiagent is deprecated:DeprecationWarning")
def test_the_reserved_actor_prefixes_are_the_memory_integrations() -> None:
    from bedrock_agentcore.memory.integrations.strands import session_manager as memory_integration

    assert (memory_integration.LEGACY_SESSION_PREFIX, memory_integration.LEGACY_AGENT_PREFIX) == (
        MEMORY_LEGACY_ACTOR_PREFIXES
    )
