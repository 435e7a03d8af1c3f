"""Instance-norm statistics carried from one vocoder window of a chunk to the next.

Kokoro's vocoder normalises the input of each of its 48 AdaIN layers over its whole span (instance
normalisation: a mean and a variance per channel over time). Decoded in windows (`windowed`), a
window that normalised over its own span only drifted from whole-chunk decoding the shorter it was,
and needed a long context on each side to hold the drift in bound.

Carried, a window normalises each layer with the statistics of everything the chunk's earlier
windows kept at that layer merged with its own new part (what it keeps and its right context; its
left context is the end of the window before, already counted). Later windows thus approach the
whole chunk's statistics whatever their length, their context only has to cover the convolutions'
reach, and with a context spanning the whole chunk every window's statistics are exactly the whole
chunk's. Merging is Chan et al.'s pairwise update of (count, mean, sum of squared deviations), in
float64 on the per-channel vectors; each span's sums are taken in float32 on deviations from the
span's own mean, so nothing cancels.

A `NormCarry` belongs to one chunk; its windows run one at a time (possibly on different threads).
`NormCarry.window` activates it for the calling context only (a `ContextVar`), so the AdaIN layers
that consult `active()` (the fused ones, `fused._adain`, and `CarriedAdaIN1d` for Kokoro's own)
find it while that window's vocoder runs and nowhere else: the frame-rate layers, whole-chunk
synthesis and other sessions' windows normalise as Kokoro does.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from functools import cache
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch


@dataclass(frozen=True, slots=True)
class Moments:
    """Per-channel count, mean and sum of squared deviations (M2) of a span, float64 vectors."""

    count: int
    mean: torch.Tensor
    m2: torch.Tensor

    def merged(self, other: Moments) -> Moments:
        """The moments of both spans together (Chan, Golub, LeVeque's pairwise update). Pure."""
        if other.count == 0:
            return self
        if self.count == 0:
            return other
        count = self.count + other.count
        delta = other.mean - self.mean
        mean = self.mean + delta * (other.count / count)
        m2 = self.m2 + other.m2 + delta * delta * (self.count * other.count / count)
        return Moments(count, mean, m2)

    @property
    def variance(self) -> torch.Tensor:
        """The biased variance, as instance normalisation uses."""
        return self.m2 / self.count


def moments(deviations: torch.Tensor, shift: torch.Tensor) -> Moments:
    """The moments of `shift + deviations` (channels x time; `shift` per channel, float64). Pure."""
    import torch

    count = int(deviations.shape[-1])
    if count == 0:
        zero = torch.zeros_like(shift)
        return Moments(0, zero, zero)
    total = deviations.sum(dim=-1).double()
    squares = torch.linalg.vector_norm(deviations, dim=-1).double().square()
    return Moments(count, shift + total / count, squares - total * total / count)


@dataclass(frozen=True, slots=True)
class _Window:
    """The window being vocoded: its span in input steps and where its new part starts and ends."""

    carry: NormCarry
    span_steps: int
    new_from: int
    """Steps of left context before the window's own audio (already counted by earlier windows)."""
    new_to: int
    """Where its own audio ends (the right context follows)."""
    pending: dict[Any, Moments] = field(default_factory=dict)
    """Each layer's moments of the window's own audio, added to the carry when the window ends."""


_ACTIVE: ContextVar[_Window | None] = ContextVar("norm_carry_window", default=None)


def active() -> _Window | None:
    """The window being vocoded in this context, if any."""
    return _ACTIVE.get()


class NormCarry:
    """One chunk's carried statistics: per AdaIN layer, the moments of every window's kept audio."""

    def __init__(self) -> None:
        self._kept: dict[Any, Moments] = {}

    @property
    def layers(self) -> int:
        """Layers with statistics carried so far."""
        return len(self._kept)

    def kept(self, layer: Any) -> Moments | None:
        return self._kept.get(layer)

    @contextmanager
    def window(self, span_steps: int, new_from: int, new_to: int) -> Iterator[None]:
        """Activate this carry for a window of `span_steps` vocoded steps whose own audio is
        [new_from, new_to) of them. Its statistics join the carry when the block ends without an
        exception (a failed window adds nothing)."""
        if not 0 <= new_from < new_to <= span_steps:
            raise ValueError(f"need 0 <= new_from < new_to <= span_steps, got {new_from}, {new_to}, {span_steps}")
        window = _Window(self, span_steps, new_from, new_to)
        token = _ACTIVE.set(window)
        try:
            yield
        finally:
            _ACTIVE.reset(token)
        for layer, kept in window.pending.items():
            before = self._kept.get(layer)
            self._kept[layer] = kept if before is None else before.merged(kept)


def normalize(
    layer: Any, x: torch.Tensor, weight: torch.Tensor | None, bias: torch.Tensor | None, eps: float
) -> torch.Tensor:
    """`F.instance_norm(x, weight=weight, bias=bias, eps=eps)` of one sequence (batch 1), with the
    active window's carried statistics for `layer`. Call only while `active()` is not None."""
    import torch

    window = _ACTIVE.get()
    if window is None:
        raise RuntimeError("no vocoder window is active")
    if x.shape[0] != 1:
        raise ValueError(f"carried normalisation is for one sequence, got a batch of {x.shape[0]}")
    values = x[0].float()
    per_step = values.shape[-1] // window.span_steps  # 10 or 60 samples per input step, plus a tail
    start, end = window.new_from * per_step, window.new_to * per_step
    new = values[:, start:]
    shift = new.mean(dim=-1, keepdim=True)
    deviations = new - shift
    shift64 = shift.squeeze(-1).double()
    kept = moments(deviations[:, : end - start], shift64)
    own = kept.merged(moments(deviations[:, end - start :], shift64))
    window.pending[layer] = kept
    before = window.carry.kept(layer)
    stats = own if before is None else before.merged(own)
    scale = torch.rsqrt(stats.variance + eps)
    if weight is not None:
        scale = scale * weight.double()
    offset = (stats.mean * -scale) if bias is None else torch.addcmul(bias.double(), stats.mean, scale, value=-1)
    # The whole span is normalised alike (its left context too: the convolutions read it).
    out = torch.addcmul(offset.float()[:, None], values, scale.float()[:, None])
    return out.to(x.dtype).unsqueeze(0)


@cache
def _carried_class() -> type:
    """Kokoro's `AdaIN1d` with the carried normalisation while a window is active."""
    from kokoro.istftnet import AdaIN1d

    class CarriedAdaIN1d(AdaIN1d):  # type: ignore[misc]
        """`AdaIN1d`, normalising with the active window's carried statistics (else as Kokoro)."""

        def forward(self, x: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
            if active() is None:
                return super().forward(x, s)  # type: ignore[no-any-return]
            import torch

            h = self.fc(s)
            gamma, beta = torch.chunk(h.view(h.size(0), h.size(1), 1), chunks=2, dim=1)
            return (1 + gamma) * normalize(self, x, self.norm.weight, self.norm.bias, self.norm.eps) + beta

    return CarriedAdaIN1d


def install(generator: Any) -> int:
    """Give the vocoder's remaining Kokoro `AdaIN1d` layers the carried normalisation, in place;
    returns how many. The fused layers (`fused.fuse`) consult the carry themselves, so after
    `fuse` this finds none."""
    from kokoro.istftnet import AdaIN1d

    carried = _carried_class()
    count = 0
    for module in generator.modules():
        if type(module) is AdaIN1d:
            module.__class__ = carried
            count += 1
    return count
