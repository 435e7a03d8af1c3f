"""Windowed decoding: a chunk's audio in pieces, the first one ready after a window, not a chunk.

Kokoro's cost is ~95 % decoder, and ~90 % of the decoder is its vocoder (`Generator`: upsampling to
24 kHz through convolutions). The text encoder, the prosody predictor (durations, F0, energy) and
the decoder's frame-rate layers still run on the whole chunk here, exactly as Kokoro runs them, and
so does the vocoder's excitation source (a sine from F0 plus noise: its phase is a running sum and
its noise is random, both global). Only the vocoder's convolutional stack runs in windows.

Each window of vocoder input steps (1 step = 300 samples = 12.5 ms) is computed with real input on
each side (`context_steps`; a first window `first_context_steps` after it), and only its middle is
kept, so convolution edges never reach the kept audio. What context cannot make exact is the
vocoder's instance normalisation, whose statistics span its whole input: the first window normalises
over its own span, each later one with the statistics carried from the windows before it
(`norm_carry`), which approach the whole chunk's. The difference this makes is measured against
whole-chunk decoding on the generated checkpoint (tests/model); with the defaults it is bounded as
`tests/model/test_model_windowed.py` states.

`decode_pieces` yields each window's samples as soon as they exist.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

from kokoro_server.norm_carry import NormCarry
from speech_protocol import SAMPLE_RATE

if TYPE_CHECKING:
    import torch

SAMPLES_PER_STEP: Final = 300
"""The vocoder's input runs at 80 steps per second (twice the 40 Hz duration frames)."""
HAR_FRAMES_PER_STEP: Final = 60
"""Excitation STFT frames per vocoder input step (hop of 5 samples)."""


STEP_S: Final = SAMPLES_PER_STEP / SAMPLE_RATE
"""Seconds of audio per vocoder input step."""


