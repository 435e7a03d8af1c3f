"""The page over the WebSocket connection, in headless Chromium, through the real chain: web server
relay, the AgentCore app's `WS /ws` (scripted model), the speech container app (zero-cost engine,
slowed down, with a probe). Two turns on one socket and one session id; Stop ends the answer at
the agent (model cancelled, speech requests cancelled) while the socket stays open; a question on
another connection of the same session stops the page's answer, which the page records as stopped."""

from __future__ import annotations

import json
from collections.abc import AsyncIterable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from bedrock_agentcore.runtime.context import BedrockAgentCoreContext
from playwright.sync_api import Page
from strands.types.streaming import StreamEvent
from websockets.sync.client import connect

from agent_app.config import AgentConfig
from agent_app.models import ModelChoice, ScriptedModel, ScriptedTurn
from bench.speech_probe import ProbedEngine, SessionProbe
from kokoro_server.app import create_app as create_speech_app
from kokoro_server.engine import ZeroCostEngine
from kokoro_server.settings import Settings
from local.threaded_server import serve_in_thread
from local.webserver import WebServerConfig
from local.webserver import create_app as create_web_app
from tests.local.local_fakes import ask, runs, serve_real_agent, turns, wait_answered

pytestmark = pytest.mark.browser

WAIT_MS = 30_000
LONG = "Streaming speech starts sooner than you think, and it keeps going while the model writes. " * 6


@dataclass
class Chain:
    url: str
    probe: SessionProbe
    models: list[ScriptedModel]
    session_ids: list[str | None]


class _TurnByTurn(ScriptedModel):
    """The app builds its model once per process: each model call here streams a new scripted answer
    (the first question a long one, to be stopped; later ones short) and records the call's session."""

    def __init__(self, models: list[ScriptedModel], session_ids: list[str | None]) -> None:
        super().__init__([ScriptedTurn(LONG)], tokens_per_s=40)
        self._models = models
        self._session_ids = session_ids

    def stream(
        self, messages: Any, tool_specs: Any = None, system_prompt: str | None = None, **kwargs: Any
    ) -> AsyncIterable[StreamEvent]:
        self._session_ids.append(BedrockAgentCoreContext.get_session_id())
        text = LONG if not self._models else f"Answer number {len(self._models) + 1}."
        made = ScriptedModel([ScriptedTurn(text)], tokens_per_s=300 if self._models else 40)
        self._models.append(made)
        return made.stream(messages, tool_specs, system_prompt, **kwargs)


@pytest.fixture
def chain(tmp_path: Path) -> Iterator[Chain]:
    probe = SessionProbe(create_speech_app(Settings(), ProbedEngine(ZeroCostEngine(compute_s_per_char=0.01))))
    models: list[ScriptedModel] = []
    session_ids: list[str | None] = []

    def model(config: AgentConfig) -> ModelChoice:
        return ModelChoice(model=_TurnByTurn(models, session_ids), name="scripted", demo=False)

    with ExitStack() as stack:
        agent = serve_real_agent(stack, probe, tmp_path / "conversations", model)
        web = stack.enter_context(serve_in_thread(create_web_app(WebServerConfig(agent_url=agent.http_url))))
        yield Chain(url=web.http_url, probe=probe, models=models, session_ids=session_ids)


def open_over_the_websocket(page: Page, chain: Chain) -> str:
    """The page, loaded, with the WebSocket connection picked; its session id."""
    page.goto(chain.url + "/")
    page.wait_for_function("document.getElementById('health').dataset.state === 'ok'")
    page.check("input[name=transport][value=websocket]")
    session_id: str = page.evaluate("window.voicestack.sessionId")
    return session_id


def test_stop_and_two_turns_over_the_websocket(page: Page, chain: Chain) -> None:
    session_id = open_over_the_websocket(page, chain)

    ask(page, "Talk for a while.")
    page.wait_for_function("window.voicestack.current?.samplesPlayed > 0", timeout=WAIT_MS)
    page.click("#stop")
    page.wait_for_function("window.voicestack.current?.done", timeout=WAIT_MS)
    assert page.inner_text("#status") == "Stopped."
    # The worklet confirms the reset by a message of its own, which may come after `done`.
    page.wait_for_function("typeof window.voicestack.lastStop?.silentMs === 'number'", timeout=WAIT_MS)
    assert page.evaluate("({ ...window.voicestack.player.progress })")["buffered"] == 0

    ask(page, "And now?")
    page.wait_for_function(
        "window.voicestack.turns.length === 2 && window.voicestack.current?.done && window.voicestack.current.drained",
        timeout=WAIT_MS,
    )
    turns: list[dict[str, Any]] = page.evaluate("() => window.voicestack.turns.map((t) => ({ ...t }))")
    assert [t["result"] for t in turns] == ["stopped", "ok"]
    assert turns[1]["answer"] == "Answer number 2."
    assert page.evaluate("window.voicestack.current.error") is None

    # Both questions went over one socket, in the page's conversation.
    assert chain.session_ids == [session_id, session_id]
    assert chain.models[0].stopped_early is True
    assert chain.models[1].finished is True
    first = chain.probe.sessions[0]
    assert first.closed is not None
    assert first.kinds()[-1] == "cancel"
    assert "close" not in first.kinds()


def test_a_question_on_another_connection_of_the_session_stops_the_pages_answer(page: Page, chain: Chain) -> None:
    """Another tab (or `voicestack talk --session`) asks on the page's session while the page's answer
    plays: the agent stops the page's turn (`turn_stopped`), the page drops its audio and records the
    answer as stopped, and its socket goes on."""
    session_id = open_over_the_websocket(page, chain)
    ask(page, "Talk for a while.")
    page.wait_for_function("window.voicestack.current?.samplesPlayed > 0", timeout=WAIT_MS)

    other: list[dict[str, Any]] = []
    with connect(chain.url.replace("http://", "ws://") + f"/api/ws?session={session_id}") as socket:
        socket.send(json.dumps({"type": "prompt", "prompt": "Me too?"}))
        while not other or other[-1]["type"] not in ("agent_end", "error"):
            other.append(json.loads(socket.recv(timeout=WAIT_MS / 1000)))
    assert "".join(e["text"] for e in other if e["type"] == "text_delta") == "Answer number 2."
    assert {e["turn"] for e in other} == {1}  # its connection's first turn

    page.wait_for_function("window.voicestack.current?.done", timeout=WAIT_MS)
    assert page.inner_text("#status") == "Stopped: another connection of this conversation asked a question."
    assert page.evaluate("window.voicestack.turns.map((t) => t.result)") == ["stopped"]
    assert runs(page) == ["stopped"]
    assert page.evaluate("window.voicestack.current.error") is None
    assert page.evaluate("window.voicestack.lastStop.reason") == "turn_stopped"
    page.wait_for_function("typeof window.voicestack.lastStop?.silentMs === 'number'", timeout=WAIT_MS)
    assert page.evaluate("({ ...window.voicestack.player.progress })")["buffered"] == 0
    assert chain.models[0].stopped_early is True

    ask(page, "And now?")  # the same socket, the next question
    wait_answered(page, 2, WAIT_MS)
    assert [(t["result"], t["answer"]) for t in turns(page)][1] == ("ok", "Answer number 3.")
    assert chain.session_ids == [session_id] * 3
