"""Incremental sentence segmentation for speech: model text deltas in, speakable chunks out.

Pure: no I/O, no clock. A chunk is released as soon as its end is certain, which at most needs the
first visible character after the boundary ("costs $5. Then" is certain at the "T"; "3.14" never
ends at the "."). Every decision depends only on the text itself, never on how it was cut into
deltas: feeding the whole answer at once or one character at a time gives the same chunks.

Rules, in the order they are checked at each position of the pending chunk:
- a chunk longer than `max_chars` is cut at its last clause mark, else its last space;
- a terminal cluster (`.`, `!`, `?`, `…`, `...`) followed by optional closing quotes/brackets and
  whitespace ends a sentence, unless the next visible character says otherwise (a lowercase word,
  or a word after an abbreviation, an initial or a list number; see `_period_ends_sentence`);
- a newline ends a line (list items, paragraphs);
- optionally, the answer's first chunk is cut at a clause mark once it is long enough, so that
  audio can start before the first sentence is complete.
Pieces shorter than `min_chars` ("Sure!") are merged with what follows instead of spoken alone.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

TERMINALS: Final = ".!?…"
CLOSERS: Final = "\"')]}”’»"
"""Closing quotes and brackets: they belong to the sentence they close."""
OPENERS: Final = "\"'([{“‘«"
CLAUSE_MARKS: Final = ",;:—–"

TITLES: Final = frozenset(
    {"mr", "mrs", "ms", "mx", "dr", "prof", "rev", "hon", "gen", "col", "capt", "lt", "sgt", "sen", "rep", "gov", "st"}
)
"""Abbreviations that precede a name: never the end of a sentence."""
JOINERS: Final = frozenset({"e.g", "i.e", "cf", "vs", "viz", "approx", "incl", "esp"})
"""Abbreviations that introduce what follows: never the end of a sentence."""
MAYBE_FINAL: Final = frozenset({"etc", "inc", "ltd", "co", "corp", "jr", "sr", "a.m", "p.m"})
"""Abbreviations that may end a sentence: they do only when a capitalised word follows."""

_DOTTED_INITIALISM = re.compile(r"^(?:[A-Za-z]\.)+[A-Za-z]$")  # U.S, U.K, Ph.D (the last dot is the candidate)
_LIST_NUMBER = re.compile(r"^\d{1,3}$")


@dataclass(frozen=True, slots=True)
class SegmenterConfig:
    """Chunk size policy. Lengths count characters of the stripped chunk."""

    min_chars: int = 12
    """Pieces shorter than this are merged with the next one (the last piece of a stream excepted)."""
    max_chars: int = 400
    """A chunk without a sentence end is cut before it grows past this."""
    first_clause_min_chars: int | None = None
    """When set, the first chunk of the stream may end at a clause mark once it has this many characters."""

    def __post_init__(self) -> None:
        if self.min_chars < 1:
            raise ValueError(f"min_chars must be at least 1, got {self.min_chars}")
        if self.max_chars < 2 * self.min_chars:
            raise ValueError(f"max_chars must be at least twice min_chars ({self.min_chars}), got {self.max_chars}")
        clause = self.first_clause_min_chars
        if clause is not None and not self.min_chars <= clause < self.max_chars:
            raise ValueError(
                f"first_clause_min_chars must be between min_chars ({self.min_chars}) and max_chars "
                f"({self.max_chars}), got {clause}"
            )


@dataclass(frozen=True, slots=True)
class _Cut:
    end: int
    """The chunk ends before this position (trailing whitespace is stripped on release)."""
    forced: bool = False
    """A cut for length: released even when short, so that scanning always moves on."""


@dataclass(frozen=True, slots=True)
class _Skip:
    resume: int
    """Not a boundary; scanning goes on from this position."""


class _NeedMore:
    """The decision needs text that has not arrived yet."""


_NEED_MORE: Final = _NeedMore()
_Decision = _Cut | _Skip | _NeedMore


class SentenceSegmenter:
    """Turns a stream of text deltas into chunks worth synthesizing, each as soon as it is certain.

    `feed` returns the chunks completed by a delta; `flush` releases everything pending at a hard
    boundary (the end of a model message) and keeps going; `finish` does the same and closes.
    Chunks are stripped, never empty, and concatenated (with the whitespace at the cuts) they are
    exactly the input.
    """

    def __init__(self, config: SegmenterConfig | None = None) -> None:
        self._config = config or SegmenterConfig()
        self._text = ""
        self._chunk_start = 0
        self._scan = 0
        self._released = 0
        self._closed = False

    @property
    def chunks_released(self) -> int:
        return self._released

    def feed(self, delta: str) -> list[str]:
        """Add a delta; return the chunks it completed (often none)."""
        if self._closed:
            raise RuntimeError("feed() after finish()")
        self._text += delta
        return self._advance(final=False)

    def flush(self) -> list[str]:
        """A hard boundary: release everything pending, as at the end of the stream, and go on."""
        if self._closed:
            raise RuntimeError("flush() after finish()")
        chunks = self._advance(final=True)
        rest = self._text[self._chunk_start :].strip()
        if rest:
            chunks.append(self._release(rest))
        self._chunk_start = self._scan = len(self._text)
        return chunks

    def finish(self) -> list[str]:
        """End of stream: release everything pending. The segmenter is closed afterwards."""
        chunks = self.flush()
        self._closed = True
        return chunks

    # --- scanning ---------------------------------------------------------------------------

    def _release(self, chunk: str) -> str:
        self._released += 1
        return chunk

    def _advance(self, *, final: bool) -> list[str]:
        chunks: list[str] = []
        text = self._text
        i = self._scan
        while i < len(text):
            decision = self._decide(i, final=final)
            if isinstance(decision, _NeedMore):
                break
            if isinstance(decision, _Skip):
                i = decision.resume
                continue
            piece = text[self._chunk_start : decision.end].strip()
            i = decision.end
            if decision.forced or len(piece) >= self._config.min_chars:
                chunks.append(self._release(piece))
                self._chunk_start = decision.end
            # A shorter piece stays pending and is merged with whatever ends next.
        self._scan = i
        if final:
            while (forced := self._forced_cut(len(text))) is not None:
                chunks.append(self._release(text[self._chunk_start : forced.end].strip()))
                self._chunk_start = forced.end
        return chunks

    def _decide(self, i: int, *, final: bool) -> _Decision:
        """Whether the pending chunk ends at (or just after) position i."""
        forced = self._forced_cut(i)
        if forced is not None:
            return forced
        decision = self._boundary(i, final=final)
        if isinstance(decision, _Cut):
            # A sentence mark and its closers may carry a chunk past the limit.
            return self._forced_cut(decision.end) or decision
        return decision

    def _boundary(self, i: int, *, final: bool) -> _Decision:
        text = self._text
        ch = text[i]
        if ch in TERMINALS:
            return self._terminal(i, final=final)
        if ch == "\n":
            return _Cut(i + 1) if text[self._chunk_start : i].strip() else _Skip(i + 1)
        if ch in CLAUSE_MARKS and self._clause_cut_allowed(i):
            if i + 1 == len(text):
                return _Cut(i + 1) if final else _NEED_MORE
            # "10:30" and "1,000" have no space after the mark: not a clause boundary.
            return _Cut(i + 1) if text[i + 1].isspace() else _Skip(i + 1)
        return _Skip(i + 1)

    def _clause_cut_allowed(self, i: int) -> bool:
        minimum = self._config.first_clause_min_chars
        if minimum is None or self._released > 0:
            return False
        return len(self._text[self._chunk_start : i + 1].strip()) >= minimum

    def _forced_cut(self, end: int) -> _Cut | None:
        """Where to cut a chunk that would reach `end` with more than `max_chars` and no boundary.

        At its last clause mark, else its last space, within the limit, leaving at least `min_chars`
        before it; else at the limit itself (inside a very long word).
        """
        text = self._text
        limit = self._config.max_chars
        if end - self._chunk_start <= limit:
            return None
        content = text[self._chunk_start : end].rstrip()
        start = len(content) - len(content.lstrip()) + self._chunk_start
        if len(content) + self._chunk_start - start <= limit:
            return None
        stop = start + limit  # the piece text[start:j] must fit: j <= stop
        earliest = start + self._config.min_chars
        for marks in (CLAUSE_MARKS, None):
            for j in range(stop, earliest - 1, -1):
                if text[j].isspace() and not text[j - 1].isspace() and (marks is None or text[j - 1] in marks):
                    return _Cut(j, forced=True)
        return _Cut(stop, forced=True)

    def _terminal(self, i: int, *, final: bool) -> _Decision:
        text = self._text
        n = len(text)
        end = i
        while end < n and text[end] in TERMINALS:
            end += 1
        cluster = text[i:end]
        while end < n and text[end] in CLOSERS:
            end += 1
        if end == n:
            return _Cut(end) if final else _NEED_MORE
        if not text[end].isspace():
            return _Skip(end)  # 3.14, v1.2.3, example.com, a@b.co, "wait...what"
        nxt = end
        while nxt < n and text[nxt].isspace():
            nxt += 1
        if "\n" in text[end:nxt]:
            return _Cut(end)  # a line break after a sentence mark is certain, whatever follows
        if nxt == n:
            return _Cut(end) if final else _NEED_MORE
        following = text[nxt]
        if "?" in cluster or "!" in cluster:
            ends = not following.islower()
        elif "…" in cluster or ".." in cluster:
            ends = following.isupper()  # an ellipsis before a lowercase word or a number is a pause
        else:
            ends = self._period_ends_sentence(i, following)
        return _Cut(end) if ends else _Skip(end)

    def _period_ends_sentence(self, i: int, following: str) -> bool:
        """Whether a single "." at position i, followed by whitespace and `following`, ends a sentence."""
        text = self._text
        word_start = i
        while word_start > self._chunk_start and not text[word_start - 1].isspace():
            word_start -= 1
        raw_word = text[word_start:i]
        word = raw_word.strip(OPENERS + CLOSERS)
        lower = word.lower()
        if lower in TITLES or lower in JOINERS:
            return False
        if len(word) == 1 and word.isupper():
            return False  # an initial: "J. K. Rowling"
        if _LIST_NUMBER.match(word) and self._at_line_start(word_start):
            return False  # "1. First item"
        if lower in MAYBE_FINAL or _DOTTED_INITIALISM.match(word):
            return following.isupper()  # "the U.S. economy" vs "in the U.S. Then"
        return not following.islower()

    def _at_line_start(self, pos: int) -> bool:
        line_start = self._text.rfind("\n", 0, pos) + 1
        return not self._text[line_start:pos].strip()
