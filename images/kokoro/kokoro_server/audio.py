"""Audio framing: PCM16 split into WebSocket frames, and the header of a streamed WAV file. Pure."""

from __future__ import annotations

import struct
from typing import Final

from speech_protocol import AUDIO_CHANNELS, SAMPLE_RATE, SAMPLE_WIDTH

WAV_UNKNOWN_SIZE: Final = 0xFFFFFFFF
"""RIFF and data sizes of a WAV stream whose length is unknown when its header is sent."""


def frame_bytes(frame_ms: int) -> int:
    """Bytes of PCM in `frame_ms` milliseconds of audio (always a whole number of samples)."""
    return SAMPLE_RATE * frame_ms // 1000 * SAMPLE_WIDTH * AUDIO_CHANNELS


def split_frames(pcm: bytes, max_bytes: int) -> tuple[bytes, ...]:
    """`pcm` cut into frames of `max_bytes` (the last one shorter); no frame for empty audio."""
    if max_bytes <= 0 or max_bytes % (SAMPLE_WIDTH * AUDIO_CHANNELS):
        raise ValueError(f"max_bytes must be a positive whole number of samples, got {max_bytes}")
    return tuple(pcm[i : i + max_bytes] for i in range(0, len(pcm), max_bytes))


def wav_stream_header() -> bytes:
    """A 44-byte PCM16 mono 24 kHz WAV header for audio streamed before its length is known.

    The RIFF and data sizes are 0xFFFFFFFF, the convention for WAV streams (ffmpeg, SoX and
    browsers read such a file to its end); computing them would mean holding back all of the audio
    until the last chunk is synthesized, which is what streaming avoids.
    """
    block_align = SAMPLE_WIDTH * AUDIO_CHANNELS
    return b"".join(
        [
            b"RIFF",
            struct.pack("<I", WAV_UNKNOWN_SIZE),
            b"WAVE",
            b"fmt ",
            struct.pack(
                "<IHHIIHH",
                16,  # fmt chunk size for PCM
                1,  # format tag: integer PCM
                AUDIO_CHANNELS,
                SAMPLE_RATE,
                SAMPLE_RATE * block_align,
                block_align,
                SAMPLE_WIDTH * 8,
            ),
            b"data",
            struct.pack("<I", WAV_UNKNOWN_SIZE),
        ]
    )
