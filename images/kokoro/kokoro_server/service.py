"""The state the server's routes share: the engine once it is loaded, the scheduler, the chunk policies."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import Literal

from kokoro_server.chunking import ChunkPolicy, SentenceChunker, WholeText
from kokoro_server.concurrency import SynthesisThreads
from kokoro_server.engine import SpeechEngine
from kokoro_server.schedule import AdaptiveChunker, EngineSpeed, ListenerBoard, sharing_factor
from kokoro_server.scheduler import FairScheduler
from kokoro_server.settings import Settings

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class LoadedEngine:
    engine: SpeechEngine
    device: Literal["cpu", "cuda"]
    use_threads: Callable[[int], None] | None = None
    """Sets the calling thread's intra-op threads for the engine (None: the engine has none to set)."""
    at_each_stage: Callable[[Callable[[], None]], Callable[[], None]] | None = None
    """Registers a callback the engine calls on its thread before each stage of a synthesis, and
    returns what removes it (None: the engine has no stages to report): threads are re-sized
    there, not only when a job starts."""


@dataclass(frozen=True, slots=True)
class EngineLoader:
    """Builds the engine at start-up, off the event loop; the server answers /ping 503 until it returns."""

    load: Callable[[], LoadedEngine]
    """Blocking: loads the model and warms it up (so the first request never pays for it)."""
    on_failure: Callable[[BaseException], None] | None = None
    """Called on the event loop when `load` raised (the process owner stops the server)."""


class Readiness(StrEnum):
    LOADING = "loading"
    READY = "ready"
    FAILED = "failed"


class NotReadyError(RuntimeError):
    """The engine is not loaded (yet, or at all)."""


class SpeechService:
    """Shared by every route: readiness, engine, scheduler, chunk policies and what they learn, session count."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.speed = EngineSpeed()
        """The engine's speed on this machine, learnt from every chunk of every client."""
        self.board = ListenerBoard()
        self.readiness = Readiness.LOADING
        self.active_sessions = 0
        self._engine: SpeechEngine | None = None
        self._scheduler: FairScheduler | None = None
        self._executor: SynthesisThreads | None = None
        self._unhook: Callable[[], None] | None = None

    def start(self, loaded: LoadedEngine) -> None:
        """Serve with `loaded`: one synthesis thread per synthesis allowed at once, each job's
        intra-op threads sized by the jobs running when it starts, and again before each stage of
        the model while it runs, within its thread's share (`concurrency`)."""
        plan = self.settings.concurrency_for(loaded.device)
        threads = SynthesisThreads(plan)
        on_start: Callable[[int], None] | None = None
        if (use_threads := loaded.use_threads) is not None:

            def on_start(running: int) -> None:
                use_threads(threads.threads_here(running))

        self._executor = threads
        scheduler = FairScheduler(plan.concurrency, threads, self.settings.synthesis_timeout_s, on_start=on_start)
        if use_threads is not None and loaded.at_each_stage is not None:
            # A job that started alone gives up its second core as soon as another job starts, and
            # one on the wide thread that started beside another takes every core once it runs
            # alone, within its thread's cap (measured: #15).
            self._unhook = loaded.at_each_stage(lambda: use_threads(threads.threads_here(scheduler.running)))
        self._scheduler = scheduler
        self._engine = loaded.engine
        self.readiness = Readiness.READY
        logger.info(
            "serving on %s, %d syntheses at a time on %d cores (alone: %d intra-op threads, with others: %d)",
            loaded.device,
            plan.concurrency,
            plan.cores,
            plan.thread_caps()[0],  # a job alone runs on the wide thread
            plan.threads_for(plan.concurrency),
        )

    def fail(self) -> None:
        self.readiness = Readiness.FAILED

    def chunk_policy(self) -> ChunkPolicy:
        """A chunk policy for one client (a session or an HTTP request), as configured."""
        if self.settings.chunking == "adaptive":
            return AdaptiveChunker(self.speed, sharing=self.sharing, board=self.board, crowd=self.in_silence)
        return SentenceChunker() if self.settings.chunking == "sentence" else WholeText()

    def sharing(self) -> float:
        """Jobs per engine slot once one more job is queued: how much longer a chunk waits than it computes."""
        if self._scheduler is None:
            return 1.0
        return sharing_factor(self._scheduler.running + self._scheduler.queued, self._scheduler.max_concurrent)

    def in_silence(self) -> int:
        """Listeners waiting in silence for the engine now (their jobs are past their deadline)."""
        return 0 if self._scheduler is None else self._scheduler.in_silence()

    @property
    def stalled(self) -> bool:
        """Every engine slot is held by a call past its time limit: nothing can be synthesized."""
        return self._scheduler is not None and self._scheduler.stalled

    @property
    def engine(self) -> SpeechEngine:
        if self._engine is None:
            raise NotReadyError(f"the speech engine is {self.readiness}")
        return self._engine

    @property
    def scheduler(self) -> FairScheduler:
        if self._scheduler is None:
            raise NotReadyError(f"the speech engine is {self.readiness}")
        return self._scheduler

    def shutdown(self) -> None:
        if self._unhook is not None:
            # Another service may serve the same engine after this one (benchmarks, tests): its
            # stages must size that one's threads only.
            self._unhook()
            self._unhook = None
        if self._executor is not None:
            # A running synthesis cannot be interrupted; queued ones are dropped by their lanes.
            self._executor.shutdown(wait=False, cancel_futures=True)
