"""Where to cut a request's text into the pieces synthesized one after another. Pure functions.

The session never splits text itself: it asks a `ChunkPolicy` for the next chunk, lazily, each
time the engine is free for it, passing what is left of the text, whether this is the request's
first chunk and how many seconds of audio are already produced ahead of playback. A policy that
sizes chunks from the buffered audio and the measured engine speed (`schedule.AdaptiveChunker`)
replaces `SentenceChunker` without touching the session: the session reports each chunk's compute
time to the policy (`observe`) and the end of each request (`finish`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final, Protocol


@dataclass(frozen=True, slots=True)
class Chunk:
    """One piece to synthesize, and the text still to chunk after it."""

    text: str
    rest: str


class ChunkPolicy(Protocol):
    """Decides the next chunk of a request's text."""

    def next_chunk(self, remaining: str, *, first: bool, buffered_audio_s: float) -> Chunk | None:
        """The next chunk of `remaining`, or None when nothing speakable is left.

        `first`: no audio of this request has been synthesized yet. `buffered_audio_s`: seconds of
        the request's audio produced but not yet played, assuming playback started with the
        first audio sent (see `audio_ahead_s`).
        """
        ...

    def observe(self, text: str, compute_s: float) -> None:
        """A chunk of `text` took the engine `compute_s` seconds (from its start to its end, without
        the wait for a turn): a policy that sizes chunks by the engine's speed learns from it."""
        ...

    def finish(self) -> None:
        """The request being chunked is over (done, cancelled or failed)."""
        ...


# A sentence ends at . ! ? or … (possibly repeated, possibly followed by closing quotes or
# brackets) before whitespace or the end of the text; a line break always ends one. A single period
# followed by a lowercase ASCII word ("3 p.m. today", "a. b. c.") is skipped by the pattern itself
# (the alternatives below are `[.!?…]+` split by that case), so a text of many such periods costs
# one pass of the regex engine instead of Python work per period.
_CLOSER_CLASS: Final = r"[\"'”’)\]]"
_SENTENCE_END: Final = re.compile(
    rf"(?:[!?…][.!?…]*|\.[.!?…]+|\.(?!{_CLOSER_CLASS}*\s+[a-z])){_CLOSER_CLASS}*(?=\s|$)|\n"
)
_CLAUSE_END: Final = re.compile(r"[,;:][\"'”’)\]]*(?=\s)|\s[—–-]+(?=\s)|—")
_CLOSERS: Final = "\"'”’)]"
_NEXT_VISIBLE: Final = re.compile(r"\s*(\S)")
_ABBREVIATIONS: Final = frozenset(
    {"mr", "mrs", "ms", "dr", "prof", "sr", "jr", "st", "vs", "e.g", "i.e", "approx", "no", "fig", "inc", "ltd", "co"}
)


def _word_start(text: str, end: int) -> int:
    """Start of the run of non-space characters that ends at `end` (== `end` when there is none)."""
    start = end
    while start > 0 and not text[start - 1].isspace():
        start -= 1
    return start


def _is_abbreviation(text: str, period_at: int) -> bool:
    """True when the period at `period_at` closes an abbreviation or an initial, not a sentence.

    A single capital is an initial when it starts the text or follows a capitalised word or another
    initial ("J. R. R. Tolkien", "John F. Kennedy"), not after a lowercase word ("plan B. Then").
    Looks only at the word before the period and the one before that (linear in their length, so a
    text with thousands of periods is scanned once, never from its start for each period).
    """
    start = _word_start(text, period_at)
    if start == period_at:
        return False
    word = text[start:period_at].lstrip("\"'“‘([")
    if word.lower() in _ABBREVIATIONS:
        return True
    if len(word) != 1 or not word.isupper():
        return False
    before_end = start
    while before_end > 0 and text[before_end - 1].isspace():
        before_end -= 1
    if before_end == 0:
        return True
    return text[_word_start(text, before_end)].isupper()


