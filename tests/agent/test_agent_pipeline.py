"""The invocation pipeline against a protocol-faithful fake speech server: order, audio, errors, stops."""

from __future__ import annotations

import asyncio
import json

import pytest

from agent_app.models import ScriptedTurn, ToolCall, tokenize
from agent_app.pipeline import Outcome, PipelineSettings
from agent_app.segmenter import SegmenterConfig, SentenceSegmenter
from agent_app.speech.split import split_text
from agent_app.speech.websocket import WebSocketTransport
from speech_protocol import WS_PATH
from tests.agent.agent_support import (
    FOUR_SENTENCES,
    CountingTransport,
    Event,
    FakeSpeechServer,
    GatedModel,
    collect,
    decoded_audio,
    make_invocation,
    run_releasing_on_first_audio,
    scripted,
    sentence_start_token,
    types,
    ws_transport,
)

LAST_SENTENCE = "On a clear day you can see for about seventy kilometers from the top."


def expected_chunks(text: str) -> list[str]:
    segmenter = SentenceSegmenter(SegmenterConfig(first_clause_min_chars=40))
    return segmenter.feed(text) + segmenter.finish()


def assert_well_formed(events: list[Event]) -> None:
    """The order every successful invocation follows, whatever the mode."""
    kinds = types(events)
    assert kinds[0] == "agent_start"
    assert kinds[-3:] == ["audio_end", "metrics", "agent_end"]
    assert kinds.count("audio_start") == 1
    assert kinds.count("error") == 0
    first_chunk = kinds.index("audio_chunk") if "audio_chunk" in kinds else kinds.index("audio_end")
    assert kinds.index("audio_start") < first_chunk
    seqs = [e["seq"] for e in events if e["type"] == "audio_chunk"]
    assert seqs == list(range(len(seqs)))
    end = events[-3]
    assert end == {"type": "audio_end", "chunks": len(seqs), "bytes": len(decoded_audio(events))}


def text_of(events: list[Event]) -> str:
    return "".join(e["text"] for e in events if e["type"] == "text_delta")


async def test_stream_mode_sends_each_chunk_and_forwards_exactly_the_pcm(fake_speech) -> None:
    fake: FakeSpeechServer = await fake_speech()
    invocation = make_invocation(scripted(), ws_transport(fake), mode="stream", voice="am_michael")
    events = await collect(invocation)

    assert_well_formed(events)
    assert events[0] == {"type": "agent_start", "mode": "stream", "model": "scripted", "demo": False}
    assert text_of(events) == FOUR_SENTENCES
    chunks = expected_chunks(FOUR_SENTENCES)
    assert chunks[0] == "The Eiffel Tower is about three hundred and thirty meters tall,"  # the first clause
    assert fake.texts == chunks
    assert [kind for kind, _ in fake.received] == ["text"] * (len(chunks) + 1)
    assert json.loads(fake.received[-1][1]) == {"type": "close"}
    assert all(json.loads(text).get("voice") == "am_michael" for _, text in fake.received[:-1])
    assert decoded_audio(events) == b"".join(fake.sent_pcm[f"s{i}"] for i in range(len(chunks)))
    metrics = events[-2]
    assert metrics["type"] == "metrics"
    assert metrics["mode"] == "stream"
    assert 0 <= metrics["time_to_first_text_ms"] <= metrics["time_to_first_audio_ms"] <= metrics["total_ms"]
    assert await invocation.wait_finished() is Outcome.COMPLETED


async def test_stream_mode_audio_arrives_while_the_model_is_still_generating(fake_speech) -> None:
    fake: FakeSpeechServer = await fake_speech()
    # The model holds its last sentence until the caller has received audio: without streaming,
    # no audio could come first, and the invocation would run into its deadline instead.
    model = GatedModel(hold_at=sentence_start_token(FOUR_SENTENCES, LAST_SENTENCE), probe=lambda: fake.sessions)
    invocation = make_invocation(model, ws_transport(fake), mode="stream", deadline_s=10)
    events, finished_at_first_audio = await run_releasing_on_first_audio(invocation, model)

    assert_well_formed(events)
    assert finished_at_first_audio is False
    kinds = types(events)
    last_text = len(kinds) - 1 - kinds[::-1].index("text_delta")
    assert kinds.index("audio_chunk") < last_text
    assert model.finished is True
    assert model.probes[-1] == 1  # one session, opened while the model was generating


