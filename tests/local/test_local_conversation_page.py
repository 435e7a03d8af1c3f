"""The page as a conversation, in headless Chromium against a fake agent: one session id for every
turn (sent as AgentCore's session header), the turns shown, "New conversation", barge-in (Stop and
a new question drop the buffered audio at once and close the agent's stream), live captions."""

from __future__ import annotations

import asyncio
import base64
import threading
from collections.abc import AsyncIterator, Sequence
from typing import Any

import pytest
from playwright.sync_api import Page

from tests.local.local_fakes import (
    WebStacks,
    ask,
    paced_script,
    pcm_bytes,
    pcm_samples,
    runs,
    sse_bytes,
    turns,
    wait_answered,
)

pytestmark = pytest.mark.browser

WAIT_MS = 20_000
RATE = 24_000


def answer_for(prompt: str) -> str:
    return f"You asked: {prompt}"


def answer_events(
    text: str, samples: int, *, words: Sequence[tuple[int, list[dict[str, Any]]]] = (), chunk: int = 4800
) -> list[dict[str, Any]]:
    """A whole answer: `samples` of audio in chunks; `words` events placed before chunk k."""
    pcm = pcm_bytes(pcm_samples(samples))
    chunks = [pcm[i : i + 2 * chunk] for i in range(0, len(pcm), 2 * chunk)]
    body: list[dict[str, Any]] = [
        {"type": "agent_start", "mode": "stream", "model": "demo", "demo": True},
        {"type": "text_delta", "text": text},
        {"type": "audio_start", "format": "pcm_s16le", "sample_rate": RATE, "channels": 1},
    ]
    placed = dict(words)
    for seq, piece in enumerate(chunks):
        if seq in placed:
            body.append({"type": "words", "words": placed[seq]})
        body.append({"type": "audio_chunk", "seq": seq, "audio": base64.b64encode(piece).decode("ascii")})
    body += [
        {"type": "audio_end", "chunks": len(chunks), "bytes": len(pcm)},
        {
            "type": "metrics",
            "mode": "stream",
            "time_to_first_text_ms": 1.0,
            "time_to_first_audio_ms": 2.0,
            "total_ms": 3.0,
        },
        {"type": "agent_end"},
    ]
    return body


def echo_script(samples: int = 2400) -> Any:
    return paced_script(lambda payload: [sse_bytes(answer_events(answer_for(payload["prompt"]), samples))])


def open_page(page: Page, url: str) -> None:
    page.goto(url + "/")
    page.wait_for_function("document.getElementById('health').dataset.state === 'ok'")


def test_two_turns_share_one_session_and_a_new_conversation_starts_another(page: Page, web_stacks: WebStacks) -> None:
    stack = web_stacks.start(echo_script())
    open_page(page, stack.url)
    first_id = page.evaluate("window.voicestack.sessionId")
    assert len(first_id) >= 33

    ask(page, "What is streaming speech?")
    wait_answered(page, 1)
    ask(page, "And what about June?")
    wait_answered(page, 2)

    assert stack.agent.session_ids == [first_id, first_id]
    assert [r["prompt"] for r in stack.agent.requests] == ["What is streaming speech?", "And what about June?"]
    assert turns(page) == [
        {"prompt": "What is streaming speech?", "answer": answer_for("What is streaming speech?"), "result": "ok"},
        {"prompt": "And what about June?", "answer": answer_for("And what about June?"), "result": "ok"},
    ]
    items = page.locator("#turns li")
    assert items.count() == 2
    assert items.nth(1).locator(".user").inner_text() == "And what about June?"
    assert items.nth(1).locator(".assistant").inner_text() == "You asked: And what about June?"

    # A reload continues the same conversation (the tab keeps its session id).
    open_page(page, stack.url)
    assert page.evaluate("window.voicestack.sessionId") == first_id

    page.click("#new-conversation")
    second_id = page.evaluate("window.voicestack.sessionId")
    assert second_id != first_id
    assert len(second_id) >= 33
    assert page.locator("#turns li").count() == 0
    ask(page, "Hello again")
    wait_answered(page, 1)
    assert stack.agent.session_ids == [first_id, first_id, second_id]


def endless_answer(text: str, samples: int, closed: threading.Event) -> Any:
    """The first `samples` of audio at once, then the stream stays open until the caller leaves."""
    events = answer_events(text, samples)
    body = sse_bytes(events[:-3])  # everything but audio_end, metrics, agent_end

    async def script(_: dict[str, Any]) -> AsyncIterator[bytes]:
        try:
            yield body
            while True:
                await asyncio.sleep(0.05)
                yield b": keep-alive\n\n"
        finally:
            closed.set()

    return script


