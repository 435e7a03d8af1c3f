"""Client-side check of one speech session: the container's frames against the requests we sent.

Pure state machine, no sockets. Per request the container sends `synthesis_start`, audio (binary
frames), `synthesis_complete`, one request after the other in the order they were sent; audio
frames carry no request id, so a frame outside a started request is a protocol violation.
"""

from __future__ import annotations

from collections import deque

from agent_app.speech.transport import SpeechErrorCode, SpeechFrame, SpeechTransportError
from speech_protocol import (
    AUDIO_CHANNELS,
    AUDIO_FORMAT,
    SAMPLE_RATE,
    SAMPLE_WIDTH,
    Cancelled,
    ErrorEvent,
    SynthesisComplete,
    SynthesisStart,
    Timestamps,
)


class SpeechRejectedError(Exception):
    """The container answered a request with an `error` frame."""

    def __init__(self, request_id: str | None, code: str, message: str) -> None:
        super().__init__(f"speech request {request_id!r} refused: {code}: {message}")
        self.request_id = request_id
        self.code = code


def _violation(message: str) -> SpeechTransportError:
    return SpeechTransportError(SpeechErrorCode.PROTOCOL_ERROR, message)


class SessionTracker:
    """Follows the requests of one session; `frame` returns the audio to forward."""

    def __init__(self) -> None:
        self._waiting: deque[str] = deque()
        self._active: str | None = None
        self.completed = 0

    @property
    def unfinished(self) -> int:
        return len(self._waiting) + (self._active is not None)

    def unfinished_ids(self) -> list[str]:
        """Requests sent and not yet completed, in the order they were sent (the active one first)."""
        return ([self._active] if self._active is not None else []) + list(self._waiting)

    def sent(self, request_id: str) -> None:
        """Record a `synthesize` request, before it is sent."""
        self._waiting.append(request_id)

    def frame(self, frame: SpeechFrame) -> bytes | None:
        """Check one frame; audio comes back, control events give None. Raises on a violation."""
        if isinstance(frame, bytes):
            if self._active is None:
                raise _violation("audio frame outside a request (no synthesis_start before it)")
            if len(frame) % (SAMPLE_WIDTH * AUDIO_CHANNELS):
                raise _violation(f"audio frame of {len(frame)} bytes is not whole PCM16 samples")
            return frame
        if isinstance(frame, ErrorEvent):
            raise SpeechRejectedError(frame.request_id, frame.code, frame.message)
        if isinstance(frame, SynthesisStart):
            self._start(frame)
        elif isinstance(frame, SynthesisComplete):
            if frame.request_id != self._active:
                raise _violation(f"synthesis_complete for {frame.request_id!r} while {self._active!r} is active")
            self._active = None
            self.completed += 1
        elif isinstance(frame, Timestamps):
            if frame.request_id != self._active:
                raise _violation(f"timestamps for {frame.request_id!r} while {self._active!r} is active")
        elif isinstance(frame, Cancelled):
            raise _violation(f"request {frame.request_id!r} was cancelled, but this client never cancels")
        return None

    def _start(self, frame: SynthesisStart) -> None:
        if self._active is not None:
            raise _violation(f"synthesis_start for {frame.request_id!r} before {self._active!r} completed")
        if not self._waiting or frame.request_id != self._waiting[0]:
            expected = self._waiting[0] if self._waiting else None
            raise _violation(f"synthesis_start for {frame.request_id!r}; expected {expected!r}")
        audio = (frame.format, frame.sample_rate, frame.channels)
        if audio != (AUDIO_FORMAT, SAMPLE_RATE, AUDIO_CHANNELS):
            raise _violation(
                f"unsupported audio {audio}; this client plays ({AUDIO_FORMAT!r}, {SAMPLE_RATE}, {AUDIO_CHANNELS})"
            )
        self._active = self._waiting.popleft()

    def end(self) -> None:
        """The container ended the session; every request sent must have completed."""
        if self.unfinished:
            raise SpeechTransportError(
                SpeechErrorCode.STREAM_ERROR,
                f"the speech session ended with {self.unfinished} request(s) unfinished",
            )