async def test_batch_mode_speaks_the_whole_answer_once_after_the_model_finished(fake_speech) -> None:
    fake: FakeSpeechServer = await fake_speech()
    model = GatedModel(probe=lambda: fake.sessions)
    invocation = make_invocation(model, ws_transport(fake), mode="batch")
    events = await collect(invocation)

    assert_well_formed(events)
    assert events[0]["mode"] == "batch"
    kinds = types(events)
    last_text = len(kinds) - 1 - kinds[::-1].index("text_delta")
    assert last_text < kinds.index("audio_start")
    assert set(model.probes) == {0}  # no session while the model was generating
    assert fake.texts == [FOUR_SENTENCES]
    assert json.loads(fake.received[0][1])["request_id"] == "answer"
    assert decoded_audio(events) == fake.sent_pcm["answer"]
    assert events[-2]["time_to_first_audio_ms"] >= events[-2]["time_to_first_text_ms"]


async def test_a_tool_call_splits_the_answer_and_its_first_part_is_spoken_at_once(fake_speech) -> None:
    fake: FakeSpeechServer = await fake_speech()
    model = scripted(
        turns=[
            ScriptedTurn("Let me look at the clock", ToolCall("current_time")),
            ScriptedTurn("It is half past ten in the morning."),
        ]
    )
    events = await collect(make_invocation(model, ws_transport(fake)))
    assert_well_formed(events)
    assert text_of(events) == "Let me look at the clock It is half past ten in the morning."
    assert fake.texts == ["Let me look at the clock", "It is half past ten in the morning."]


async def test_an_empty_answer_has_an_empty_audio_section(fake_speech) -> None:
    fake: FakeSpeechServer = await fake_speech()
    invocation = make_invocation(scripted(""), ws_transport(fake), mode="batch")
    events = await collect(invocation)
    assert types(events) == ["agent_start", "audio_start", "audio_end", "metrics", "agent_end"]
    assert events[2] == {"type": "audio_end", "chunks": 0, "bytes": 0}
    assert events[3]["time_to_first_text_ms"] is None
    assert events[3]["time_to_first_audio_ms"] is None
    assert fake.sessions == 0


async def test_a_chunk_without_words_is_not_sent(fake_speech) -> None:
    fake: FakeSpeechServer = await fake_speech()
    events = await collect(make_invocation(scripted("The answer is below this line.\n***"), ws_transport(fake)))
    assert_well_formed(events)
    assert fake.texts == ["The answer is below this line."]


async def test_events_can_be_read_once(fake_speech) -> None:
    fake: FakeSpeechServer = await fake_speech()
    invocation = make_invocation(scripted("Hello there, friend."), ws_transport(fake))
    await collect(invocation)
    with pytest.raises(RuntimeError, match="can be read once"):
        await collect(invocation)


# --- failures: one error event with a stable code, then the end ------------------------------------


def assert_failed_with(events: list[Event], code: str) -> Event:
    kinds = types(events)
    assert kinds[0] == "agent_start"
    assert kinds[-1] == "error"
    assert kinds.count("error") == 1
    assert "agent_end" not in kinds
    assert "metrics" not in kinds
    assert events[-1]["code"] == code
    return events[-1]


