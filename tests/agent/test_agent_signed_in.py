"""Signed-in users through the app (AGENT_AUTH=jwt), over real HTTP and WebSocket connections: tokens
refused before any model or speech work, one user's conversation theirs alone, the per-user limit
of sessions, and an IAM stack as before. The user pool is `token_support.ServedPool`: real RSA keys,
its JWKS served over loopback HTTP."""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed

from agent_app.app import AppDependencies, create_app
from agent_app.memory import ACTOR_ID, SESSION_HEADER, user_directory
from agent_app.models import DEMO_ANSWER
from tests.agent.agent_support import FOUR_SENTENCES, Event, FakeSpeechServer, Models, types
from tests.agent.conftest import LiveServer
from tests.agent.test_agent_app import demo_deps, listing, sse_events, websocket_config
from tests.agent.test_agent_bargein import is_end, receive_until
from tests.agent.token_support import ServedPool, SigningKey, bearer, served_pool, subprotocols

SESSION = "a1b2c3d4-0000-4000-8000-0000000000f1"
ALICE = "0b7e6c52-3f1e-4d0a-9a53-5e2f1d9c4b11"
BOB = "7f3d2a10-5c4b-4e8f-9a21-0c6d1e2f3a4b"
REMEMBERED = 'You asked me before: "{}" '


@pytest.fixture
def pool() -> Iterator[ServedPool]:
    with served_pool() as served:
        yield served


Start = Callable[..., LiveServer]


@pytest.fixture
def signed_in_app(serve_asgi: Callable[[Any], LiveServer], tmp_path: Path, pool: ServedPool) -> Start:
    """Serve the agent as the JWT-authorized runtime of `pool`; keyword arguments are more environment."""

    def start(
        speech_url: str = "ws://127.0.0.1:9/unused", deps: AppDependencies | None = None, **env: str
    ) -> LiveServer:
        config = websocket_config(speech_url, AGENT_SESSION_DIR=str(tmp_path), **pool.env(**env))
        return serve_asgi(create_app(config, deps or demo_deps()))

    return start


async def post(
    server: LiveServer, payload: Any, *, headers: dict[str, str], session_id: str | None = None
) -> httpx.Response:
    if session_id is not None:
        headers = {**headers, SESSION_HEADER: session_id}
    async with httpx.AsyncClient(timeout=20) as client:
        return await client.post(f"{server.http_url}/invocations", json=payload, headers=headers)


def sse(response: httpx.Response) -> list[Event]:
    assert response.status_code == 200, response.text
    return [json.loads(line[6:]) for line in response.text.splitlines() if line.startswith("data: ")]


def answer_of(events: list[Event]) -> str:
    return "".join(e["text"] for e in events if e["type"] == "text_delta")


# --- tokens refused before any model or speech work ------------------------------------------------------


@pytest.mark.parametrize(
    ("make_headers", "code", "challenge"),
    [
        (lambda pool: {}, "token_missing", "Bearer"),
        (lambda pool: {"Authorization": "Basic dXNlcjpwYXNz"}, "token_malformed", 'Bearer error="invalid_token"'),
        (lambda pool: bearer(pool.pool.mint(exp=1)), "token_expired", 'Bearer error="invalid_token"'),
        (
            lambda pool: bearer(pool.pool.mint(key=SigningKey("key-1"))),
            "token_bad_signature",
            'Bearer error="invalid_token"',
        ),
        (
            lambda pool: bearer(pool.pool.mint(key=SigningKey("key-7"))),
            "token_unknown_key",
            'Bearer error="invalid_token"',
        ),
        (
            lambda pool: bearer(pool.pool.mint(iss="https://elsewhere")),
            "token_wrong_issuer",
            'Bearer error="invalid_token"',
        ),
        (lambda pool: bearer(pool.pool.mint(client_id="other")), "token_wrong_client", 'Bearer error="invalid_token"'),
        (lambda pool: bearer(pool.pool.id_token()), "token_wrong_use", 'Bearer error="invalid_token"'),
        (
            lambda pool: bearer(pool.pool.hs256_with_public_key()),
            "token_algorithm_not_allowed",
            'Bearer error="invalid_token"',
        ),
    ],
    ids=lambda value: value if isinstance(value, str) and value.startswith("token_") else "",
)
async def test_a_bad_token_gets_a_401_before_the_body_is_read(
    fake_speech, signed_in_app: Start, pool: ServedPool, *, make_headers, code: str, challenge: str
) -> None:
    fake: FakeSpeechServer = await fake_speech()
    models = Models()
    server = signed_in_app(fake.url, AppDependencies(model=models))
    # A body over the limit and of the wrong type: the token is refused first all the same.
    async with httpx.AsyncClient(timeout=20) as client:
        response = await client.post(
            f"{server.http_url}/invocations",
            content=b"x" * 100_000,
            headers={**make_headers(pool), "content-type": "text/plain"},
        )
    assert response.status_code == 401
    assert response.headers["content-type"] == "application/json"
    assert response.headers["www-authenticate"] == challenge
    assert response.json()["type"] == "error"
    assert response.json()["code"] == code
    assert models.asked == []
    assert fake.sessions == 0


