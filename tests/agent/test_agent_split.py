"""Cutting a long answer into requests the speech container accepts: where the cuts fall."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agent_app.speech.split import split_text


@pytest.mark.parametrize(
    ("text", "max_chars", "pieces"),
    [
        ("Short.", 100, ["Short."]),
        ("", 10, []),
        ("One two. Three four. Five six.", 21, ["One two. Three four. ", "Five six."]),
        ('He said "yes." Then he left.', 18, ['He said "yes." ', "Then he left."]),
        ("A list\nwith lines and more words", 20, ["A list\n", "with lines and more ", "words"]),
        ("First part, second part, third", 20, ["First part, ", "second part, third"]),
        ("no sentence end here at all", 12, ["no sentence ", "end here at ", "all"]),
        ("abcdefghijklmnopqrstuvwxyz", 10, ["abcdefghij", "klmnopqrst", "uvwxyz"]),
        # A sentence end just past the limit still counts: its space is cut off the next piece instead.
        ("Exactly ten. Next", 12, ["Exactly ten.", " Next"]),
    ],
)
def test_cuts_fall_where_a_listener_would_not_notice(text: str, max_chars: int, pieces: list[str]) -> None:
    assert split_text(text, max_chars) == pieces


def test_a_limit_below_one_is_refused() -> None:
    with pytest.raises(ValueError, match="max_chars must be at least 1, got 0"):
        split_text("x", 0)


@given(st.text(alphabet=st.sampled_from("ab .,!?\n\"')"), max_size=300), st.integers(min_value=1, max_value=40))
def test_pieces_join_back_to_the_text_and_respect_the_limit(text: str, max_chars: int) -> None:
    pieces = split_text(text, max_chars)
    assert "".join(pieces) == text
    assert all(0 < len(piece) <= max_chars for piece in pieces)