@pytest.mark.parametrize("mode", ["stream", "batch"])
async def test_a_speech_endpoint_that_is_down_leaves_the_answer_as_text(free_port: int, mode) -> None:
    model = scripted(tokens_per_s=200)
    transport = CountingTransport(WebSocketTransport(f"ws://127.0.0.1:{free_port}{WS_PATH}", open_timeout_s=2))
    invocation = make_invocation(model, transport, mode=mode)
    events = await collect(invocation)

    kinds = types(events)
    assert kinds[-4:] == ["audio_start", "audio_end", "metrics", "agent_end"]
    assert kinds.count("error") == 1
    error = events[kinds.index("error")]
    assert error["code"] == "speech_unavailable"
    assert error["message"].startswith("speech is unavailable (cannot open a speech session at ws://127.0.0.1:")
    assert error["message"].endswith("); the answer continues as text")
    assert text_of(events) == FOUR_SENTENCES  # all of it, the text after the error included
    assert events[-3] == {"type": "audio_end", "chunks": 0, "bytes": 0}
    assert events[-2]["time_to_first_audio_ms"] is None
    assert "audio_chunk" not in kinds
    assert transport.attempts == 2  # one retry, not more
    assert model.finished is True
    assert await invocation.wait_finished() is Outcome.TEXT_ONLY


@pytest.mark.parametrize("mode", ["stream", "batch"])
async def test_a_session_that_cannot_open_once_is_retried_with_nothing_lost(fake_speech, mode) -> None:
    fake: FakeSpeechServer = await fake_speech()
    transport = CountingTransport(ws_transport(fake), refuse_first=True)
    events = await collect(make_invocation(scripted(), transport, mode=mode))
    assert_well_formed(events)
    assert transport.attempts == 2
    assert fake.sessions == 1
    assert fake.texts == (expected_chunks(FOUR_SENTENCES) if mode == "stream" else [FOUR_SENTENCES])
    assert decoded_audio(events) == b"".join(fake.sent_pcm.values())


async def test_a_stream_that_never_answers_is_retried_and_resends_what_was_sent(fake_speech) -> None:
    fake: FakeSpeechServer = await fake_speech()
    # The first session takes every request but fails as SageMaker does when the stream is not
    # accepted in time: at the first receive, after the agent has already sent some chunks.
    transport = CountingTransport(ws_transport(fake), silent_after=2)
    events = await collect(make_invocation(scripted(tokens_per_s=200), transport))
    assert_well_formed(events)
    assert transport.attempts == 2
    assert transport.first_session_sent[:2] == expected_chunks(FOUR_SENTENCES)[:2]
    assert fake.texts == expected_chunks(FOUR_SENTENCES)  # each chunk once, in order, on the second session
    assert decoded_audio(events) == b"".join(fake.sent_pcm[f"s{i}"] for i in range(len(fake.sent_pcm)))


async def test_a_session_that_breaks_after_audio_is_not_retried(fake_speech) -> None:
    fake: FakeSpeechServer = await fake_speech(fault="close_mid_stream")
    transport = CountingTransport(ws_transport(fake))
    events = await collect(make_invocation(scripted(), transport))
    assert events[-1]["code"] == "speech_stream_error"
    assert transport.attempts == 1


@pytest.mark.parametrize(
    ("fault", "code", "message"),
    [
        ("close_mid_stream", "speech_stream_error", "engine crashed"),
        ("drop_mid_stream", "speech_stream_error", "the speech session broke"),
        ("close_early", "speech_stream_error", "ended the session before the agent closed it"),
        ("malformed_control", "speech_protocol_error", "malformed control frame"),
        ("reject", "speech_rejected", "unknown_voice: no such voice"),
    ],
)
async def test_a_speech_session_that_fails_mid_answer(fake_speech, fault, code, message) -> None:
    fake: FakeSpeechServer = await fake_speech(fault=fault)
    model = scripted(tokens_per_s=200)
    invocation = make_invocation(model, ws_transport(fake))
    events = await collect(invocation)
    error = assert_failed_with(events, code)
    assert message in error["message"]
    assert model.stopped_early is True
    assert await invocation.wait_finished() is Outcome.FAILED


