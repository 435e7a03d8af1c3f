"""The synthesis engine seam: one small Protocol, a zero-cost engine for protocol tests.

The real engine (Kokoro-82M through the `kokoro` package) lives in `kokoro_engine.py`; the server
only knows this interface, so protocol tests run in milliseconds while end-to-end tests run the
real model. `synthesize` is blocking and CPU/GPU-bound: callers run it off the event loop.
"""

from __future__ import annotations

import re
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import numpy as np

from speech_protocol import SAMPLE_RATE, WordTiming


@dataclass(frozen=True, slots=True)
class ChunkAudio:
    """The audio of one chunk of text."""

    pcm: bytes
    """PCM16 little-endian, mono, 24 kHz."""
    words: tuple[WordTiming, ...]
    """Word timings in seconds from the start of this chunk's audio (empty when unknown)."""
    ends_chunk: bool = False
    """Set by a `PieceStreamingEngine` on a chunk's last piece, so nothing more is asked of it (an
    engine that does not set it is asked once more and ends its iterator)."""

    @property
    def duration_s(self) -> float:
        return len(self.pcm) / (2 * SAMPLE_RATE)


class SpeechEngine(Protocol):
    """What the server needs from a text-to-speech model."""

    @property
    def voices(self) -> frozenset[str]: ...

    @property
    def default_voice(self) -> str: ...

    def synthesize(self, text: str, voice: str, speed: float) -> ChunkAudio:
        """Synthesize one chunk. Blocking; never call it on the event loop."""
        ...


@runtime_checkable
class PieceStreamingEngine(Protocol):
    """An engine that can hand one chunk's audio over in pieces, each as soon as it exists.

    The pieces, concatenated, are the chunk's audio (up to the bound its implementation states);
    each piece's word timings are relative to that piece's first sample. Each `next` is blocking
    like `synthesize` and runs in an engine worker thread, not always the same one (the server makes
    each piece its own job), never two at once: the iterator must hold no thread-local state across
    pieces, and may be dropped between them.
    """

    def synthesize_pieces(
        self,
        text: str,
        voice: str,
        speed: float,
        *,
        others_waiting: Callable[[], int] | None = None,
        ahead_s: Callable[[], float] | None = None,
    ) -> Iterator[ChunkAudio]:
        """`others_waiting()`, asked when the first piece is cut, is how many other listeners wait
        in silence for the engine: the more, the shorter the first piece may be made. `ahead_s()`,
        asked when a later piece is cut (on the engine thread), is the audio this listener holds and
        has not played yet: a piece is made no longer than can be ready before it runs out."""
        ...


def float_to_pcm16(audio: np.ndarray) -> bytes:
    """Float samples in [-1, 1] to PCM16 LE bytes (clipped, not wrapped, when out of range)."""
    clipped = np.clip(audio, -1.0, 1.0)
    pcm: bytes = (clipped * 32767.0).astype("<i2").tobytes()
    return pcm


_WORD = re.compile(r"\S+")


class ZeroCostEngine:
    """A deterministic stand-in for the model: audio length proportional to the text, no compute.

    Sample k of a chunk is `(k % 251) - 125`, so tests can assert the exact bytes; an optional
    `compute_s_per_char` sleeps to simulate a model's cost (the sleep releases the GIL, as torch does).
    It remembers only its last `history` calls (`calls`), so a long soak run or a server started
    with `--engine zero` does not grow without bound; `call_count` counts them all.
    """

    def __init__(
        self,
        *,
        seconds_per_char: float = 0.06,
        compute_s_per_char: float = 0.0,
        voices: frozenset[str] = frozenset({"af_heart", "am_michael"}),
        default_voice: str = "af_heart",
        history: int = 1000,
    ) -> None:
        if history < 0:
            raise ValueError(f"history must be >= 0, got {history}")
        self.seconds_per_char = seconds_per_char
        self.compute_s_per_char = compute_s_per_char
        self._voices = voices
        self._default_voice = default_voice
        self._calls: deque[tuple[str, str, float]] = deque(maxlen=history)
        self.call_count = 0

    @property
    def calls(self) -> list[tuple[str, str, float]]:
        """The last `history` calls (text, voice, speed), oldest first."""
        return list(self._calls)

    @property
    def voices(self) -> frozenset[str]:
        return self._voices

    @property
    def default_voice(self) -> str:
        return self._default_voice

    def samples_for(self, text: str, speed: float = 1.0) -> int:
        return int(len(text) * self.seconds_per_char * SAMPLE_RATE / speed)

    def synthesize(self, text: str, voice: str, speed: float) -> ChunkAudio:
        self._calls.append((text, voice, speed))
        self.call_count += 1
        if self.compute_s_per_char:
            time.sleep(len(text) * self.compute_s_per_char)
        n = self.samples_for(text, speed)
        pcm = ((np.arange(n) % 251) - 125).astype("<i2").tobytes()
        words: list[WordTiming] = []
        per_char = n / SAMPLE_RATE / max(len(text), 1)
        for match in _WORD.finditer(text):
            words.append(WordTiming(match.group(), match.start() * per_char, match.end() * per_char))
        return ChunkAudio(pcm=pcm, words=tuple(words))