async def test_a_signed_in_user_is_answered(fake_speech, signed_in_app: Start, pool: ServedPool) -> None:
    fake: FakeSpeechServer = await fake_speech()
    server = signed_in_app(fake.url)
    events = sse(await post(server, {"prompt": "Hello?"}, headers=bearer(pool.pool.mint(ALICE))))
    assert answer_of(events) == DEMO_ANSWER
    assert types(events)[-1] == "agent_end"
    assert pool.fetches == 1


async def test_keys_that_cannot_be_fetched_are_a_503_not_a_crash(signed_in_app: Start, pool: ServedPool) -> None:
    pool.status = 500
    server = signed_in_app()
    response = await post(server, {"prompt": "Hi"}, headers=bearer(pool.pool.mint(ALICE)))
    assert response.status_code == 503
    jwks_url = f"{pool.issuer}/.well-known/jwks.json"
    assert response.json() == {
        "type": "error",
        "code": "auth_unavailable",
        "message": f"the user pool's signing keys are unavailable: {jwks_url} answered HTTP 500",
    }
    async with httpx.AsyncClient() as client:
        assert (await client.get(f"{server.http_url}/ping")).status_code == 200


# --- WS /ws -------------------------------------------------------------------------------------------------


async def refused(socket: ClientConnection) -> tuple[Event, int, str]:
    """The one `error` event of a refused connection, and the close code and reason that follow it."""
    event = json.loads(await socket.recv())
    with pytest.raises(ConnectionClosed) as closed:
        await socket.recv()
    assert closed.value.rcvd is not None
    return event, closed.value.rcvd.code, closed.value.rcvd.reason


async def test_a_browser_signs_in_with_the_subprotocol_pair(
    fake_speech, signed_in_app: Start, pool: ServedPool, caplog: pytest.LogCaptureFixture
) -> None:
    fake: FakeSpeechServer = await fake_speech()
    url = signed_in_app(fake.url).ws_url("/ws")
    with caplog.at_level(logging.INFO, logger="agent_app.identity"):
        async with connect(url, subprotocols=subprotocols(pool.pool.mint(ALICE))) as socket:
            assert socket.subprotocol == "base64UrlBearerAuthorization"
            await socket.send(json.dumps({"type": "prompt", "prompt": "Hello?"}))
            events = await receive_until(socket, is_end)
    assert answer_of(events) == DEMO_ANSWER
    assert events[-1] == {"type": "agent_end", "turn": 1}
    # The line a deployer looks for to learn which carrier AgentCore delivered.
    assert f"ws: user {ALICE} signed in with a token from base64UrlBearerAuthorization" in caplog.messages


async def test_a_header_token_works_on_the_websocket_too(
    signed_in_app: Start, pool: ServedPool, fake_speech, caplog: pytest.LogCaptureFixture
) -> None:
    fake: FakeSpeechServer = await fake_speech()
    url = signed_in_app(fake.url).ws_url("/ws")
    with caplog.at_level(logging.INFO, logger="agent_app.identity"):
        async with connect(url, additional_headers=bearer(pool.pool.mint(ALICE))) as socket:
            assert socket.subprotocol is None
            await socket.send(json.dumps({"type": "prompt", "prompt": "Hello?"}))
            assert (await receive_until(socket, is_end))[-1]["type"] == "agent_end"
    assert f"ws: user {ALICE} signed in with a token from the Authorization header" in caplog.messages