async def test_audio_received_before_a_break_is_still_forwarded_in_order(fake_speech) -> None:
    fake: FakeSpeechServer = await fake_speech(fault="close_mid_stream")
    events = await collect(make_invocation(scripted(), ws_transport(fake)))
    kinds = types(events)
    assert kinds.count("audio_chunk") == 1  # the first frame, sent before the close
    assert decoded_audio(events) == fake.engine.synthesize(fake.texts[0], "af_heart", 1.0).pcm[:4_800]
    assert kinds[-1] == "error"


async def test_a_model_failure_is_a_model_error_and_closes_the_speech_session(fake_speech) -> None:
    fake: FakeSpeechServer = await fake_speech()
    model = GatedModel(fail_at=30)
    invocation = make_invocation(model, ws_transport(fake))
    events = await collect(invocation)
    error = assert_failed_with(events, "model_error")
    assert "model endpoint throttled" in error["message"]
    assert text_of(events) == "".join(tokenize(FOUR_SENTENCES)[:30])
    await asyncio.sleep(0.05)
    assert fake.disconnects == 1  # the session was dropped, not closed with a close message
    assert json.loads(fake.received[-1][1])["type"] == "synthesize"


# --- deadline and a caller that is gone ------------------------------------------------------------


async def test_the_deadline_stops_model_and_speech(fake_speech) -> None:
    fake: FakeSpeechServer = await fake_speech()
    model = scripted(tokens_per_s=40)
    invocation = make_invocation(model, ws_transport(fake), deadline_s=0.3)
    events = await collect(invocation)
    error = assert_failed_with(events, "deadline_exceeded")
    assert error["message"] == "the answer did not finish within 0.3 s"
    assert model.stopped_early is True
    sent = model.tokens_sent
    await asyncio.sleep(0.1)
    assert model.tokens_sent == sent
    assert fake.disconnects == 1


async def test_a_caller_that_stops_reading_stops_the_work(fake_speech) -> None:
    fake: FakeSpeechServer = await fake_speech()
    model = scripted(FOUR_SENTENCES * 4, tokens_per_s=200)  # 1.4 s of tokens
    invocation = make_invocation(model, ws_transport(fake), outbox_size=4, caller_gone_after_s=0.2)
    stream = invocation.events()
    first = [dict(await anext(stream)) for _ in range(3)]
    assert types(first) == ["agent_start", "text_delta", "text_delta"]
    # The caller neither reads nor closes the generator, as AgentCore does after a disconnect.
    outcome = await asyncio.wait_for(invocation.wait_finished(), 5)
    assert outcome is Outcome.CALLER_GONE
    assert model.stopped_early is True
    sent = model.tokens_sent
    assert sent < len(tokenize(FOUR_SENTENCES * 4))
    await asyncio.sleep(0.1)
    assert model.tokens_sent == sent
    assert fake.disconnects == 1
    # Should it read again after all, it gets a clear end instead of a stream that never ends.
    rest = [dict(event) async for event in stream]
    assert rest == [
        {
            "type": "error",
            "code": "caller_too_slow",
            "message": "the caller read no event for 0.2 s; the answer was stopped",
        }
    ]


async def test_closing_the_generator_stops_the_work_at_once(fake_speech) -> None:
    fake: FakeSpeechServer = await fake_speech()
    model = scripted(tokens_per_s=100)
    invocation = make_invocation(model, ws_transport(fake))
    stream = invocation.events()
    while (await anext(stream))["type"] != "text_delta":
        pass
    await stream.aclose()  # type: ignore[attr-defined]
    assert await asyncio.wait_for(invocation.wait_finished(), 1) is Outcome.CLOSED
    assert model.stopped_early is True
    await asyncio.sleep(0.05)
    assert fake.disconnects == 1


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"deadline_s": 0}, "deadline_s must be > 0"),
        ({"caller_gone_after_s": -1}, "caller_gone_after_s must be > 0"),
        ({"outbox_size": 1}, "outbox_size must be at least 2"),
    ],
)
def test_pipeline_settings_are_checked(kwargs, message) -> None:
    with pytest.raises(ValueError, match=message):
        PipelineSettings(**{"mode": "stream", "voice": None, "deadline_s": 1.0, **kwargs})