def test_stop_drops_the_buffered_audio_at_once_and_closes_the_agent_stream(page: Page, web_stacks: WebStacks) -> None:
    closed = threading.Event()
    stack = web_stacks.start(endless_answer("A long answer.", 5 * RATE, closed))
    open_page(page, stack.url)
    ask(page, "Talk for a while.")
    page.wait_for_function(
        "window.voicestack.current?.samplesReceived === 5 * 24000 && window.voicestack.current.samplesPlayed > 0",
        timeout=WAIT_MS,
    )
    page.click("#stop")
    page.wait_for_function("window.voicestack.lastStop?.silentMs != null", timeout=WAIT_MS)

    stop = page.evaluate("window.voicestack.lastStop")
    assert stop["reason"] == "stop"
    assert stop["silentMs"] >= 0
    # The worklet confirmed: nothing buffered, nothing playing, though 5 s had arrived.
    assert page.evaluate("({ ...window.voicestack.player.progress })") == {
        "state": "idle",
        "played": 0,
        "underruns": 0,
        "buffered": 0,
    }
    assert closed.wait(timeout=10), "the agent's stream was not closed after Stop"
    page.wait_for_function("window.voicestack.current?.done", timeout=WAIT_MS)
    assert page.inner_text("#status") == "Stopped."
    assert turns(page) == [{"prompt": "Talk for a while.", "answer": "A long answer.", "result": "stopped"}]
    assert runs(page) == ["stopped"]
    assert page.is_disabled("#stop")


def playing_out(page: Page, web_stacks: WebStacks) -> None:
    """Ask for a 5 s answer; return once all of it has arrived and it is playing."""
    stack = web_stacks.start(echo_script(5 * RATE))
    open_page(page, stack.url)
    ask(page, "Talk for a while.")
    page.wait_for_function(
        "window.voicestack.current?.done && window.voicestack.current.samplesPlayed > 0"
        " && !window.voicestack.current.drained",
        timeout=WAIT_MS,
    )


def test_an_answer_stopped_while_it_plays_out_is_recorded_as_stopped(page: Page, web_stacks: WebStacks) -> None:
    """The whole answer (5 s of audio) has arrived and is playing when Stop is pressed: its row in
    the answers table and its turn say "stopped" (they said "ok": the stream had ended well)."""
    playing_out(page, web_stacks)
    assert runs(page) == ["ok"]  # the stream ended well; the audio still plays
    page.click("#stop")
    page.wait_for_function("window.voicestack.lastStop?.silentMs != null", timeout=WAIT_MS)

    assert runs(page) == ["stopped"]
    assert page.locator("#runs tbody td").nth(7).inner_text() == "stopped"
    assert turns(page) == [
        {"prompt": "Talk for a while.", "answer": answer_for("Talk for a while."), "result": "stopped"}
    ]
    assert page.get_attribute("#turns li .assistant", "data-result") == "stopped"
    assert page.inner_text("#status") == "Stopped."
    assert page.is_disabled("#stop")

    # The next answer plays to its end and is "ok"; the stopped one stays stopped.
    ask(page, "And now?")
    wait_answered(page, 2)
    assert runs(page) == ["stopped", "ok"]
    assert [t["result"] for t in turns(page)] == ["stopped", "ok"]


def test_a_new_question_while_the_last_answer_plays_out_records_it_as_stopped(
    page: Page, web_stacks: WebStacks
) -> None:
    playing_out(page, web_stacks)
    ask(page, "Something else?")
    page.wait_for_function("window.voicestack.turns.length === 2 && window.voicestack.current?.done", timeout=WAIT_MS)
    assert page.evaluate("window.voicestack.lastStop.reason") == "new_question"
    assert runs(page) == ["stopped", "ok"]
    assert [t["result"] for t in turns(page)] == ["stopped", "ok"]


def test_a_failed_answer_stays_failed_when_the_next_question_comes(page: Page, web_stacks: WebStacks) -> None:
    failed: list[dict[str, Any]] = [
        {"type": "agent_start", "mode": "stream", "model": "demo", "demo": True},
        {"type": "error", "code": "model_error", "message": "the model stream failed"},
    ]

    async def script(payload: dict[str, Any]) -> AsyncIterator[bytes]:
        yield sse_bytes(failed if payload["prompt"] == "Fail." else answer_events(answer_for(payload["prompt"]), 2400))

    stack = web_stacks.start(script)
    open_page(page, stack.url)
    ask(page, "Fail.")
    page.wait_for_function("window.voicestack.current?.done", timeout=WAIT_MS)
    ask(page, "And now?")
    wait_answered(page, 2)
    assert runs(page) == ["model_error", "ok"]
    assert [t["result"] for t in turns(page)] == ["model_error", "ok"]


