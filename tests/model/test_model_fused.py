"""The fused blocks (`kokoro_server.fused`) against Kokoro's own modules, on the generated checkpoint.

Two copies of the full-size model: as published (`fused=False`) and as the server runs it (the
session engine). Folding weight norm must not change a single bit; the fused AdaIN blocks compute
Kokoro's values to float rounding, checked on the activations a real synthesis feeds them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from kokoro.istftnet import AdaIN1d, AdaINResBlock1

from kokoro_server import model_pin
from kokoro_server.fused import FuseReport, fuse
from kokoro_server.kokoro_engine import KokoroEngine

pytestmark = pytest.mark.model

TEXT = "Streaming speech lets a voice agent start talking before its answer is ready."


@pytest.fixture(scope="module")
def published(kokoro_model_dir: Path) -> KokoroEngine:
    return KokoroEngine.load(kokoro_model_dir, fused=False)


def _inputs(engine: KokoroEngine) -> tuple[str, torch.Tensor]:
    [(phonemes, _)] = engine.phonemize(TEXT)
    return phonemes, engine._packs["af_heart"][len(phonemes) - 1]


def test_fuse_folds_every_weight_norm_the_checkpoint_stores(kokoro_model_dir: Path, published: KokoroEngine) -> None:
    state = torch.load(kokoro_model_dir / model_pin.CHECKPOINT_FILE, map_location="cpu", weights_only=True, mmap=True)
    stored = sum(key.endswith(".weight_g") for tensors in state.values() for key in tensors)
    from kokoro import KModel

    model = KModel(
        repo_id=model_pin.REPO_ID,
        config=str(kokoro_model_dir / model_pin.CONFIG_FILE),
        model=str(kokoro_model_dir / model_pin.CHECKPOINT_FILE),
    )
    adain = sum(type(m) is AdaIN1d for m in model.modules())
    # The vocoder's three kernel sizes at each of its two rates, plus one source block per rate.
    assert fuse(model) == FuseReport(weight_norms=stored, adain=adain, resblocks=8)
    assert stored == 89
    assert adain == 70
    assert not [name for name, m in model.named_modules() if hasattr(m, "weight_g") or hasattr(m, "weight_v")]
    assert fuse(model) == FuseReport(weight_norms=0, adain=0, resblocks=0)  # nothing left to change
    # The published copy is untouched by `fused=False`.
    assert sum(hasattr(m, "weight_g") for m in published._model.modules()) == stored


def test_folding_weight_norm_changes_no_bit(kokoro_engine: KokoroEngine, published: KokoroEngine) -> None:
    """The text encoder has weight-normed convolutions and no AdaIN: folded, its output is identical."""
    phonemes, _ = _inputs(published)
    vocab = published._model.vocab
    ids = torch.tensor([[0, *(vocab[p] for p in phonemes if p in vocab), 0]])
    lengths = torch.tensor([ids.shape[1]])
    mask = torch.zeros_like(ids, dtype=torch.bool)
    with torch.inference_mode():
        ours = kokoro_engine._model.text_encoder(ids, lengths, mask)
        theirs = published._model.text_encoder(ids, lengths, mask)
    assert torch.equal(ours, theirs)


def _captured(engine: KokoroEngine) -> dict[str, tuple[Any, torch.Tensor, torch.Tensor]]:
    """(module, x, s) fed to a few AdaIN blocks of every kind during one real synthesis."""
    model = engine._model
    watched = {
        "decoder.encode.norm1": model.decoder.encode.norm1,  # frame rate, 1,090 channels
        "predictor.F0.1.norm2": model.predictor.F0[1].norm2,  # prosody
        "generator.resblocks.0": model.decoder.generator.resblocks[0],  # 256 channels, kernel 3
        "generator.resblocks.5": model.decoder.generator.resblocks[5],  # 128 channels at 4.8 kHz, kernel 11
        "generator.noise_res.1": model.decoder.generator.noise_res[1],
    }
    seen: dict[str, tuple[Any, torch.Tensor, torch.Tensor]] = {}

    def watch(name: str) -> Any:
        def hook(module: Any, args: tuple[torch.Tensor, torch.Tensor]) -> None:  # None: the inputs unchanged
            seen.setdefault(name, (module, args[0].clone(), args[1].clone()))

        return hook

    handles = [module.register_forward_pre_hook(watch(name)) for name, module in watched.items()]
    try:
        phonemes, ref_s = _inputs(engine)
        with torch.inference_mode():
            model(phonemes, ref_s, 1.0)
    finally:
        for handle in handles:
            handle.remove()
    assert sorted(seen) == sorted(watched)
    return seen


def test_fused_blocks_compute_kokoros_values_on_real_activations(kokoro_engine: KokoroEngine) -> None:
    for name, (module, x, s) in _captured(kokoro_engine).items():
        original = AdaIN1d.forward if isinstance(module, AdaIN1d) else AdaINResBlock1.forward
        assert type(module).forward is not original, name  # the session engine runs the fused forward
        before = x.clone()
        with torch.inference_mode():
            fused = module(x, s)
            kokoro = original(module, x, s)
        assert torch.equal(x, before), f"{name}: the block wrote into its input"
        scale = float(kokoro.abs().max())
        assert float((fused - kokoro).abs().max()) <= 1e-5 * max(scale, 1.0), name


def test_a_batch_of_two_runs_kokoros_adain(kokoro_engine: KokoroEngine) -> None:
    """The style folds into the norm's affine for one sequence only; a batch takes Kokoro's path."""
    module, x, s = _captured(kokoro_engine)["decoder.encode.norm1"]
    xs, ss = torch.cat([x, 2 * x]), torch.cat([s, -s])
    with torch.inference_mode():
        assert torch.equal(module(xs, ss), AdaIN1d.forward(module, xs, ss))


def test_fused_engine_audio_is_the_published_audio_to_one_pcm_step(
    kokoro_engine: KokoroEngine, published: KokoroEngine
) -> None:
    audio = []
    for engine in (kokoro_engine, published):
        torch.manual_seed(11)  # the vocoder's excitation noise: the same draws for both
        audio.append(np.frombuffer(engine.synthesize(TEXT, "af_heart", 1.0).pcm, dtype=np.int16).astype(np.int32))
    ours, theirs = audio
    assert ours.shape == theirs.shape
    assert int(np.abs(ours - theirs).max()) <= 2  # measured: 1 (float rounding moves a sample across a step)


def test_fused_blocks_with_every_parameter_random_compute_kokoros_values() -> None:
    """The generated checkpoint leaves Snake's alphas at 1 and the norms' affine at (1, 0), as
    Kokoro initialises them; trained weights do not. Here every parameter is random, the
    published block and its fused copy get the same ones."""
    torch.manual_seed(5)
    block, published = (AdaINResBlock1(channels=24, kernel_size=7, dilation=(1, 3, 5), style_dim=16) for _ in "ab")
    with torch.no_grad():
        for parameter in block.parameters():
            parameter.copy_(torch.rand_like(parameter) + 0.5)  # alphas and norm weights away from 1, biases from 0
    published.load_state_dict(block.state_dict())
    holder = torch.nn.ModuleList([block])
    assert fuse(holder) == FuseReport(weight_norms=6, adain=6, resblocks=1)
    x, s = torch.randn(1, 24, 300), torch.randn(1, 16)
    with torch.inference_mode():
        theirs = published(x, s)
        ours = block(x, s)
        norm = block.adain1[1]
        single_theirs = published.adain1[1](x, s)
        single_ours = norm(x, s)
    torch.testing.assert_close(ours, theirs, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(single_ours, single_theirs, rtol=1e-5, atol=1e-5)


def test_fused_blocks_run_under_bf16_autocast_as_kokoros_do() -> None:
    """The server's bf16 setting runs the model under autocast: the style's linear layer then
    returns bf16 and the norms keep fp32 parameters. The fused blocks must accept that mix, as
    Kokoro's do, and agree with them to bf16 precision."""
    torch.manual_seed(6)
    block, published = (AdaINResBlock1(channels=16, kernel_size=3, dilation=(1, 3, 5), style_dim=8) for _ in "ab")
    published.load_state_dict(block.state_dict())
    fuse(torch.nn.ModuleList([block]))
    x, s = torch.randn(1, 16, 200), torch.randn(1, 8)
    with torch.inference_mode(), torch.autocast("cpu", dtype=torch.bfloat16):
        theirs = published(x, s)
        ours = block(x, s)
    assert ours.shape == theirs.shape
    torch.testing.assert_close(ours.float(), theirs.float(), rtol=0.05, atol=0.05)
