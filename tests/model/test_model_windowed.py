"""Windowed decoding against whole-chunk decoding, on the generated full-size checkpoint.

The bound: with the default plan, the stitched audio differs from whole-chunk decoding by at most
0.05 (full scale 1.0) and by at most 0.005 on average; measured on this 5.3 s chunk: 0.036 / 0.0024
with the 0.9 s first window, 0.043 / 0.0025 with the crowd's 0.25 s one, 0.036 / 0.0035 with the
shortest later windows a plan cuts (0.5 s, `min_window_steps`; each normalising over its own span
they would drift twice as far, `test_carried_statistics_hold_short_windows_to_whole_chunk_audio`).
The difference comes only from
instance normalisation, which spans its whole input: the first vocoder window normalises over its own
span, each later one with the statistics carried from the windows before (`norm_carry`), and the
first window's frame-rate layers over their prefix. With a context that spans the whole chunk, the
stitched audio equals whole-chunk decoding to float rounding.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable

import pytest
import torch

from kokoro_server.kokoro_engine import KokoroEngine
from kokoro_server.norm_carry import NormCarry
from kokoro_server.vocoder_speed import VocoderSpeed
from kokoro_server.windowed import (
    SAMPLES_PER_STEP,
    WindowPlan,
    complete_decoding,
    decode_pieces,
    decode_window,
    encode_chunk,
    start_decoding,
)
from speech_protocol import SAMPLE_RATE

pytestmark = pytest.mark.model

TEXT = "The quick brown fox jumps over the lazy dog, and then it runs away."
PLAN = WindowPlan()  # the defaults: a 0.9 s window, then 3 s ones at an unknown speed


def decode(
    engine: KokoroEngine,
    plan: WindowPlan | None,
    first_steps: int | None = None,
    next_steps: Callable[[int], int] | None = None,
) -> tuple[torch.Tensor, list[int]]:
    model = engine._model
    [(phonemes, _)] = engine.phonemize(TEXT)
    ref_s = engine._packs["af_heart"][len(phonemes) - 1]
    with torch.inference_mode():
        encoded = encode_chunk(model, phonemes, ref_s, 1.0)
        torch.manual_seed(7)  # the vocoder's excitation noise: the same draws for both decodings
        if plan is None:
            whole = model.decoder(encoded.asr, encoded.f0, encoded.n, encoded.style).reshape(-1)
            return whole, [whole.numel()]
        pieces = list(decode_pieces(model.decoder, encoded, plan, first_steps, next_steps=next_steps))
    return torch.cat(pieces), [p.numel() for p in pieces]


def short_windows(remaining: int) -> int:
    """The shortest later windows a plan cuts (0.5 s): the most seams and the shortest spans."""
    size = PLAN.min_window_steps
    return remaining if remaining - size < size else size


@pytest.mark.parametrize(
    ("first_steps", "next_steps"), [(None, None), (PLAN.min_first_steps, None), (None, short_windows)]
)
def test_windowed_audio_is_whole_chunk_audio_within_the_stated_bound(
    kokoro_engine: KokoroEngine, first_steps: int | None, next_steps: Callable[[int], int] | None
) -> None:
    whole, _ = decode(kokoro_engine, None)
    stitched, sizes = decode(kokoro_engine, PLAN, first_steps, next_steps)
    steps = whole.numel() // SAMPLES_PER_STEP
    if next_steps is None:
        assert [s // SAMPLES_PER_STEP for s in sizes] == [b - a for a, b in PLAN.windows(steps, first_steps)]
    else:
        # 426 steps: 72, seven of 40, then 74 (34 would be too short)
        assert [s // SAMPLES_PER_STEP for s in sizes] == [72, *[40] * 7, 74]
    assert len(sizes) >= 2
    assert stitched.numel() == whole.numel()
    difference = (stitched - whole).abs()
    assert float(difference.max()) <= 0.05
    assert float(difference.mean()) <= 0.005
    assert float(difference.max()) > 0.0  # the first window really normalises over its own span

    whole_context = WindowPlan(context_steps=10_000, first_context_steps=10_000)
    exact, _ = decode(kokoro_engine, whole_context, first_steps, next_steps)
    assert float((exact - whole).abs().max()) < 1e-4


def test_carried_statistics_hold_short_windows_to_whole_chunk_audio(kokoro_engine: KokoroEngine) -> None:
    """The same 0.5 s windows, each normalising over its own span only (a fresh carry per window),
    drift about twice as far: what the carry buys, measured 0.0035 against 0.0070 on average."""
    model = kokoro_engine._model
    [(phonemes, _)] = kokoro_engine.phonemize(TEXT)
    ref_s = kokoro_engine._packs["af_heart"][len(phonemes) - 1]
    whole, _ = decode(kokoro_engine, None)
    steps = whole.numel() // SAMPLES_PER_STEP
    cuts = [0, 72, *range(112, steps - 40, 40), steps]
    drift: dict[bool, float] = {}
    for carried in (True, False):
        with torch.inference_mode():
            encoded = encode_chunk(model, phonemes, ref_s, 1.0)
            torch.manual_seed(7)
            decoding = complete_decoding(model.decoder, encoded, start_decoding(model.decoder, encoded))
            pieces = []
            for start, end in itertools.pairwise(cuts):
                if not carried:
                    decoding = dataclasses.replace(decoding, norms=NormCarry())
                span = PLAN.span(start, end, steps)
                pieces.append(decode_window(model.decoder, decoding, start, end, span))
        drift[carried] = float((torch.cat(pieces) - whole).abs().mean())
    assert drift[True] <= 0.005 < drift[False]


# Alone at an unmeasured speed the first window is the default 72 steps moved back to the last word end
# within 0.3 s (24 steps): "quick" ends at step 51 ("brown", at 87, would delay first audio). A crowd's is 20.
@pytest.mark.parametrize(("crowd", "first_steps"), [(0, 51), (3, PLAN.min_first_steps)])
def test_the_engine_pieces_add_up_to_the_chunk(kokoro_engine: KokoroEngine, crowd: int, first_steps: int) -> None:
    whole = kokoro_engine.synthesize(TEXT, "af_heart", 1.0)
    word_ends = [round(w.end_s * SAMPLE_RATE / SAMPLES_PER_STEP) for w in whole.words]
    assert word_ends[:3] == [15, 51, 87]
    asked: list[int] = []

    def others_waiting() -> int:
        asked.append(crowd)
        return crowd

    buffered: list[float] = []

    def ahead_s() -> float:
        buffered.append(100.0)
        return 100.0  # plenty: every later window is the longest (and the plan is the default one)

    kokoro_engine.vocoder_speed = VocoderSpeed()  # unmeasured: the plan's default first window, at a word end
    pieces = list(
        kokoro_engine.synthesize_pieces(TEXT, "af_heart", 1.0, others_waiting=others_waiting, ahead_s=ahead_s)
    )
    assert asked == [crowd]  # once, for the first window
    assert len(buffered) == len(pieces) - 1  # once before each later window
    typical, first = kokoro_engine.vocoder_speed.typical, kokoro_engine.vocoder_speed.alone
    assert typical is not None  # every window's vocoder work was measured
    assert first is not None
    assert 0.0 < typical <= first
    steps = len(whole.pcm) // 2 // SAMPLES_PER_STEP
    assert [len(p.pcm) // 2 // SAMPLES_PER_STEP for p in pieces] == [b - a for a, b in PLAN.windows(steps, first_steps)]
    assert len(pieces[0].pcm) == first_steps * SAMPLES_PER_STEP * 2
    assert [p.ends_chunk for p in pieces] == [False] * (len(pieces) - 1) + [True]
    assert len(pieces) >= 2
    assert sum(len(p.pcm) for p in pieces) == len(whole.pcm)
    assert [w.word for p in pieces for w in p.words] == [w.word for w in whole.words]
    offset, starts = 0.0, []
    for piece in pieces:
        starts += [offset + w.start_s for w in piece.words]
        offset += piece.duration_s
    # To float rounding (a start exactly on a rounding boundary, 3.5875 s, must not flip a digit).
    assert starts == pytest.approx([w.start_s for w in whole.words], abs=1e-9)
