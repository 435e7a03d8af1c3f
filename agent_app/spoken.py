"""What the voice says: a stream of markdown deltas turned into a stream of spoken text, incrementally.

Pure: no I/O, no clock. The text shown to the caller keeps its markdown; the voice gets this. Lines
are the unit of block structure, so a line is held only until its first characters say what it is:
- a code fence (```` ``` ```` or `~~~`) opens a block that is not read out: the voice says
  `CODE_PHRASE` once, and every line up to the closing fence is dropped;
- a table row (`| a | b |`) is held to its end and read as "a, b."; the `|---|` rule is dropped;
- headings, bullets (`-`, `*`, `+`, `•`) and quotes lose their markers; a numbered item keeps its
  number ("1. Drink water."); a horizontal rule is dropped; a heading, item or row that does not
  end with a sentence mark gets a period, so that the voice pauses there as a reader's eye would;
- the rest of a line is released in pieces at gaps where `spoken_inline.safe_cut` holds, each
  rewritten by `speak_inline`, so that a paragraph's sentences reach the segmenter as they come.
Spaces are tidied last (runs collapsed, none before punctuation or at a line's edges), one character
of look-ahead at a time. Every decision depends only on the text, never on how it was cut into
deltas: any split of the stream gives the same spoken text (tested with hypothesis).

`SpokenSegmenter` chains this with `SentenceSegmenter`: markdown deltas in, spoken chunks out,
with the segmenter's `feed`/`flush`/`finish` interface.
"""

from __future__ import annotations

import re
from enum import Enum, auto
from typing import Final

from agent_app.segmenter import SegmenterConfig, SentenceSegmenter, Splitter
from agent_app.spoken_inline import safe_cut, speak_inline

CODE_PHRASE: Final = "Code omitted."
"""Said once where a code block is, instead of reading the code."""
SENTENCE_MARKS: Final = ".!?…:;"
PREFIX_HOLD: Final = 16
"""A line's first characters are held until a letter arrives, the line ends, or this many arrived."""

_FENCE: Final = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_HEADING: Final = re.compile(r"^ {0,3}#{1,6}(?:[ \t]+|$)")
_BULLET: Final = re.compile(r"^[ \t]*[-*+•‣◦▪●⁃][ \t]+")
_NUMBERED: Final = re.compile(r"^[ \t]*(\d{1,9})[.)][ \t]+")
_QUOTE: Final = re.compile(r"^[ \t]*(?:>[ \t]?)+")
_RULE: Final = re.compile(r"^[ \t]*([-*_])(?:[ \t]*\1){2,}[ \t]*$")
_TABLE_RULE: Final = re.compile(r"^[ \t]*\|?[ \t]*:?-+:?[ \t]*(?:\|[ \t]*:?-+:?[ \t]*)*\|?[ \t]*$")
_GAP: Final = re.compile(r"(?<=\S)\s")
HOLD_CAP: Final = 400
"""A piece of a line is cut at its next gap once this long, even inside an unclosed link or code span."""
_PUNCTUATION: Final = ".,!?;:…)]}”’»"
"""No space is spoken before these."""


class _Block(Enum):
    START = auto()
    """At a line's start, its kind not known yet."""
    TEXT = auto()
    """A paragraph line, a heading, a list item or a quote: read out as it arrives."""
    TABLE = auto()
    """A table row: held to its end."""
    RULE = auto()
    """Maybe a horizontal rule: held to its end."""
    FENCE = auto()
    """Inside a code block: dropped."""


