"""The adaptive chunk schedule: how much text to synthesize next so that playback never stops.

Splitting by sentence is not enough for gapless speech: the model's cost grows with the audio it
makes, so a long second sentence can take longer to synthesize than the short first one takes to
play. This schedule sizes every chunk from three measured quantities instead:

- the audio already produced ahead of the listener (`buffered_audio_s`): the next chunk must be
  ready before it runs out, so the chunk may grow as the buffer grows;
- the engine's speed on this machine (`EngineSpeed`: seconds of compute per character, an
  exponentially weighted average of finished chunks, from a pessimistic prior);
- the load: with other sessions' jobs queued or running ahead of this one, the wait for the
  engine grows (`sharing`, the number of jobs that share each engine slot, this one included).

The first chunk is the shortest sensible piece (the first clause or phrase of the first sentence),
for the earliest first audio. Later chunks are cut at a sentence boundary when one lands in the
useful part of the allowance, else a clause, else a phrase boundary (before a conjunction or a
relative word), else between words; never inside a word.

`plan_chunk` is the pure decision; `AdaptiveChunker` binds it to an `EngineSpeed` and a load
source and implements `kokoro_server.chunking.ChunkPolicy`.
"""

from __future__ import annotations

import logging
import math
import re
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Final

from kokoro_server.chunking import Chunk, sentence_end

logger = logging.getLogger(__name__)


class Boundary(IntEnum):
    """Kinds of places where text may be cut, weakest first."""

    WORD = 0
    PHRASE = 1
    CLAUSE = 2
    SENTENCE = 3


@dataclass(frozen=True, slots=True)
class Cut:
    """A place to cut: the chunk is `text[:at]`, the rest `text[at:]`."""

    at: int
    kind: Boundary


# A clause ends at , ; : (possibly followed by closing quotes or brackets) before whitespace, or at
# a dash standing between spaces. The cut goes after the punctuation, at the whitespace.
_CLAUSE_END: Final = re.compile(r"[,;:][\"'”’)\]]*(?=\s)|(?<=\s)[—–-]+(?=\s)")
# A phrase starts with a conjunction or a relative word; the cut goes at the whitespace before it.
_PHRASE_START: Final = re.compile(
    r"\s(?=(?:and|but|or|nor|so|yet|because|before|after|while|when|whenever|where|wherever|which|who|whom"
    r"|whose|that|if|unless|until|although|though|since|whereas|whether|than|instead|as)\b)"
)
_SPACE: Final = re.compile(r"\s+")
_VISIBLE: Final = re.compile(r"\S")


@dataclass(frozen=True, slots=True)
class ScheduleParams:
    """The schedule's constants: text shape rules and the safety of the timing budget."""

    min_piece_chars: int = 15
    """Neither side of a cut inside a sentence may be shorter (no "Well," or "down." chunk)."""
    first_max_chars: int = 60
    """The first chunk is the first clause or phrase of at least `min_piece_chars` up to this length."""
    crowd_first_max_chars: int = 30
    """The same limit when other listeners already wait in silence for the engine (a crowd arriving
    together): this one's first audio waits for theirs, so its first piece is kept shorter."""
    max_chunk_chars: int = 300
    """The model reads at most 510 phonemes at once; longer text is split by the engine itself."""
    max_chunk_compute_s: float = 4.0
    """Predicted compute of one chunk at most: a running chunk cannot be interrupted, so a bigger one
    would delay every other session's next chunk (and a newcomer's first audio) for longer."""
    safety: float = 0.75
    """The share of the buffered audio the next chunk may spend (speed estimates are noisy)."""
    margin_s: float = 0.15
    """Seconds kept in reserve on top (frame transfer, scheduling jitter)."""
    min_fill: float = 0.2
    """A boundary of a better kind wins when it keeps at least this share of the allowed length."""

    def __post_init__(self) -> None:
        if not 0 < self.safety <= 1:
            raise ValueError(f"safety must be in (0, 1], got {self.safety}")
        if not 0 <= self.min_fill <= 1:
            raise ValueError(f"min_fill must be in [0, 1], got {self.min_fill}")
        if self.min_piece_chars < 1 or self.first_max_chars < self.min_piece_chars:
            raise ValueError("need 1 <= min_piece_chars <= first_max_chars")
        if not self.min_piece_chars <= self.crowd_first_max_chars <= self.first_max_chars:
            raise ValueError("need min_piece_chars <= crowd_first_max_chars <= first_max_chars")
        if self.max_chunk_chars < self.first_max_chars:
            raise ValueError("max_chunk_chars must be at least first_max_chars")


