"""Tokens for the tests: a user pool stand-in that mints Cognito-shaped access tokens and serves its JWKS.

The keys are real RSA keys made with `cryptography`; tokens are signed by PyJWT. The JWKS is served
by a small HTTP server on a loopback port (`ServedPool`), so the agent fetches it the way it fetches
Cognito's, and the server counts the fetches.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import threading
import time
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.hazmat.primitives.asymmetric.rsa import RSAPrivateKey
from jwt.algorithms import RSAAlgorithm
from websockets.typing import Subprotocol

from agent_app.jwks import JWKS_PATH

CLIENT_ID = "5rr0n8t1gq4hm0c6t5u1l7ugr2"
FRESH: Any = object()
"""`sub` left to the pool: a new UUID."""
OTHER_CLIENT_ID = "1h57kf5cpq17m0eml12EXAMPLE"


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode("ascii").rstrip("=")


def unsigned(header: Mapping[str, Any], claims: Mapping[str, Any], signature: bytes = b"") -> str:
    """A compact JWS of our own making (for the forms PyJWT will not produce: `alg: none`, ...)."""
    parts = [b64url(json.dumps(dict(header)).encode()), b64url(json.dumps(dict(claims)).encode())]
    return ".".join([*parts, b64url(signature)])


@dataclass
class SigningKey:
    kid: str
    private: RSAPrivateKey = field(
        default_factory=lambda: rsa.generate_private_key(public_exponent=65537, key_size=2048)
    )

    def jwk(self) -> dict[str, Any]:
        jwk: dict[str, Any] = json.loads(RSAAlgorithm.to_jwk(self.private.public_key()))
        return {**jwk, "kid": self.kid, "alg": "RS256", "use": "sig"}

    def public_pem(self) -> bytes:
        return self.private.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )


@dataclass
class UserPool:
    """Mints access tokens as Cognito does (claims, RS256, `kid`), for `issuer`."""

    issuer: str = "https://cognito-idp.us-east-1.amazonaws.com/us-east-1_Ab12Cd34E"
    keys: list[SigningKey] = field(default_factory=lambda: [SigningKey("key-1")])

    def claims(self, sub: Any = FRESH, **overrides: Any) -> dict[str, Any]:
        """Cognito's access token claims for `sub` (None: no `sub`); `overrides` replace or (None) drop claims."""
        now = int(time.time())
        sub = str(uuid.uuid4()) if sub is FRESH else sub
        claims: dict[str, Any] = {
            "sub": sub,
            "iss": self.issuer,
            "client_id": CLIENT_ID,
            "origin_jti": str(uuid.uuid4()),
            "event_id": str(uuid.uuid4()),
            "token_use": "access",
            "scope": "openid email",
            "auth_time": now,
            "exp": now + 3600,
            "iat": now,
            "jti": str(uuid.uuid4()),
            "username": sub,
        }
        claims.update(overrides)
        return {name: value for name, value in claims.items() if value is not None}

    def mint(
        self,
        sub: Any = FRESH,
        *,
        key: SigningKey | None = None,
        headers: Mapping[str, Any] | None = None,
        **claims: Any,
    ) -> str:
        """An access token of `sub` (a fresh UUID by default; None: none); `claims` override Cognito's
        (None drops one)."""
        key = key or self.keys[0]
        return jwt.encode(
            self.claims(sub, **claims), key.private, algorithm="RS256", headers={"kid": key.kid, **(headers or {})}
        )

    def id_token(self, sub: Any = FRESH) -> str:
        """Cognito's ID token: the client in `aud`, no `client_id`, `token_use: id`."""
        return self.mint(sub, token_use="id", client_id=None, aud=CLIENT_ID, email="jane@example.com")

    def hs256_with_public_key(self, sub: Any = FRESH) -> str:
        """The algorithm-confusion forgery: HS256 keyed with the pool's public key."""
        header = {"alg": "HS256", "kid": self.keys[0].kid, "typ": "JWT"}
        body = ".".join([b64url(json.dumps(header).encode()), b64url(json.dumps(self.claims(sub)).encode())])
        signature = hmac.new(self.keys[0].public_pem(), body.encode(), hashlib.sha256).digest()
        return f"{body}.{b64url(signature)}"

    def jwks(self) -> dict[str, Any]:
        return {"keys": [key.jwk() for key in self.keys]}


class ServedPool:
    """A `UserPool` whose JWKS is served over HTTP on a loopback port; `issuer` is that server's URL."""

    def __init__(self) -> None:
        self.fetches = 0
        self.status = 200
        self.body: bytes | None = None
        """Served instead of the pool's JWKS when set."""
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.issuer = f"http://127.0.0.1:{self._server.server_address[1]}/us-east-1_Ab12Cd34E"
        self.pool = UserPool(issuer=self.issuer)
        self._thread = threading.Thread(target=self._server.serve_forever, name="jwks", daemon=True)

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        served = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                served.fetches += 1
                if self.path != "/us-east-1_Ab12Cd34E" + JWKS_PATH or served.status != 200:
                    self.send_error(404 if served.status == 200 else served.status)
                    return
                body = served.body if served.body is not None else json.dumps(served.pool.jwks()).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        return Handler

    def env(self, **more: str) -> dict[str, str]:
        """The JWT runtime's environment (the infra contract) for this pool."""
        return {"AGENT_AUTH": "jwt", "AGENT_JWT_ISSUER": self.issuer, "AGENT_JWT_CLIENT_IDS": CLIENT_ID, **more}

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


@contextmanager
def served_pool() -> Iterator[ServedPool]:
    served = ServedPool()
    served._thread.start()
    try:
        yield served
    finally:
        served.close()


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def subprotocols(token: str) -> list[Subprotocol]:
    """What a browser offers (AgentCore's documented form): the token, then the sentinel."""
    return [
        Subprotocol(f"base64UrlBearerAuthorization.{b64url(token.encode())}"),
        Subprotocol("base64UrlBearerAuthorization"),
    ]