class SpokenText:
    """Markdown deltas in, spoken-text deltas out (`feed`), with `flush` at a hard boundary."""

    def __init__(self) -> None:
        self._block = _Block.START
        self._line = ""
        """The current line's text not yet released (after its marker, for a text line)."""
        self._ends_line = False
        """The current text line is a heading, an item or a row: it gets a period if it has none."""
        self._fence = ""
        self._opening_fence = False
        self._code_to_announce = False
        self._last_spoken = ""
        """The last visible character released on the current line."""
        self._space = ""
        """Whitespace held by the tidier until the next visible character says whether to keep it."""
        self._line_has_text = False
        self._checked = 0
        """Gaps of the current line before this position have been looked at."""

    def feed(self, delta: str) -> str:
        """Add a markdown delta; return the spoken text it completed (often empty)."""
        out: list[str] = []
        *complete, partial = delta.split("\n")
        for line in complete:
            self._line += line
            out.append(self._end_line())
        self._line += partial
        out.append(self._advance())
        return "".join(out)

    def flush(self) -> str:
        """A hard boundary (the end of a model message): end the current line, close any block."""
        spoken = self._end_line() if self._line or self._block is not _Block.START else ""
        self._block = _Block.START  # an unclosed code block ends with its message
        return spoken + self._tidy("", end=True)

    # --- lines ---------------------------------------------------------------------------------

    def _advance(self) -> str:
        """Release what the current, unfinished line allows."""
        if self._block is _Block.START and not self._classify(final=False):
            return ""
        out = self._announce_code()
        if self._block is _Block.FENCE and self._opening_fence:
            self._line = ""  # the info string ("python") is not read
        elif self._block is _Block.TEXT:
            out += self._release_text(final=False)
        # Table rows, rules and lines of code are held to the end of their line.
        return out

    def _end_line(self) -> str:
        if self._block is _Block.FENCE and not self._opening_fence:
            closing = self._line.strip()
            if closing.startswith(self._fence) and not closing.strip(self._fence[0]):
                self._block = _Block.START
            self._line = ""
            return ""
        if self._block is _Block.START:
            self._classify(final=True)
        out = self._announce_code()
        if self._block is _Block.FENCE:
            self._opening_fence = False
            self._line = ""
            return out
        if self._block is _Block.TEXT:
            out += self._release_text(final=True)
        elif self._block is _Block.TABLE:
            out += self._table_row(self._line)
        self._line = ""
        self._checked = 0
        self._block = _Block.START
        self._last_spoken = ""
        self._ends_line = False
        return out + self._tidy("\n")

    def _announce_code(self) -> str:
        if not self._code_to_announce:
            return ""
        self._code_to_announce = False
        return self._tidy(CODE_PHRASE + "\n")

    def _classify(self, *, final: bool) -> bool:
        """Decide the current line's kind from its start; False while that needs more text."""
        line = self._line
        decided = final or len(line) >= PREFIX_HOLD or any(ch.isalpha() for ch in line)
        if not decided:
            return False
        if fence := _FENCE.match(line):
            self._block = _Block.FENCE
            self._fence = fence.group(1)
            self._opening_fence = True
            self._code_to_announce = True
            return True
        if line.lstrip().startswith("|"):
            self._block = _Block.TABLE
            return True
        if _RULE.match(line):
            self._block = _Block.RULE
            return True
        self._block = _Block.TEXT
        if heading := _HEADING.match(line):
            self._line = line[heading.end() :]
            self._ends_line = True
        elif number := _NUMBERED.match(line):
            self._line = f"{number.group(1)}. " + line[number.end() :]
            self._ends_line = True
        elif bullet := _BULLET.match(line):
            self._line = line[bullet.end() :]
            self._ends_line = True
        elif quote := _QUOTE.match(line):
            self._line = line[quote.end() :]
        return True

    def _release_text(self, *, final: bool) -> str:
        """Release the current line up to its latest cut (all of it at its end).

        Each gap is looked at once, in order, when its first space arrives: a cut where
        `safe_cut` holds, or, so that an unclosed "[" or "`" cannot hold a line (and make this
        quadratic), at the first gap `HOLD_CAP` characters into the piece. Cuts are therefore
        the same however the line arrived.
        """
        line = self._line
        pieces: list[str] = []
        start = 0
        for gap in _GAP.finditer(line, self._checked):
            before = line[start : gap.start()]
            if safe_cut(before) or len(before) >= HOLD_CAP:
                pieces.append(speak_inline(before))
                start = gap.start()
        if final:
            pieces.append(speak_inline(line[start:]))
            start = len(line)
        self._line = line[start:]
        self._checked = len(self._line)
        spoken = "".join(pieces)
        if final and self._ends_line:
            visible = spoken.rstrip()
            last = visible[-1] if visible else self._last_spoken
            if last and last not in SENTENCE_MARKS:
                spoken = visible + "."
        if spoken.strip():
            self._last_spoken = spoken.rstrip()[-1]
        return self._tidy(spoken)

    def _table_row(self, row: str) -> str:
        if _TABLE_RULE.match(row):
            return ""
        body = row.strip()
        body = body.removeprefix("|")
        if body.endswith("|") and not body.endswith("\\|"):
            body = body[:-1]
        cells = [speak_inline(cell).strip() for cell in re.split(r"(?<!\\)\|", body)]
        spoken = ", ".join(cell for cell in cells if cell)
        if spoken and spoken[-1] not in SENTENCE_MARKS:
            spoken += "."
        return self._tidy(spoken)

    # --- spaces ----------------------------------------------------------------------------------

    def _tidy(self, text: str, *, end: bool = False) -> str:
        """Collapse runs of spaces, drop them before punctuation and at a line's edges."""
        out: list[str] = []
        for ch in text:
            if ch == "\n":
                self._space = ""
                if self._line_has_text:
                    out.append("\n")
                self._line_has_text = False
            elif ch.isspace():
                self._space = " "
            else:
                if self._space and self._line_has_text and ch not in _PUNCTUATION:
                    out.append(" ")
                self._space = ""
                self._line_has_text = True
                out.append(ch)
        if end:
            self._space = ""
        return "".join(out)


def to_spoken(markdown: str) -> str:
    """A whole markdown text, as the voice should say it (batch mode)."""
    spoken = SpokenText()
    return (spoken.feed(markdown) + spoken.flush()).strip()


class SpokenSegmenter:
    """Markdown deltas in, spoken chunks out, each as soon as it is certain.

    The same interface as `SentenceSegmenter`, which it feeds with `SpokenText`'s output.
    """

    def __init__(self, config: SegmenterConfig | None = None, *, splitter: Splitter | None = None) -> None:
        self._spoken = SpokenText()
        self._segmenter = SentenceSegmenter(config, splitter=splitter)

    @property
    def chunks_released(self) -> int:
        return self._segmenter.chunks_released

    def feed(self, delta: str) -> list[str]:
        """Add a markdown delta; return the spoken chunks it completed (often none)."""
        return self._segmenter.feed(self._spoken.feed(delta))

    def flush(self) -> list[str]:
        """A hard boundary: release everything pending and go on."""
        return self._segmenter.feed(self._spoken.flush()) + self._segmenter.flush()

    def finish(self) -> list[str]:
        """End of stream: release everything pending. Closed afterwards."""
        return self._segmenter.feed(self._spoken.flush()) + self._segmenter.finish()