def _sentences(text: str, limit: int) -> Iterator[tuple[int, int]]:
    """(start, end) of each sentence of `text` that starts before `limit`."""
    pos = 0
    while pos < len(text):
        visible = _VISIBLE.search(text, pos)
        if visible is None or visible.start() >= limit:
            return
        start = visible.start()
        end = sentence_end(text, start)  # an index into `text`: no copy of the rest per sentence
        yield start, max(end, start + 1)
        pos = max(end, start + 1)


def _stripped_lengths(sentence: str, offset: int, visible_end: int) -> tuple[int, int]:
    """`len(sentence[:offset].strip())` and `len(sentence[offset:].strip())` for a sentence that starts
    visible and whose visible part ends at `visible_end`, looking only at the spaces around `offset`
    (slicing and stripping per cut would make one long sentence quadratic)."""
    left = offset
    while left > 0 and sentence[left - 1].isspace():
        left -= 1
    right = offset
    while right < visible_end and sentence[right].isspace():
        right += 1
    return left, max(visible_end - right, 0)


def boundaries(text: str, params: ScheduleParams, limit: int | None = None) -> list[Cut]:
    """Every allowed cut of `text` at or before `limit` (all when None), in order, strongest kind per place.

    Sentence ends (including the end of the text) are always allowed; a cut inside a sentence only
    at whitespace and only when both fragments of that sentence keep `min_piece_chars`.
    """
    stop = len(text) if limit is None else limit
    best: dict[int, Boundary] = {}

    def add(at: int, kind: Boundary) -> None:
        if at <= stop and best.get(at, Boundary.WORD) <= kind:
            best[at] = kind

    for start, end in _sentences(text, stop):
        add(end, Boundary.SENTENCE)
        sentence = text[start:end]
        visible_end = len(sentence.rstrip())
        inner: list[tuple[int, Boundary]] = [(m.start(), Boundary.WORD) for m in _SPACE.finditer(sentence)]
        inner += [(m.start(), Boundary.PHRASE) for m in _PHRASE_START.finditer(sentence)]
        inner += [(m.end(), Boundary.CLAUSE) for m in _CLAUSE_END.finditer(sentence)]
        for offset, kind in inner:
            if start + offset > stop:
                continue
            left, right = _stripped_lengths(sentence, offset, visible_end)
            if left >= params.min_piece_chars and right >= params.min_piece_chars:
                add(start + offset, kind)
    return [Cut(at, kind) for at, kind in sorted(best.items())]


def first_cut(text: str, params: ScheduleParams, max_chars: int | None = None) -> Cut:
    """The shortest sensible first piece of `text` (which starts with a word).

    The earliest sentence or clause end of at least `min_piece_chars` when it is within
    `max_chars` (default `first_max_chars`); else the earliest phrase boundary within it; else the
    last word boundary within it; else the first place to cut at all (a very long word is never split).
    """
    cuts = boundaries(text, params, params.first_max_chars if max_chars is None else max_chars)
    window = [c for c in cuts if len(text[: c.at].strip()) >= params.min_piece_chars]
    for kinds in ((Boundary.SENTENCE, Boundary.CLAUSE), (Boundary.PHRASE,)):
        chosen = [c for c in window if c.kind in kinds]
        if chosen:
            return chosen[0]
    return cuts[-1] if cuts else boundaries(text, params)[0]


