"""Who is calling: the signed-in user a token names (`AGENT_AUTH=jwt`), or the stack's IAM callers.

Both routes ask the same `Authenticator` before any model or speech work: `POST /invocations` in
`http_guard.py`, before its body is read; `WS /ws` before its first message. The identity is
recorded in the request's ASGI scope (`identity_of`), where the entrypoint finds it.

What reaches the container (AgentCore's documentation, the SDK in this venv, and what is assumed):
- `POST /invocations`: the page sends `Authorization: Bearer <access token>`; AgentCore's JWT
  authorizer checks it and, with `Authorization` in the runtime's request-header allowlist,
  forwards it (documented: "Pass custom headers to Amazon Bedrock AgentCore Runtime").
- `WS /ws` with headers (a Python client, `generate_ws_connection_oauth`): the same header.
- `WS /ws` from a browser, which cannot set headers: the token rides in the subprotocols
  `base64UrlBearerAuthorization.<base64url token>, base64UrlBearerAuthorization` (documented).
  AgentCore says upgrade requests reach the container "without modification", but also lists
  `Sec-WebSocket-Protocol` among the headers it will not forward as a custom header, and does not
  say whether it turns the subprotocol into an `Authorization` header. So both are read: the
  header first, else the subprotocol (`auth.bearer_token`); the upgrade is answered with the
  sentinel protocol when offered, as a browser requires. Which of the two arrives is for one
  deployed call to show (`agent_app/README.md`, "Signed-in users").

A refusal is `http_guard.Refused`: 401 with the token's code and `WWW-Authenticate: Bearer`
(RFC 6750), or 503 `auth_unavailable` when the user pool's keys cannot be fetched.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final, Protocol

from starlette import status
from starlette.datastructures import Headers
from starlette.types import Scope

from agent_app import events
from agent_app.auth import BEARER_SUBPROTOCOL, TokenRefused, bearer_token, key_id, unknown_key, verify_token
from agent_app.config import AgentConfig
from agent_app.events import AgentErrorCode
from agent_app.http_guard import Refused
from agent_app.jwks import JWKS_PATH, KeySet, KeysUnavailable
from agent_app.memory import ACTOR_ID

logger = logging.getLogger(__name__)

STATE_KEY: Final = "voicestack_identity"
"""Where the identity is recorded in the ASGI scope's `state` (Starlette's `request.state`)."""


@dataclass(frozen=True, slots=True)
class Identity:
    user: str
    """Keys the user's conversations: AgentCore Memory's actor, the file store's directory."""
    signed_in: bool
    """A user with a token (their sessions are limited); False: the stack's IAM callers."""


IAM_CALLERS: Final = Identity(ACTOR_ID, signed_in=False)
"""Every IAM caller of a stack: the runtime passes the container no caller identity of theirs."""


class Authenticator(Protocol):
    async def authenticate(self, scope: Scope) -> Identity:
        """The caller of an HTTP or WebSocket scope, recorded in it; raises `Refused`."""
        ...


def remember(scope: Scope, identity: Identity) -> Identity:
    scope.setdefault("state", {})[STATE_KEY] = identity
    return identity


def identity_of(scope: Scope) -> Identity | None:
    """The identity `authenticate` recorded in `scope`; None if it never ran."""
    identity = scope.get("state", {}).get(STATE_KEY)
    return identity if isinstance(identity, Identity) else None


class IamAuthenticator:
    """An IAM-authorized runtime: AgentCore has checked the SigV4 signature; every caller is one identity."""

    async def authenticate(self, scope: Scope) -> Identity:
        return remember(scope, IAM_CALLERS)


def _offered_subprotocols(scope: Scope) -> Sequence[str]:
    return list(scope.get("subprotocols", ())) if scope["type"] == "websocket" else ()


class JwtAuthenticator:
    """A JWT-authorized runtime: each call's access token names its user (`auth.py` checks it)."""

    def __init__(self, *, issuer: str, client_ids: Sequence[str], keys: KeySet) -> None:
        self._issuer = issuer
        self._client_ids = frozenset(client_ids)
        self._keys = keys

    async def authenticate(self, scope: Scope) -> Identity:
        authorization = Headers(scope=scope).get("authorization")
        try:
            token = bearer_token(authorization, _offered_subprotocols(scope))
            kid = key_id(token)
            key = await self._keys.key(kid)
            if key is None:
                raise unknown_key(kid)
            user = verify_token(token, key, issuer=self._issuer, client_ids=self._client_ids)
        except TokenRefused as refused:
            challenge = "Bearer" if refused.code is AgentErrorCode.TOKEN_MISSING else 'Bearer error="invalid_token"'
            raise Refused(
                status.HTTP_401_UNAUTHORIZED,
                events.error(refused.code, refused.message),
                headers={"WWW-Authenticate": challenge},
            ) from None
        except KeysUnavailable as exc:
            raise Refused(
                status.HTTP_503_SERVICE_UNAVAILABLE,
                events.error(AgentErrorCode.AUTH_UNAVAILABLE, f"the user pool's signing keys are unavailable: {exc}"),
            ) from None
        if scope["type"] == "websocket":
            # Which carrier AgentCore delivered is for a deployment to show (the README's check).
            carrier = "the Authorization header" if authorization and authorization.strip() else BEARER_SUBPROTOCOL
            logger.info("ws: user %s signed in with a token from %s", user, carrier)
        return remember(scope, Identity(user, signed_in=True))


def build_authenticator(config: AgentConfig) -> Authenticator:
    """The configured authenticator; builds no client and fetches nothing (the keys come on first use)."""
    if config.auth == "iam":
        return IamAuthenticator()
    if config.jwt_issuer is None:
        raise ValueError("AGENT_JWT_ISSUER is required with AGENT_AUTH=jwt")  # load_config guarantees it
    return JwtAuthenticator(
        issuer=config.jwt_issuer, client_ids=config.jwt_client_ids, keys=KeySet(config.jwt_issuer + JWKS_PATH)
    )
