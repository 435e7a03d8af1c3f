"""Windowed decoding against whole-chunk decoding, on the generated full-size checkpoint.

The bound: with the default plan (0.2 s of context), the stitched audio differs from whole-chunk
decoding by at most 0.05 (full scale 1.0; measured 0.036 on a 3.5 s chunk) and by at most 0.005 on
average (measured 0.0028). The difference comes only from the vocoder's instance normalisation
(each window normalises over its own span): with a context that spans the whole chunk, the
stitched audio equals whole-chunk decoding to float rounding.
"""

from __future__ import annotations

import pytest
import torch

from kokoro_server.kokoro_engine import KokoroEngine
from kokoro_server.windowed import SAMPLES_PER_STEP, WindowPlan, decode_pieces, encode_chunk

pytestmark = pytest.mark.model

TEXT = "The quick brown fox jumps over the lazy dog, and then it runs away."
PLAN = WindowPlan()  # the defaults: a 1 s window, then 3 s ones


def decode(engine: KokoroEngine, plan: WindowPlan | None) -> tuple[torch.Tensor, list[int]]:
    model = engine._model
    [(phonemes, _)] = engine.phonemize(TEXT)
    ref_s = engine._packs["af_heart"][len(phonemes) - 1]
    with torch.inference_mode():
        encoded = encode_chunk(model, phonemes, ref_s, 1.0)
        torch.manual_seed(7)  # the vocoder's excitation noise: the same draws for both decodings
        if plan is None:
            whole = model.decoder(encoded.asr, encoded.f0, encoded.n, encoded.style).reshape(-1)
            return whole, [whole.numel()]
        pieces = list(decode_pieces(model.decoder, encoded, plan))
    return torch.cat(pieces), [p.numel() for p in pieces]


def test_windowed_audio_is_whole_chunk_audio_within_the_stated_bound(kokoro_engine: KokoroEngine) -> None:
    whole, _ = decode(kokoro_engine, None)
    stitched, sizes = decode(kokoro_engine, PLAN)
    steps = whole.numel() // SAMPLES_PER_STEP
    assert [s // SAMPLES_PER_STEP for s in sizes] == [b - a for a, b in PLAN.windows(steps)]
    assert len(sizes) >= 2
    assert stitched.numel() == whole.numel()
    difference = (stitched - whole).abs()
    assert float(difference.max()) <= 0.05
    assert float(difference.mean()) <= 0.005
    assert float(difference.max()) > 0.0  # the windows really normalise over their own spans

    exact, _ = decode(kokoro_engine, WindowPlan(context_steps=10_000))
    assert float((exact - whole).abs().max()) < 1e-4


def test_the_engine_pieces_add_up_to_the_chunk(kokoro_engine: KokoroEngine) -> None:
    whole = kokoro_engine.synthesize(TEXT, "af_heart", 1.0)
    pieces = list(kokoro_engine.synthesize_pieces(TEXT, "af_heart", 1.0))
    assert len(pieces) >= 2
    assert sum(len(p.pcm) for p in pieces) == len(whole.pcm)
    assert [w.word for p in pieces for w in p.words] == [w.word for w in whole.words]
    offset, starts = 0.0, []
    for piece in pieces:
        starts += [round(offset + w.start_s, 3) for w in piece.words]
        offset += piece.duration_s
    assert starts == [round(w.start_s, 3) for w in whole.words]
