"""The schedule inside the server: chosen by the chunking setting, fed by every chunk's compute time,
aware of the load, and forgotten when a request ends."""

from __future__ import annotations

import asyncio
import threading

import httpx

from bench.gapless import serving
from bench.recording import record_session
from bench.texts import LONG_ANSWER
from kokoro_server.app import create_app
from kokoro_server.chunking import SentenceChunker, WholeText
from kokoro_server.engine import ZeroCostEngine
from kokoro_server.schedule import AdaptiveChunker
from kokoro_server.service import LoadedEngine, SpeechService
from kokoro_server.settings import Settings


def test_the_chunking_setting_picks_the_policy_and_adaptive_ones_share_what_they_learn() -> None:
    service = SpeechService(Settings())
    first, second = service.chunk_policy(), service.chunk_policy()
    assert isinstance(first, AdaptiveChunker)
    assert isinstance(second, AdaptiveChunker)
    assert first is not second  # one per client: each reports its own listener to the board
    assert first.speed is second.speed is service.speed
    assert first.board is second.board is service.board
    assert isinstance(SpeechService(Settings(chunking="sentence")).chunk_policy(), SentenceChunker)
    assert isinstance(SpeechService(Settings(chunking="none")).chunk_policy(), WholeText)


async def test_sharing_counts_the_jobs_already_running_or_queued_per_engine_slot() -> None:
    service = SpeechService(Settings(max_concurrent=1))
    assert service.sharing() == 1.0  # not started: nothing to share
    service.start(LoadedEngine(ZeroCostEngine(), "cpu"))  # one slot
    release = threading.Event()
    try:
        running = asyncio.create_task(service.scheduler.lane("a").run(lambda: release.wait(10)))
        queued = asyncio.create_task(service.scheduler.lane("b").run(lambda: release.wait(10)))
        await asyncio.sleep(0.05)
        assert (service.scheduler.running, service.scheduler.queued) == (1, 1)
        assert service.sharing() == 3.0  # a new job waits for two others on the one slot
    finally:
        release.set()
    await asyncio.gather(running, queued)
    assert service.sharing() == 1.0
    service.shutdown()


async def test_a_session_reports_each_chunks_compute_time_and_frees_the_board_when_done() -> None:
    engine = ZeroCostEngine(compute_s_per_char=0.002)
    app = create_app(Settings(), engine)
    service: SpeechService = app.state.speech
    with serving(app) as url:
        recording = await record_session(url, LONG_ANSWER)
        assert service.speed.observations == len(engine.calls) == recording.complete.chunks
        # Each chunk computed 0.002 s per character; the estimate is what remains after the 0.05 s
        # fixed overhead the model assumes per chunk: below 0.002, never zero.
        assert 0.0 < service.speed.s_per_char < 0.002
        assert service.board.tightest(0.0, exclude=None) is None

        async with httpx.AsyncClient() as client:
            response = await client.post(
                url.replace("ws://", "http://").replace("/invocations-bidirectional-stream", "/invocations"),
                json={"text": "Hello there. The HTTP route learns as well."},
            )
        assert response.status_code == 200
        assert service.speed.observations == len(engine.calls) > recording.complete.chunks
