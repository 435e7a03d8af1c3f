"""A real-time audio player, simulated: what a listener hears from a stream of audio frames. Pure.

The player starts at the first audio byte and plays samples at the sample rate. When the next
frame has not arrived by the time the audio before it has been played, the player runs dry: it
plays silence until the frame arrives (an underrun), then carries on. The report gives the time
to first audio, the silence inserted by underruns and how many there were, so a benchmark or a
test can tell a gapless stream from one that stutters.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from speech_protocol import AUDIO_CHANNELS, SAMPLE_RATE, SAMPLE_WIDTH


@dataclass(frozen=True, slots=True)
class Arrival:
    """One binary audio frame and when it arrived, in seconds on the same clock as the request."""

    at_s: float
    num_bytes: int


@dataclass(frozen=True, slots=True)
class Gap:
    """Silence the listener hears: the player ran dry at `at_s` until a frame arrived."""

    at_s: float
    silence_s: float
    audio_played_s: float
    """Seconds of audio heard before this gap."""


@dataclass(frozen=True, slots=True)
class PlaybackReport:
    """What a real-time player made of one request's audio."""

    time_to_first_audio_s: float
    """From the request being sent to the first audio byte (playback starts then)."""
    audio_s: float
    """Seconds of audio received."""
    silence_s: float
    """Total silence inserted by underruns after playback started."""
    underruns: int
    gaps: tuple[Gap, ...]
    ends_at_s: float
    """When the last sample has been played, on the request's clock."""


def bytes_to_seconds(num_bytes: int) -> float:
    return num_bytes / (SAMPLE_RATE * SAMPLE_WIDTH * AUDIO_CHANNELS)


def simulate_playback(
    arrivals: Iterable[Arrival], *, sent_at_s: float = 0.0, tolerance_s: float = 0.0
) -> PlaybackReport:
    """Play `arrivals` (in arrival order) in real time from the first one; report the silences.

    A frame arriving at most `tolerance_s` after the player ran dry is not counted as an underrun
    (its silence is still added to `ends_at_s`, not to `silence_s`): 0 counts every late sample.
    Raises ValueError for frames out of time order or without audio, and for no frames at all.
    """
    frames = list(arrivals)
    if not frames:
        raise ValueError("no audio frames: nothing was played")
    gaps: list[Gap] = []
    playhead = frames[0].at_s
    """When the audio received so far will have been played."""
    played_s = 0.0
    previous_at = frames[0].at_s
    for frame in frames:
        if frame.num_bytes <= 0:
            raise ValueError(f"a frame without audio arrived at {frame.at_s}")
        if frame.at_s < previous_at:
            raise ValueError(f"frames out of order: {frame.at_s} after {previous_at}")
        previous_at = frame.at_s
        late_s = frame.at_s - playhead
        if late_s > tolerance_s:
            gaps.append(Gap(at_s=playhead, silence_s=late_s, audio_played_s=played_s))
        playhead = max(playhead, frame.at_s)
        duration_s = bytes_to_seconds(frame.num_bytes)
        playhead += duration_s
        played_s += duration_s
    return PlaybackReport(
        time_to_first_audio_s=frames[0].at_s - sent_at_s,
        audio_s=played_s,
        silence_s=sum((gap.silence_s for gap in gaps), 0.0),
        underruns=len(gaps),
        gaps=tuple(gaps),
        ends_at_s=playhead,
    )
