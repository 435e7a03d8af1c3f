"""The user pool's keys: fetched on first use and off the event loop, cached, refreshed on an unknown
`kid` at most once per interval (a flood of forged kids does not hammer the pool), and a pool that
cannot be reached is `KeysUnavailable`, not a crash."""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import time
from typing import Any

import pytest

from agent_app.jwks import (
    JWKS_PATH,
    MAX_JWKS_BYTES,
    REFRESH_MIN_INTERVAL_S,
    KeySet,
    KeysUnavailable,
    fetch_url,
    parse_jwks,
)
from tests.agent.token_support import SigningKey, UserPool, served_pool

URL = "https://cognito-idp.us-east-1.amazonaws.com/us-east-1_Ab12Cd34E" + JWKS_PATH


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Pool:
    """A JWKS source for `KeySet`: counts fetches, can fail, records the thread each ran on."""

    def __init__(self) -> None:
        self.pool = UserPool()
        self.fetches = 0
        self.failing = False
        self.threads: list[threading.Thread] = []
        self.delay_s = 0.0

    def __call__(self, url: str) -> bytes:
        assert url == URL
        self.fetches += 1
        self.threads.append(threading.current_thread())
        if self.delay_s:
            time.sleep(self.delay_s)
        if self.failing:
            raise KeysUnavailable(f"{url} answered HTTP 500")
        return json.dumps(self.pool.jwks()).encode()


def key_set(source: Pool, clock: FakeClock | None = None) -> KeySet:
    return KeySet(URL, fetch=source, clock=clock or FakeClock())


async def test_nothing_is_fetched_until_a_token_needs_a_key_then_the_keys_are_cached() -> None:
    source = Pool()
    keys = key_set(source)
    assert source.fetches == 0
    first = await keys.key("key-1")
    assert first is not None
    assert first.key_id == "key-1"
    assert await keys.key("key-1") is first
    assert source.fetches == 1


async def test_a_flood_of_unknown_kids_costs_one_fetch_per_interval() -> None:
    source, clock = Pool(), FakeClock()
    keys = key_set(source, clock)
    assert await keys.key("key-1") is not None
    found = await asyncio.gather(*(keys.key(f"forged-{i}") for i in range(1_000)))
    assert found == [None] * 1_000
    assert source.fetches == 1  # the set was fetched just now: no refresh within the interval
    clock.now += REFRESH_MIN_INTERVAL_S
    found = await asyncio.gather(*(keys.key(f"forged-again-{i}") for i in range(1_000)))
    assert found == [None] * 1_000
    assert source.fetches == 2  # one refresh for the whole flood
    assert await keys.key("key-1") is not None
    assert source.fetches == 2


async def test_a_rotated_key_is_found_by_the_next_refresh() -> None:
    source, clock = Pool(), FakeClock()
    keys = key_set(source, clock)
    assert await keys.key("key-1") is not None
    source.pool.keys.append(SigningKey("key-2"))
    assert await keys.key("key-2") is None  # within the interval: not fetched again
    clock.now += REFRESH_MIN_INTERVAL_S
    assert (await keys.key("key-2")) is not None
    assert source.fetches == 2


async def test_concurrent_first_calls_wait_on_one_fetch_that_runs_off_the_loop() -> None:
    source = Pool()
    source.delay_s = 0.3
    keys = key_set(source)
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(0.01)
            ticks += 1

    ticking = asyncio.create_task(ticker())
    found = await asyncio.gather(*(keys.key("key-1") for _ in range(50)))
    ticking.cancel()
    assert all(key is not None for key in found)
    assert source.fetches == 1
    assert source.threads[0] is not threading.current_thread()
    assert ticks >= 10  # the loop kept running while the fetch slept in its thread


