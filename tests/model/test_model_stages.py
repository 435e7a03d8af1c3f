"""The model's stages (`kokoro_engine.stage_modules`), where a running job's threads are re-sized:
every stage listed is one the model really runs, on the synthesizing thread, inside every window."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest

from kokoro_server.engine import ChunkAudio
from kokoro_server.kokoro_engine import KokoroEngine, stage_modules

pytestmark = pytest.mark.model

TEXT = "Streaming speech lets a voice agent start talking before its answer is ready."


def test_one_synthesis_runs_every_stage_once_per_phoneme_string(kokoro_engine: KokoroEngine) -> None:
    """A stage the model no longer runs (a renamed or bypassed module) would be a hook that never
    fires: threads would silently stop following. One phoneme string runs each exactly once."""
    stages = stage_modules(kokoro_engine._model)
    calls: list[str] = []
    remove = kokoro_engine.at_each_stage(lambda: calls.append(threading.current_thread().name))
    try:
        kokoro_engine.synthesize(TEXT, "af_heart", 1.0)
    finally:
        remove()
    assert len(kokoro_engine.phonemize(TEXT)) == 1
    assert len({id(module) for module in stages}) == len(stages) == 68
    assert len(calls) == len(stages)
    assert set(calls) == {threading.current_thread().name}
    kokoro_engine.synthesize(TEXT, "af_heart", 1.0)
    assert len(calls) == len(stages)  # removed: no more calls


def test_every_window_reports_its_stages_on_the_thread_that_decodes_it(kokoro_engine: KokoroEngine) -> None:
    """The server runs each window as its own job, on whichever pool thread is free (here: two
    threads by turns): a window's stages are reported on that thread, one per vocoder convolution
    (a long window's threads can change inside it)."""
    generator = kokoro_engine._model.decoder.generator
    per_window = (
        len(generator.ups)
        + sum(len(block.convs1) + len(block.convs2) for block in (*generator.noise_res, *generator.resblocks))
        + 1  # conv_post
    )
    assert per_window == 51
    calls: list[str] = []
    remove = kokoro_engine.at_each_stage(lambda: calls.append(threading.current_thread().name))
    pieces: Iterator[ChunkAudio] = kokoro_engine.synthesize_pieces(TEXT, "af_heart", 1.0, ahead_s=lambda: 100.0)
    per_piece: list[tuple[str, list[str]]] = []
    pools = [ThreadPoolExecutor(max_workers=1, thread_name_prefix=name) for name in ("even", "odd")]
    try:
        for turn in range(20):
            before = len(calls)
            job = pools[turn % 2].submit(lambda: (next(pieces, None), threading.current_thread().name))
            piece, thread = job.result()
            if piece is None:
                break
            per_piece.append((thread, calls[before:]))
            if piece.ends_chunk:
                break
    finally:
        remove()
        for pool in pools:
            pool.shutdown()
    assert len(per_piece) >= 2
    for turn, (thread, seen) in enumerate(per_piece):
        assert thread.startswith(("even", "odd")[turn % 2])
        assert set(seen) == {thread}
    text_side = 11  # ALBERT, the predictor's text encoder, LSTM, shared LSTM, 3 F0 and 3 N blocks, text encoder
    frame_rate = 5  # the decoder's encode block and 4 decode blocks: on the first window's prefix, then the rest
    # the first job: text side, excitation, the prefix's frame-rate blocks, its window; each later
    # one's window (the second also completes the frame-rate blocks)
    assert [len(seen) for _, seen in per_piece] == [
        text_side + 1 + frame_rate + per_window,
        frame_rate + per_window,
        *[per_window] * (len(per_piece) - 2),
    ]


def test_the_gapless_benchmark_serves_the_engine_one_app_at_a_time_and_unhooks_it(kokoro_engine: KokoroEngine) -> None:
    """`bench.gapless` serves the real engine as the server does (threads sized per job and stage),
    one app at a time; each app's service removes its stage hooks when it shuts down, so the next
    app's stages size only its own threads."""
    from bench.gapless import POLICIES, Case, run_precision

    stages = stage_modules(kokoro_engine._model)
    rows = run_precision(kokoro_engine, "fp32", [Case("four sentences", 1, "fp32")], progress=False)
    assert len(rows) == 1
    assert set(rows[0].outcomes) == set(POLICIES)
    for outcome in rows[0].outcomes.values():
        assert len(outcome.playbacks) == 1
        assert outcome.playbacks[0].audio_s > 10  # the whole four-sentence text was heard
    assert [len(module._forward_pre_hooks) for module in stages] == [0] * len(stages)
