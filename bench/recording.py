"""Records one request of a real speech WebSocket session: each audio frame and when it arrived.

The recording feeds `bench.playback.simulate_playback`. Arrival times are seconds from the moment
the synthesize message was sent, on the client's clock, so they include everything a listener
would wait for: queueing, synthesis, framing and the socket.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from websockets.asyncio.client import ClientConnection, connect

from bench.playback import Arrival, PlaybackReport, simulate_playback
from speech_protocol import (
    Close,
    ErrorEvent,
    SynthesisComplete,
    Synthesize,
    encode_client_message,
    parse_server_event,
)


class RecordingError(RuntimeError):
    """The server answered the request with something other than its audio and completion."""


@dataclass(frozen=True, slots=True)
class Recording:
    """One request's audio frames with their arrival times, and the server's completion frame."""

    text: str
    arrivals: tuple[Arrival, ...]
    complete: SynthesisComplete

    def playback(self, *, tolerance_s: float = 0.0) -> PlaybackReport:
        return simulate_playback(self.arrivals, sent_at_s=0.0, tolerance_s=tolerance_s)


async def record_request(
    ws: ClientConnection,
    text: str,
    *,
    request_id: str = "bench",
    voice: str | None = None,
    clock: Callable[[], float] = time.perf_counter,
) -> Recording:
    """Send one synthesize message on an open session; record its frames until `synthesis_complete`.

    Control frames arrive as text, audio as binary; nothing is parsed to tell them apart.
    """
    await ws.send(encode_client_message(Synthesize(text=text, request_id=request_id, voice=voice)))
    sent_at = clock()
    arrivals: list[Arrival] = []
    while True:
        message = await ws.recv()
        if isinstance(message, bytes):
            arrivals.append(Arrival(at_s=clock() - sent_at, num_bytes=len(message)))
            continue
        event = parse_server_event(message)
        if isinstance(event, ErrorEvent):
            raise RecordingError(f"request {request_id}: {event.code}: {event.message}")
        if isinstance(event, SynthesisComplete):
            return Recording(text=text, arrivals=tuple(arrivals), complete=event)
        # synthesis_start and timestamps carry nothing the player needs.


async def record_session(url: str, text: str, *, voice: str | None = None) -> Recording:
    """Open a session at `url`, record one request of `text`, close the session normally."""
    async with connect(url, max_size=None) as ws:
        recording = await record_request(ws, text, voice=voice)
        await ws.send(encode_client_message(Close()))
        return recording
