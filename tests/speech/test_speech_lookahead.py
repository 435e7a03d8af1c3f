"""A session's look-ahead: the next request is synthesized beside the current one, frames stay in order.

Each engine call here waits on its own text's gate, so a test decides which job finishes first:
exact frames prove that a request ahead holds what it makes until the one before it is done.
"""

from __future__ import annotations

import json
import threading
import time
from typing import Any

import pytest

from kokoro_server.engine import ChunkAudio, ZeroCostEngine
from kokoro_server.session import SessionLimits
from tests.speech.speech_support import (
    WAIT_S,
    audio_frames,
    expected_request,
    is_event,
    receive_until,
    serve_in_process,
    wait_until,
    without_timing,
)

pytestmark = pytest.mark.timeout(30)

THREE_SENTENCES = "Short one. Another sentence follows. The last sentence ends it."
NEXT = "A second request."
QUIET_S = 0.3
"""How long a test watches for work that must not start (a started job is recorded at once)."""


class KeyedGates:
    """A ZeroCostEngine whose call for a gated text waits until the test opens that text's gate.

    Records each call when it starts and when it ends, and the most calls ever running at once.
    """

    def __init__(self, *gated: str, fail_on: str | None = None) -> None:
        self.inner = ZeroCostEngine()
        self.gates = {text: threading.Event() for text in gated}
        self.fail_on = fail_on
        self.started: list[str] = []
        self.ended: list[str] = []
        self.max_in_flight = 0
        self._lock = threading.Lock()

    @property
    def voices(self) -> frozenset[str]:
        return self.inner.voices

    @property
    def default_voice(self) -> str:
        return self.inner.default_voice

    def synthesize(self, text: str, voice: str, speed: float) -> ChunkAudio:
        with self._lock:
            self.started.append(text)
            self.max_in_flight = max(self.max_in_flight, len(self.started) - len(self.ended))
        try:
            gate = self.gates.get(text)
            if gate is not None and not gate.wait(WAIT_S):
                raise TimeoutError(f"test never opened the gate of {text!r}")
            if self.fail_on is not None and self.fail_on in text:
                raise RuntimeError(f"engine failure on {text!r}")
            return self.inner.synthesize(text, voice, speed)
        finally:
            with self._lock:
                self.ended.append(text)

    def open(self, text: str) -> None:
        self.gates[text].set()

    def open_all(self) -> None:
        for gate in self.gates.values():
            gate.set()

    def wait_started(self, text: str) -> None:
        wait_until(lambda: text in self.started, f"the engine call for {text!r} (started: {self.started})")

    def wait_ended(self, text: str) -> None:
        wait_until(lambda: text in self.ended, f"the end of the engine call for {text!r}")


def synth(text: str, request_id: str) -> str:
    return json.dumps({"text": text, "request_id": request_id})


def in_some_order(started: list[str], first: list[str], then: set[str]) -> bool:
    """`started` begins with `first`, then the texts of `then` (jobs started side by side, in either order)."""
    return started[: len(first)] == first and set(started[len(first) : len(first) + len(then)]) == then


def serve(engine: KeyedGates, **settings: Any) -> Any:
    settings.setdefault("max_concurrent", 2)
    return serve_in_process(engine, **settings)


def test_the_next_request_starts_once_the_current_one_is_audible_and_its_frames_wait_their_turn() -> None:
    engine = KeyedGates("Short one.", "Another sentence follows.")
    with serve(engine) as (client, served), client.websocket_connect("/invocations-bidirectional-stream") as ws:
        assert served.service.lookahead_requests == 1
        ws.send_text(synth(THREE_SENTENCES, "r1"))
        ws.send_text(synth(NEXT, "r2"))
        engine.wait_started("Short one.")
        time.sleep(QUIET_S)
        assert engine.started == ["Short one."]  # the listener waits for its first piece: it gets the cores

        engine.open("Short one.")
        # r1's chunk 2 (held at its gate) and r2 (not gated) run side by side; r2 ends first.
        engine.wait_started("Another sentence follows.")
        engine.wait_ended(NEXT)
        assert engine.ended == ["Short one.", NEXT]
        engine.open("Another sentence follows.")
        frames = receive_until(ws, is_event("synthesis_complete", "r2"))

    # r2 was computed before r1's second chunk, yet not one of its frames comes before r1's last.
    assert without_timing(frames) == expected_request("r1", THREE_SENTENCES) + expected_request("r2", NEXT)
    assert engine.max_in_flight == 2


def test_a_request_ahead_holds_at_most_two_chunks_then_waits() -> None:
    ahead = "Chunk one here. Chunk two here. Chunk three here. Chunk four here."
    engine = KeyedGates("Another sentence follows.")
    with serve(engine) as (client, _), client.websocket_connect("/invocations-bidirectional-stream") as ws:
        ws.send_text(synth(THREE_SENTENCES, "r1"))
        ws.send_text(synth(ahead, "r2"))
        engine.wait_ended("Chunk two here.")
        time.sleep(QUIET_S)
        # Two chunks held (SessionLimits.max_queued_chunks): the third is not computed until r1 is done.
        assert in_some_order(engine.started, ["Short one."], {"Another sentence follows.", "Chunk one here."})
        assert engine.started[3:] == ["Chunk two here."]
        engine.open("Another sentence follows.")
        frames = receive_until(ws, is_event("synthesis_complete", "r2"))

    assert SessionLimits(max_text_chars=1, frame_bytes=2).max_queued_chunks == 2
    assert without_timing(frames) == expected_request("r1", THREE_SENTENCES) + expected_request("r2", ahead)


