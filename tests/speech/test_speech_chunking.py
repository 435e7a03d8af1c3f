"""Text chunking: sentence boundaries, the first chunk's clause cut, the length cap. Pure, no server."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bench.speech import BENCH_TEXT
from kokoro_server import chunking
from kokoro_server.chunking import (
    SentenceChunker,
    WholeText,
    audio_ahead_s,
    clause_end,
    cut_before,
    sentence_end,
)


def chunks(text: str, policy: SentenceChunker | WholeText | None = None) -> list[str]:
    policy = policy or SentenceChunker()
    out, rest, first = [], text, True
    while (chunk := policy.next_chunk(rest, first=first, buffered_audio_s=0.0)) is not None:
        out.append(chunk.text)
        rest, first = chunk.rest, False
    return out


def test_the_benchmark_text_has_267_characters_and_four_sentence_chunks() -> None:
    assert len(BENCH_TEXT) == 267
    assert chunks(BENCH_TEXT) == [
        "Streaming speech lets a voice agent start talking before its answer is ready.",
        "Each sentence is synthesized as soon as the language model finishes writing it.",
        "The listener hears the first words in a fraction of a second instead of waiting.",
        "This is why latency matters.",
    ]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Hi there! How are you? Fine.", ["Hi there!", "How are you?", "Fine."]),
        ('She said "stop." Then left.', ['She said "stop."', "Then left."]),
        ("Wait... what? (Really.) Yes", ["Wait...", "what?", "(Really.)", "Yes"]),
        (
            "Dr. Smith met Mrs. Jones at St. Paul. They talked.",
            ["Dr. Smith met Mrs. Jones at St. Paul.", "They talked."],
        ),
        ("J. R. R. Tolkien wrote it. The end.", ["J. R. R. Tolkien wrote it.", "The end."]),
        ("John F. Kennedy spoke. Then left.", ["John F. Kennedy spoke.", "Then left."]),
        ("We take plan B. Then we go.", ["We take plan B.", "Then we go."]),
        ("It costs 5 U.S. dollars at 3 p.m. today. Cheap.", ["It costs 5 U.S. dollars at 3 p.m. today.", "Cheap."]),
        ("Pi is 3.14159 roughly. That is all.", ["Pi is 3.14159 roughly.", "That is all."]),
        ("Use a tool, e.g. a hammer. Done.", ["Use a tool, e.g. a hammer.", "Done."]),
        ("First line\nSecond line\n\n\nThird", ["First line", "Second line", "Third"]),
        ("No punctuation at all", ["No punctuation at all"]),
        ("  Leading and trailing space.   ", ["Leading and trailing space."]),
    ],
)
def test_sentence_chunks(text: str, expected: list[str]) -> None:
    assert chunks(text) == expected


def test_a_long_first_sentence_is_cut_at_its_first_clause_and_later_ones_are_not() -> None:
    text = "Well, when the weather is fine and warm, we walk to the river and sit down. Later, we go home."
    assert chunks(text) == [
        "Well, when the weather is fine and warm,",  # "Well," alone would be shorter than 15 characters
        "we walk to the river and sit down.",
        "Later, we go home.",
    ]


def test_a_short_first_sentence_is_not_cut() -> None:
    assert chunks("Yes, I can do that for you. Right away.") == ["Yes, I can do that for you.", "Right away."]


def test_no_clause_cut_leaves_a_tiny_rest() -> None:
    sentence = "This first sentence is long enough to cut but has one comma near its end, ok."
    assert clause_end(sentence, 15) is None
    assert chunks(sentence) == [sentence]


def test_a_sentence_over_the_cap_is_cut_at_a_clause_then_at_a_space() -> None:
    policy = SentenceChunker(max_chunk_chars=40)
    assert chunks("alpha beta gamma delta, epsilon zeta eta theta iota kappa lambda mu nu.", policy) == [
        "alpha beta gamma delta,",
        "epsilon zeta eta theta iota kappa lambda",
        "mu nu.",
    ]
    assert chunks("x" * 95, policy) == ["x" * 40, "x" * 40, "x" * 15]


def test_whole_text_is_one_chunk() -> None:
    assert chunks(BENCH_TEXT, WholeText()) == [BENCH_TEXT]
    assert WholeText().next_chunk("   ", first=True, buffered_audio_s=0.0) is None


def test_nothing_speakable_left_is_none() -> None:
    assert SentenceChunker().next_chunk(" \n\t ", first=False, buffered_audio_s=3.0) is None


def test_sentence_end_and_cut_before_positions() -> None:
    assert sentence_end("One. Two.") == 4
    assert sentence_end("No end") == 6
    assert cut_before("short", 10, 3) == 5
    assert cut_before("aaa bbb ccc", 9, 3) == 7


@pytest.mark.parametrize(
    ("produced_s", "first_audio_at", "now", "expected"),
    [(2.0, None, 100.0, 2.0), (5.0, 100.0, 101.5, 3.5), (1.0, 100.0, 103.0, 0.0)],
)
def test_audio_ahead_of_playback(produced_s: float, first_audio_at: float | None, now: float, expected: float) -> None:
    assert audio_ahead_s(produced_s, first_audio_at, now) == expected


words = st.text(alphabet=st.sampled_from("abcdefghij"), min_size=1, max_size=12)
separators = st.sampled_from([" ", " ", " ", ", ", ". ", "! ", "? ", "; ", "\n", " - ", "... "])


@given(st.lists(st.tuples(words, separators), min_size=1, max_size=80))
def test_chunks_cover_the_text_in_order_without_cutting_words(parts: list[tuple[str, str]]) -> None:
    text = "".join(word + sep for word, sep in parts)
    policy = SentenceChunker(max_chunk_chars=60)
    result = chunks(text, policy)

    assert all(0 < len(c) <= 60 for c in result)
    assert " ".join(result).split() == text.split()  # every word, once, in order, none cut in two


# --- linear sentence detection (issue 12: 5,000 characters of "a. a. a." took 2.9 s) ----------

_REF_SENTENCE_END = re.compile(r"[.!?…]+[\"'”’)\]]*(?=\s|$)|\n")


def reference_sentence_end(text: str) -> int:
    """The rule `sentence_end` implements, written the obvious (quadratic) way, as an oracle."""
    for match in _REF_SENTENCE_END.finditer(text):
        if match.group() == "\n":
            if text[: match.start()].strip():
                return match.start()
            continue
        if match.group().rstrip("\"'”’)]") == ".":
            before = re.search(r"(\S+)\.$", text[: match.start() + 1])
            if before is not None:
                word = before.group(1).lstrip("\"'“‘([")
                if word.lower() in chunking._ABBREVIATIONS:
                    continue
                if len(word) == 1 and word.isupper():
                    previous = text[: before.start()].split()
                    if not previous or previous[-1][0].isupper():
                        continue
            rest = text[match.end() :].lstrip()
            if rest and rest[0].islower():
                continue
        return match.end()
    return len(text)


hostile_pieces = st.sampled_from(
    ["a", "A", "B", "é", "É", "mr", "Dr", "e.g", "U.S", "x", ".", ". ", "..", "!", "?", "…", '"', "”", ")", "(", "“",
     " ", "  ", "\n", "\t", "\u00a0", "3", "p.m", ",", "ß"]
)  # fmt: skip


@given(st.lists(hostile_pieces, max_size=60).map("".join))
def test_sentence_end_agrees_with_the_reference_rule(text: str) -> None:
    assert sentence_end(text) == reference_sentence_end(text)


@pytest.mark.parametrize(
    "unit", ["a. ", "A. ", "Mr. ", "e.g. ", ". ", "x.\u00a0", "\n", " ", "é. ", 'a." ', "a.) b ", "Z.\n"]
)
def test_pathological_texts_get_the_reference_answer(unit: str) -> None:
    text = (unit * (2000 // len(unit)))[:2000] + " The End. Next"
    assert sentence_end(text) == reference_sentence_end(text)


def test_sentence_end_scans_each_character_a_bounded_number_of_times(monkeypatch: pytest.MonkeyPatch) -> None:
    # The Python-level work is the backward scan for the word before a period; counted, it stays
    # within twice the text's length, whereas rescanning from the start is quadratic.
    scanned = 0
    word_start = chunking._word_start

    def counting(text: str, end: int) -> int:
        nonlocal scanned
        start = word_start(text, end)
        scanned += end - start
        return start

    monkeypatch.setattr(chunking, "_word_start", counting)
    for unit in ["A. ", "Mr. ", "e.g. ", "J.\t"]:
        scanned = 0
        text = unit * 5000
        assert sentence_end(text) == len(text)  # no period here ends a sentence
        assert 0 < scanned <= 2 * len(text), (unit, scanned)


def test_a_text_of_lowercase_initials_is_one_sentence_and_its_chunks_cover_it() -> None:
    text = "a. " * 1667
    assert sentence_end(text) == len(text) - 1  # only the last period, followed by no word, ends it
    assert " ".join(chunks(text)).split() == text.split()
