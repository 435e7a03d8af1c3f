"""A signed-in user's token, checked: pure functions, one stable code for each way a token is bad.

With `AGENT_AUTH=jwt` every call carries a Cognito access token: AgentCore's JWT authorizer has
checked it already, and the agent checks it again (the issue's "refused before any model or speech
work" holds even if the runtime were misconfigured), then takes the user's identity from it. The
signature is PyJWT's to verify (never ours); the keys come from the user pool's JWKS
(`agent_app.jwks`), looked up by the token's `kid`. The checks run in this order, and the first
that fails names the token's fault (`AgentErrorCode`, all HTTP 401):

| code | when |
|---|---|
| `token_missing` | no `Authorization` header and no `base64UrlBearerAuthorization.<token>` subprotocol |
| `token_too_large` | over `MAX_TOKEN_CHARS` (AgentCore forwards header values of at most 4 KB) |
| `token_malformed` | not `Bearer <token>`, not three base64url parts, header or payload not JSON, no numeric `exp` |
| `token_algorithm_not_allowed` | `alg` other than RS256 (`none` included): Cognito signs with RS256 only |
| `token_unknown_key` | no `kid`, or a `kid` the pool's JWKS does not hold (after one refresh, see `jwks.py`) |
| `token_bad_signature` | the signature does not verify with that key (forged, or altered) |
| `token_not_yet_valid` | `iat` or `nbf` in the future (beyond `CLOCK_LEEWAY_S`) |
| `token_expired` | `exp` in the past (beyond `CLOCK_LEEWAY_S`) |
| `token_wrong_issuer` | `iss` missing or not `AGENT_JWT_ISSUER` |
| `token_wrong_use` | `token_use` other than `access`: an ID token (`id`) is refused, the page sends the access token |
| `token_wrong_client` | `client_id` missing or not in `AGENT_JWT_CLIENT_IDS` (a Cognito access token has no `aud`) |
| `token_no_subject` | no `sub` |
| `token_bad_subject` | a `sub` that cannot key a conversation (see `check_user_id`) |

Access tokens only: that is what Cognito issues for API calls, what AgentCore's `allowedClients`
checks (the `client_id` claim; an ID token carries the client in `aud` and AgentCore refuses it),
and what the page sends. Messages never quote the token; claim values they quote are cut.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Collection, Sequence
from typing import Any, Final

import jwt
from jwt import PyJWK

from agent_app.events import AgentErrorCode
from agent_app.memory import ACTOR_ID, MEMORY_LEGACY_ACTOR_PREFIXES
from speech_protocol import quote

BEARER_SUBPROTOCOL: Final = "base64UrlBearerAuthorization"
"""AgentCore's browser WebSocket auth: the subprotocols `base64UrlBearerAuthorization.<base64url
token>` and this sentinel, which the server picks back (a browser fails a handshake whose answer
picks none of the protocols it offered)."""
_BEARER_PREFIX: Final = BEARER_SUBPROTOCOL + "."
MAX_TOKEN_CHARS: Final = 4096
"""AgentCore forwards header values of at most 4 KB and its SDK refuses a subprotocol token over
4,096 characters; a Cognito access token is about 1,000."""
ALGORITHM: Final = "RS256"
"""The only algorithm Cognito signs its tokens with."""
CLOCK_LEEWAY_S: Final = 30
"""Clock skew tolerated on `exp`, `nbf` and `iat`: the microVM's clock and Cognito's may differ a little."""
ACCESS_TOKEN_USE: Final = "access"
USER_ID_CHARS: Final = (1, 128)
USER_ID_PATTERN: Final = "[a-zA-Z0-9][a-zA-Z0-9_-]*"
"""A user id (the token's `sub`) as it keys a conversation: within AgentCore Memory's `actorId`
(botocore: 1-255 of `[a-zA-Z0-9][a-zA-Z0-9-_/]*(?::[a-zA-Z0-9-_/]+)*...`) without its `/` and `:`, so
that it names one actor and nothing else; the tests hold it to botocore's model. A Cognito `sub` is
a UUID."""
_USER_ID = re.compile(USER_ID_PATTERN)
_JWS_COMPACT = re.compile(r"[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*")
"""JWS compact serialization; the signature may be empty (`alg: none`), which the algorithm check refuses."""
_BASE64URL = re.compile(r"[A-Za-z0-9_-]+")


class TokenRefused(Exception):
    """A token that cannot be accepted: its stable code and a message that says why."""

    def __init__(self, code: AgentErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def _malformed(message: str) -> TokenRefused:
    return TokenRefused(AgentErrorCode.TOKEN_MALFORMED, message)


def _check_size(chars: int) -> None:
    if chars > MAX_TOKEN_CHARS:
        raise TokenRefused(
            AgentErrorCode.TOKEN_TOO_LARGE, f"the token has {chars} characters; the limit is {MAX_TOKEN_CHARS}"
        )


def accepted_subprotocol(offered: Sequence[str]) -> str | None:
    """The subprotocol to answer a WebSocket upgrade with: the sentinel when offered, never the token."""
    return BEARER_SUBPROTOCOL if BEARER_SUBPROTOCOL in offered else None


def bearer_token(authorization: str | None, subprotocols: Sequence[str] = ()) -> str:
    """The call's token: the `Authorization: Bearer` header (what AgentCore forwards when the runtime
    allowlists it), else a WebSocket's `base64UrlBearerAuthorization.<token>` subprotocol."""
    if authorization is not None and authorization.strip():
        scheme, _, token = authorization.strip().partition(" ")
        token = token.strip()
        if scheme.lower() != "bearer" or not token:
            raise _malformed("the Authorization header must be 'Bearer <token>'")
        _check_size(len(token))
        return token
    carried = [
        protocol.removeprefix(_BEARER_PREFIX) for protocol in subprotocols if protocol.startswith(_BEARER_PREFIX)
    ]
    if not carried:
        raise TokenRefused(
            AgentErrorCode.TOKEN_MISSING,
            f"sign in first: send an access token (Authorization: Bearer <token>, or the {BEARER_SUBPROTOCOL} "
            "WebSocket subprotocols)",
        )
    if len(carried) > 1:
        raise _malformed(f"more than one {BEARER_SUBPROTOCOL} token subprotocol")
    encoded = carried[0]
    _check_size(len(encoded) * 3 // 4)
    if _BASE64URL.fullmatch(encoded) is None or len(encoded) % 4 == 1:
        raise _malformed(f"the {BEARER_SUBPROTOCOL} subprotocol does not hold a base64url token")
    try:
        token = base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4)).decode("ascii")
    except (binascii.Error, UnicodeDecodeError):
        raise _malformed(f"the {BEARER_SUBPROTOCOL} subprotocol does not hold a base64url token") from None
    _check_size(len(token))
    return token


def key_id(token: str) -> str:
    """The `kid` of a token whose shape and algorithm are acceptable; read before any key is looked up."""
    _check_size(len(token))
    if _JWS_COMPACT.fullmatch(token) is None:
        raise _malformed("the token is not a JWT (three base64url parts separated by dots)")
    try:
        header = jwt.get_unverified_header(token)
    except jwt.InvalidTokenError:  # DecodeError among them: bad base64, not JSON, not an object, a kid not a string
        raise _malformed(
            "the token's parts do not decode, or its header is not a JSON object of valid JWT parameters"
        ) from None
    algorithm = header.get("alg")
    if algorithm != ALGORITHM:
        raise TokenRefused(
            AgentErrorCode.TOKEN_ALGORITHM_NOT_ALLOWED,
            f"the token is signed with {quote(algorithm)}; only {ALGORITHM} is accepted",
        )
    kid = header.get("kid")
    if not isinstance(kid, str) or not kid:
        raise TokenRefused(AgentErrorCode.TOKEN_UNKNOWN_KEY, "the token names no signing key ('kid')")
    return kid


def unknown_key(kid: str) -> TokenRefused:
    return TokenRefused(
        AgentErrorCode.TOKEN_UNKNOWN_KEY, f"the token's signing key {quote(kid)} is not one of the user pool's keys"
    )


def verify_token(token: str, key: PyJWK, *, issuer: str, client_ids: Collection[str]) -> str:
    """The user id (`sub`) of a token signed with `key` (the JWKS key its `kid` names)."""
    try:
        claims: dict[str, Any] = jwt.decode(
            token,
            key,
            algorithms=[ALGORITHM],
            issuer=issuer,
            leeway=CLOCK_LEEWAY_S,
            options={"require": ["exp"], "verify_aud": False, "verify_sub": False, "verify_jti": False},
        )
    except jwt.InvalidSignatureError:
        raise TokenRefused(
            AgentErrorCode.TOKEN_BAD_SIGNATURE, "the token's signature does not verify with the user pool's key"
        ) from None
    except jwt.ExpiredSignatureError:
        raise TokenRefused(AgentErrorCode.TOKEN_EXPIRED, "the token has expired; sign in again") from None
    except jwt.ImmatureSignatureError:
        raise TokenRefused(
            AgentErrorCode.TOKEN_NOT_YET_VALID, "the token is not valid yet (issued in the future: check the clocks)"
        ) from None
    except jwt.InvalidIssuerError:
        raise TokenRefused(
            AgentErrorCode.TOKEN_WRONG_ISSUER, "the token was not issued by this stack's user pool"
        ) from None
    except jwt.MissingRequiredClaimError as exc:
        if exc.claim == "iss":
            raise TokenRefused(AgentErrorCode.TOKEN_WRONG_ISSUER, "the token names no issuer ('iss')") from None
        raise _malformed(f"the token has no {quote(exc.claim)} claim") from None
    except jwt.InvalidTokenError:  # DecodeError (payload not a JSON object, exp/nbf not numbers), InvalidIssuedAtError
        raise _malformed("the token's payload is not a JSON object of valid JWT claims") from None

    token_use = claims.get("token_use")
    if token_use != ACCESS_TOKEN_USE:
        what = "has no token_use" if token_use is None else f"is for {quote(token_use)} use"
        raise TokenRefused(AgentErrorCode.TOKEN_WRONG_USE, f"the token {what}; send the access token, not the ID token")
    client_id = claims.get("client_id")
    if client_id is None:
        raise TokenRefused(AgentErrorCode.TOKEN_WRONG_CLIENT, "the token names no app client ('client_id')")
    if not isinstance(client_id, str) or client_id not in client_ids:
        raise TokenRefused(
            AgentErrorCode.TOKEN_WRONG_CLIENT,
            f"the token's app client {quote(client_id)} is not one this agent accepts",
        )
    return check_user_id(claims.get("sub"))


def check_user_id(sub: object) -> str:
    """A token's `sub` as the user id that keys the user's conversations.

    Refused besides what `USER_ID_PATTERN` excludes: the IAM callers' actor (`memory.ACTOR_ID`: a
    signed-in user must never share its conversations) and the actors AgentCore Memory's Strands
    integration reads legacy state from (`session_<id>`, `agent_<id>`), which another user's
    conversation may fall back to.
    """
    if sub is None or sub == "":
        raise TokenRefused(AgentErrorCode.TOKEN_NO_SUBJECT, "the token names no user ('sub')")
    shortest, longest = USER_ID_CHARS
    if (
        not isinstance(sub, str)
        or not shortest <= len(sub) <= longest
        or _USER_ID.fullmatch(sub) is None
        or sub == ACTOR_ID
        or sub.startswith(MEMORY_LEGACY_ACTOR_PREFIXES)
    ):
        raise TokenRefused(
            AgentErrorCode.TOKEN_BAD_SUBJECT,
            f"the token's user id ('sub') cannot name a conversation's owner: {shortest} to {longest} letters, "
            f"digits, '-' or '_', starting with a letter or digit, not a reserved name; got {quote(sub)}",
        )
    return sub