@pytest.mark.parametrize(
    ("make_protocols", "code"),
    [
        (lambda pool: ["base64UrlBearerAuthorization"], "token_missing"),
        (lambda pool: subprotocols(pool.pool.mint(exp=1)), "token_expired"),
        (lambda pool: subprotocols(pool.pool.mint(key=SigningKey("key-1"))), "token_bad_signature"),
        (lambda pool: ["base64UrlBearerAuthorization.!!!", "base64UrlBearerAuthorization"], "token_malformed"),
    ],
    ids=lambda value: value if isinstance(value, str) else "",
)
async def test_a_bad_token_on_the_websocket_gets_an_error_event_then_close_1008(
    signed_in_app: Start, pool: ServedPool, make_protocols, code: str
) -> None:
    url = signed_in_app().ws_url("/ws")
    async with connect(url, subprotocols=make_protocols(pool)) as socket:
        assert socket.subprotocol == "base64UrlBearerAuthorization"  # accepted as the browser requires, then refused
        event, close_code, reason = await refused(socket)
    assert event["type"] == "error"
    assert event["code"] == code
    assert (close_code, reason) == (1008, code)


async def test_unfetchable_keys_close_the_websocket_with_1013(signed_in_app: Start, pool: ServedPool) -> None:
    pool.status = 503
    url = signed_in_app().ws_url("/ws")
    async with connect(url, subprotocols=subprotocols(pool.pool.mint(ALICE))) as socket:
        event, close_code, reason = await refused(socket)
    assert event["code"] == "auth_unavailable"
    assert (close_code, reason) == (1013, "auth_unavailable")


# --- one user's conversation is theirs alone ------------------------------------------------------------------


async def test_a_second_user_naming_the_first_ones_session_gets_a_new_empty_conversation(
    fake_speech, signed_in_app: Start, pool: ServedPool, tmp_path: Path
) -> None:
    fake: FakeSpeechServer = await fake_speech()
    server = signed_in_app(fake.url)
    alice, bob = bearer(pool.pool.mint(ALICE)), bearer(pool.pool.mint(BOB))

    first = sse(await post(server, {"prompt": "My name is Alice."}, headers=alice, session_id=SESSION))
    second = sse(await post(server, {"prompt": "What is my name?"}, headers=alice, session_id=SESSION))
    bobs = sse(await post(server, {"prompt": "What did she say?"}, headers=bob, session_id=SESSION))
    bobs_next = sse(await post(server, {"prompt": "And now?"}, headers=bob, session_id=SESSION))
    alices_third = sse(await post(server, {"prompt": "Thanks."}, headers=alice, session_id=SESSION))

    assert answer_of(first) == DEMO_ANSWER
    assert answer_of(second) == REMEMBERED.format("My name is Alice.") + DEMO_ANSWER
    assert answer_of(bobs) == DEMO_ANSWER  # nothing of Alice's: a conversation of Bob's own
    assert answer_of(bobs_next) == REMEMBERED.format("What did she say?") + DEMO_ANSWER
    assert answer_of(alices_third) == REMEMBERED.format("What is my name?") + DEMO_ANSWER
    # On disk: one directory per user, each with its own copy of the session.
    assert sorted(listing(tmp_path / "users")) == sorted(
        [user_directory(tmp_path, ALICE).name, user_directory(tmp_path, BOB).name]
    )
    for user in (ALICE, BOB):
        assert listing(user_directory(tmp_path, user)) == [f"session_{SESSION}"]


