"""Kokoro's decoder blocks with the same arithmetic in fewer passes over memory.

On a CPU the vocoder's convolutions take about 77 % of its time and its element-wise work most of
the rest, on tensors of 128 channels x 4,800 samples per second of audio: every operation is one
pass over several megabytes. Kokoro (as StyleTTS 2) writes its style-adaptive blocks as
separate operations, each allocating a new tensor:

- `AdaIN1d`: instance normalisation, then `(1 + gamma) * x + beta` (two more passes). The style's
  gamma and beta are per channel, so they fold into the normalisation's own per-channel affine:
  one call, `weight * (1 + gamma)` and `bias * (1 + gamma) + beta` (`F.batch_norm`, the same
  kernel `F.instance_norm` reaches for one sequence after a reshape and a copy). Inside a windowed
  vocoder, with the statistics carried across the chunk's windows (`norm_carry`).
- Snake (`x + 1/a * sin(a * x) ** 2` in `AdaINResBlock1`): five passes, four of them allocating;
  here one allocation and the rest in place.
- Weight normalisation recomputes every convolution's weight from `weight_g` and `weight_v` on
  every call (about 1 % of the vocoder, more of the short text-side calls); folded once at load,
  it is the same weight (the same operations on the same tensors, so bit-identical outputs).

`fuse(model)` applies all three to a loaded `KModel` in place. The fused blocks compute the same
values up to float rounding (the order of a few multiplications changes): tested against Kokoro's
own modules on the generated checkpoint. Measured side by side on a 2-core AMD EPYC (`make
bench-fused`): see images/kokoro/README.md, Performance.

The fused forwards are only for inference: they write into tensors they created, which autograd
would reject; the engine runs every model call under `torch.inference_mode`.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, Any

from kokoro_server import norm_carry

if TYPE_CHECKING:
    import torch


@dataclass(frozen=True, slots=True)
class FuseReport:
    """What `fuse` changed: modules whose weight norm was folded, and blocks given fused forwards."""

    weight_norms: int
    adain: int
    resblocks: int


def _adain(layer: Any, x: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
    """`AdaIN1d.forward` for one sequence (batch 1): the style folded into the instance norm's affine.

    Inside a vocoder window with carried statistics (`norm_carry`), normalised with them. Otherwise
    `F.batch_norm` in training mode without running statistics: for one sequence that is the
    instance norm (the same kernel, which `F.instance_norm` reaches after reshaping and copying),
    bit-identical and measured 1.6 times as fast on this layer's shapes."""
    import torch
    import torch.nn.functional as F

    norm = layer.norm
    h = layer.fc(s)[0]
    channels = h.shape[0] // 2
    scale = 1 + h[:channels]
    weight = scale if norm.weight is None else norm.weight * scale
    bias = h[channels:] if norm.bias is None else torch.addcmul(h[channels:], norm.bias, scale)
    if norm_carry.active() is not None:
        return norm_carry.normalize(layer, x, weight, bias, norm.eps)
    return F.batch_norm(x, None, None, weight=weight, bias=bias, training=True, eps=norm.eps)


def _snake_(x: torch.Tensor, alpha: torch.Tensor) -> torch.Tensor:
    """Snake, `x + 1/alpha * sin(alpha * x) ** 2`, written into `x` (which the caller owns)."""
    import torch

    wave = torch.mul(x, alpha)
    wave.sin_()
    wave.square_()
    return x.addcmul_(wave, alpha.reciprocal())


@cache
def _fused_classes() -> tuple[type, type]:
    """The fused subclasses, defined once on first use: kokoro and torch are imported lazily."""
    from kokoro.istftnet import AdaIN1d, AdaINResBlock1

    class FusedAdaIN1d(AdaIN1d):  # type: ignore[misc]
        """`AdaIN1d` in one instance-norm call (batch 1; other batches run Kokoro's forward)."""

        def forward(self, x: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
            if x.shape[0] != 1 or s.shape[0] != 1:
                return super().forward(x, s)  # type: ignore[no-any-return]
            return _adain(self, x, s)

    class FusedAdaINResBlock1(AdaINResBlock1):  # type: ignore[misc]
        """`AdaINResBlock1` with Snake in place and the residual added in place."""

        def forward(self, x: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
            blocks = zip(self.convs1, self.convs2, self.adain1, self.adain2, self.alpha1, self.alpha2, strict=True)
            for conv1, conv2, norm1, norm2, alpha1, alpha2 in blocks:
                # Each norm returns a new tensor (FusedAdaIN1d or Kokoro's), so Snake may write into it.
                xt = conv1(_snake_(norm1(x, s), alpha1))
                xt = conv2(_snake_(norm2(xt, s), alpha2))
                x = xt.add_(x)  # the convolution's output is new; `x` (the caller's input) is not written
            return x

    return FusedAdaIN1d, FusedAdaINResBlock1


def fuse(model: Any) -> FuseReport:
    """Fold weight norm and give Kokoro's AdaIN blocks their fused forwards, in place.

    Call after the checkpoint was verified (folding replaces `weight_g`/`weight_v` by `weight`).
    Only modules of exactly Kokoro's classes are changed, so a second call changes nothing."""
    from kokoro.istftnet import AdaIN1d, AdaINResBlock1
    from torch.nn.utils import remove_weight_norm

    fused_adain, fused_block = _fused_classes()
    folded = adain = blocks = 0
    for module in model.modules():
        if hasattr(module, "weight_g") and hasattr(module, "weight_v"):
            remove_weight_norm(module)
            folded += 1
        if type(module) is AdaIN1d:
            module.__class__ = fused_adain
            adain += 1
        elif type(module) is AdaINResBlock1:
            module.__class__ = fused_block
            blocks += 1
    return FuseReport(weight_norms=folded, adain=adain, resblocks=blocks)
