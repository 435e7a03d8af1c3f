"""Instance-norm statistics carried across a chunk's vocoder windows (`kokoro_server.norm_carry`).

The statistics are checked against torch's own instance norm and float64 `var_mean` on synthetic
activations (no model); the installation against the full-size model's modules. The windowed
audio it gives is bounded against whole-chunk decoding in test_model_windowed.py.
"""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from kokoro.istftnet import AdaIN1d

from kokoro_server import norm_carry
from kokoro_server.fused import _fused_classes
from kokoro_server.kokoro_engine import KokoroEngine
from kokoro_server.norm_carry import Moments, NormCarry, moments, normalize

CHANNELS, STEPS, PER_STEP = 6, 40, 10


def _moments_of(x: torch.Tensor) -> Moments:
    """Moments as `normalize` takes them: deviations from the span's own float32 mean."""
    shift = x.mean(dim=-1, keepdim=True)
    return moments(x - shift, shift.squeeze(-1).double())


def test_merged_moments_are_the_whole_spans_mean_and_variance() -> None:
    generator = torch.Generator().manual_seed(3)
    x = torch.randn(CHANNELS, 1000, generator=generator) * torch.arange(1, CHANNELS + 1)[:, None] + 5.0
    parts = [x[:, :1], x[:, 1:400], x[:, 400:400], x[:, 400:]]  # one sample, a run, an empty span, the rest
    merged = Moments(0, torch.zeros(CHANNELS, dtype=torch.float64), torch.zeros(CHANNELS, dtype=torch.float64))
    for part in parts:
        merged = merged.merged(_moments_of(part))
    variance, mean = torch.var_mean(x.double(), dim=-1, correction=0)
    assert merged.count == 1000
    torch.testing.assert_close(merged.mean, mean, rtol=0, atol=1e-6)
    torch.testing.assert_close(merged.variance, variance, rtol=1e-6, atol=0)


def test_moments_of_a_large_offset_do_not_cancel() -> None:
    """Sums of squares about zero in float32 would lose the variance under a mean of 1000 (about 6 %
    here); taken about the span's own mean they keep it to float rounding."""
    generator = torch.Generator().manual_seed(4)
    x = 1000.0 + torch.randn(CHANNELS, 4000, generator=generator)
    variance = torch.var(x.double(), dim=-1, correction=0)
    torch.testing.assert_close(_moments_of(x).variance, variance, rtol=1e-5, atol=0)
    about_zero = moments(x, torch.zeros(CHANNELS, dtype=torch.float64))
    assert float((about_zero.variance - variance).abs().max()) > 1e-3


def _layer_input(generator_seed: int = 5) -> torch.Tensor:
    generator = torch.Generator().manual_seed(generator_seed)
    return torch.randn(1, CHANNELS, STEPS * PER_STEP + 1, generator=generator) * 2.0 + 0.5  # + a tail, as stage 2


def test_windows_whose_span_is_the_whole_sequence_normalise_exactly_as_instance_norm() -> None:
    """With a context spanning everything, the first window's statistics are the whole sequence's,
    and a later window's (the first one's kept part merged with its own) are again the whole's."""
    x = _layer_input()
    weight, bias = torch.rand(CHANNELS) + 0.5, torch.randn(CHANNELS)
    expected = F.instance_norm(x, weight=weight, bias=bias, eps=1e-5)
    carry, layer = NormCarry(), object()
    for new_from, new_to in ((0, 15), (15, 31), (31, STEPS)):
        with carry.window(STEPS, new_from, new_to):
            out = normalize(layer, x, weight, bias, 1e-5)
        torch.testing.assert_close(out, expected, rtol=0, atol=2e-5)
    kept = carry.kept(layer)
    assert kept is not None
    assert kept.count == STEPS * PER_STEP  # the kept parts, each once (the tail sample is context)
    assert carry.layers == 1


