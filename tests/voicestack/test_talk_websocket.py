"""`voicestack talk` over the WebSocket route against a scripted agent: which answer is a turn's
(the agent numbers turns per connection and refuses some questions without a number), and a turn
stopped by the agent itself (another connection of the session asked) recorded as stopped, never
waited on: the client (run_turn), then the command as a process."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from starlette.applications import Starlette
from starlette.routing import WebSocketRoute
from starlette.websockets import WebSocket

from local.threaded_server import serve_in_thread
from tests.voicestack.talk_support import caller_env, talk
from voicestack.talk.client import run_turn
from voicestack.talk.conversation import WebSocketConversation
from voicestack.talk.targets import LocalAgent

WAIT_S = 10.0
"""Longer than any answer here takes; reaching it means the client waited for nothing."""
SESSION = "talk-websocket-session-0123456789abcdef"


def start(turn: int) -> dict[str, Any]:
    return {"type": "agent_start", "turn": turn, "mode": "stream"}


def text(turn: int, words: str) -> dict[str, Any]:
    return {"type": "text_delta", "turn": turn, "text": words}


def end(turn: int) -> dict[str, Any]:
    return {"type": "agent_end", "turn": turn}


@dataclass
class ScriptedSocket:
    """`WS /ws` answering each prompt with the next list of `answers` (an answer that does not end
    waits); `stop` is confirmed with `turn_stopped` of the last turn. Records the caller's messages."""

    answers: list[list[dict[str, Any]]]
    received: list[str] = field(default_factory=list)

    def app(self) -> Starlette:
        return Starlette(routes=[WebSocketRoute("/ws", self._conversation)])

    async def _conversation(self, websocket: WebSocket) -> None:
        await websocket.accept()
        turn = 0
        while (message := await websocket.receive())["type"] != "websocket.disconnect":
            control = json.loads(message["text"])
            self.received.append(control["type"])
            if control["type"] == "stop":
                await websocket.send_text(json.dumps({"type": "turn_stopped", "turn": turn}))
                continue
            for event in self.answers.pop(0):
                turn = event.get("turn", turn)
                await websocket.send_text(json.dumps(event))


@pytest.fixture
def scripted(request: pytest.FixtureRequest) -> Iterator[tuple[ScriptedSocket, str]]:
    agent = ScriptedSocket(list(request.param))  # its own copy: the answers are used up
    with serve_in_thread(agent.app()) as server:
        yield agent, server.http_url


AGENT_STOPS_IT = [[start(1), text(1, "Hel"), {"type": "turn_stopped", "turn": 1}]]
"""The agent stops turn 1 without being asked: another connection of the session asked a question."""


@pytest.mark.parametrize("scripted", [AGENT_STOPS_IT], indirect=True)
async def test_a_turn_the_agent_stopped_is_recorded_as_stopped_by_it(scripted: tuple[ScriptedSocket, str]) -> None:
    _, url = scripted
    agent = LocalAgent(url)
    conversation = WebSocketConversation(agent, SESSION)
    result = await asyncio.wait_for(run_turn(conversation, {"prompt": "Hi?"}, number=1), WAIT_S)
    await conversation.aclose()
    await agent.aclose()
    assert (result.outcome, result.stopped_by, result.error_code, result.text) == ("stopped", "agent", None, "Hel")


REFUSED_THEN_ANSWERED = [
    [{"type": "error", "code": "bad_request", "message": "'voice' is not one of the server's"}],
    [start(1), text(1, "Hi."), end(1)],
]


@pytest.mark.parametrize("scripted", [REFUSED_THEN_ANSWERED], indirect=True)
async def test_a_refused_question_takes_no_turn_number_from_the_next(scripted: tuple[ScriptedSocket, str]) -> None:
    """The agent refuses the first question without a turn; the second is its connection's turn 1."""
    _, url = scripted
    agent = LocalAgent(url)
    conversation = WebSocketConversation(agent, SESSION)
    refused = await asyncio.wait_for(run_turn(conversation, {"prompt": "Hi?", "voice": "x"}, number=1), WAIT_S)
    answered = await asyncio.wait_for(run_turn(conversation, {"prompt": "Hi?"}, number=2), WAIT_S)
    await conversation.aclose()
    await agent.aclose()
    assert (refused.outcome, refused.error_code) == ("error", "bad_request")
    assert (answered.outcome, answered.text, answered.stopped_by) == ("ok", "Hi.", None)


@pytest.mark.parametrize("scripted", [[[start(1), text(1, "Hel")]]], indirect=True)
async def test_a_turn_the_caller_stops_is_confirmed_and_recorded_as_stopped_by_it(
    scripted: tuple[ScriptedSocket, str],
) -> None:
    socket, url = scripted
    agent = LocalAgent(url)
    conversation = WebSocketConversation(agent, SESSION)
    stop = asyncio.Event()
    result = await asyncio.wait_for(
        run_turn(conversation, {"prompt": "Hi?"}, number=1, stop=stop, on_text=lambda _: stop.set()), WAIT_S
    )
    await conversation.aclose()
    await agent.aclose()
    assert (result.outcome, result.stopped_by, result.text) == ("stopped", "caller", "Hel")
    assert socket.received == ["prompt", "stop"]


@pytest.mark.parametrize("scripted", [AGENT_STOPS_IT], indirect=True)
def test_the_command_exits_1_when_the_agent_stopped_its_answer(scripted: tuple[ScriptedSocket, str]) -> None:
    _, url = scripted
    done = talk(["--url", url, "--session", SESSION, "--no-play", "Hi?"], caller_env())
    assert done.returncode == 1, done.stderr
    assert done.stdout == "Hel\n"
    err = done.stderr.splitlines()
    assert err[-3] == "(the agent stopped the answer: another connection of this session asked a question)"
    assert err[-1] == (
        "voicestack talk: the agent stopped the answer: another connection of this session asked a question "
        f"(session {SESSION})"
    )
