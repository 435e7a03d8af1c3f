"""AgentCore's WebSocket limits: every event kind fits one frame at its worst, the cuts keep every
byte and character in order, and the pacer keeps any second under the frame rate."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agent_app import events
from agent_app.events import AgentErrorCode
from agent_app.frames import (
    AGENTCORE_FRAME_LIMIT_BYTES,
    AGENTCORE_FRAMES_PER_S,
    AUDIO_CHUNK_PCM_BYTES,
    FRAME_BURST,
    FRAMES_PER_S,
    MAX_ERROR_MESSAGE_CHARS,
    MAX_EVENT_BYTES,
    MAX_TEXT_DELTA_CHARS,
    MAX_WORD_CHARS,
    FramePacer,
    pcm_pieces,
    text_pieces,
    utf8_safe,
)
from agent_app.ws_route import encode_frame
from tests.agent.agent_support import most_in_any_second

WORST_INT = 2**64
"""A `seq` or `turn` no connection reaches: 20 digits."""
WORST_CHAR = "\x01"
"""JSON writes it as \\u0001: 6 bytes for one character, the most any character takes."""


def frame_bytes(event: object) -> int:
    """The size of the frame `WS /ws` sends for `event` (with the biggest turn)."""
    assert isinstance(event, dict)
    return len(encode_frame({**event, "turn": WORST_INT}).encode("utf-8"))


def test_our_bound_is_well_under_agentcores_limit() -> None:
    assert (AGENTCORE_FRAME_LIMIT_BYTES, AGENTCORE_FRAMES_PER_S) == (32_000, 250)  # AWS's "32 KB" and 250/s
    assert MAX_EVENT_BYTES * 1.9 < AGENTCORE_FRAME_LIMIT_BYTES
    assert FRAMES_PER_S + FRAME_BURST + 1 < AGENTCORE_FRAMES_PER_S


def test_the_fullest_audio_chunk_fits_one_frame() -> None:
    event = events.audio_chunk(WORST_INT, b"\xff\x7f" * (AUDIO_CHUNK_PCM_BYTES // 2))
    assert len(event["audio"]) == 16_000  # 12,000 bytes of PCM, no base64 padding
    assert frame_bytes(event) == 16_095
    assert frame_bytes(event) <= MAX_EVENT_BYTES


def test_an_audio_chunk_over_the_bound_is_refused_by_its_builder() -> None:
    with pytest.raises(ValueError, match="at most 12000 bytes of PCM, got 12002"):
        events.audio_chunk(0, b"\x00" * (AUDIO_CHUNK_PCM_BYTES + 2))


def test_the_worst_text_delta_fits_one_frame() -> None:
    assert frame_bytes(events.text_delta(WORST_CHAR * MAX_TEXT_DELTA_CHARS)) <= MAX_EVENT_BYTES
    assert frame_bytes(events.text_delta("\U0001f600" * MAX_TEXT_DELTA_CHARS)) <= MAX_EVENT_BYTES
    with pytest.raises(ValueError, match="at most 2000 characters, got 2001"):
        events.text_delta("a" * (MAX_TEXT_DELTA_CHARS + 1))


def test_the_worst_error_fits_one_frame_and_keeps_its_start() -> None:
    event = events.error(AgentErrorCode.MODEL_ERROR, "boom: " + WORST_CHAR * 100_000)
    assert len(event["message"]) == MAX_ERROR_MESSAGE_CHARS
    assert event["message"].startswith("boom: ")
    assert event["message"].endswith("…")
    assert frame_bytes(event) <= MAX_EVENT_BYTES


def test_a_huge_model_name_fits_one_frame() -> None:
    assert frame_bytes(events.agent_start("batch", WORST_CHAR * 50_000, demo=False)) <= MAX_EVENT_BYTES


def test_the_fixed_events_fit_one_frame_at_their_worst() -> None:
    for event in (
        events.audio_start(),
        events.audio_end(WORST_INT, WORST_INT),
        events.metrics("stream", first_text_s=1e300, first_audio_s=-1e300, total_s=1e300),
        events.agent_end(),
        {"type": "turn_stopped"},
    ):
        assert frame_bytes(event) <= 200


def test_words_are_cut_into_as_many_events_as_they_need_each_within_one_frame() -> None:
    # A 5,000-character batch request of one-letter words, and words no real text has.
    timings = [(WORST_CHAR if i % 7 else WORST_CHAR * 900, i * 1e15, i * 1e15 + 0.123456) for i in range(2_500)]
    cut = events.words(timings, offset_s=12.5)
    assert len(cut) > 1
    assert all(frame_bytes(event) <= MAX_EVENT_BYTES for event in cut)
    words = [word for event in cut for word in event["words"]]
    assert [w["word"] for w in words] == [
        WORST_CHAR if i % 7 else WORST_CHAR * (MAX_WORD_CHARS - 1) + "…" for i in range(2_500)
    ]
    assert words[3] == {"word": WORST_CHAR, "start_s": round(12.5 + 3e15, 3), "end_s": round(12.5 + 3e15 + 0.123456, 3)}


def test_a_few_words_are_one_event() -> None:
    assert events.words([("Hello", 0.0, 0.31), ("world", 0.35, 0.7)], offset_s=1.0) == [
        {
            "type": "words",
            "words": [
                {"word": "Hello", "start_s": 1.0, "end_s": 1.31},
                {"word": "world", "start_s": 1.35, "end_s": 1.7},
            ],
        }
    ]


def test_lone_surrogates_never_reach_a_frame() -> None:
    assert utf8_safe("a\ud800b\udfff") == "a\ufffdb\ufffd"
    assert utf8_safe("ok \U0001f600") == "ok \U0001f600"
    assert events.text_delta("a\ud800")["text"] == "a\ufffd"
    assert events.error(AgentErrorCode.MODEL_ERROR, "x\udc80")["message"] == "x\ufffd"
    assert events.words([("\ud83d", 0.0, 0.1)], offset_s=0)[0]["words"][0]["word"] == "\ufffd"
    assert events.agent_start("stream", "m\ud800", demo=False)["model"] == "m\ufffd"


def test_the_frame_encoder_sends_a_builders_slip_as_an_escape_and_a_giant_as_an_internal_error() -> None:
    assert encode_frame({"type": "text_delta", "text": "a\ud800", "turn": 1}) == (
        '{"type": "text_delta", "text": "a\\ud800", "turn": 1}'
    )
    giant = {"type": "audio_chunk", "seq": 3, "audio": "A" * MAX_EVENT_BYTES, "turn": 4}
    assert json.loads(encode_frame(giant)) == {
        "type": "error",
        "code": "internal_error",
        "message": "internal error: an event too large for one frame",
        "turn": 4,
    }


@given(st.binary(max_size=60_000).map(lambda b: b[: len(b) // 2 * 2]), st.sampled_from([2, 960, 12_000, 24_000]))
def test_pcm_pieces_keep_every_byte_in_whole_samples(pcm: bytes, max_bytes: int) -> None:
    pieces = pcm_pieces(pcm, max_bytes)
    assert b"".join(pieces) == pcm
    assert all(0 < len(piece) <= max_bytes and len(piece) % 2 == 0 for piece in pieces)
    assert all(len(piece) == max_bytes for piece in pieces[:-1])


def test_pcm_pieces_refuse_half_a_sample() -> None:
    with pytest.raises(ValueError, match="whole samples, got 11999"):
        pcm_pieces(b"", 11_999)


def test_a_10_s_container_frame_is_40_chunks() -> None:
    frame = bytes(480_000)  # frame_ms=10000, the speech server's largest
    assert [len(piece) for piece in pcm_pieces(frame)] == [AUDIO_CHUNK_PCM_BYTES] * 40


@given(st.text(max_size=7_000), st.integers(min_value=1, max_value=3_000))
def test_text_pieces_keep_every_character(text: str, max_chars: int) -> None:
    pieces = text_pieces(text, max_chars)
    assert "".join(pieces) == text
    assert all(0 < len(piece) <= max_chars for piece in pieces)


# --- the pacer ------------------------------------------------------------------------------------


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def send_times(ready_at: list[float]) -> list[float]:
    """When one sender, pacing itself, sends frames that become ready at `ready_at` (sorted)."""
    clock = Clock()
    pacer = FramePacer(clock)
    sent: list[float] = []
    for ready in ready_at:
        clock.now = max(ready, sent[-1] if sent else 0.0)
        sent.append(clock.now + pacer.delay())
    return sent


@given(st.lists(st.floats(min_value=0, max_value=5), min_size=1, max_size=3_000).map(sorted))
def test_no_second_holds_more_frames_than_the_pacer_allows(ready_at: list[float]) -> None:
    sent = send_times(ready_at)
    assert all(s >= r for s, r in zip(sent, ready_at, strict=True))
    assert sent == sorted(sent)
    assert most_in_any_second(sent) <= FRAMES_PER_S + FRAME_BURST + 1 < AGENTCORE_FRAMES_PER_S


def test_a_burst_leaves_at_once_then_at_the_rate() -> None:
    sent = send_times([0.0] * 3_000)  # a 10 s frame's chunks and more, all ready at once
    assert sent[: FRAME_BURST + 1] == [0.0] * (FRAME_BURST + 1)
    assert sent[FRAME_BURST + 1] == pytest.approx(1 / FRAMES_PER_S)
    assert most_in_any_second(sent) == FRAMES_PER_S + FRAME_BURST + 1
    assert sent[-1] == pytest.approx((3_000 - FRAME_BURST - 1) / FRAMES_PER_S)


def test_frames_at_the_rate_never_wait() -> None:
    ready = [i / FRAMES_PER_S for i in range(1_000)]
    assert send_times(ready) == ready
