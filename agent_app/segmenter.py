"""Incremental sentence segmentation for speech: text deltas in, speakable chunks out.

Pure: no I/O, no clock. Where a sentence ends is decided by a whole-text sentence splitter, pySBD
by default (it gets 47 of its 48 English golden rules; see `bench/segmenters.py`), asked about one
candidate boundary at a time on a window of the text that ends a fixed number of words after the
candidate. Each decision therefore depends only on the text itself, never on how it was cut into
deltas: feeding the whole answer at once or one character at a time gives the same chunks. And a
chunk is released as soon as its window is complete, which is one word after its end ("Hello
World. My " releases "Hello World." at the space after "My"), two after a list marker.

At each gap between words of the pending chunk, in this order:
- a chunk longer than `max_chars` is cut at its last clause mark, else its last space;
- a newline ends a line (list items, paragraphs, table rows);
- optionally, the answer's first chunk is cut at a clause mark once it is long enough, so that
  audio can start before the first sentence is complete;
- the splitter is asked whether a sentence ends there, but only where one can: after a terminal
  mark (`.`, `!`, `?`, `…`), possibly followed by closing quotes, brackets or markdown emphasis
  (`**A sentence.** Next`), or before something that looks like a list marker (`2.`, `b)`, `•`).
Pieces shorter than `min_chars` ("Sure!") are merged with what follows instead of spoken alone.
"""

from __future__ import annotations

import functools
import re
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final

TERMINALS: Final = ".!?…"
CLOSERS: Final = "\"')]}”’»*_~`"
"""Closing quotes, brackets and markdown emphasis: they belong to the sentence they close."""
CLAUSE_MARKS: Final = ",;:—–"
LOOKAHEAD_CAP: Final = 64
"""The window ends at most this many characters after the candidate gap (a very long word)."""
LEFT_CONTEXT: Final = 160
"""The window starts at most about this many characters before the candidate (bounds the cost)."""

_HIDDEN: Final = str.maketrans("*_~`", "    ")

Splitter = Callable[[str], Sequence[str]]
"""A whole-text sentence splitter: the sentences of a text, in order (whitespace may be stripped)."""

_LIST_MARKER = re.compile(r"^(?:\(?(?:\d{1,3}|[A-Za-z])[.)]{1,2}|[•⁃‣◦▪●]\S*)$")


def new_pysbd_splitter(cache_size: int = 1024) -> Splitter:
    """pySBD's English rules (non-destructive: `clean=False`), answers cached (`cache_size` windows).

    A window is often asked about again (a flush, tests that feed the same text twice), and one
    call costs a few milliseconds.
    """
    with warnings.catch_warnings():
        # pysbd 0.3.4 has invalid escape sequences in a few regex strings: Python warns when it
        # compiles them (a fresh install, or a read-only site-packages), harmlessly.
        warnings.simplefilter("ignore", SyntaxWarning)
        import pysbd  # type: ignore[import-untyped]  # no stubs or py.typed

    segmenter = pysbd.Segmenter(language="en", clean=False)

    @functools.lru_cache(maxsize=cache_size)
    def split(text: str) -> tuple[str, ...]:
        return tuple(segmenter.segment(text))

    return split


@functools.cache
def pysbd_splitter() -> Splitter:
    """The shared pySBD splitter, built on first use (not at import)."""
    return new_pysbd_splitter()