async def test_over_the_websocket_the_other_user_neither_reads_nor_stops_the_first_ones_turn(
    fake_speech, signed_in_app: Start, pool: ServedPool
) -> None:
    fake: FakeSpeechServer = await fake_speech()
    models = Models(FOUR_SENTENCES * 2, tokens_per_s=100)
    url = signed_in_app(fake.url, AppDependencies(model=models), AGENT_SESSION_WAIT_S="0.2").ws_url("/ws")
    headers = {SESSION_HEADER: SESSION}
    async with connect(url, subprotocols=subprotocols(pool.pool.mint(ALICE)), additional_headers=headers) as alice:
        await alice.send(json.dumps({"type": "prompt", "prompt": "Alice's question"}))
        await receive_until(alice, lambda e: e["type"] == "text_delta")
        # Bob names Alice's session while her turn runs: he neither waits for it (it is not his
        # conversation's turn, so no session_busy) nor stops it (no turn_stopped for Alice).
        async with connect(url, subprotocols=subprotocols(pool.pool.mint(BOB)), additional_headers=headers) as bob:
            models.text, models.tokens_per_s = "Bob's answer.", 2000
            await bob.send(json.dumps({"type": "prompt", "prompt": "Bob's question"}))
            bobs = await receive_until(bob, is_end)
        alices = await receive_until(alice, is_end)

    assert bobs[-1] == {"type": "agent_end", "turn": 1}
    assert answer_of(bobs) == "Bob's answer."
    assert alices[-1] == {"type": "agent_end", "turn": 1}
    assert "turn_stopped" not in types(alices)
    assert answer_of(alices).endswith(FOUR_SENTENCES)
    assert models.made[0].stopped_early is False
    assert models.asked == ["Alice's question", "Bob's question"]


async def test_an_iam_stack_is_as_before_whatever_authorization_it_is_sent(
    fake_speech, serve_asgi: Callable[[Any], LiveServer], tmp_path: Path
) -> None:
    fake: FakeSpeechServer = await fake_speech()
    config = websocket_config(fake.url, AGENT_SESSION_DIR=str(tmp_path))
    server = serve_asgi(create_app(config, demo_deps()))
    sse(await post(server, {"prompt": "Hi"}, headers={}, session_id=SESSION))
    again = sse(await post(server, {"prompt": "Hi again"}, headers=bearer("not-a-token"), session_id=SESSION))
    assert answer_of(again) == REMEMBERED.format("Hi") + DEMO_ANSWER
    assert listing(user_directory(tmp_path, ACTOR_ID)) == [f"session_{SESSION}"]
    # Nor is an IAM stack limited: more sessions at once than a signed-in user may have.
    urls = [server.ws_url("/ws")] * 3
    sockets = [
        await connect(url, additional_headers={SESSION_HEADER: f"{SESSION[:-1]}{i}"}) for i, url in enumerate(urls)
    ]
    for socket in sockets:
        await socket.send(json.dumps({"type": "prompt", "prompt": "Hi"}))
        assert (await receive_until(socket, is_end))[-1]["type"] == "agent_end"
        await socket.close()


# --- the per-user limit of sessions -------------------------------------------------------------------------

LIMIT_MESSAGE = (
    "this user already has 2 sessions open, the most one user may have at once (limit 2); close one, then try again"
)


def session(n: int) -> str:
    return f"a1b2c3d4-0000-4000-8000-{n:012d}"


async def open_socket(url: str, token: str, session_id: str) -> ClientConnection:
    return await connect(url, subprotocols=subprotocols(token), additional_headers={SESSION_HEADER: session_id})