def _continues_lowercase(text: str, end: int) -> bool:
    """True when the next word starts in lowercase: "U.S. dollars", "approx. five", "3 p.m. today"."""
    match = _NEXT_VISIBLE.match(text, end)
    return match is not None and match.group(1).islower()


def sentence_end(text: str) -> int:
    """Index just past the first sentence of `text` (its closing punctuation); len(text) if none.

    Linear in the length of `text`.
    """
    visible = _NEXT_VISIBLE.match(text)
    first_visible = len(text) if visible is None else visible.start(1)
    for match in _SENTENCE_END.finditer(text):
        if match.group() == "\n":
            if match.start() > first_visible:
                return match.start()
            continue
        single_period = match.group().rstrip(_CLOSERS) == "."
        if single_period and (_is_abbreviation(text, match.start()) or _continues_lowercase(text, match.end())):
            continue
        return match.end()
    return len(text)


def clause_end(sentence: str, min_chars: int) -> int | None:
    """Index just past the first clause boundary that leaves at least `min_chars` on both sides."""
    for match in _CLAUSE_END.finditer(sentence):
        cut = match.end()
        if len(sentence[:cut].strip()) >= min_chars and len(sentence[cut:].strip()) >= min_chars:
            return cut
    return None


def cut_before(text: str, limit: int, min_clause_chars: int) -> int:
    """Where to cut `text` so the first piece has at most `limit` characters.

    The last clause boundary within the limit, else the last space within it, else the limit
    itself (a single "word" longer than the limit cannot be cut anywhere better).
    """
    if len(text) <= limit:
        return len(text)
    head = text[:limit]
    cuts = [m.end() for m in _CLAUSE_END.finditer(head) if len(head[: m.end()].strip()) >= min_clause_chars]
    if cuts:
        return cuts[-1]
    space = text.rfind(" ", 0, limit + 1)  # a space right after the limit still ends a word within it
    return space if space > 0 else limit


@dataclass(frozen=True, slots=True)
class SentenceChunker:
    """One sentence per chunk; the first chunk stops at a clause when the first sentence is long.

    A shorter first chunk means earlier first audio; later chunks follow whole sentences, which
    keeps the model's prosody natural. No chunk exceeds `max_chunk_chars` (the model takes at most
    510 phonemes in one pass).
    """

    first_clause_after_chars: int = 60
    """A first sentence longer than this is cut at its first clause boundary."""
    min_clause_chars: int = 15
    """Neither side of a clause cut may be shorter than this (no "Well," chunk)."""
    max_chunk_chars: int = 300

    def next_chunk(self, remaining: str, *, first: bool, buffered_audio_s: float) -> Chunk | None:
        text = remaining.lstrip()
        if not text.strip():
            return None
        end = sentence_end(text)
        if first and len(text[:end].strip()) > self.first_clause_after_chars:
            end = clause_end(text[:end], self.min_clause_chars) or end
        end = min(end, cut_before(text[:end], self.max_chunk_chars, self.min_clause_chars))
        return Chunk(text=text[:end].strip(), rest=text[end:])

    def observe(self, text: str, compute_s: float) -> None:
        """Sentence boundaries do not depend on the engine's speed."""

    def finish(self) -> None:
        """Nothing to release."""


@dataclass(frozen=True, slots=True)
class WholeText:
    """The whole text as one chunk: the reference container's behaviour, kept for comparisons."""

    def next_chunk(self, remaining: str, *, first: bool, buffered_audio_s: float) -> Chunk | None:
        text = remaining.strip()
        return Chunk(text=text, rest="") if text else None

    def observe(self, text: str, compute_s: float) -> None:
        """The whole text is one chunk, whatever the engine's speed."""

    def finish(self) -> None:
        """Nothing to release."""


def audio_ahead_s(produced_s: float, first_audio_at: float | None, now: float) -> float:
    """Seconds of audio produced but not yet played, if playback began when the first audio left.

    Before any audio left nothing is playing, so everything produced is ahead.
    """
    if first_audio_at is None:
        return produced_s
    return max(0.0, produced_s - (now - first_audio_at))