def sentence_ends(text: str, sentences: Sequence[str]) -> list[int]:
    """Where each sentence of `sentences` ends in `text` (after its last non-space character).

    The sentences are located in order; a splitter that altered the text stops the mapping there
    (no boundary is claimed past what could be located).
    """
    ends: list[int] = []
    position = 0
    for sentence in sentences:
        stripped = sentence.strip()
        if not stripped:
            continue
        found = text.find(stripped, position)
        if found < 0 or text[position:found].strip():
            break
        position = found + len(stripped)
        ends.append(position)
    return ends


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
    exactly the input. `splitter` decides sentence ends (default: pySBD).
    """

    def __init__(self, config: SegmenterConfig | None = None, *, splitter: Splitter | None = None) -> None:
        self._config = config or SegmenterConfig()
        self._split = splitter or pysbd_splitter()
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
        # Released text is never looked at again: drop it, so that a long answer costs linear time.
        self._text = ""
        self._chunk_start = self._scan = 0
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
            i = max(decision.end, i + 1)  # a gap's cut ends at the gap: never decide it twice
            if decision.forced or len(piece) >= self._config.min_chars:
                chunks.append(self._release(piece))
                self._chunk_start = decision.end
            # A shorter piece stays pending and is merged with whatever ends next.
        self._scan = i
        if final:
            while (forced := self._forced_cut(len(text))) is not None:
                chunks.append(self._release(text[self._chunk_start : forced.end].strip()))
                self._chunk_start = forced.end
        self._compact()
        return chunks

    def _compact(self) -> None:
        # Keep only what a later decision can look at: the pending chunk.
        if self._chunk_start > 0:
            self._text = self._text[self._chunk_start :]
            self._scan -= self._chunk_start
            self._chunk_start = 0

    def _decide(self, i: int, *, final: bool) -> _Decision:
        """Whether the pending chunk ends at (or just after) position i."""
        forced = self._forced_cut(i)
        if forced is not None:
            return forced
        decision = self._boundary(i, final=final)
        if isinstance(decision, _Cut):
            # A sentence and its closers may carry a chunk past the limit.
            return self._forced_cut(decision.end) or decision
        return decision

    def _boundary(self, i: int, *, final: bool) -> _Decision:
        text = self._text
        ch = text[i]
        if ch == "\n":
            return _Cut(i + 1) if text[self._chunk_start : i].strip() else _Skip(i + 1)
        if ch.isspace() and i > self._chunk_start and not text[i - 1].isspace():
            return self._gap(i, final=final)
        return _Skip(i + 1)

    def _gap(self, i: int, *, final: bool) -> _Decision:
        """A gap between words starts at i: is it the end of the pending chunk?"""
        text = self._text
        n = len(text)
        if text[i - 1] in CLAUSE_MARKS and self._clause_cut_allowed(i - 1):
            return _Cut(i)
        nxt = i
        while nxt < n and text[nxt].isspace():
            if text[nxt] == "\n":
                return _Skip(nxt)  # the newline itself ends the chunk
            nxt += 1
        if nxt == n:
            return _Skip(n) if final else _NEED_MORE
        mark = i
        while mark > self._chunk_start and text[mark - 1] in CLOSERS:
            mark -= 1
        after_terminal = mark > self._chunk_start and text[mark - 1] in TERMINALS
        first_word_end = _word_end(text, nxt)
        if first_word_end == n and not final and n - nxt < LOOKAHEAD_CAP:
            return _NEED_MORE  # "2" may yet become the list marker "2."
        marker = _LIST_MARKER.match(text[nxt:first_word_end]) is not None
        if not after_terminal and not marker:
            return _Skip(nxt)
        if all(_LIST_MARKER.match(token) for token in text[self._chunk_start : i].split()):
            # "1. The first item": a list marker that starts the chunk is not a sentence. The
            # splitter sees lists only whole ("1. ... 2. ..."), and a window shows it one item.
            return _Skip(nxt)
        window_end = self._window_end(nxt, words=2 if marker else 1, final=final)
        if window_end is None:
            return _NEED_MORE
        start = self._window_start(i)
        # Markdown emphasis and code marks are hidden from the splitter (it reads "idea._ Next" as
        # one sentence); spaces keep every position where it was.
        window = text[start:window_end].translate(_HIDDEN)
        ends = sentence_ends(window, self._split(window))
        if any(not text[start + end : i].strip(CLOSERS) for end in ends if start + end <= i):
            return _Cut(i)
        return _Skip(nxt)

    def _window_end(self, nxt: int, *, words: int, final: bool) -> int | None:
        """Where the splitter's window ends: after `words` words from nxt and the space after them.

        Tokens without a letter or digit (". . .", "•", "—") do not count as words: the splitter must
        see a spaced ellipsis whole. None while that text has not arrived (capped at a long word).
        """
        text = self._text
        n = len(text)
        cap = nxt + LOOKAHEAD_CAP
        end = nxt
        while words > 0:
            while end < n and text[end].isspace():
                end += 1
            start = end
            end = _word_end(text, end)
            if end >= cap:
                return cap
            if end == n:
                return n if final else None
            if any(ch.isalnum() for ch in text[start:end]):
                words -= 1
        # The space after the last word: the splitter's rules look for "U.S. How " before deciding.
        return end + 1

    def _window_start(self, i: int) -> int:
        start = self._chunk_start
        if i - start <= LEFT_CONTEXT:
            return start
        # Start at a word after the limit, so that the splitter never sees half a word.
        gap = self._text.find(" ", i - LEFT_CONTEXT, i)
        return gap + 1 if gap >= 0 else i - LEFT_CONTEXT

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


def _word_end(text: str, start: int) -> int:
    end = start
    while end < len(text) and not text[end].isspace():
        end += 1
    return end