def test_a_new_question_while_one_plays_stops_it_and_answers_the_new_one(page: Page, web_stacks: WebStacks) -> None:
    closed = threading.Event()
    first = endless_answer("The first, long answer.", 5 * RATE, closed)
    second = echo_script(4800)

    async def script(payload: dict[str, Any]) -> AsyncIterator[bytes]:
        chosen = first if payload["prompt"] == "Talk for a while." else second
        async for piece in chosen(payload):
            yield piece

    stack = web_stacks.start(script)
    open_page(page, stack.url)
    ask(page, "Talk for a while.")
    page.wait_for_function("window.voicestack.current?.samplesPlayed > 0", timeout=WAIT_MS)
    ask(page, "Something else?")
    wait_answered(page, 2)

    assert page.evaluate("window.voicestack.lastStop.reason") == "new_question"
    assert closed.wait(timeout=10), "the first answer's stream was not closed"
    current = page.evaluate(
        "({ samplesPlayed: window.voicestack.current.samplesPlayed, error: window.voicestack.current.error })"
    )
    assert current == {"samplesPlayed": 4800, "error": None}
    assert turns(page) == [
        {"prompt": "Talk for a while.", "answer": "The first, long answer.", "result": "stopped"},
        {"prompt": "Something else?", "answer": answer_for("Something else?"), "result": "ok"},
    ]
    assert len(stack.agent.session_ids) == 2
    assert len(set(stack.agent.session_ids)) == 1


def test_captions_highlight_each_word_as_it_is_spoken(page: Page, web_stacks: WebStacks) -> None:
    # Two `words` events, each before the 0.6 s of audio it times, on the answer's timeline (as the agent sends them).
    words = [
        (0, [{"word": "Hello", "start_s": 0.0, "end_s": 0.3}, {"word": "streaming", "start_s": 0.3, "end_s": 0.6}]),
        (3, [{"word": "world.", "start_s": 0.6, "end_s": 0.9}, {"word": "Bye.", "start_s": 0.9, "end_s": 1.2}]),
    ]
    events = answer_events("Hello streaming world. Bye.", int(1.2 * RATE), words=words)
    stack = web_stacks.start(paced_script(lambda _: [sse_bytes(events)]))
    open_page(page, stack.url)
    ask(page, "Say hello.")

    page.wait_for_function("window.voicestack.current?.spokenWord === 2", timeout=WAIT_MS)
    # The page redraws at most every 100 ms (app.js RENDER_EVERY_MS); "world." is spoken for 300 ms.
    page.wait_for_function(
        "[...document.querySelectorAll('#captions span.spoken')].map((s) => s.textContent).join('|') === 'world.'",
        timeout=300,
    )
    assert page.locator("#captions span.spoken").all_inner_texts() == ["world."]
    wait_answered(page, 1)

    state = page.evaluate(
        "() => { const c = window.voicestack.current;"
        " return { trail: c.captionTrail, words: c.captionWords, spoken: c.spokenWord }; }"
    )
    assert state == {"trail": [0, 1, 2, 3], "words": ["Hello", "streaming", "world.", "Bye."], "spoken": -1}
    assert page.inner_text("#captions") == "Hello streaming world. Bye."
    assert page.locator("#captions span.spoken").count() == 0


# The speech model's tokens for "It keeps speaking, because it's “quoted” (really) - well... OK?"
# and a straight-quoted "fine": misaki splits punctuation from the words, with no spacing.
MODEL_TOKENS = [
    "It", "keeps", "speaking", ",", "because", "it's", "“", "quoted", "”", "(", "really", ")", "-", "well",
    ".", ".", ".", "OK", "?", "She", "said", '"', "fine", '"', "and", "'", "left", "'", ".",
]  # fmt: skip
MODEL_TOKENS_SPOKEN = "It keeps speaking, because it's “quoted” (really) - well... OK? She said \"fine\" and 'left'."


