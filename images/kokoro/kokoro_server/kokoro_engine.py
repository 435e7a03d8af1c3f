"""The real engine: Kokoro-82M through the `kokoro` package (KModel + misaki English G2P).

Weights come from a model directory in the published layout (real or generated random weights).
`kokoro` loads checkpoints with `strict=False` after a first failure, so a renamed tensor would be
skipped silently and the model would run on random values: `verify_checkpoint_loaded` checks that
every tensor of the file reached the model, and loading fails loudly otherwise.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, ExitStack, nullcontext
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, get_args

import numpy as np

from kokoro_server import model_pin, norm_carry
from kokoro_server.capability import Probe, probe_bf16_cpu, require_precision
from kokoro_server.engine import ChunkAudio, float_to_pcm16
from kokoro_server.fused import fuse
from kokoro_server.g2p import offline_spacy_model
from kokoro_server.vocoder_speed import VocoderSpeed
from kokoro_server.weights import voice_files
from kokoro_server.windowed import SAMPLES_PER_STEP, STEP_S, WindowPlan, decode_pieces, encode_chunk
from speech_protocol import SAMPLE_RATE, WordTiming

if TYPE_CHECKING:
    import torch

logger = logging.getLogger(__name__)

Precision = Literal["fp32", "bf16", "fp16"]
PRECISIONS: tuple[str, ...] = get_args(Precision)
MAX_PHONEMES = 510
"""KModel's context: longer phoneme strings are split by the pipeline's own chunker."""


class CheckpointMismatch(RuntimeError):
    """Some checkpoint tensors did not reach the model (wrong names or shapes)."""


def verify_checkpoint_loaded(model: Any, checkpoint: Path) -> int:
    """Check every tensor of `checkpoint` equals the model's; returns how many were checked."""
    import torch

    state = torch.load(checkpoint, map_location="cpu", weights_only=True, mmap=True)
    problems: list[str] = []
    checked = 0
    for sub, tensors in state.items():
        module = getattr(model, sub, None)
        if not isinstance(module, torch.nn.Module):
            problems.append(f"{sub}: the model has no such sub-module")
            continue
        loaded = module.state_dict()
        for key, tensor in tensors.items():
            name = key.removeprefix("module.")
            target = loaded.get(name)
            if target is None:
                problems.append(f"{sub}.{name}: not a parameter of the model")
            elif target.shape != tensor.shape or not torch.equal(target.detach().cpu(), tensor):
                problems.append(f"{sub}.{name}: value not loaded")
            checked += 1
    if problems:
        shown = "; ".join(problems[:5])
        raise CheckpointMismatch(f"{len(problems)} of {checked} checkpoint tensors did not load: {shown}")
    return checked


def stage_modules(model: Any) -> list[torch.nn.Module]:
    """The model's stages: ALBERT, the prosody predictor's text encoder, LSTM and F0/energy blocks,
    the text encoder, the decoder's frame-rate blocks, the vocoder's excitation, upsampling, each
    convolution of its residual blocks, and its output convolution. Between two of them a job's
    intra-op threads can change (`at_each_stage`): measured at one thread on an 80-character chunk
    (5 s of audio, 3.9 s to synthesize), 68 stages, at most 0.16 s between two."""
    predictor, decoder, generator = model.predictor, model.decoder, model.decoder.generator
    return [
        model.bert,
        predictor.text_encoder,
        predictor.lstm,
        predictor.shared,
        *predictor.F0,
        *predictor.N,
        model.text_encoder,
        decoder.encode,
        *decoder.decode,
        generator.m_source,
        *generator.ups,
        # The vocoder's residual blocks hold most of the work (at one thread, a 5 s chunk's last
        # three blocks ran 0.5-0.7 s each): their convolutions, one by one, are the stages there.
        *(conv for block in (*generator.noise_res, *generator.resblocks) for conv in (*block.convs1, *block.convs2)),
        generator.conv_post,
    ]


def _autocast(device: str, precision: Precision) -> AbstractContextManager[Any]:
    import torch

    if precision == "fp32":
        return nullcontext()
    if device.startswith("cuda"):
        return torch.autocast("cuda", dtype=torch.float16 if precision == "fp16" else torch.bfloat16)
    if precision == "fp16":
        raise ValueError("precision 'fp16' needs a CUDA device; on a CPU use 'bf16' or 'fp32'")
    return torch.autocast("cpu", dtype=torch.bfloat16)