def cut_within(text: str, limit: int, params: ScheduleParams) -> Cut | None:
    """The best cut of `text` no longer than `limit` characters, or None when there is none.

    Strongest kind first (sentence, clause, phrase, word) among cuts that keep at least `min_fill`
    of the limit; when only short pieces fit, the longest of them.
    """
    cuts = boundaries(text, params, limit)
    if not cuts:
        return None
    for kind in sorted(Boundary, reverse=True):
        fitting = [c for c in cuts if c.kind is kind and c.at >= params.min_fill * limit]
        if fitting:
            return fitting[-1]
    return cuts[-1]


def budget_chars(
    buffered_audio_s: float, *, s_per_char: float, overhead_s: float, sharing: float, params: ScheduleParams
) -> int:
    """How many characters the next chunk may have so that it is ready before the buffer runs out.

    The chunk waits behind the jobs ahead of it and then computes: its wall time is predicted as
    `sharing * (overhead_s + s_per_char * chars)`, and it may spend `safety * buffered - margin`.
    Capped by `max_chunk_chars` and by `max_chunk_compute_s` of compute alone. Can be 0 or less.
    """
    if s_per_char <= 0 or sharing < 1:
        raise ValueError(f"need s_per_char > 0 and sharing >= 1, got {s_per_char}, {sharing}")
    spend_s = params.safety * buffered_audio_s - params.margin_s
    by_buffer = (spend_s / sharing - overhead_s) / s_per_char
    by_compute = (params.max_chunk_compute_s - overhead_s) / s_per_char
    return math.floor(min(by_buffer, by_compute, params.max_chunk_chars))


def plan_chunk(
    remaining: str,
    *,
    first: bool,
    buffered_audio_s: float,
    s_per_char: float,
    overhead_s: float = 0.0,
    sharing: float = 1.0,
    crowd: int = 0,
    params: ScheduleParams | None = None,
) -> Chunk | None:
    """The next chunk of `remaining`, or None when nothing speakable is left. Pure.

    The first chunk is the shortest sensible piece (`first_cut`), within `crowd_first_max_chars`
    when `crowd` other listeners wait in silence; a later chunk the largest well-cut piece the
    budget allows, or, when the buffer cannot pay for one (e.g. after an underrun), the shortest
    piece cut at a phrase or stronger boundary (`shortest_cut`).
    """
    params = params or ScheduleParams()
    text = remaining.lstrip()
    if not text.strip():
        return None
    if first:
        cut = first_cut(text, params, params.crowd_first_max_chars if crowd > 0 else None)
    else:
        limit = budget_chars(
            buffered_audio_s, s_per_char=s_per_char, overhead_s=overhead_s, sharing=sharing, params=params
        )
        if len(text.rstrip()) <= limit:
            return Chunk(text=text.strip(), rest="")
        fit = cut_within(text, limit, params) if limit >= params.min_piece_chars else None
        cut = fit or shortest_cut(text, params)
    return Chunk(text=text[: cut.at].strip(), rest=text[cut.at :])


def shortest_cut(text: str, params: ScheduleParams) -> Cut:
    """The piece to take when the buffer cannot pay for a well-cut one (a gap is coming): the
    earliest sentence, clause or phrase boundary of at least `min_piece_chars` within
    `first_max_chars`, whatever its kind, else `first_cut`. Pure.

    Not the first chunk's preference for a clause: the listener is about to hear silence, and a
    shorter piece shortens it. Measured (#15): two sessions on two cores, the second session's
    second chunk had 1.20 s of audio to pay with (a 14-character budget); the clause rule took the
    47-character sentence end (predicted 2.28 s: a 0.3-0.5 s gap), the phrase at 19 characters
    was predicted 0.95 s."""
    cuts = boundaries(text, params, params.first_max_chars)
    for cut in cuts:
        if cut.kind >= Boundary.PHRASE and len(text[: cut.at].strip()) >= params.min_piece_chars:
            return cut
    return first_cut(text, params)