async def test_a_pool_that_cannot_be_fetched_is_unavailable_and_not_hammered() -> None:
    source, clock = Pool(), FakeClock()
    source.failing = True
    keys = key_set(source, clock)
    for _ in range(3):
        with pytest.raises(KeysUnavailable) as caught:
            await keys.key("key-1")
        assert str(caught.value) == f"{URL} answered HTTP 500"
    assert source.fetches == 1
    clock.now += REFRESH_MIN_INTERVAL_S
    source.failing = False
    assert await keys.key("key-1") is not None
    assert source.fetches == 2


async def test_keys_too_old_are_fetched_again_and_kept_if_that_fails(caplog: pytest.LogCaptureFixture) -> None:
    source, clock = Pool(), FakeClock()
    keys = KeySet(URL, fetch=source, clock=clock, max_age_s=3600)
    assert await keys.key("key-1") is not None
    clock.now += 3600
    source.failing = True
    with caplog.at_level(logging.WARNING, logger="agent_app.jwks"):
        assert await keys.key("key-1") is not None  # the cached key still verifies
    assert source.fetches == 2
    assert caplog.messages == [
        f"the user pool's keys could not be refreshed, the cached ones stay: {URL} answered HTTP 500"
    ]
    source.failing = False
    source.pool.keys = [SigningKey("key-2")]  # the pool withdrew key-1
    clock.now += REFRESH_MIN_INTERVAL_S
    assert await keys.key("key-1") is None
    assert await keys.key("key-2") is not None


def rsa_jwk(**fields: Any) -> dict[str, Any]:
    return {**SigningKey("k").jwk(), **fields}


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"<html>", "is not a JWKS with usable keys: Expecting value: line 1 column 1 (char 0)"),
        (b"[]", "is not a JWKS (a JSON object with 'keys')"),
        (b'{"keys": []}', "is not a JWKS with usable keys: The JWK Set did not contain any keys"),
        (
            json.dumps({"keys": [{"kty": "oct", "k": "c2VjcmV0", "kid": "h"}]}).encode(),
            "holds no RS256 signing key with a 'kid'",
        ),
        (json.dumps({"keys": [rsa_jwk(kid=None)]}).encode(), "holds no RS256 signing key with a 'kid'"),
        (json.dumps({"keys": [rsa_jwk(alg="RS512")]}).encode(), "holds no RS256 signing key with a 'kid'"),
        (json.dumps({"keys": [rsa_jwk(use="enc")]}).encode(), "holds no RS256 signing key with a 'kid'"),
    ],
)
def test_a_document_without_usable_keys_is_refused(body: bytes, message: str) -> None:
    with pytest.raises(KeysUnavailable) as caught:
        parse_jwks(body, source=URL)
    assert str(caught.value) == f"{URL} {message}"


def test_only_rs256_signing_keys_are_kept() -> None:
    keys = {
        "keys": [
            rsa_jwk(kid="sig"),
            rsa_jwk(kid="no-use", use=None),
            rsa_jwk(kid="enc", use="enc"),
            {"kty": "oct", "k": "c2VjcmV0", "kid": "hmac"},
        ]
    }
    assert sorted(parse_jwks(json.dumps(keys).encode(), source=URL)) == ["no-use", "sig"]


def test_fetch_url_reads_a_served_jwks_and_names_what_went_wrong(free_port: int) -> None:
    with served_pool() as served:
        url = served.issuer + JWKS_PATH
        assert json.loads(fetch_url(url)) == served.pool.jwks()
        with pytest.raises(KeysUnavailable) as caught:
            fetch_url(served.issuer + "/nowhere")
        assert str(caught.value) == f"{served.issuer}/nowhere answered HTTP 404"
        served.body = json.dumps(served.pool.jwks()).encode() + b" " * MAX_JWKS_BYTES
        with pytest.raises(KeysUnavailable) as caught:
            fetch_url(url)
        assert str(caught.value) == f"{url} sent more than {MAX_JWKS_BYTES} bytes"
    with pytest.raises(KeysUnavailable) as caught:
        fetch_url(f"http://127.0.0.1:{free_port}/p{JWKS_PATH}")
    assert str(caught.value).startswith(f"http://127.0.0.1:{free_port}/p{JWKS_PATH} could not be read: ")