class KokoroEngine:
    """Implements `SpeechEngine` with Kokoro-82M. `synthesize` is thread-safe and blocking."""

    def __init__(
        self,
        *,
        model: Any,
        pipeline: Any,
        voice_packs: dict[str, torch.Tensor],
        device: str,
        precision: Precision,
    ) -> None:
        if not voice_packs:
            raise ValueError("at least one voice is required")
        self._model = model
        self._pipeline = pipeline
        self._packs = voice_packs
        self._device = device
        self._precision = precision
        # spaCy pipelines are not documented as thread-safe; G2P is ~1 % of the cost, so it is
        # serialized while model inference (which releases the GIL) runs in parallel.
        self._g2p_lock = threading.Lock()
        self.window_plan = WindowPlan()
        """How `synthesize_pieces` cuts a chunk's vocoder work (see `windowed`)."""
        self.vocoder_speed = VocoderSpeed()
        """The vocoder's measured speed over the windows this engine decoded (`vocoder_speed`)."""
        default = model_pin.DEFAULT_VOICES[0]
        self._default_voice = default if default in voice_packs else sorted(voice_packs)[0]

    @classmethod
    def load(
        cls,
        model_dir: Path,
        *,
        device: str = "cpu",
        precision: str = "fp32",
        real_istft: bool | None = None,
        probe: Probe = probe_bf16_cpu,
        fused: bool = True,
    ) -> KokoroEngine:
        """Load config, checkpoint and every voice of `model_dir`; verify the checkpoint.

        `real_istft` selects kokoro's real-valued inverse STFT (`disable_complex=True`). It is
        required under reduced precision: the default iSTFT multiplies the phase by 1j, which under
        bf16 autocast makes a bf16 complex tensor that PyTorch cannot multiply on a CPU. None means
        "only when the precision is not fp32". `probe` checks that this CPU runs bf16 (see
        `capability`): a CPU without native bf16 is refused before anything is loaded. `fused`
        folds weight norm and fuses the AdaIN blocks' element-wise work (`fused`: same values to
        float rounding, fewer passes over memory); False keeps Kokoro's modules as published
        (the side-by-side benchmark, `bench.fused`).
        """
        if precision not in PRECISIONS:
            raise ValueError(f"precision must be one of {', '.join(PRECISIONS)}, got {precision!r}")
        prec: Precision = precision  # type: ignore[assignment]
        _autocast(device, prec)  # fail now, not on the first request
        require_precision(device, prec, probe=probe)
        import torch
        from kokoro import KModel, KPipeline

        checkpoint = model_dir / model_pin.CHECKPOINT_FILE
        model = KModel(
            repo_id=model_pin.REPO_ID,
            config=str(model_dir / model_pin.CONFIG_FILE),
            model=str(checkpoint),
            disable_complex=prec != "fp32" if real_istft is None else real_istft,
        )
        count = verify_checkpoint_loaded(model, checkpoint)
        logger.info("loaded %d checkpoint tensors from %s", count, checkpoint)
        model = model.to(device).eval()
        if fused:
            logger.info("fused: %s", fuse(model))
        # Kokoro's own AdaIN layers (not fused) learn the windows' carried statistics too, so both
        # kinds of engine cut the same windows into the same audio (the fused ones consult them already).
        if carried := norm_carry.install(model.decoder.generator):
            logger.info("Kokoro's vocoder AdaIN layers given carried statistics: %d", carried)
        with offline_spacy_model() as spacy_model:
            pipeline = KPipeline(lang_code=model_pin.LANG_CODE, repo_id=model_pin.REPO_ID, model=False)
        logger.info("G2P ready (spaCy model: %s)", spacy_model)
        packs = {name: torch.load(path, weights_only=True).to(device) for name, path in voice_files(model_dir).items()}
        return cls(model=model, pipeline=pipeline, voice_packs=packs, device=device, precision=prec)

    @property
    def voices(self) -> frozenset[str]:
        return frozenset(self._packs)

    @property
    def default_voice(self) -> str:
        return self._default_voice

    @property
    def precision(self) -> Precision:
        return self._precision

    def phonemize(self, text: str) -> list[tuple[str, list[Any]]]:
        """Phoneme strings (each at most 510 symbols) and their tokens, as KPipeline chunks them."""
        with self._g2p_lock:
            _, tokens = self._pipeline.g2p(text)
            return [(ps[:MAX_PHONEMES], tks) for _, ps, tks in self._pipeline.en_tokenize(tokens) if ps]

    def synthesize(self, text: str, voice: str, speed: float) -> ChunkAudio:
        import torch
        from kokoro import KPipeline

        pack = self._packs[voice]
        pieces: list[np.ndarray] = []
        words: list[WordTiming] = []
        offset_s = 0.0
        for phonemes, tokens in self.phonemize(text):
            with torch.inference_mode(), _autocast(self._device, self._precision):
                output = self._model(phonemes, pack[len(phonemes) - 1], speed, return_output=True)
            audio = output.audio.float().cpu().numpy()
            KPipeline.join_timestamps(tokens, output.pred_dur)
            for token in tokens:
                if token.start_ts is not None and token.end_ts is not None:
                    words.append(WordTiming(token.text, offset_s + token.start_ts, offset_s + token.end_ts))
            pieces.append(audio)
            offset_s += len(audio) / SAMPLE_RATE
        samples = np.concatenate(pieces) if pieces else np.zeros(0, dtype=np.float32)
        return ChunkAudio(pcm=float_to_pcm16(samples), words=tuple(words))

    def _computing(self) -> AbstractContextManager[Any]:
        """Inference mode and this engine's precision, for one stretch of model work on this thread."""
        import torch

        stack = ExitStack()
        stack.enter_context(torch.inference_mode())
        stack.enter_context(_autocast(self._device, self._precision))
        return stack

    def synthesize_pieces(
        self,
        text: str,
        voice: str,
        speed: float,
        *,
        others_waiting: Callable[[], int] | None = None,
        ahead_s: Callable[[], float] | None = None,
    ) -> Iterator[ChunkAudio]:
        """The chunk's audio window by window (`windowed`): the first piece after one window of
        vocoder work, not the whole chunk's. Text encoder and prosody run per phoneme string. The
        first window is cut once they have run, when the crowd of listeners waiting in silence is
        known (`WindowPlan.first_for`): requests that arrive together are all queued by then. Each
        later window is cut when its step starts, as long as the vocoder can make it before the
        `ahead_s()` seconds of audio the listener holds run out (`WindowPlan.next_steps`). The
        vocoder's speed counted on is `VocoderSpeed.alone` for a chunk whose first window was
        planned with nobody else waiting, else `VocoderSpeed.typical`.

        Each `next` may run on another thread (the server makes every window its own engine job):
        inference mode and autocast are thread-local, so they are entered and left within each
        step, never held across a `yield`.
        """
        from kokoro import KPipeline

        pack = self._packs[voice]
        plan = self.window_plan
        strings = self.phonemize(text)

        def next_steps(remaining: int, alone: bool) -> int:
            ahead = ahead_s() if ahead_s is not None else None
            speed_now = self.vocoder_speed.alone if alone else self.vocoder_speed.typical
            size = plan.next_steps(remaining, ahead, speed_now)
            logger.debug(
                "window: %d of %d steps left, listener ahead %s s, %s s/step", size, remaining, ahead, speed_now
            )
            return size

        for number, (phonemes, tokens) in enumerate(strings, start=1):
            with self._computing():
                encoded = encode_chunk(self._model, phonemes, pack[len(phonemes) - 1], speed)
                KPipeline.join_timestamps(tokens, encoded.pred_dur.cpu())
            crowd = others_waiting() if others_waiting is not None and number == 1 else 0
            alone = crowd == 0
            timed = [t for t in tokens if t.start_ts is not None and t.end_ts is not None]
            word_ends = sorted({round(t.end_ts / STEP_S) for t in timed})
            steps, s_per_step = encoded.vocoder_steps, self.vocoder_speed.alone  # a crowd's ignores the speed
            first = plan.first_for(crowd, steps, s_per_step, word_ends)
            logger.debug("first window: %d of %d steps, %d waiting, %s s/step", first, steps, crowd, s_per_step)
            done, total = 0, steps * SAMPLES_PER_STEP
            pieces = decode_pieces(
                self._model.decoder,
                encoded,
                plan,
                first,
                next_steps=partial(next_steps, alone=alone),
                vocoded=partial(self._vocoded, alone),
                around=self._computing,
            )
            for audio in pieces:
                samples = audio.float().cpu().numpy()
                piece_start_s, piece_end_s = done / SAMPLE_RATE, (done + len(samples)) / SAMPLE_RATE
                done += len(samples)
                words = tuple(
                    WordTiming(t.text, t.start_ts - piece_start_s, t.end_ts - piece_start_s)
                    for t in timed
                    # a word starting past the audio's end (rounding) still belongs to the last piece
                    if piece_start_s <= t.start_ts and (t.start_ts < piece_end_s or done >= total)
                )
                last = number == len(strings) and done >= total
                yield ChunkAudio(pcm=float_to_pcm16(samples), words=words, ends_chunk=last)

    def at_each_stage(self, callback: Callable[[], None]) -> Callable[[], None]:
        """Call `callback` on the engine's thread before each stage of the model (`stage_modules`),
        in every synthesis; returns what undoes it. The server re-sizes the thread's intra-op team
        there (`concurrency`): a job's threads follow the jobs running beside it while it runs."""
        handles = [
            module.register_forward_pre_hook(lambda _module, _args: callback()) for module in stage_modules(self._model)
        ]

        def remove() -> None:
            for handle in handles:
                handle.remove()

        return remove

    def _vocoded(self, alone: bool, steps: int, seconds: float, first: bool) -> None:
        """Record one window's vocoder work: every window tells the typical speed, the first window
        of a chunk planned `alone` the speed of such first windows too."""
        self.vocoder_speed.record(steps, seconds, first_alone=alone and first)
