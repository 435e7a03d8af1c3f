"""The page in headless Chromium, through the web server's proxy, against a fake agent's SSE stream:
both modes play every sample, an underrun pauses and resumes, errors and Stop are handled."""

from __future__ import annotations

import asyncio
import socket
import tempfile
import threading
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Page

from tests.local.local_fakes import (
    ANSWER_TEXT,
    WebStacks,
    agent_events,
    paced_script,
    pcm_bytes,
    pcm_samples,
    split_bytes,
    sse_bytes,
)

pytestmark = pytest.mark.browser

PROMPT = "How does streaming speech work?"
AUDIO_SAMPLES = 24_000  # one second of audio
WAIT_MS = 20_000


def network_pieces(payload: dict[str, Any]) -> list[bytes]:
    """The answer for the requested mode, cut into network pieces at awkward offsets."""
    events = agent_events(payload["mode"], pcm_bytes(pcm_samples(AUDIO_SAMPLES)), chunk_sizes=[4801, 7200, 9599])
    return split_bytes(sse_bytes(events), [997, 1499, 2003])


def ask(page: Page, url: str, mode: str) -> None:
    page.goto(url + "/")
    page.wait_for_function("document.getElementById('health').dataset.state === 'ok'")
    page.fill("#prompt", PROMPT)
    page.check(f"input[name=mode][value={mode}]")
    page.click("#speak")


def current(page: Page) -> dict[str, Any]:
    state: dict[str, Any] = page.evaluate(
        "() => { const { session, ...rest } = window.voicestack.current; return rest; }"
    )
    return state


@pytest.mark.parametrize("mode", ["stream", "batch"])
def test_page_plays_a_streamed_answer(page: Page, web_stacks: WebStacks, mode: str) -> None:
    stack = web_stacks.start(paced_script(network_pieces, delay_s=0.01))
    ask(page, stack.url, mode)
    page.wait_for_function("window.voicestack.current?.done && window.voicestack.current.drained", timeout=WAIT_MS)

    state = current(page)
    assert stack.agent.requests == [{"prompt": PROMPT, "mode": mode}]
    assert page.text_content("#answer") == ANSWER_TEXT
    assert state["error"] is None
    assert (state["samplesReceived"], state["samplesPlayed"], state["playerState"]) == (
        AUDIO_SAMPLES,
        AUDIO_SAMPLES,
        "drained",
    )
    for key in ("firstTextMs", "firstAudioMs", "playbackStartMs"):
        assert isinstance(state[key], int | float), key
    if mode == "batch":
        assert state["firstTextMs"] <= state["firstAudioMs"]  # every text event precedes audio_start
    assert state["serverMetrics"]["time_to_first_audio_ms"] == 80.25
    assert "offline demo model" in page.inner_text("#model")
    assert page.is_hidden("#error")
    assert page.inner_text("#status") == "Done."
    rows = page.locator("#runs tbody tr")
    assert rows.count() == 1
    cells = rows.first.locator("td").all_inner_texts()
    assert (cells[1], cells[5], cells[7]) == (mode, "1.00 s", "ok")

    shot = Path(tempfile.gettempdir()) / f"voicestack-page-{mode}.png"
    page.screenshot(path=str(shot), full_page=True)
    print(f"screenshot: {shot}")


def test_page_underrun_pauses_then_resumes(page: Page, web_stacks: WebStacks) -> None:
    """The agent holds the stream after 0.1 s of audio until the player has run dry."""
    first_chunk_samples = 2400
    events = agent_events(
        "stream", pcm_bytes(pcm_samples(12_000)), chunk_sizes=[2 * first_chunk_samples, 4801, 4799, 4800, 4800]
    )
    body = sse_bytes(events)
    first_audio = body.index(b'"seq": 1')
    hold_at = body.rindex(b"data: ", 0, first_audio)
    release = threading.Event()

    async def held(_: dict[str, Any]) -> AsyncIterator[bytes]:
        yield body[:hold_at]
        await asyncio.to_thread(release.wait, WAIT_MS / 1000)
        yield body[hold_at:]

    stack = web_stacks.start(held)
    ask(page, stack.url, "stream")
    page.wait_for_function("window.voicestack.current?.underruns === 1", timeout=WAIT_MS)
    paused = current(page)
    # Everything that had arrived was played, and the player waits instead of stopping.
    assert (paused["samplesPlayed"], paused["playerState"], paused["done"]) == (first_chunk_samples, "buffering", False)

    release.set()
    page.wait_for_function("window.voicestack.current?.done && window.voicestack.current.drained", timeout=WAIT_MS)
    state = current(page)
    assert (state["samplesPlayed"], state["underruns"], state["error"]) == (12_000, 1, None)


