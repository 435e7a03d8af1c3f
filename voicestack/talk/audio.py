"""The answer's audio: played live on the default output device, written to a WAV file.

Playback goes through `sounddevice` (PortAudio). A machine without PortAudio, or without an output
device, gets one line saying so (`open_player` returns the reason) and a player that plays
nothing; nothing else changes. The device pulls PCM from a `PcmBuffer` on its own thread (the
callback), so the event loop only appends; a barge-in clears the buffer and the device plays
silence from its next block.

`write_wav` writes the PCM exactly as it arrived (24 kHz mono PCM16 from the agent): the file's
data chunk is byte for byte the concatenated audio events.
"""

from __future__ import annotations

import asyncio
import threading
import wave
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from speech_protocol import SAMPLE_WIDTH


class PcmBuffer:
    """Bytes waiting to be played, appended by one thread and read by another."""

    def __init__(self) -> None:
        self._chunks: deque[bytes] = deque()
        self._pending = 0
        self._lock = threading.Lock()

    def append(self, pcm: bytes) -> None:
        if pcm:
            with self._lock:
                self._chunks.append(pcm)
                self._pending += len(pcm)

    def read(self, size: int) -> bytes:
        """Up to `size` bytes, oldest first (fewer when less is buffered)."""
        out = bytearray()
        with self._lock:
            while self._chunks and len(out) < size:
                chunk = self._chunks.popleft()
                take = size - len(out)
                out += chunk[:take]
                if len(chunk) > take:
                    self._chunks.appendleft(chunk[take:])
            self._pending -= len(out)
        return bytes(out)

    def clear(self) -> None:
        with self._lock:
            self._chunks.clear()
            self._pending = 0

    @property
    def pending(self) -> int:
        return self._pending


class Player(Protocol):
    def play(self, pcm: bytes) -> None: ...

    def clear(self) -> None:
        """Barge-in: drop what has not been played yet."""

    async def drain(self) -> None:
        """Wait until everything written has been played."""

    def close(self) -> None: ...


class SilentPlayer:
    """Plays nothing (no device, or `--no-play`)."""

    def play(self, pcm: bytes) -> None:
        return None

    def clear(self) -> None:
        return None

    async def drain(self) -> None:
        return None

    def close(self) -> None:
        return None


class DevicePlayer:
    """The default output device, fed from a `PcmBuffer` by PortAudio's callback thread (made on
    the event loop, which the callback tells when the buffer has run empty)."""

    def __init__(self, sounddevice: Any, sample_rate: int, channels: int) -> None:
        self._buffer = PcmBuffer()
        self._loop = asyncio.get_running_loop()
        self._empty = asyncio.Event()
        self._empty.set()
        self._stream = sounddevice.RawOutputStream(
            samplerate=sample_rate, channels=channels, dtype="int16", callback=self._fill
        )
        self._stream.start()

    def _fill(self, outdata: Any, frames: int, time: Any, status: Any) -> None:
        data = self._buffer.read(len(outdata))
        outdata[: len(data)] = data
        outdata[len(data) :] = b"\0" * (len(outdata) - len(data))
        if data and not self._buffer.pending:
            self._loop.call_soon_threadsafe(self._mark_if_empty)

    def _mark_if_empty(self) -> None:
        # On the loop: `play` may have appended since the callback saw the buffer empty.
        if not self._buffer.pending:
            self._empty.set()

    def play(self, pcm: bytes) -> None:
        if pcm:
            self._empty.clear()
            self._buffer.append(pcm)

    def clear(self) -> None:
        self._buffer.clear()
        self._empty.set()

    async def drain(self) -> None:
        await self._empty.wait()
        await asyncio.sleep(float(self._stream.latency))  # what the device still holds

    def close(self) -> None:
        self._stream.stop()
        self._stream.close()


def _load_sounddevice() -> Any:
    import sounddevice

    return sounddevice


def open_player(
    sample_rate: int, channels: int, *, load: Callable[[], Any] = _load_sounddevice
) -> tuple[Player, str | None]:
    """The default output device's player, or a silent one and the one-line reason."""
    try:
        sounddevice = load()
    except OSError as exc:  # the module loads PortAudio at import time
        return SilentPlayer(), f"no audio playback: {exc} (install PortAudio, e.g. apt-get install libportaudio2)"
    try:
        sounddevice.query_devices(kind="output")
        return DevicePlayer(sounddevice, sample_rate, channels), None
    except (sounddevice.PortAudioError, ValueError) as exc:
        return SilentPlayer(), f"no audio playback: no usable output device ({exc})"


def write_wav(path: Path, pcm: bytes, *, sample_rate: int, channels: int) -> None:
    """PCM16 as a WAV file whose data chunk is `pcm`, unchanged."""
    with wave.open(str(path), "wb") as out:
        out.setnchannels(channels)
        out.setsampwidth(SAMPLE_WIDTH)
        out.setframerate(sample_rate)
        out.writeframes(pcm)