def test_captions_join_punctuation_to_its_word(page: Page, web_stacks: WebStacks) -> None:
    words = [{"word": w, "start_s": i * 0.05, "end_s": i * 0.05 + 0.04} for i, w in enumerate(MODEL_TOKENS)]
    events = answer_events("The answer.", int(len(MODEL_TOKENS) * 0.05 * RATE), words=[(0, words)])
    stack = web_stacks.start(paced_script(lambda _: [sse_bytes(events)]))
    open_page(page, stack.url)
    ask(page, "Say it.")
    wait_answered(page, 1)
    assert page.text_content("#captions") == MODEL_TOKENS_SPOKEN
    # Each word keeps its own span (the highlight), punctuation included.
    assert page.locator("#captions span").all_inner_texts() == MODEL_TOKENS

    gaps = page.evaluate(
        """async (words) => (await import("/captions.js")).captionGaps(words)""",
        ["configured", ".", "Next", "(", "a", ")", "word"],
    )
    assert gaps == ["", "", " ", " ", "", "", " "]


CAPTION_TRACK = """
async () => {
  const { CaptionTrack } = await import("/captions.js");
  const track = new CaptionTrack();
  track.add([{ word: "a", start_s: 0.0, end_s: 0.1 }, { word: "b", start_s: 0.2, end_s: 0.3 }], 24000);
  track.add([{ word: "c", start_s: 1.0, end_s: 1.1 }], 24000);
  const at = (seconds) => track.spokenAt(Math.round(seconds * 24000));
  return {
    words: track.words,
    spoken: [at(0), at(0.05), at(0.15), at(0.2), at(0.5), at(1.0), at(1.05), at(1.1), at(2)],
  };
}
"""


def test_caption_track_places_words_on_the_answers_timeline(page: Page, web_stacks: WebStacks) -> None:
    stack = web_stacks.start(echo_script())
    open_page(page, stack.url)
    result = page.evaluate(CAPTION_TRACK)
    assert result["words"] == [
        {"word": "a", "startSample": 0, "endSample": 2400},
        {"word": "b", "startSample": 4800, "endSample": 7200},
        {"word": "c", "startSample": 24000, "endSample": 26400},
    ]
    # In a pause the previous word stays marked; after the last word, none is.
    assert result["spoken"] == [0, 0, 0, 1, 1, 2, 2, -1, -1]


@pytest.mark.parametrize(
    ("words", "message"),
    [
        ('"x"', "'words' event needs 'words' as array"),
        (
            '[{"word": "a", "start_s": 0.5, "end_s": 0.1}]',
            "'words' entry 0 needs word, start_s <= end_s (seconds >= 0)",
        ),
        ('[{"word": 3, "start_s": 0, "end_s": 0.1}]', "'words' entry 0 needs word, start_s <= end_s (seconds >= 0)"),
        ('[{"word": "a", "start_s": -1, "end_s": 0.1}]', "'words' entry 0 needs word, start_s <= end_s (seconds >= 0)"),
    ],
)
def test_a_malformed_words_event_is_refused(page: Page, web_stacks: WebStacks, words: str, message: str) -> None:
    stack = web_stacks.start(echo_script())
    open_page(page, stack.url)
    result = page.evaluate(
        """async (data) => {
          const { parseAgentEvent } = await import("/events.js");
          try { parseAgentEvent(data); return null; } catch (err) { return { code: err.code, message: err.message }; }
        }""",
        f'{{"type": "words", "words": {words}}}',
    )
    assert result == {"code": "invalid_event", "message": message}


COUNT_MUTATIONS = """
() => {
  window.mutationCounts = {};
  for (const id of ["answer", "first-text", "underruns"]) {
    window.mutationCounts[id] = 0;
    new MutationObserver((records) => { window.mutationCounts[id] += records.length; }).observe(
      document.getElementById(id), { childList: true, characterData: true, subtree: true });
  }
}
"""


def test_the_page_redraws_a_burst_of_text_once_and_unchanged_text_never(page: Page, web_stacks: WebStacks) -> None:
    """The page shares the machine with the model (app.js `setText`, `renderSoon`): 60 text events
    arriving together are drawn in a few redraws, not 60, and a figure that does not change is not
    rewritten on each of the ~23 player reports a second while the audio plays."""
    words = [f"word{n}" for n in range(60)]
    events = answer_events("", int(1.2 * RATE))
    events[1:2] = [{"type": "text_delta", "text": word + " "} for word in words]
    stack = web_stacks.start(paced_script(lambda _: [sse_bytes(events)]))
    open_page(page, stack.url)
    page.evaluate(COUNT_MUTATIONS)
    ask(page, "Count to sixty.")
    wait_answered(page, 1)

    counts = page.evaluate("window.mutationCounts")
    assert page.evaluate("document.getElementById('answer').textContent") == "".join(f"{w} " for w in words)
    assert counts["answer"] <= 5, counts  # one per redraw, at most one redraw per 100 ms
    assert counts["first-text"] <= 2, counts  # "–", then the time, each once
    assert counts["underruns"] <= 2, counts