def test_page_shows_the_agent_error(page: Page, web_stacks: WebStacks) -> None:
    events: list[dict[str, Any]] = [
        {"type": "agent_start", "mode": "stream", "model": "demo", "demo": True},
        {"type": "text_delta", "text": "Partial "},
        {"type": "error", "code": "model_error", "message": "the model stream failed"},
        {"type": "text_delta", "text": "never read"},
    ]
    stack = web_stacks.start(paced_script(lambda _: [sse_bytes(events)]))
    ask(page, stack.url, "stream")
    page.wait_for_function("window.voicestack.current?.done", timeout=WAIT_MS)
    assert page.inner_text("#error") == "model_error: the model stream failed"
    assert page.text_content("#answer") == "Partial "
    assert page.locator("#runs tbody td").nth(7).inner_text() == "model_error"


def test_without_speech_the_answer_goes_on_as_text(page: Page, web_stacks: WebStacks) -> None:
    events: list[dict[str, Any]] = [
        {"type": "agent_start", "mode": "stream", "model": "demo", "demo": True},
        {"type": "text_delta", "text": "Partial "},
        {
            "type": "error",
            "code": "speech_unavailable",
            "message": "speech is unavailable; the answer continues as text",
        },
        {"type": "text_delta", "text": "and the rest."},
        {"type": "audio_start", "format": "pcm_s16le", "sample_rate": 24000, "channels": 1},
        {"type": "audio_end", "chunks": 0, "bytes": 0},
        {"type": "agent_end"},
    ]
    stack = web_stacks.start(paced_script(lambda _: [sse_bytes(events)]))
    ask(page, stack.url, "stream")
    page.wait_for_function("window.voicestack.current?.done", timeout=WAIT_MS)
    assert page.inner_text("#error") == "speech_unavailable: speech is unavailable; the answer continues as text"
    assert page.text_content("#answer") == "Partial and the rest."


def test_page_reports_an_unreachable_agent(page: Page, page_problems: list[str], web_stacks: WebStacks) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        closed_port = sock.getsockname()[1]
    url = web_stacks.start_web(f"http://127.0.0.1:{closed_port}")
    page.goto(url + "/")
    page.wait_for_function("document.getElementById('health').dataset.state === 'down'")
    assert page.inner_text("#health") == "agent: agent_unreachable"
    page.click("#speak")
    page.wait_for_function("window.voicestack.current?.done", timeout=WAIT_MS)
    assert page.inner_text("#error").startswith(f"agent_unreachable: no answer from http://127.0.0.1:{closed_port}")
    # The browser logs each failed request; both were expected.
    expected = "console.error: Failed to load resource: the server responded with a status of 502 (Bad Gateway)"
    assert page_problems == [expected, expected]
    page_problems.clear()


def test_page_stop_closes_the_agent_stream(page: Page, web_stacks: WebStacks) -> None:
    events = agent_events("stream", pcm_bytes(pcm_samples(4800)), chunk_sizes=[9600])
    body = sse_bytes(events)
    closed = threading.Event()

    async def endless(_: dict[str, Any]) -> AsyncIterator[bytes]:
        try:
            yield body[: body.index(b"data: ", body.index(b'"audio_chunk"'))]
            while True:  # never finishes: only a disconnect ends it
                await asyncio.sleep(0.05)
                yield b": keep-alive\n\n"
        finally:
            closed.set()

    stack = web_stacks.start(endless)
    ask(page, stack.url, "stream")
    page.wait_for_function("typeof window.voicestack.current?.firstTextMs === 'number'", timeout=WAIT_MS)
    page.click("#stop")
    page.wait_for_function("window.voicestack.current?.done", timeout=WAIT_MS)
    assert page.inner_text("#status") == "Stopped."
    assert closed.wait(timeout=10), "the agent's stream was not closed after Stop"
    assert page.is_hidden("#error")
