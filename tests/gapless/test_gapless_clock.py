"""A schedule per session: the chunk decisions count the audio the session delivered and not yet played.

The agent sends each sentence as its own request in one session; a sentence that arrives while the
previous one still plays must be sized by that audio, not restarted from the shortest piece.
"""

from __future__ import annotations

import time

import pytest

from kokoro_server.engine import ZeroCostEngine
from kokoro_server.schedule import AdaptiveChunker, EngineSpeed, PlaybackClock, starts_from_silence
from tests.speech.speech_support import is_event, receive_until, serve_in_process

FIRST = "Streaming speech lets a voice agent start talking, even before the whole answer is complete."
SECOND = "The second sentence arrives while the first one still plays, so it can go out in one piece."
WS = "/invocations-bidirectional-stream"
SECOND_FIRST_CLAUSE = "The second sentence arrives while the first one still plays,"


def second_sentence_calls(engine: ZeroCostEngine) -> list[str]:
    return [text for text, _, _ in engine.calls if text.startswith("The second")]


def test_the_clock_queues_each_piece_after_the_audio_before_it() -> None:
    clock = PlaybackClock()
    assert clock.ahead_s(5.0) == 0.0
    clock.delivered(10.0, 2.0)  # plays 10 -> 12
    assert clock.ahead_s(10.5) == pytest.approx(1.5)
    clock.delivered(11.0, 3.0)  # queued behind: plays 12 -> 15
    assert clock.ends_at == pytest.approx(15.0)
    assert clock.ahead_s(14.0) == pytest.approx(1.0)
    assert clock.ahead_s(16.0) == 0.0
    clock.delivered(20.0, 1.0)  # after an underrun playback resumes on arrival: 20 -> 21
    assert clock.ends_at == pytest.approx(21.0)
    clock.reset()
    assert clock.ahead_s(20.5) == 0.0


def test_only_a_chunk_that_starts_from_silence_is_the_shortest_piece() -> None:
    assert starts_from_silence(0, 0.0)
    assert not starts_from_silence(0, 0.4)  # a new request while the last one still plays
    assert not starts_from_silence(3, 0.0)  # an underrun inside a request: sized by the budget (which falls back)


def test_a_request_following_audio_still_playing_is_planned_from_that_audio() -> None:
    speed = EngineSpeed()
    speed.observe(100, 0.05 + 100 * 0.01)  # 0.01 s per character
    chunker = AdaptiveChunker(speed)
    assert chunker.next_chunk(SECOND, first=True, buffered_audio_s=0.0).text == SECOND_FIRST_CLAUSE  # type: ignore[union-attr]
    # 5 s playing: 0.75 * 5 - 0.15 = 3.6 s to spend, 355 characters' worth: the whole sentence.
    assert chunker.next_chunk(SECOND, first=starts_from_silence(0, 5.0), buffered_audio_s=5.0).text == SECOND  # type: ignore[union-attr]


def test_in_a_session_the_next_sentence_goes_whole_while_the_first_still_plays() -> None:
    # Instant compute, 0.06 s of audio per character: the first request's 5.6 s still play when
    # the second is planned.
    engine = ZeroCostEngine()
    with serve_in_process(engine, chunking="adaptive") as (client, _), client.websocket_connect(WS) as ws:
        ws.send_json({"text": FIRST, "request_id": "1"})
        ws.send_json({"text": SECOND, "request_id": "2"})
        receive_until(ws, is_event("synthesis_complete", "2"))
    assert engine.calls[0][0] == "Streaming speech lets a voice agent start talking,"  # from silence: shortest
    assert second_sentence_calls(engine) == [SECOND]


def test_in_a_session_a_sentence_after_silence_starts_with_the_shortest_piece() -> None:
    engine = ZeroCostEngine(seconds_per_char=0.0001)  # 9 ms of audio: played out before the next request
    with serve_in_process(engine, chunking="adaptive") as (client, _), client.websocket_connect(WS) as ws:
        ws.send_json({"text": FIRST, "request_id": "1"})
        receive_until(ws, is_event("synthesis_complete", "1"))
        time.sleep(0.05)
        ws.send_json({"text": SECOND, "request_id": "2"})
        receive_until(ws, is_event("synthesis_complete", "2"))
    assert second_sentence_calls(engine) == [SECOND_FIRST_CLAUSE]


def test_a_cancel_empties_the_clock() -> None:
    engine = ZeroCostEngine(compute_s_per_char=0.0005)
    with serve_in_process(engine, chunking="adaptive") as (client, _), client.websocket_connect(WS) as ws:
        ws.send_json({"text": FIRST, "request_id": "1"})
        receive_until(ws, is_event("synthesis_complete", "1"))
        ws.send_json({"text": FIRST + " " + FIRST, "request_id": "2"})
        ws.send_json({"type": "cancel", "request_id": "2"})
        receive_until(ws, is_event("cancelled", "2"))
        ws.send_json({"text": SECOND, "request_id": "3"})
        receive_until(ws, is_event("synthesis_complete", "3"))
    # After the cancel the listener hears nothing (request 1's 5.6 s would otherwise still play):
    # request 3 starts from the shortest piece.
    assert second_sentence_calls(engine) == [SECOND_FIRST_CLAUSE]
