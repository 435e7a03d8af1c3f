"""Reduced precision versus fp32: how much the audio changes and how much faster it is made.

The same text is synthesized by an fp32 engine and a reduced-precision one (bf16 autocast on a
CPU, fp16 or bf16 on a GPU) from the same random seed (the vocoder's excitation is noise), and
the audio is compared three ways:

- the waveform: relative L2 error over the common length, and the length difference (reduced
  precision can round a predicted phoneme duration to the next 25 ms frame: 600 samples);
- the magnitude spectrogram (50 ms windows, one per duration frame): insensitive to phase, so a
  changed excitation does not count, a changed timbre does;
- the same two errors between fp32 runs from two different seeds: the vocoder's own randomness,
  the floor under which a difference is not a precision effect.

Speed is the median wall time of repeated syntheses, fp32 and reduced precision alternating so
that a change in the machine's load affects both alike, and per second of audio produced (the
decoder's cost grows with the audio, and the durations may differ).

`compare_waveforms`, `spectral_error` and `speedup` are pure; `measure_precision` runs two loaded
engines, `load_engine` loads one, `python -m bench.precision` prints one comparison.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Final

import numpy as np

if TYPE_CHECKING:
    from kokoro_server.kokoro_engine import KokoroEngine

SAMPLES_PER_FRAME: Final = 600
"""Kokoro predicts durations in frames of 25 ms: 600 samples at 24 kHz."""
SPECTRUM_WINDOW: Final = 2 * SAMPLES_PER_FRAME
DEFAULT_TEXT: Final = (
    "Streaming speech lets a voice agent start talking before its answer is ready. "
    "Each sentence is synthesized as soon as the language model finishes writing it."
)


@dataclass(frozen=True, slots=True)
class WaveformDiff:
    """How a candidate waveform differs from a reference one."""

    reference_samples: int
    candidate_samples: int
    relative_l2: float
    """||reference - candidate|| / ||reference|| over the common length (the shorter one's)."""

    @property
    def length_diff_samples(self) -> int:
        """Candidate minus reference length, in samples."""
        return self.candidate_samples - self.reference_samples

    @property
    def length_diff_frames(self) -> float:
        return self.length_diff_samples / SAMPLES_PER_FRAME


def pcm16_to_float(pcm: bytes) -> np.ndarray:
    """PCM16 little-endian bytes to float64 samples in [-1, 1)."""
    if len(pcm) % 2:
        raise ValueError(f"PCM16 needs an even number of bytes, got {len(pcm)}")
    return np.frombuffer(pcm, dtype="<i2").astype(np.float64) / 32768.0


def _relative_l2(reference: np.ndarray, candidate: np.ndarray) -> float:
    scale = float(np.linalg.norm(reference))
    if scale == 0.0:
        raise ValueError("the reference is silent over the common length")
    return float(np.linalg.norm(reference - candidate)) / scale


def compare_waveforms(reference: np.ndarray, candidate: np.ndarray) -> WaveformDiff:
    """Relative L2 error of `candidate` against `reference` over their common length.

    Raises ValueError when either is empty or the reference is silent there (no scale to compare to).
    """
    if reference.ndim != 1 or candidate.ndim != 1:
        raise ValueError("waveforms must be one-dimensional")
    common = min(len(reference), len(candidate))
    if common == 0:
        raise ValueError("an empty waveform cannot be compared")
    return WaveformDiff(
        reference_samples=len(reference),
        candidate_samples=len(candidate),
        relative_l2=_relative_l2(reference[:common].astype(np.float64), candidate[:common].astype(np.float64)),
    )


def magnitude_spectrogram(
    samples: np.ndarray, *, window: int = SPECTRUM_WINDOW, hop: int = SAMPLES_PER_FRAME
) -> np.ndarray:
    """|STFT| with a Hann window, frames x bins; only whole windows (none when shorter than one)."""
    count = 0 if len(samples) < window else 1 + (len(samples) - window) // hop
    if count == 0:
        return np.zeros((0, window // 2 + 1))
    frames = np.stack([samples[i * hop : i * hop + window] for i in range(count)])
    return np.abs(np.fft.rfft(frames * np.hanning(window), axis=1))


def spectral_error(reference: np.ndarray, candidate: np.ndarray) -> float:
    """Relative L2 error of the magnitude spectrograms over their common frames (phase-insensitive)."""
    ref, cand = magnitude_spectrogram(reference), magnitude_spectrogram(candidate)
    common = min(len(ref), len(cand))
    if common == 0:
        raise ValueError(f"both waveforms need at least {SPECTRUM_WINDOW} samples")
    return _relative_l2(ref[:common], cand[:common])


def speedup(reference_s: Sequence[float], candidate_s: Sequence[float]) -> float:
    """How many times faster the candidate is: ratio of the median times."""
    if not reference_s or not candidate_s:
        raise ValueError("speed-up needs at least one timing of each")
    candidate = statistics.median(candidate_s)
    if candidate <= 0:
        raise ValueError(f"the candidate's median time must be positive, got {candidate}")
    return statistics.median(reference_s) / candidate


@dataclass(frozen=True, slots=True)
class Run:
    """One timed synthesis."""

    wall_s: float
    audio_s: float

    @property
    def real_time_factor(self) -> float:
        return self.wall_s / self.audio_s


@dataclass(frozen=True, slots=True)
class PrecisionReport:
    precision: str
    text_chars: int
    waveform: WaveformDiff
    spectral: float
    seed_waveform: float
    """fp32 against fp32 from another seed: the vocoder's own randomness, waveform."""
    seed_spectral: float
    reference_runs: tuple[Run, ...]
    """fp32 syntheses."""
    candidate_runs: tuple[Run, ...]

    @property
    def speedup(self) -> float:
        return speedup([r.wall_s for r in self.reference_runs], [r.wall_s for r in self.candidate_runs])

    @property
    def rtf_speedup(self) -> float:
        """Speed-up per second of audio produced."""
        return speedup(
            [r.real_time_factor for r in self.reference_runs], [r.real_time_factor for r in self.candidate_runs]
        )

    def lines(self) -> list[str]:
        ref_rtf = statistics.median(r.real_time_factor for r in self.reference_runs)
        cand_rtf = statistics.median(r.real_time_factor for r in self.candidate_runs)
        diff = self.waveform
        return [
            f"{self.precision} vs fp32 on {self.text_chars} characters (same seed):",
            f"  waveform relative L2 {diff.relative_l2:.3f} over the common length; length {diff.candidate_samples} "
            f"vs {diff.reference_samples} samples ({diff.length_diff_samples:+d} = {diff.length_diff_frames:+.0f} "
            "duration frames)",
            f"  magnitude spectrogram relative L2 {self.spectral:.3f}",
            f"  floor (fp32 vs fp32, another seed): waveform {self.seed_waveform:.3f}, "
            f"spectrogram {self.seed_spectral:.3f}",
            f"  real-time factor {ref_rtf:.2f} fp32, {cand_rtf:.2f} {self.precision}: speed-up x{self.rtf_speedup:.2f} "
            f"per audio second, x{self.speedup:.2f} per synthesis (median of {len(self.reference_runs)})",
        ]


def _seeded(engine: KokoroEngine, text: str, seed: int) -> tuple[np.ndarray, Run]:
    """The audio of `text` from a fixed noise seed, and how long it took."""
    import torch

    torch.manual_seed(seed)
    started = time.perf_counter()
    audio = engine.synthesize(text, engine.default_voice, 1.0)
    return pcm16_to_float(audio.pcm), Run(wall_s=time.perf_counter() - started, audio_s=audio.duration_s)


def measure_precision(
    reference: KokoroEngine, candidate: KokoroEngine, text: str = DEFAULT_TEXT, *, repeats: int = 3, seed: int = 0
) -> PrecisionReport:
    """Compare two loaded engines (fp32 first) on `text`: errors from seeded runs, speed from `repeats`.

    Both engines are warmed up on `text` first: the first call at a new length is slower.
    """
    if repeats < 1:
        raise ValueError(f"repeats must be at least 1, got {repeats}")
    other_seed, _ = _seeded(reference, text, seed + 1)
    _seeded(candidate, text, seed)
    reference_runs: list[Run] = []
    candidate_runs: list[Run] = []
    reference_audio = candidate_audio = np.zeros(0)
    for _ in range(repeats):
        reference_audio, run = _seeded(reference, text, seed)
        reference_runs.append(run)
        candidate_audio, run = _seeded(candidate, text, seed)
        candidate_runs.append(run)
    return PrecisionReport(
        precision=candidate.precision,
        text_chars=len(text),
        waveform=compare_waveforms(reference_audio, candidate_audio),
        spectral=spectral_error(reference_audio, candidate_audio),
        seed_waveform=compare_waveforms(reference_audio, other_seed).relative_l2,
        seed_spectral=spectral_error(reference_audio, other_seed),
        reference_runs=tuple(reference_runs),
        candidate_runs=tuple(candidate_runs),
    )


def load_engine(model_dir: Path, *, precision: str, device: str = "cpu") -> KokoroEngine:
    """A KokoroEngine whose vocoder uses kokoro's real-valued iSTFT, whatever the precision.

    Reduced precision needs the real-valued iSTFT (see `KokoroEngine.load`); building both sides of
    a comparison that way means only the precision differs between them.
    """
    from kokoro_server.kokoro_engine import KokoroEngine

    return KokoroEngine.load(model_dir, precision=precision, device=device, real_istft=True)


def compare_precisions(
    model_dir: Path, *, precision: str = "bf16", device: str = "cpu", text: str = DEFAULT_TEXT, repeats: int = 3
) -> PrecisionReport:
    """Load an fp32 and a `precision` engine from `model_dir` on `device` and compare them."""
    reference = load_engine(model_dir, precision="fp32", device=device)
    candidate = load_engine(model_dir, precision=precision, device=device)
    return measure_precision(reference, candidate, text, repeats=repeats)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.precision", description="reduced precision versus fp32")
    parser.add_argument("--model-dir", type=Path, help="model directory (default: generated random weights)")
    parser.add_argument("--precision", default="bf16", choices=["bf16", "fp16"])
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    model_dir: Path = args.model_dir
    if model_dir is None:
        from kokoro_server.fake_weights import ensure_random_weights

        model_dir = ensure_random_weights()
    report = compare_precisions(model_dir, precision=args.precision, device=args.device, repeats=args.repeats)
    print("\n".join(report.lines()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