@dataclass(frozen=True, slots=True)
class WindowPlan:
    """How a chunk's vocoder input is cut: the first window short (first audio), each later one as
    long as can be vocoded before the listener's audio runs out.

    The sizes are decided one window at a time, from the audio the listener has buffered and the
    vocoder's measured speed (seconds per vocoded input step, context included): a fixed second
    window would be too long on a mid-speed machine (3 s of audio to compute while 0.9 s plays: a
    stutter at a real-time factor of 0.3) and needlessly short on a fast one. Pure: no clock.
    """

    first_steps: int = 72
    """The first window when alone and the speed is unknown, or too slow for any window to keep
    up: 0.9 s of audio (its vocoder work measured about half of a 3.5 s chunk's), moved back to
    the last word end within `word_slack_steps` when the words' timing is given (`at_word_end`)."""
    min_first_steps: int = 20
    """The shortest first window (0.25 s): with a crowd waiting in silence (`first_for`), or alone
    on an engine fast enough to grow the windows from there without a gap."""
    max_first_steps: int = 96
    """The longest first window alone (1.2 s): where the default one would leave a gap that a longer
    one avoids, it may grow this far (first audio a little later, then no stutter), never further."""
    window_steps: int = 240
    """The longest window: 3 s of audio. It bounds one engine job (others wait for it to end) and is
    the size used when no window can keep up (a gap is coming: fewer windows pay less context)."""
    min_window_steps: int = 40
    """The shortest later window a plan cuts (0.5 s). With statistics carried (`norm_carry`) a
    window's length hardly moves it from whole-chunk decoding: measured on the generated checkpoint
    (a 5.3 s chunk after a 0.9 s first window), mean abs difference 0.0037 with 0.3 s windows, 0.0036
    with 0.5 s, 0.0029 with 1.5 s, max 0.036 to 0.037 (the first window's 0.036); each window
    normalising over its own span (and 16 steps of context) it was 0.0071, 0.0065, 0.0045. The
    bound: 0.005 / 0.05. Windows are cut as long as the listener's buffer allows, so short ones come
    only while it is thin: right after a short first window, whose plan they make possible (a 300-step
    chunk at 0.0043 s/step: a 0.41 s first window, against 0.78 s with a 1.5 s floor; first audio
    0.486-0.499 s against 0.581-0.640 s in the server, side by side, images/kokoro/README.md). On a
    slower engine they make a gapless plan possible where 1.5 s ones allowed none, from a longer
    first window (first audio later, then no gap)."""
    min_tail_steps: int = 60
    """A chunk's remainder shorter than this (0.75 s) joins the window before it: on its own it
    would pay a whole context for little audio."""
    context_steps: int = 11
    """Real input on each side of a later window (0.1375 s): the vocoder's reach. An impulse in its
    input at one step changes the audio from 7.2 steps before to 7.9 after; one in its excitation
    from 10.5 before to 9.9 after (the source path adds its own convolutions); the reach is the
    architecture's, not the weights'. With statistics carried, context only has to cover that
    (later windows of 0.3 s on a 5.3 s chunk: max difference 0.0373, 0.0358 and 0.0367, mean 0.0037,
    0.0037 and 0.0038, with 11, 10 and 8 steps)."""
    first_context_steps: int = 16
    """Real input after a first window (0.2 s; there is nothing before it). A first window's
    statistics span only itself and this context, so it is longer than the convolutions need:
    measured on the generated checkpoint, a 5.3 s chunk, max abs difference to whole-chunk decoding
    0.036 (full scale 1.0) with a 0.9 s first window, 0.043 with the crowd's 0.25 s one; with 8
    steps 0.039 and 0.055."""
    margin: float = 0.8
    """The share of the listener's buffered audio a window's predicted vocoding may take: the rest
    absorbs a misprediction (machine noise, other jobs starting beside it)."""
    word_slack_steps: int = 24
    """How far back (0.3 s) the default first window may move to end between two words (`first_for`)."""
    handover_steps: int = 16
    """Time between a first window's audio and its second window's start, in steps of vocoder work:
    the frame-rate layers of the rest of the chunk (`complete_decoding`) and the job's turn. Measured
    in the server at 0.0052 s/step: 69-82 ms, so 16 steps (83 ms; it scales with the machine's
    speed like the vocoder). A first window planned without it measured 0.33 s of audio left when
    the second window was cut, not 0.41: too little for the plan it was chosen for."""

    def __post_init__(self) -> None:
        if self.first_steps < 1 or self.window_steps < 1 or self.context_steps < 0 or self.first_context_steps < 0:
            raise ValueError("need first_steps >= 1, window_steps >= 1, context_steps >= 0, first_context_steps >= 0")
        if not 1 <= self.min_first_steps <= self.first_steps <= self.max_first_steps:
            raise ValueError("need 1 <= min_first_steps <= first_steps <= max_first_steps")
        if not 1 <= self.min_window_steps <= self.window_steps or self.min_tail_steps < 0:
            raise ValueError("need 1 <= min_window_steps <= window_steps and min_tail_steps >= 0")
        if not 0 < self.margin <= 1:
            raise ValueError(f"need 0 < margin <= 1, got {self.margin}")
        if self.word_slack_steps < 0:
            raise ValueError(f"need word_slack_steps >= 0, got {self.word_slack_steps}")
        if self.handover_steps < 0:
            raise ValueError(f"need handover_steps >= 0, got {self.handover_steps}")

    def first_for(
        self,
        others_waiting: int,
        steps: int | None = None,
        s_per_step: float | None = None,
        word_ends: Sequence[int] = (),
    ) -> int:
        """The first window of a chunk of `steps` input steps. Pure.

        With `others_waiting` other listeners waiting in silence for the engine, their first audio
        waits for this one's first piece (or runs beside it at half the speed), so the first window
        shrinks with the crowd: `first_steps / (1 + others)`, at least `min_first_steps`. Alone, at a
        known vocoder speed, the shortest first window, up to `max_first_steps`, from which the rest
        of the chunk plays without a gap (`plays_gapless`). When none does, or the speed is unknown,
        `first_steps`, moved back to the last of `word_ends` (the steps where the chunk's words
        end) within `word_slack_steps` (`at_word_end`): the listener may then wait for the second
        window, and a wait between two words is a pause, one inside a word a stutter.
        """
        if others_waiting > 0:
            return max(self.min_first_steps, self.first_steps // (1 + others_waiting))
        if steps is not None and s_per_step is not None and s_per_step > 0:
            for first in range(self.min_first_steps, self.max_first_steps + 1):
                if self.plays_gapless(first, steps, s_per_step):
                    return first
        return self.at_word_end(self.first_steps, word_ends)

    def at_word_end(self, first: int, word_ends: Sequence[int]) -> int:
        """The last of `word_ends` at most `first` and at most `word_slack_steps` before it (and not
        under `min_first_steps`), else `first`. Never later: first audio is what the listener waits
        for, and a gap is coming anyway. Pure."""
        lo = max(self.min_first_steps, first - self.word_slack_steps)
        candidates = [end for end in word_ends if lo <= end <= first]
        return max(candidates) if candidates else first

    def next_steps(self, remaining: int, ahead_s: float | None = None, s_per_step: float | None = None) -> int:
        """The next window after the first, with `remaining` input steps left, the listener holding
        `ahead_s` of audio not yet played and the vocoder taking `s_per_step` per vocoded step. Pure.

        When windows cut this way play the rest of the chunk without a gap (`plays_out`): the
        longest window (at most `window_steps`) whose predicted vocoding, contexts included, takes
        at most `margin` of `ahead_s`. When they do not (the buffer ran thinner than planned: the
        machine slowed, or other work came first): the shortest window from whose audio the rest
        plays out (`recovers_from`), so the listener hears one short gap, not a long one and not a
        stutter. When none would (the vocoder is too slow, or the speed is unknown):
        `window_steps`, as few windows as possible, so the least context is paid and the one gap is
        the shortest. A remainder under `min_tail_steps` joins the window.
        """
        if ahead_s is not None and s_per_step is not None and s_per_step > 0:
            fitted = self._fitted(remaining, ahead_s, s_per_step)
            if fitted is not None and self.plays_out(remaining, ahead_s, s_per_step):
                return fitted
            recovering = self.recovers_from(remaining, s_per_step)
            if recovering is not None:
                return recovering
        return self._whole_if_sliver(self.window_steps, remaining)

    def recovers_from(self, remaining: int, s_per_step: float) -> int | None:
        """The shortest window (at least `min_window_steps`) after which the rest of `remaining`
        plays out without a gap from that window's audio alone, or None when none does. Pure.

        The listener may wait for this window (its gap is its vocoding less what they still hold,
        shortest for the shortest window); from its audio on, no other gap.
        """
        for candidate in range(min(self.min_window_steps, remaining), min(self.window_steps, remaining) + 1):
            size = self._whole_if_sliver(candidate, remaining)
            if size >= remaining or self.plays_out(remaining - size, size * STEP_S, s_per_step):
                return size
        return None

    def plays_gapless(self, first: int, steps: int, s_per_step: float) -> bool:
        """Whether a chunk of `steps` input steps plays without a gap after a first window of
        `first` (the listener starts playing when it arrives), the rest cut by `next_steps` and
        vocoded at `s_per_step` per step, after the `handover_steps` of work before the second
        window. Pure."""
        done = self.first_window(steps, first)
        return self.plays_out(steps - done, done * STEP_S - self.handover_steps * s_per_step, s_per_step)

    def plays_out(self, remaining: int, ahead_s: float, s_per_step: float) -> bool:
        """Whether the `remaining` input steps after a window, cut as long as the margin allows
        (`next_steps`) and vocoded at `s_per_step`, each arrive before the listener's audio
        (`ahead_s` now) runs out. Pure: a simulation, a few iterations per window. An unknown
        (non-positive) speed plays nothing out."""
        if s_per_step <= 0:
            return False
        while remaining > 0:
            size = self._fitted(remaining, ahead_s, s_per_step)
            if size is None:
                return False
            cost = s_per_step * self.vocoded_later(size, remaining)
            if cost > ahead_s:
                return False
            ahead_s += size * STEP_S - cost
            remaining -= size
        return True

    def span(self, start: int, end: int, steps: int) -> tuple[int, int]:
        """The input steps [lo, hi) a window [start, end) of a chunk of `steps` vocodes: itself,
        `context_steps` before it and, after it, `context_steps` (a first window's
        `first_context_steps`), within the chunk. Pure."""
        after = self.first_context_steps if start == 0 else self.context_steps
        return max(0, start - self.context_steps), min(steps, end + after)

    def vocoded_steps(self, start: int, end: int, steps: int) -> int:
        """Input steps a window [start, end) of a chunk of `steps` vocodes: itself and its contexts."""
        lo, hi = self.span(start, end, steps)
        return hi - lo

    def vocoded_later(self, size: int, remaining: int) -> int:
        """`vocoded_steps` of a later window of `size` with `remaining` steps left including it (its
        left context is whole: every first window is longer than the context)."""
        start = self.context_steps
        return self.vocoded_steps(start, start + size, start + remaining)

    def _fitted(self, remaining: int, ahead_s: float, s_per_step: float) -> int | None:
        """The longest later window vocoded within `margin` of `ahead_s`, None under `min_window_steps`."""
        fits = int(ahead_s * self.margin / s_per_step) - 2 * self.context_steps
        if fits < self.min_window_steps:
            return None
        return self._whole_if_sliver(min(self.window_steps, fits), remaining)

    def windows(self, steps: int, first_steps: int | None = None) -> list[tuple[int, int]]:
        """[start, end) of each window over `steps` input steps, in order, covering them exactly,
        at an unknown speed (the first `first_steps` long, default the plan's; the rest
        `window_steps`, no remainder under `min_tail_steps`). Pure."""
        out: list[tuple[int, int]] = []
        start = 0
        while start < steps:
            size = self.next_steps(steps - start) if out else self.first_window(steps, first_steps)
            out.append((start, start + size))
            start += size
        return out

    def first_window(self, steps: int, first_steps: int | None = None) -> int:
        """The first window's length over a chunk of `steps`: `first_steps` (default: the plan's), or
        the whole chunk when what would follow is under `min_tail_steps`. Pure."""
        return self._whole_if_sliver(self.first_steps if first_steps is None else first_steps, steps)

    def _whole_if_sliver(self, size: int, remaining: int) -> int:
        return remaining if remaining - size < self.min_tail_steps else size


@dataclass(frozen=True, slots=True)
class Encoded:
    """A chunk through text encoder and prosody predictor: the decoder's inputs and the durations."""

    asr: torch.Tensor
    f0: torch.Tensor
    n: torch.Tensor
    style: torch.Tensor
    """The decoder's half of the voice's style vector."""
    pred_dur: torch.Tensor
    """Frames (25 ms) per input token, for word timestamps."""

    @property
    def vocoder_steps(self) -> int:
        """The vocoder's input steps: two per duration frame."""
        return 2 * int(self.asr.shape[-1])


def encode_chunk(model: Any, phonemes: str, ref_s: torch.Tensor, speed: float) -> Encoded:
    """Everything of `KModel.forward` before its decoder call, on one phoneme string."""
    import torch

    ids = [i for i in (model.vocab.get(p) for p in phonemes) if i is not None]
    input_ids = torch.tensor([[0, *ids, 0]], dtype=torch.long, device=model.device)
    ref_s = ref_s.to(model.device)
    length = input_ids.shape[-1]
    lengths = torch.full((1,), length, dtype=torch.long, device=model.device)
    text_mask = torch.zeros((1, length), dtype=torch.bool, device=model.device)  # one unpadded sequence
    bert_dur = model.bert(input_ids, attention_mask=(~text_mask).int())
    d_en = model.bert_encoder(bert_dur).transpose(-1, -2)
    prosody_style = ref_s[:, 128:]
    d = model.predictor.text_encoder(d_en, prosody_style, lengths, text_mask)
    lstm_out, _ = model.predictor.lstm(d)
    duration = torch.sigmoid(model.predictor.duration_proj(lstm_out)).sum(dim=-1) / speed
    pred_dur = torch.round(duration).clamp(min=1).long().squeeze()
    frames = torch.repeat_interleave(torch.arange(length, device=model.device), pred_dur)
    alignment = torch.zeros((length, frames.shape[0]), device=model.device)
    alignment[frames, torch.arange(frames.shape[0], device=model.device)] = 1
    alignment = alignment.unsqueeze(0)
    f0, n = model.predictor.F0Ntrain(d.transpose(-1, -2) @ alignment, prosody_style)
    asr = model.text_encoder(input_ids, lengths, text_mask) @ alignment
    return Encoded(asr=asr, f0=f0, n=n, style=ref_s[:, :128], pred_dur=pred_dur)


def _prepare(decoder: Any, asr: torch.Tensor, f0: torch.Tensor, n: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
    """The decoder's frame-rate layers on the whole chunk (as `kokoro.istftnet.Decoder.forward`)."""
    import torch

    f0_down = decoder.F0_conv(f0.unsqueeze(1))
    n_down = decoder.N_conv(n.unsqueeze(1))
    x: torch.Tensor = decoder.encode(torch.cat([asr, f0_down, n_down], dim=1), s)
    asr_res = decoder.asr_res(asr)
    residual = True
    for block in decoder.decode:
        if residual:
            x = torch.cat([x, asr_res, f0_down, n_down], dim=1)
        x = block(x, s)
        if block.upsample_type != "none":
            residual = False
    return x


def _excitation(generator: Any, f0: torch.Tensor) -> torch.Tensor:
    """The vocoder's harmonic source on the whole chunk: magnitude and phase of its STFT."""
    import torch

    upsampled = generator.f0_upsamp(f0[:, None]).transpose(1, 2)
    har_source, _, _ = generator.m_source(upsampled)
    spec, phase = generator.stft.transform(har_source.transpose(1, 2).squeeze(1))
    return torch.cat([spec, phase], dim=1)


def _vocode(generator: Any, x: torch.Tensor, s: torch.Tensor, har: torch.Tensor) -> torch.Tensor:
    """The vocoder's convolutional stack on one span (as `kokoro.istftnet.Generator.forward`)."""
    import torch
    import torch.nn.functional as F

    for i in range(generator.num_upsamples):
        x = F.leaky_relu(x, negative_slope=0.1)
        source = generator.noise_res[i](generator.noise_convs[i](har), s)
        x = generator.ups[i](x)
        if i == generator.num_upsamples - 1:
            x = generator.reflection_pad(x)
        x = x + source
        total = generator.resblocks[i * generator.num_kernels](x, s)
        for j in range(1, generator.num_kernels):
            total = total + generator.resblocks[i * generator.num_kernels + j](x, s)
        x = total / generator.num_kernels
    x = generator.conv_post(F.leaky_relu(x))
    half = generator.post_n_fft // 2 + 1
    audio: torch.Tensor = generator.stft.inverse(torch.exp(x[:, :half, :]), torch.sin(x[:, half:, :]))
    return audio.reshape(-1)


PREPARE_CONTEXT_FRAMES: Final = 12
"""Frames of real input past a prefix's end for the decoder's frame-rate layers (five blocks of two
kernel-3 convolutions reach 10 frames), so their zero padding at the cut never reaches kept audio."""


@dataclass(frozen=True, slots=True)
class Decoding:
    """One chunk's decoder state once its whole-chunk parts have run: windows are decoded from it.

    Holds tensors and the carried statistics, no thread-local state, so consecutive windows may be
    decoded on different threads: the server runs each window as its own engine job
    (`kokoro_engine.synthesize_pieces`).
    """

    x: torch.Tensor
    """The vocoder's input (the decoder's frame-rate layers' output): the whole chunk's, or a prefix."""
    har: torch.Tensor
    """The vocoder's excitation (harmonic source STFT) for the whole chunk."""
    style: torch.Tensor
    steps: int
    """The chunk's vocoder input steps (`x` may hold only the first ones: `ready_steps`)."""
    norms: NormCarry = field(default_factory=NormCarry)
    """The vocoder's normalisation statistics, carried from each window to the next (mutable:
    `decode_window` adds each window's; windows run one at a time)."""

    @property
    def ready_steps(self) -> int:
        return int(self.x.shape[-1])


def start_decoding(decoder: Any, encoded: Encoded, first_window: tuple[int, int] | None = None) -> Decoding:
    """The decoder's whole-chunk parts: the excitation on the whole chunk, the frame-rate layers on
    the whole chunk, or, given the first window's (steps, steps of context after it), only on the prefix that
    window needs (its frames, its vocoder context and `PREPARE_CONTEXT_FRAMES`): first audio does
    not wait for the frame-rate layers of the whole chunk. `complete_decoding` runs the rest."""
    har = _excitation(decoder.generator, encoded.f0)  # once: its noise must be the same draws for every window
    frames = encoded.vocoder_steps // 2
    upto = frames
    if first_window is not None:
        first_steps, context_steps = first_window
        upto = min(frames, -(-(first_steps + context_steps) // 2) + PREPARE_CONTEXT_FRAMES)
    x = _prepare(decoder, encoded.asr[:, :, :upto], encoded.f0[:, : 2 * upto], encoded.n[:, : 2 * upto], encoded.style)
    return Decoding(x=x, har=har, style=encoded.style, steps=encoded.vocoder_steps)


def complete_decoding(decoder: Any, encoded: Encoded, decoding: Decoding) -> Decoding:
    """`decoding` with the frame-rate layers run on the whole chunk (itself when they were)."""
    if decoding.ready_steps == decoding.steps:
        return decoding
    x = _prepare(decoder, encoded.asr, encoded.f0, encoded.n, encoded.style)
    return Decoding(x=x, har=decoding.har, style=decoding.style, steps=decoding.steps, norms=decoding.norms)


def decode_window(decoder: Any, decoding: Decoding, start: int, end: int, span: tuple[int, int]) -> torch.Tensor:
    """The audio of input steps [start, end), vocoded over `span` (its [lo, hi) with the contexts,
    `WindowPlan.span`), normalised with the statistics carried from the chunk's earlier windows,
    which then carry this one's too: call in order, each window once."""
    lo, hi = span
    if not 0 <= lo <= start < end <= hi <= decoding.steps:
        raise ValueError(f"window [{start}, {end}) is not inside its span [{lo}, {hi}) of {decoding.steps} steps")
    if hi > decoding.ready_steps:
        raise ValueError(f"window [{start}, {end}) needs steps up to {hi}; only {decoding.ready_steps} are ready")
    span_har = decoding.har[:, :, HAR_FRAMES_PER_STEP * lo : HAR_FRAMES_PER_STEP * hi + 1]
    with decoding.norms.window(hi - lo, start - lo, end - lo):
        audio = _vocode(decoder.generator, decoding.x[:, :, lo:hi], decoding.style, span_har)
    return audio[SAMPLES_PER_STEP * (start - lo) : SAMPLES_PER_STEP * (end - lo)]


def decode_pieces(
    decoder: Any,
    encoded: Encoded,
    plan: WindowPlan,
    first_steps: int | None = None,
    *,
    next_steps: Callable[[int], int] | None = None,
    vocoded: Callable[[int, float, bool], None] | None = None,
    around: Callable[[], AbstractContextManager[Any]] = nullcontext,
) -> Iterator[torch.Tensor]:
    """The decoder's audio for one chunk, window by window: the first from a prefix of the
    frame-rate layers, the rest from the whole chunk's (1-D float tensors whose concatenation has
    the length whole-chunk decoding `decoder(asr, f0, n, style)` gives).

    The first window is `first_steps` long (default: the plan's); each later one is sized when its
    step starts, once the frame-rate layers are complete, by `next_steps(remaining steps)` (default:
    `plan.next_steps` at an unknown speed), so the caller can size it from what the listener holds
    by then. `vocoded(steps, seconds, first)` is told each window's vocoder work, contexts included,
    and whether it was the chunk's first window.

    Each window's work runs inside `around()`, entered and left within its step, never across a
    `yield`: the engine sets thread-local state there (inference mode, autocast), because
    consecutive windows may run on different threads."""
    import time

    import torch

    steps = encoded.vocoder_steps
    size_next = next_steps if next_steps is not None else plan.next_steps
    decoding: Decoding | None = None
    start = 0
    while start < steps:
        with around():
            if decoding is None:
                end = plan.first_window(steps, first_steps)
                decoding = start_decoding(decoder, encoded, (end, plan.first_context_steps))
            else:
                decoding = complete_decoding(decoder, encoded, decoding)
                end = start + min(max(1, size_next(steps - start)), steps - start)
            began = time.perf_counter()
            audio = decode_window(decoder, decoding, start, end, plan.span(start, end, steps))
            if vocoded is not None:
                if audio.device.type == "cuda":
                    torch.cuda.synchronize(audio.device)  # the kernels ran asynchronously until now
                vocoded(plan.vocoded_steps(start, end, steps), time.perf_counter() - began, start == 0)
        yield audio
        start = end