@dataclass(eq=False)
class EngineSpeed:
    """Online estimate of the engine's compute seconds per character of text, on this machine.

    Each finished chunk reports its characters and its compute time (from the start of the
    engine call to its end, excluding the wait for a turn: the load is accounted for separately by
    `sharing`). The per-character cost beyond a fixed per-chunk overhead is averaged with weight
    `alpha` for the newest chunk; the first observation replaces the prior. The prior is a 2-core
    CPU running the model in fp32 (pessimistic elsewhere, which errs on the side of smaller chunks).
    """

    prior_s_per_char: float = 0.03
    overhead_s: float = 0.05
    """Per-chunk cost that does not grow with the text (G2P set-up, the model's fixed layers)."""
    alpha: float = 0.3
    floor_s_per_char: float = 1e-5
    """Lower bound of the estimate, so that a chunk cheaper than the overhead does not make it zero."""
    observations: int = 0
    _s_per_char: float | None = None

    def __post_init__(self) -> None:
        if not 0 < self.alpha <= 1:
            raise ValueError(f"alpha must be in (0, 1], got {self.alpha}")
        if self.prior_s_per_char <= 0 or self.overhead_s < 0:
            raise ValueError("need prior_s_per_char > 0 and overhead_s >= 0")

    @property
    def s_per_char(self) -> float:
        return self.prior_s_per_char if self._s_per_char is None else self._s_per_char

    def observe(self, chars: int, compute_s: float) -> None:
        """Learn from one finished chunk of `chars` characters that computed for `compute_s` seconds."""
        if chars <= 0 or compute_s < 0:
            return  # nothing to learn from an empty chunk or a clock that went backwards
        sample = max((compute_s - self.overhead_s) / chars, self.floor_s_per_char)
        current = self._s_per_char
        self._s_per_char = sample if current is None else (1 - self.alpha) * current + self.alpha * sample
        self.observations += 1

    def predict_s(self, chars: int) -> float:
        """Predicted compute seconds of a chunk of `chars` characters, with nothing ahead of it."""
        return self.overhead_s + self.s_per_char * chars


def alone() -> float:
    """The load of an engine that serves one session: nothing else waits for it."""
    return 1.0


def nobody() -> int:
    """Listeners waiting in silence for an engine that serves one session: none."""
    return 0


@dataclass(eq=False)
class ListenerBoard:
    """When the audio of each listener being served runs out; shared by every session of a server.

    Sessions take turns on the engine, so a big chunk for a listener with plenty of audio buffered
    delays the next chunk of one who has little. Each session reports, at each decision, when its
    listener's audio runs out; every session then sizes its chunk for the most urgent listener.
    A listener whose audio has already run out constrains nobody: that session is finished,
    cancelled or already silent, and its own next chunk is the shortest sensible piece anyway.
    """

    _runs_out_at: dict[object, float] = field(default_factory=dict)

    def report(self, key: object, runs_out_at: float) -> None:
        self._runs_out_at[key] = runs_out_at

    def forget(self, key: object) -> None:
        self._runs_out_at.pop(key, None)

    def tightest(self, now: float, *, exclude: object) -> float | None:
        """Seconds of audio left to the most urgent other listener, None when no other has any."""
        for key in [k for k, at in self._runs_out_at.items() if at <= now]:
            del self._runs_out_at[key]  # ran out: see the class docstring
        left = [at - now for key, at in self._runs_out_at.items() if key is not exclude]
        return min(left) if left else None


