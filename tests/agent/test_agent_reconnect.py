"""A caller that comes back on the same session: after its socket dropped, after the session's
microVM was recycled (AgentCore's 15-minute idle timeout), and pings while an answer runs."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from websockets.asyncio.client import connect

from agent_app.app import AppDependencies, create_app
from agent_app.memory import INTERRUPTED_MARK, SESSION_HEADER
from agent_app.models import DEMO_ANSWER, DemoModel, ModelChoice
from tests.agent.agent_support import FOUR_SENTENCES, Event, FakeSpeechServer, Models
from tests.agent.test_agent_app import websocket_config
from tests.agent.test_agent_bargein import NEVER_S, Speech, is_end, receive_until

SESSION = "a1b2c3d4-0000-4000-8000-0000000000c1"
HEADERS = {SESSION_HEADER: SESSION}


def prompt(text: str, **fields: str) -> str:
    return json.dumps({"type": "prompt", "prompt": text, **fields})


def answer_of(events: list[Event]) -> str:
    return "".join(e["text"] for e in events if e["type"] == "text_delta")


async def drain(socket: object, seconds: float) -> list[Event]:
    """Whatever the socket still delivers within `seconds`."""
    received: list[Event] = []
    try:
        async with asyncio.timeout(seconds):
            while True:
                received.append(json.loads(await socket.recv()))  # type: ignore[attr-defined]
    except TimeoutError:
        return received


async def test_a_reconnect_stops_the_turn_its_dropped_socket_still_runs(serve_asgi, tmp_path: Path) -> None:
    """The old socket stays open but nobody reads it: a dropped network the agent has not noticed.
    The new socket's question must not wait for that turn (0.5 s, then 409 session_busy)."""
    speech = Speech(serve_asgi)
    models = Models()
    config = websocket_config(
        speech.url, AGENT_DEADLINE_S="600", AGENT_SESSION_DIR=str(tmp_path), AGENT_SESSION_WAIT_S="0.5"
    )
    url = serve_asgi(create_app(config, AppDependencies(model=models, caller_gone_after_s=NEVER_S))).ws_url("/ws")
    async with connect(url, additional_headers=HEADERS) as old:
        await old.send(prompt("Talk."))
        await receive_until(old, lambda e: e["type"] == "audio_chunk")
        async with connect(url, additional_headers=HEADERS) as new:
            models.text, models.tokens_per_s = FOUR_SENTENCES, 2000
            await new.send(prompt("Are you there?", mode="batch"))
            answer = await receive_until(new, is_end)
        late = await drain(old, 2.0)

    assert answer[0] == {"type": "agent_start", "mode": "batch", "model": "scripted", "demo": False, "turn": 1}
    assert answer[-1] == {"type": "agent_end", "turn": 1}
    assert answer_of(answer) == FOUR_SENTENCES
    assert models.made[0].stopped_early is True
    assert (await speech.wait_closed(0)).kinds()[-1] == "cancel"
    # What reached the old socket late (the rest may sit in a dead socket's buffers) is its own
    # turn's, and nothing of it comes after its turn_stopped.
    assert all(e.get("turn") == 1 for e in late)
    stopped_at = next((i for i, e in enumerate(late) if e["type"] == "turn_stopped"), len(late))
    assert late[stopped_at + 1 :] == []
    # The conversation holds the stopped turn, marked, then the new question and its answer.
    texts = stored_texts(tmp_path)
    assert texts[0] == "Talk."
    assert texts[1].endswith(INTERRUPTED_MARK)
    assert texts[2:] == ["Are you there?", FOUR_SENTENCES]


def stored_texts(directory: Path) -> list[str]:
    """The texts of the conversation's stored messages (Strands' FileSessionManager), in order."""
    messages = [json.loads(path.read_text()) for path in directory.glob("**/message_*.json")]
    return [m["message"]["content"][0]["text"] for m in sorted(messages, key=lambda m: m["message_id"])]


def demo_deps() -> AppDependencies:
    fast_demo = ModelChoice(model=DemoModel(tokens_per_s=2000), name="demo", demo=True)
    return AppDependencies(model=lambda config: fast_demo)


async def test_a_reconnect_to_a_fresh_process_finds_the_conversation(fake_speech, serve_asgi, tmp_path: Path) -> None:
    """AgentCore ends a session idle for 15 minutes (its microVM with it); the caller reconnects on
    the same session id and a new process answers: the conversation is in the store, not in memory."""
    fake: FakeSpeechServer = await fake_speech()
    config = websocket_config(fake.url, AGENT_SESSION_DIR=str(tmp_path))
    first = serve_asgi(create_app(config, demo_deps()))
    async with connect(first.ws_url("/ws"), additional_headers=HEADERS) as socket:
        await socket.send(prompt("How warm is Paris in May?"))
        before = await receive_until(socket, is_end)
    first.stop()

    second = serve_asgi(create_app(config, demo_deps()))
    async with connect(second.ws_url("/ws"), additional_headers=HEADERS) as socket:
        await socket.send(prompt("And in June?"))
        after = await receive_until(socket, is_end)
    assert answer_of(before) == DEMO_ANSWER
    assert answer_of(after) == 'You asked me before: "How warm is Paris in May?" ' + DEMO_ANSWER


async def test_pings_are_answered_while_an_answer_runs(serve_asgi) -> None:
    """AgentCore counts pings as activity: a client may keep its session alive with them."""
    speech = Speech(serve_asgi)
    models = Models()
    config = websocket_config(speech.url, AGENT_DEADLINE_S="600")
    url = serve_asgi(create_app(config, AppDependencies(model=models, caller_gone_after_s=NEVER_S))).ws_url("/ws")
    async with connect(url, ping_interval=None) as socket:
        await socket.send(prompt("Talk."))
        await receive_until(socket, lambda e: e["type"] == "audio_chunk")
        # Read on meanwhile: a pong queues behind the events the client has not read.
        reader = asyncio.create_task(receive_until(socket, lambda e: e["type"] == "turn_stopped"))
        for _ in range(3):
            latency = await asyncio.wait_for(await socket.ping(), 5)
            assert latency < 5
        await socket.send(json.dumps({"type": "stop"}))
        assert (await reader)[-1] == {"type": "turn_stopped", "turn": 1}
    assert models.made[0].stopped_early is True


async def test_a_question_right_after_another_on_one_session_never_waits_for_it(serve_asgi, tmp_path: Path) -> None:
    """The first turn is stopped before its task ever ran (so before its events were read): its
    conversation's turn is given back at once, not after the app's watchdog (a 409 after 0.5 s)."""
    speech = Speech(serve_asgi)
    models = Models(FOUR_SENTENCES, tokens_per_s=2000)
    config = websocket_config(
        speech.url, AGENT_DEADLINE_S="600", AGENT_SESSION_DIR=str(tmp_path), AGENT_SESSION_WAIT_S="0.5"
    )
    url = serve_asgi(create_app(config, AppDependencies(model=models, caller_gone_after_s=NEVER_S))).ws_url("/ws")
    async with connect(url, additional_headers=HEADERS) as socket:
        await socket.send(prompt("First?"))
        await socket.send(prompt("Second?"))
        received = await receive_until(socket, lambda e: e["type"] == "agent_end" or e["type"] == "error")
    assert received[0] == {"type": "turn_stopped", "turn": 1}
    assert received[1]["type"] == "agent_start"
    assert received[-1] == {"type": "agent_end", "turn": 2}
    assert stored_texts(tmp_path) == ["Second?", FOUR_SENTENCES]