# --- batch answers over the container's text limit, speed, word timings ----------------------------


async def test_a_batch_answer_over_the_text_limit_is_sent_in_several_requests(fake_speech) -> None:
    fake: FakeSpeechServer = await fake_speech()
    events = await collect(make_invocation(scripted(), ws_transport(fake), mode="batch", max_request_chars=100))
    assert_well_formed(events)
    pieces = [piece.strip() for piece in split_text(FOUR_SENTENCES, 100)]
    assert len(pieces) == 4
    assert fake.texts == pieces
    ids = [json.loads(text)["request_id"] for _, text in fake.received if '"synthesize"' in text]
    assert ids == ["answer", "answer-1", "answer-2", "answer-3"]
    assert decoded_audio(events) == b"".join(fake.sent_pcm[request_id] for request_id in ids)
    assert all(len(text) <= 100 for text in fake.texts)


@pytest.mark.parametrize("mode", ["stream", "batch"])
async def test_speed_and_voice_are_sent_with_every_request(fake_speech, mode) -> None:
    fake: FakeSpeechServer = await fake_speech()
    await collect(make_invocation(scripted(), ws_transport(fake), mode=mode, voice="am_michael", speed=1.25))
    requests = [json.loads(text) for _, text in fake.received if '"synthesize"' in text]
    assert requests
    assert {(r["voice"], r["speed"], r["timestamps"]) for r in requests} == {("am_michael", 1.25, True)}


async def test_word_timings_come_before_their_audio_in_the_answers_time(fake_speech) -> None:
    fake: FakeSpeechServer = await fake_speech()
    events = await collect(make_invocation(scripted(), ws_transport(fake)))
    assert_well_formed(events)
    chunks = expected_chunks(FOUR_SENTENCES)
    words_events = [(index, e) for index, e in enumerate(events) if e["type"] == "words"]
    assert len(words_events) == len(chunks)
    offset_s = 0.0
    for (index, event), (request, chunk) in zip(words_events, enumerate(chunks), strict=True):
        expected = [
            {"word": word, "start_s": round(offset_s + i * 0.25, 3), "end_s": round(offset_s + i * 0.25 + 0.2, 3)}
            for i, word in enumerate(chunk.split())
        ]
        assert event == {"type": "words", "words": expected}
        assert events[index + 1]["type"] in ("audio_chunk", "audio_start")  # the request's audio follows
        offset_s += len(fake.sent_pcm[f"s{request}"]) / 48_000


async def test_no_word_timings_when_not_asked(fake_speech) -> None:
    fake: FakeSpeechServer = await fake_speech()
    events = await collect(make_invocation(scripted(), ws_transport(fake), timestamps=False))
    assert_well_formed(events)
    assert "words" not in types(events)
    assert all("timestamps" not in json.loads(text) for _, text in fake.received)


MARKDOWN_ANSWER = "## Plan\n\n- Call **555-123-4567** today.\n\n```python\nprint('x')\n```\nSee [the docs](https://example.com/a?b=c).\n"


@pytest.mark.parametrize(
    ("mode", "requests"),
    [
        # The first chunk ends at a clause (early first audio), the others at sentence ends.
        (
            "stream",
            [
                "Plan.\nCall five five five, one two three,",
                "four five six seven today.",
                "Code omitted.",
                "See the docs.",
            ],
        ),
        (
            "batch",
            ["Plan.\nCall five five five, one two three, four five six seven today.\nCode omitted.\nSee the docs."],
        ),
    ],
)
async def test_markdown_is_shown_as_written_and_spoken_as_a_person_would_say_it(fake_speech, mode, requests) -> None:
    fake: FakeSpeechServer = await fake_speech()
    events = await collect(make_invocation(scripted(MARKDOWN_ANSWER), ws_transport(fake), mode=mode))
    assert_well_formed(events)
    assert text_of(events) == MARKDOWN_ANSWER  # the text shown keeps its markdown
    assert fake.texts == requests