def test_cancelling_the_request_ahead_drops_what_it_holds() -> None:
    engine = KeyedGates("Another sentence follows.")
    with serve(engine) as (client, _), client.websocket_connect("/invocations-bidirectional-stream") as ws:
        ws.send_text(synth(THREE_SENTENCES, "r1"))
        ws.send_text(synth(NEXT, "r2"))
        engine.wait_ended(NEXT)  # r2's audio is made and held
        ws.send_text(json.dumps({"type": "cancel", "request_id": "r2"}))
        frames = receive_until(ws, is_event("cancelled", "r2"))
        engine.open("Another sentence follows.")
        frames += receive_until(ws, is_event("synthesis_complete", "r1"))
        ws.send_text(synth("Then this.", "r3"))
        frames += receive_until(ws, is_event("synthesis_complete", "r3"))

    r1 = expected_request("r1", THREE_SENTENCES)
    assert without_timing(frames) == [
        r1[0],
        *audio_frames("Short one."),
        ("text", {"type": "cancelled", "request_id": "r2"}),
        *r1[1 + len(audio_frames("Short one.")) :],
        *expected_request("r3", "Then this."),
    ]


def test_cancelling_the_current_request_lets_the_request_ahead_play_next() -> None:
    engine = KeyedGates("Another sentence follows.")
    with serve(engine) as (client, _), client.websocket_connect("/invocations-bidirectional-stream") as ws:
        ws.send_text(synth(THREE_SENTENCES, "r1"))
        ws.send_text(synth(NEXT, "r2"))
        engine.wait_ended(NEXT)
        ws.send_text(json.dumps({"type": "cancel", "request_id": "r1"}))
        frames = receive_until(ws, is_event("synthesis_complete", "r2"))
        engine.open("Another sentence follows.")  # r1's running chunk ends; its audio is discarded
        engine.wait_ended("Another sentence follows.")

    r1 = expected_request("r1", THREE_SENTENCES)
    assert without_timing(frames) == [
        r1[0],
        *audio_frames("Short one."),
        ("text", {"type": "cancelled", "request_id": "r1"}),
        *expected_request("r2", NEXT),
    ]
    assert "The last sentence ends it." not in engine.started


def test_an_engine_failure_of_the_request_ahead_is_reported_in_its_turn_and_the_session_goes_on() -> None:
    engine = KeyedGates("Another sentence follows.", fail_on="second")
    with serve(engine) as (client, _), client.websocket_connect("/invocations-bidirectional-stream") as ws:
        ws.send_text(synth(THREE_SENTENCES, "r1"))
        ws.send_text(synth(NEXT, "r2"))
        engine.wait_ended(NEXT)
        engine.open("Another sentence follows.")
        frames = receive_until(ws, is_event("error", "r2"))
        ws.send_text(synth("Still here.", "r3"))
        frames += receive_until(ws, is_event("synthesis_complete", "r3"))

    assert without_timing(frames) == [
        *expected_request("r1", THREE_SENTENCES),
        expected_request("r2", NEXT)[0],
        (
            "text",
            {
                "type": "error",
                "request_id": "r2",
                "code": "synthesis_failed",
                "message": "synthesis failed; see server logs",
            },
        ),
        *expected_request("r3", "Still here."),
    ]


def test_at_most_one_request_runs_ahead_and_a_disconnect_stops_both() -> None:
    engine = KeyedGates("Another sentence follows.", NEXT)
    with serve(engine) as (client, served):
        with client.websocket_connect("/invocations-bidirectional-stream") as ws:
            ws.send_text(synth(THREE_SENTENCES, "r1"))
            ws.send_text(synth(NEXT, "r2"))
            ws.send_text(synth("A third one.", "r3"))
            engine.wait_started(NEXT)
            time.sleep(QUIET_S)
            assert in_some_order(engine.started, ["Short one."], {"Another sentence follows.", NEXT})
        scheduler = served.service.scheduler
        assert (served.service.active_sessions, scheduler.open_lanes, scheduler.queued) == (0, 0, 0)
        engine.open_all()
        wait_until(lambda: scheduler.running == 0, "both running jobs to end")
        time.sleep(QUIET_S)

    assert len(engine.started) == 3  # r3 never started


@pytest.mark.parametrize(("settings", "lookahead"), [({"lookahead": "off"}, 0), ({"max_concurrent": 1}, 0)])
def test_without_look_ahead_the_next_request_waits_for_the_current(settings: dict[str, Any], lookahead: int) -> None:
    engine = KeyedGates("Another sentence follows.")
    with (
        serve(engine, **settings) as (client, served),
        client.websocket_connect("/invocations-bidirectional-stream") as ws,
    ):
        assert served.service.lookahead_requests == lookahead
        ws.send_text(synth(THREE_SENTENCES, "r1"))
        ws.send_text(synth(NEXT, "r2"))
        engine.wait_started("Another sentence follows.")
        time.sleep(QUIET_S)
        assert engine.started == ["Short one.", "Another sentence follows."]
        engine.open("Another sentence follows.")
        frames = receive_until(ws, is_event("synthesis_complete", "r2"))

    assert without_timing(frames) == expected_request("r1", THREE_SENTENCES) + expected_request("r2", NEXT)
    assert engine.max_in_flight == 1


def test_a_negative_look_ahead_is_refused() -> None:
    with pytest.raises(ValueError, match="lookahead_requests must be at least 0, got -1"):
        SessionLimits(max_text_chars=1, frame_bytes=2, lookahead_requests=-1)