@dataclass(eq=False)
class AdaptiveChunker:
    """`ChunkPolicy` of one session: `plan_chunk` with the server's speed estimate, load and board.

    `speed` and `board` are shared by every session of a server (the speed is the machine's);
    `sharing` returns how many jobs share each engine slot once this chunk is queued (see
    `sharing_factor`); `crowd` how many listeners already wait in silence for the engine (asked
    for a first chunk); `clock` is the clock of `board` entries (any monotonic seconds).
    """

    speed: EngineSpeed
    sharing: Callable[[], float] = alone
    crowd: Callable[[], int] = nobody
    board: ListenerBoard | None = None
    clock: Callable[[], float] = time.perf_counter
    params: ScheduleParams = field(default_factory=ScheduleParams)

    def next_chunk(self, remaining: str, *, first: bool, buffered_audio_s: float) -> Chunk | None:
        buffered = buffered_audio_s
        if self.board is not None:
            now = self.clock()
            if not first:
                self.board.report(self, now + buffered_audio_s)
            tightest = self.board.tightest(now, exclude=self)
            if tightest is not None:
                buffered = min(buffered, tightest)
        sharing = max(1.0, self.sharing())
        chunk = plan_chunk(
            remaining,
            first=first,
            buffered_audio_s=buffered,
            s_per_char=self.speed.s_per_char,
            overhead_s=self.speed.overhead_s,
            sharing=sharing,
            crowd=self.crowd() if first else 0,
            params=self.params,
        )
        if chunk is None or not chunk.rest.strip():
            self.finish()
        if chunk is not None:
            logger.debug(
                "next chunk %d chars (first %s, buffered %.2f s, planned for %.2f s, sharing %.1f, %.4f s/char)",
                len(chunk.text),
                first,
                buffered_audio_s,
                buffered,
                sharing,
                self.speed.s_per_char,
            )
        return chunk

    def observe(self, text: str, compute_s: float) -> None:
        """Learn from a finished chunk: its text and the seconds the engine computed it."""
        logger.debug(
            "chunk of %d chars computed in %.2f s (predicted %.2f s)",
            len(text),
            compute_s,
            self.speed.predict_s(len(text)),
        )
        self.speed.observe(len(text), compute_s)

    def finish(self) -> None:
        """This session's request is over (done, cancelled or failed): it constrains nobody now."""
        if self.board is not None:
            self.board.forget(self)


def timed[T](fn: Callable[[], T]) -> tuple[T, float]:
    """`fn()` and the seconds it ran. Call it where the work runs (in the engine's worker thread),
    so that the wait for a turn is not counted: `sharing` accounts for the load."""
    started = time.perf_counter()
    result = fn()
    return result, time.perf_counter() - started


def sharing_factor(jobs_in_system: int, slots: int) -> float:
    """Jobs per engine slot once one more job joins `jobs_in_system` (running or queued) on `slots` slots.

    Each session has at most one job in the system at a time and turns are round-robin, so a new
    job waits for at most one job of each other busy session: with similar chunk sizes its wall
    time is about this factor times its own compute.
    """
    if slots < 1 or jobs_in_system < 0:
        raise ValueError(f"need slots >= 1 and jobs_in_system >= 0, got {slots}, {jobs_in_system}")
    return max(1.0, (jobs_in_system + 1) / slots)


@dataclass(eq=False)
class PlaybackClock:
    """A session's playback clock: when the audio it has delivered so far ends playing.

    The agent sends each sentence as its own request in one session, so a request-local schedule
    would start every sentence from zero (the shortest piece) even while the listener still has
    seconds of the previous sentence to hear. The clock counts the session's audio instead: each
    piece starts playing when it is delivered or when the audio before it ends, whichever is later
    (a player that queues what it gets and resumes after an underrun), so the audio ahead of the
    listener is `ends_at - now`. A cancel empties the listener's queue (the page drops its buffered
    audio), so it resets the clock.
    """

    ends_at: float | None = None

    def delivered(self, at: float, duration_s: float) -> None:
        """`duration_s` seconds of audio reached the listener at `at`."""
        start = at if self.ends_at is None else max(self.ends_at, at)
        self.ends_at = start + duration_s

    def ahead_s(self, now: float) -> float:
        """Seconds of delivered audio not yet played at `now`. Safe to ask from an engine thread
        (the engine sizes a window with it) while the event loop may `reset` the clock."""
        ends_at = self.ends_at  # read once: a reset between a check and a use would leave None
        return 0.0 if ends_at is None else max(0.0, ends_at - now)

    def reset(self) -> None:
        self.ends_at = None


def starts_from_silence(chunk_index: int, ahead_s: float) -> bool:
    """Whether the next chunk must be the shortest sensible piece (`first` of `ChunkPolicy`).

    Only the first chunk of a request while the listener hears nothing: a request that follows
    audio still playing is sized by that audio like any later chunk.
    """
    return chunk_index == 0 and ahead_s <= 0.0
