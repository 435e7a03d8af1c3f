"""The user pool's signing keys (its JWKS), fetched off the event loop and cached.

The keys are fetched from `AGENT_JWT_ISSUER` + `JWKS_PATH` (Cognito's documented location) the first
time a token needs one, never at import or start-up, in a worker thread, with a timeout and a size
limit. A token whose `kid` is not in the cached set triggers one refresh (a pool that rotated its
keys), but at most one fetch is attempted per `REFRESH_MIN_INTERVAL_S`, however many tokens name
unknown keys: a flood of forged `kid`s costs Cognito two requests a minute per process, and
concurrent callers wait on the one fetch in flight. The set is fetched again once it is
`MAX_AGE_S` old (a key the pool withdrew stops verifying); if that fetch fails, the keys in hand
are kept. A pool whose keys cannot be fetched at all is `KeysUnavailable` (HTTP 503
`auth_unavailable`), not a crash.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from typing import Final

from jwt import PyJWK, PyJWKSet
from jwt.exceptions import PyJWKSetError

from agent_app.auth import ALGORITHM

logger = logging.getLogger(__name__)

JWKS_PATH: Final = "/.well-known/jwks.json"
FETCH_TIMEOUT_S: Final = 5.0
"""Cognito answers in tens of milliseconds; a call waits at most this long for keys it has never had."""
MAX_JWKS_BYTES: Final = 64 * 1024
"""A Cognito JWKS holds two keys, about 1 KB."""
REFRESH_MIN_INTERVAL_S: Final = 30.0
"""At most one fetch this often, whatever the tokens say: Cognito publishes a new key before it
signs with it, so a rotation costs at most this much delay; a flood of unknown `kid`s, two fetches
a minute."""
MAX_AGE_S: Final = 3600.0
"""Keys this old are fetched again, so that one the pool withdrew stops verifying tokens."""

Fetch = Callable[[str], bytes]
"""Blocking GET of a URL's body (run in a worker thread); raises `KeysUnavailable`."""
Clock = Callable[[], float]


class KeysUnavailable(Exception):
    """The JWKS could not be fetched or holds no usable key."""


def fetch_url(url: str) -> bytes:
    """The body of `url` (HTTP 200, at most `MAX_JWKS_BYTES`), or `KeysUnavailable` saying why not."""
    request = urllib.request.Request(url, headers={"Accept": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=FETCH_TIMEOUT_S) as response:
            body: bytes = response.read(MAX_JWKS_BYTES + 1)
    except urllib.error.HTTPError as exc:
        raise KeysUnavailable(f"{url} answered HTTP {exc.code}") from None
    except (OSError, ValueError) as exc:  # URLError, timeouts, refused connections, a bad URL
        raise KeysUnavailable(f"{url} could not be read: {exc}") from None
    if len(body) > MAX_JWKS_BYTES:
        raise KeysUnavailable(f"{url} sent more than {MAX_JWKS_BYTES} bytes")
    return body


def parse_jwks(body: bytes, *, source: str) -> dict[str, PyJWK]:
    """The RS256 signing keys of a JWKS document, by `kid`; keys of other kinds are left out."""
    try:
        document = json.loads(body)
        key_set = PyJWKSet.from_dict(document) if isinstance(document, dict) else None
    except (ValueError, PyJWKSetError) as exc:
        raise KeysUnavailable(f"{source} is not a JWKS with usable keys: {exc}") from None
    if key_set is None:
        raise KeysUnavailable(f"{source} is not a JWKS (a JSON object with 'keys')")
    keys = {
        key.key_id: key
        for key in key_set.keys
        if key.key_id
        and key.key_type == "RSA"
        and key.algorithm_name == ALGORITHM
        and key.public_key_use in (None, "sig")
    }
    if not keys:
        raise KeysUnavailable(f"{source} holds no RS256 signing key with a 'kid'")
    return keys


class KeySet:
    """The pool's keys by `kid`, fetched when first needed and refreshed as the module docstring says.

    One per process, used from one event loop (the server's).
    """

    def __init__(
        self,
        url: str,
        *,
        fetch: Fetch = fetch_url,
        clock: Clock = time.monotonic,
        refresh_min_interval_s: float = REFRESH_MIN_INTERVAL_S,
        max_age_s: float = MAX_AGE_S,
    ) -> None:
        self.url = url
        self._fetch = fetch
        self._clock = clock
        self._min_interval_s = refresh_min_interval_s
        self._max_age_s = max_age_s
        self._lock = asyncio.Lock()
        self._keys: dict[str, PyJWK] | None = None
        self._fetched_at = 0.0
        self._attempted_at: float | None = None
        self._last_error = f"{url} has not been fetched yet"
        self.fetches = 0
        """Fetches attempted (what the interval bounds)."""

    async def key(self, kid: str) -> PyJWK | None:
        """The key `kid` names; None when the pool has no such key. Raises `KeysUnavailable`."""
        keys = self._keys
        if keys is None or self._clock() - self._fetched_at >= self._max_age_s:
            keys = await self._refresh()
        if kid not in keys:
            keys = await self._refresh()
        return keys.get(kid)

    async def _refresh(self) -> dict[str, PyJWK]:
        """The keys after fetching them again, unless a fetch was attempted within the interval (or
        one is in flight: its result is used). Raises `KeysUnavailable` only when no keys are in hand."""
        async with self._lock:
            recent = self._attempted_at is not None and self._clock() - self._attempted_at < self._min_interval_s
            if not recent:
                self._attempted_at = self._clock()
                self.fetches += 1
                try:
                    body = await asyncio.to_thread(self._fetch, self.url)
                    self._keys = parse_jwks(body, source=self.url)
                    self._fetched_at = self._clock()
                except KeysUnavailable as exc:
                    self._last_error = str(exc)
                    if self._keys is not None:
                        logger.warning("the user pool's keys could not be refreshed, the cached ones stay: %s", exc)
            if self._keys is None:
                raise KeysUnavailable(self._last_error)
            return self._keys