def test_a_later_window_normalises_with_what_came_before_not_only_itself() -> None:
    x = _layer_input()
    carry, layer = NormCarry(), object()
    with carry.window(20, 0, 10):  # the first 20 steps, keeping 10
        normalize(layer, x[..., : 20 * PER_STEP], None, None, 1e-5)
    later = x[..., 5 * PER_STEP : 25 * PER_STEP]  # steps 5..25: 5 of left context, 15 new
    with carry.window(20, 5, 15):
        out = normalize(layer, later, None, None, 1e-5)
    seen = x[0, :, : 25 * PER_STEP].double()  # kept 0..10, then this window's new 10..25
    variance, mean = torch.var_mean(seen, dim=-1, correction=0)
    expected = (later[0].double() - mean[:, None]) / torch.sqrt(variance[:, None] + 1e-5)
    torch.testing.assert_close(out[0].double(), expected, rtol=0, atol=2e-5)
    alone = F.instance_norm(later, eps=1e-5)
    assert float((out - alone).abs().max()) > 0.01  # not the window's own statistics


def test_a_failed_window_carries_nothing_and_windows_stay_in_their_thread() -> None:
    x, carry, layer = _layer_input(), NormCarry(), object()

    def failing_window() -> None:
        with carry.window(STEPS, 0, 10):
            normalize(layer, x, None, None, 1e-5)
            raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match=r"^boom$"):
        failing_window()
    assert carry.layers == 0
    assert norm_carry.active() is None
    seen: list[object] = []
    with carry.window(STEPS, 0, 10):
        thread = threading.Thread(target=lambda: seen.append(norm_carry.active()))
        thread.start()
        thread.join()
        assert norm_carry.active() is not None
    assert seen == [None]  # another session's window on another thread normalises as Kokoro


def test_bad_use_is_refused_with_a_clear_error() -> None:
    x = _layer_input()
    with pytest.raises(RuntimeError, match=r"^no vocoder window is active$"):
        normalize(object(), x, None, None, 1e-5)
    with pytest.raises(ValueError, match=r"^need 0 <= new_from < new_to <= span_steps, got 10, 10, 40$"):
        NormCarry().window(STEPS, 10, 10).__enter__()
    with (
        pytest.raises(ValueError, match=r"^carried normalisation is for one sequence, got a batch of 2$"),
        NormCarry().window(STEPS, 0, 10),
    ):
        normalize(object(), torch.cat([x, x]), None, None, 1e-5)


def test_reduced_precision_input_keeps_its_dtype() -> None:
    x = _layer_input().bfloat16()
    with NormCarry().window(STEPS, 0, STEPS):
        out = normalize(object(), x, None, None, 1e-5)
    assert out.dtype == torch.bfloat16
    torch.testing.assert_close(out.float(), F.instance_norm(x.float(), eps=1e-5), rtol=0, atol=0.05)


@pytest.mark.model
def test_every_vocoder_adain_layer_consults_the_carry_fused_or_not(kokoro_model_dir: Path) -> None:
    """Kokoro's own engine (`fused=False`) gets `CarriedAdaIN1d` in its vocoder (48 layers: 6 per
    residual block, 6 source blocks and 2 stages), the frame-rate layers (22) stay Kokoro's; the
    fused engine's layers consult the carry themselves, so installing finds none."""
    published = KokoroEngine.load(kokoro_model_dir, fused=False)
    generator = published._model.decoder.generator
    carried = [m for m in generator.modules() if type(m).__name__ == "CarriedAdaIN1d"]
    assert len(carried) == 48
    assert sum(type(m) is AdaIN1d for m in published._model.modules()) == 22
    assert norm_carry.install(generator) == 0  # a second install changes nothing
    fused = KokoroEngine.load(kokoro_model_dir)
    fused_adain, _ = _fused_classes()
    assert sum(type(m) is fused_adain for m in fused._model.decoder.generator.modules()) == 48
    assert norm_carry.install(fused._model.decoder.generator) == 0
