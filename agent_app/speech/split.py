"""Cut a long text into requests the speech container accepts (its `max_text_chars`, 5,000 by default).

Pure. Used by `batch` mode, which sends the finished answer at once: an answer over the limit is
sent as several requests on one session, which the container speaks back to back. Cuts fall
where a listener would not notice them, in order of preference: after a sentence end (`.`, `!`,
`?`, `…`, possibly followed by closing quotes or brackets) and its space, else at a line break,
else after a clause mark (`,`, `;`, `:`), else at any space; a text with no space in the allowed
range is cut hard at the limit. Joining the pieces gives the text back exactly.
"""

from __future__ import annotations

import re
from typing import Final

DEFAULT_MAX_REQUEST_CHARS: Final = 5_000
"""The speech container's default `max_text_chars` (kokoro_server.settings)."""

_PREFERRED_CUTS: Final = (
    re.compile(r"[.!?…][\"'”’)\]]*\s+"),
    re.compile(r"\n+"),
    re.compile(r"[,;:]\s+"),
    re.compile(r"\s+"),
)
"""Each pattern matches the text a cut goes after; earlier patterns are better places to cut."""


def _cut_at(window: str) -> int:
    """Where to cut a piece that may take all of `window` (at least 1, at most len(window))."""
    for pattern in _PREFERRED_CUTS:
        ends = [match.end() for match in pattern.finditer(window)]
        if ends:
            return ends[-1]
    return len(window)


def split_text(text: str, max_chars: int) -> list[str]:
    """Pieces of `text`, each at most `max_chars` long, cut at the best place in each window."""
    if max_chars < 1:
        raise ValueError(f"max_chars must be at least 1, got {max_chars}")
    pieces: list[str] = []
    rest = text
    while len(rest) > max_chars:
        # The text after the window decides too: a sentence end right at the limit is a good cut.
        cut = min(_cut_at(rest[: max_chars + 1]), max_chars)
        pieces.append(rest[:cut])
        rest = rest[cut:]
    if rest:
        pieces.append(rest)
    return pieces
