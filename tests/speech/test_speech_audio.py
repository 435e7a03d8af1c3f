"""Audio framing and the streamed WAV header. Pure."""

from __future__ import annotations

import io
import struct
import wave

import pytest

from kokoro_server.audio import frame_bytes, split_frames, wav_stream_header


def test_frame_bytes_is_whole_samples() -> None:
    assert frame_bytes(1000) == 48000
    assert frame_bytes(20) == 960


def test_split_frames_keeps_every_byte_in_order() -> None:
    pcm = bytes(range(200)) * 3
    assert split_frames(pcm, 250) == (pcm[:250], pcm[250:500], pcm[500:])
    assert split_frames(b"", 250) == ()


@pytest.mark.parametrize("size", [0, 3, -2])
def test_split_frames_refuses_sizes_that_cut_a_sample(size: int) -> None:
    with pytest.raises(ValueError, match=f"max_bytes must be a positive whole number of samples, got {size}"):
        split_frames(b"\x00\x00", size)


def test_wav_stream_header_fields() -> None:
    header = wav_stream_header()
    assert len(header) == 44
    riff, riff_size, wave_id, fmt_id, fmt_size = struct.unpack("<4sI4s4sI", header[:20])
    tag, channels, rate, byte_rate, align, bits = struct.unpack("<HHIIHH", header[20:36])
    data_id, data_size = struct.unpack("<4sI", header[36:44])
    assert (riff, riff_size, wave_id, fmt_id, fmt_size) == (b"RIFF", 0xFFFFFFFF, b"WAVE", b"fmt ", 16)
    assert (tag, channels, rate, byte_rate, align, bits) == (1, 1, 24000, 48000, 2, 16)
    assert (data_id, data_size) == (b"data", 0xFFFFFFFF)


def test_a_wav_reader_reads_the_stream_to_its_end() -> None:
    pcm = struct.pack("<4h", 1, -1, 300, -300)
    with wave.open(io.BytesIO(wav_stream_header() + pcm)) as reader:
        assert (reader.getnchannels(), reader.getsampwidth(), reader.getframerate()) == (1, 2, 24000)
        assert reader.readframes(1_000_000) == pcm
