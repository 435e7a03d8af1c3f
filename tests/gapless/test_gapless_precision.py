"""The pure parts of the precision check: waveform and spectrogram errors, speed-up. No model."""

from __future__ import annotations

import numpy as np
import pytest

from bench.precision import (
    SAMPLES_PER_FRAME,
    PrecisionReport,
    Run,
    WaveformDiff,
    compare_waveforms,
    magnitude_spectrogram,
    pcm16_to_float,
    spectral_error,
    speedup,
)

RNG = np.random.default_rng(7)
NOISE = RNG.standard_normal(24_000)


def test_pcm16_bytes_become_floats_in_the_unit_range() -> None:
    pcm = np.array([0, 16384, -32768, 32767], dtype="<i2").tobytes()
    assert pcm16_to_float(pcm).tolist() == [0.0, 0.5, -1.0, 32767 / 32768]
    with pytest.raises(ValueError, match="even number of bytes"):
        pcm16_to_float(b"\x00")


def test_identical_waveforms_have_no_error() -> None:
    assert compare_waveforms(NOISE, NOISE.copy()) == WaveformDiff(24_000, 24_000, 0.0)


def test_relative_l2_is_the_norm_of_the_difference_over_the_norm_of_the_reference() -> None:
    reference = np.array([3.0, 4.0])
    diff = compare_waveforms(reference, np.array([3.0, 4.5]))
    assert diff.relative_l2 == 0.1  # 0.5 / 5


def test_lengths_are_aligned_to_the_shorter_and_their_difference_reported_in_samples_and_frames() -> None:
    longer = np.concatenate([NOISE, np.ones(SAMPLES_PER_FRAME)])
    diff = compare_waveforms(NOISE, longer)
    assert (diff.relative_l2, diff.length_diff_samples, diff.length_diff_frames) == (0.0, 600, 1.0)
    shorter = compare_waveforms(NOISE, NOISE[:-1200] * 0.5)
    assert shorter.length_diff_frames == -2.0
    assert shorter.relative_l2 == pytest.approx(0.5)


@pytest.mark.parametrize(
    ("reference", "candidate", "message"),
    [
        (np.zeros(0), NOISE, "empty"),
        (np.zeros(10), np.ones(10), "silent"),
        (np.zeros((2, 2)), np.zeros((2, 2)), "one-dimensional"),
    ],
)
def test_comparisons_without_a_scale_are_rejected(reference: np.ndarray, candidate: np.ndarray, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        compare_waveforms(reference, candidate)


def test_the_spectrogram_has_one_frame_per_600_samples_with_1200_sample_windows() -> None:
    assert magnitude_spectrogram(NOISE).shape == (39, 601)  # 1 + (24000 - 1200) // 600
    assert magnitude_spectrogram(NOISE[:1199]).shape == (0, 601)


def test_the_spectral_error_ignores_a_sign_flip_that_the_waveform_error_counts_fully() -> None:
    assert compare_waveforms(NOISE, -NOISE).relative_l2 == 2.0
    assert spectral_error(NOISE, -NOISE) == 0.0
    assert spectral_error(NOISE, 1.5 * NOISE) == pytest.approx(0.5)
    with pytest.raises(ValueError, match="at least 1200 samples"):
        spectral_error(NOISE[:1000], NOISE[:1000])


def test_speedup_is_the_ratio_of_median_times() -> None:
    assert speedup([2.0, 9.0, 4.0], [1.0, 2.0, 50.0]) == 2.0
    with pytest.raises(ValueError, match="at least one timing"):
        speedup([], [1.0])
    with pytest.raises(ValueError, match="positive"):
        speedup([1.0], [0.0])


def test_the_report_gives_speedup_per_synthesis_and_per_audio_second() -> None:
    report = PrecisionReport(
        precision="bf16",
        text_chars=100,
        waveform=WaveformDiff(24_000, 24_600, 0.25),
        spectral=0.125,
        seed_waveform=1.0,
        seed_spectral=0.5,
        reference_runs=(Run(wall_s=4.0, audio_s=8.0), Run(wall_s=4.0, audio_s=8.0)),
        candidate_runs=(Run(wall_s=2.5, audio_s=10.0), Run(wall_s=2.5, audio_s=10.0)),
    )
    assert report.speedup == 1.6
    assert report.rtf_speedup == 2.0  # 0.5 vs 0.25 seconds per second of audio
    assert report.lines() == [
        "bf16 vs fp32 on 100 characters (same seed):",
        "  waveform relative L2 0.250 over the common length; length 24600 vs 24000 samples (+600 = +1 duration "
        "frames)",
        "  magnitude spectrogram relative L2 0.125",
        "  floor (fp32 vs fp32, another seed): waveform 1.000, spectrogram 0.500",
        "  real-time factor 0.50 fp32, 0.25 bf16: speed-up x2.00 per audio second, x1.60 per synthesis (median of 2)",
    ]
