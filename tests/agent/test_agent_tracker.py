"""The client-side session check: frames in the order the protocol allows, audio forwarded as is."""

from __future__ import annotations

import pytest

from agent_app.speech.tracker import SessionTracker, SpeechRejectedError
from agent_app.speech.transport import SpeechErrorCode, SpeechTransportError
from speech_protocol import Cancelled, ErrorEvent, SynthesisComplete, SynthesisStart, Timestamps, WordTiming


def complete(request_id: str) -> SynthesisComplete:
    return SynthesisComplete(request_id, audio_duration_s=0.1, time_to_first_audio_ms=1.0, elapsed_ms=2.0, chunks=1)


def violation(tracker: SessionTracker, frame: object, message: str) -> None:
    with pytest.raises(SpeechTransportError) as caught:
        tracker.frame(frame)  # type: ignore[arg-type]
    assert caught.value.code is SpeechErrorCode.PROTOCOL_ERROR
    assert message in caught.value.message


def test_two_requests_in_order() -> None:
    tracker = SessionTracker()
    tracker.sent("s0")
    tracker.sent("s1")
    assert tracker.frame(SynthesisStart("s0")) is None
    assert tracker.frame(b"\x01\x00\x02\x00") == b"\x01\x00\x02\x00"
    assert tracker.frame(Timestamps("s0", 0, (WordTiming("hi", 0.0, 0.1),))) is None
    assert tracker.frame(complete("s0")) is None
    assert tracker.unfinished == 1
    assert tracker.frame(SynthesisStart("s1")) is None
    assert tracker.frame(complete("s1")) is None
    assert tracker.completed == 2
    tracker.end()


def test_audio_before_any_start_is_a_violation() -> None:
    tracker = SessionTracker()
    tracker.sent("s0")
    violation(tracker, b"\x00\x00", "audio frame outside a request")


def test_half_a_sample_is_a_violation() -> None:
    tracker = SessionTracker()
    tracker.sent("s0")
    tracker.frame(SynthesisStart("s0"))
    violation(tracker, b"\x00\x00\x00", "3 bytes is not whole PCM16 samples")


def test_start_out_of_order_is_a_violation() -> None:
    tracker = SessionTracker()
    tracker.sent("s0")
    tracker.sent("s1")
    violation(tracker, SynthesisStart("s1"), "synthesis_start for 's1'; expected 's0'")


def test_start_before_the_previous_completed_is_a_violation() -> None:
    tracker = SessionTracker()
    tracker.sent("s0")
    tracker.sent("s1")
    tracker.frame(SynthesisStart("s0"))
    violation(tracker, SynthesisStart("s1"), "before 's0' completed")


def test_complete_for_another_request_is_a_violation() -> None:
    tracker = SessionTracker()
    tracker.sent("s0")
    tracker.frame(SynthesisStart("s0"))
    violation(tracker, complete("s9"), "synthesis_complete for 's9' while 's0' is active")


def test_another_audio_format_is_a_violation() -> None:
    tracker = SessionTracker()
    tracker.sent("s0")
    violation(tracker, SynthesisStart("s0", sample_rate=16000), "unsupported audio ('pcm_s16le', 16000, 1)")


def test_cancelled_is_a_violation_for_a_client_that_never_cancels() -> None:
    tracker = SessionTracker()
    tracker.sent("s0")
    violation(tracker, Cancelled("s0"), "never cancels")


def test_an_error_frame_is_a_rejection_with_the_containers_code() -> None:
    tracker = SessionTracker()
    tracker.sent("s0")
    with pytest.raises(SpeechRejectedError) as caught:
        tracker.frame(ErrorEvent("s0", "unknown_voice", "no voice 'zz'"))
    assert caught.value.code == "unknown_voice"
    assert caught.value.request_id == "s0"
    assert str(caught.value) == "speech request 's0' refused: unknown_voice: no voice 'zz'"


def test_ending_with_unfinished_requests_is_a_stream_error() -> None:
    tracker = SessionTracker()
    tracker.sent("s0")
    tracker.sent("s1")
    tracker.frame(SynthesisStart("s0"))
    with pytest.raises(SpeechTransportError) as caught:
        tracker.end()
    assert caught.value.code is SpeechErrorCode.STREAM_ERROR
    assert caught.value.message == "the speech session ended with 2 request(s) unfinished"