async def test_a_user_over_the_limit_is_refused_others_are_not_and_a_closed_socket_frees_its_session(
    fake_speech, signed_in_app: Start, pool: ServedPool
) -> None:
    fake: FakeSpeechServer = await fake_speech()
    server = signed_in_app(fake.url)
    url = server.ws_url("/ws")
    alice, bob = pool.pool.mint(ALICE), pool.pool.mint(BOB)

    first, second = await open_socket(url, alice, session(1)), await open_socket(url, alice, session(2))
    async with await open_socket(url, alice, session(3)) as third:
        event, close_code, reason = await refused(third)
    assert event == {"type": "error", "code": "too_many_sessions", "message": LIMIT_MESSAGE}
    assert (close_code, reason) == (1013, "too_many_sessions")

    over = await post(server, {"prompt": "Hi"}, headers=bearer(alice), session_id=session(3))
    assert (over.status_code, over.json()) == (
        429,
        {"type": "error", "code": "too_many_sessions", "message": LIMIT_MESSAGE},
    )
    over = await post(server, {"prompt": "Hi"}, headers=bearer(alice))  # a one-turn call is a session too
    assert over.status_code == 429
    # A session she has open counts once, whatever holds it: a call on it is answered, as is a
    # second socket on it (a reconnect while the first lingers).
    assert (
        types(sse(await post(server, {"prompt": "Hi"}, headers=bearer(alice), session_id=session(1))))[-1]
        == "agent_end"
    )
    async with await open_socket(url, alice, session(2)) as again:
        await again.send(json.dumps({"type": "prompt", "prompt": "Still here?"}))
        assert (await receive_until(again, is_end))[-1]["type"] == "agent_end"
    # Bob is not affected.
    async with await open_socket(url, bob, session(3)) as bobs:
        await bobs.send(json.dumps({"type": "prompt", "prompt": "Hi"}))
        assert (await receive_until(bobs, is_end))[-1]["type"] == "agent_end"

    await first.close()
    await first.wait_closed()
    async with await open_socket(url, alice, session(3)) as third:
        await third.send(json.dumps({"type": "prompt", "prompt": "Now?"}))
        assert (await receive_until(third, is_end))[-1]["type"] == "agent_end"
    await second.close()


async def test_a_session_held_by_a_turn_is_freed_when_the_turn_ends(
    fake_speech, signed_in_app: Start, pool: ServedPool
) -> None:
    fake: FakeSpeechServer = await fake_speech()
    models = Models(FOUR_SENTENCES, tokens_per_s=200)
    server = signed_in_app(fake.url, AppDependencies(model=models), AGENT_MAX_SESSIONS_PER_USER="1")
    alice = bearer(pool.pool.mint(ALICE))
    async with (
        httpx.AsyncClient(timeout=30) as client,
        client.stream(
            "POST",
            f"{server.http_url}/invocations",
            json={"prompt": "Long?"},
            headers={**alice, SESSION_HEADER: session(1)},
        ) as running,
    ):
        stream: AsyncIterator[Event] = sse_events(running)
        assert (await anext(stream))["type"] == "agent_start"
        refused_meanwhile = await post(server, {"prompt": "Other?"}, headers=alice, session_id=session(2))
        rest = [event async for event in stream]
    assert refused_meanwhile.status_code == 429
    assert refused_meanwhile.json()["message"] == (
        "this user already has 1 sessions open, the most one user may have at once (limit 1); close one, then try again"
    )
    assert rest[-1] == {"type": "agent_end"}
    after = sse(await post(server, {"prompt": "Other?"}, headers=alice, session_id=session(2)))
    assert after[-1] == {"type": "agent_end"}


# bedrock-agentcore 1.25 imports a Strands module that Strands 1.62 marks deprecated.
@pytest.mark.filterwarnings("ignore:strands.experimental.hooks.multiagent is deprecated:DeprecationWarning")
async def test_in_agentcore_memory_the_users_sub_is_the_actor(
    signed_in_app: Start, pool: ServedPool, monkeypatch: pytest.MonkeyPatch, free_port: int
) -> None:
    # As in test_agent_app: Memory's endpoint is a closed local port, so the refused request's
    # path shows the actor the conversation is filed under.
    monkeypatch.setenv("AWS_ENDPOINT_URL_BEDROCK_AGENTCORE", f"http://127.0.0.1:{free_port}")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDAGENTTEST")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "not-a-secret")
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "1")
    server = signed_in_app(AGENTCORE_MEMORY_ID="voicestack_memory-AbC123", AWS_REGION="us-east-1")
    response = await post(server, {"prompt": "Hi"}, headers=bearer(pool.pool.mint(ALICE)), session_id=SESSION)
    assert response.status_code == 503
    assert response.json()["code"] == "memory_unavailable"
    assert f"/memories/voicestack_memory-AbC123/actor/{ALICE}/sessions/{SESSION}" in response.json()["message"]
