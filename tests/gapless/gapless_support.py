"""A deterministic model of speech sessions sharing one engine, for the schedule's tests. No clock, no threads.

It follows the session's producer (`kokoro_server.session`): a session asks its chunk policy for
the next chunk as soon as its previous chunk is synthesized, the chunk's job joins the engine's
queue, and its audio is sent the moment the job is done (playback starts with the first audio).
The engine runs one job at a time in arrival order; with at most one job per session in the
queue, that is the fair scheduler's round-robin. Compute and audio are proportional to the text,
like `ZeroCostEngine(seconds_per_char=..., compute_s_per_char=...)`.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from bench.playback import Arrival, PlaybackReport, simulate_playback
from kokoro_server.chunking import ChunkPolicy, audio_ahead_s
from kokoro_server.engine import ZeroCostEngine


@dataclass
class _Session:
    rest: str
    chunks: list[str] = field(default_factory=list)
    arrivals: list[Arrival] = field(default_factory=list)
    produced_s: float = 0.0
    first_audio_at: float | None = None


@dataclass
class SimClock:
    """The simulation's clock, for policies that read one (`AdaptiveChunker.clock`)."""

    now: float = 0.0

    def __call__(self) -> float:
        return self.now


@dataclass(frozen=True)
class SimulatedSession:
    chunks: tuple[str, ...]
    playback: PlaybackReport


def simulate_sessions(
    policies: Sequence[ChunkPolicy],
    texts: Sequence[str],
    *,
    clock: SimClock | None = None,
    compute_s_per_char: float,
    audio_s_per_char: float = 0.06,
    learn: Callable[[str, float], None] | None = None,
    on_load: Callable[[int], None] | None = None,
) -> list[SimulatedSession]:
    """Run one request per text, all sent at time 0, through its session's policy and a one-slot engine.

    `learn(chunk_text, compute_s)` is called as each job finishes (the session's report of its
    timing); `on_load(jobs_in_system)` just before each decision (what the server's load source sees).
    """
    engine = ZeroCostEngine(seconds_per_char=audio_s_per_char)
    sessions = [_Session(rest=text) for text in texts]
    # (time, order, kind, session): "done" (0) before "decide" (1) at the same instant.
    events: list[tuple[float, int, int, int, str]] = [(0.0, 1, i, i, "") for i in range(len(sessions))]
    heapq.heapify(events)
    engine_free_at, jobs_done_at = 0.0, dict[int, float]()
    sequence = len(sessions)
    while events:
        now, kind, _, index, chunk_text = heapq.heappop(events)
        if clock is not None:
            clock.now = now
        session = sessions[index]
        if kind == 0:
            nbytes = engine.samples_for(chunk_text) * 2
            session.arrivals.append(Arrival(at_s=now, num_bytes=nbytes))
            session.first_audio_at = now if session.first_audio_at is None else session.first_audio_at
            session.produced_s += nbytes / 48_000
            jobs_done_at.pop(index)
            if learn is not None:
                learn(chunk_text, len(chunk_text) * compute_s_per_char)
            sequence += 1
            heapq.heappush(events, (now, 1, sequence, index, ""))
            continue
        if on_load is not None:
            on_load(len(jobs_done_at))
        ahead = audio_ahead_s(session.produced_s, session.first_audio_at, now)
        chunk = policies[index].next_chunk(session.rest, first=not session.chunks, buffered_audio_s=ahead)
        if chunk is None:
            continue
        session.chunks.append(chunk.text)
        session.rest = chunk.rest
        engine_free_at = max(now, engine_free_at) + len(chunk.text) * compute_s_per_char
        jobs_done_at[index] = engine_free_at
        sequence += 1
        heapq.heappush(events, (engine_free_at, 0, sequence, index, chunk.text))
    return [SimulatedSession(tuple(s.chunks), simulate_playback(s.arrivals)) for s in sessions]
