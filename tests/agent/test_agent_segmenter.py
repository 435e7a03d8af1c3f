"""The incremental sentence segmenter: one table per rule, release timing, and split invariance."""

from __future__ import annotations

import itertools
import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent_app.segmenter import LOOKAHEAD_CAP, SegmenterConfig, SentenceSegmenter, sentence_ends
from bench.segmenter_cases import CASES

DEFAULT = SegmenterConfig()


def segment(text: str, config: SegmenterConfig = DEFAULT) -> list[str]:
    segmenter = SentenceSegmenter(config)
    return segmenter.feed(text) + segmenter.finish()


def segment_in_pieces(text: str, cuts: list[int], config: SegmenterConfig = DEFAULT) -> list[str]:
    segmenter = SentenceSegmenter(config)
    chunks: list[str] = []
    bounds = [0, *sorted(set(cuts)), len(text)]
    for start, end in itertools.pairwise(bounds):
        chunks += segmenter.feed(text[start:end])
    return chunks + segmenter.finish()


def release_points(text: str, config: SegmenterConfig = DEFAULT) -> list[tuple[str, int | None]]:
    """Each chunk with the index of the character whose arrival released it (None: at finish)."""
    segmenter = SentenceSegmenter(config)
    points: list[tuple[str, int | None]] = []
    for index, char in enumerate(text):
        points += [(chunk, index) for chunk in segmenter.feed(char)]
    return points + [(chunk, None) for chunk in segmenter.finish()]


def assert_same_text(text: str, chunks: list[str]) -> None:
    """The chunks, in order, are the text: only whitespace lies between and around them."""
    position = 0
    for chunk in chunks:
        assert chunk, "empty chunk"
        assert chunk == chunk.strip(), f"unstripped chunk {chunk!r}"
        found = text.find(chunk, position)
        assert found >= 0, f"{chunk!r} not found after position {position} of {text!r}"
        assert not text[position:found].strip(), f"text dropped before {chunk!r}: {text[position:found]!r}"
        position = found + len(chunk)
    assert not text[position:].strip(), f"text dropped at the end: {text[position:]!r}"


# --- tables: one per rule ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Mr. Smith went to Washington. He came back.", ["Mr. Smith went to Washington.", "He came back."]),
        ("Ask Dr. Jones and Mrs. Lee today. They know.", ["Ask Dr. Jones and Mrs. Lee today.", "They know."]),
        ("Bring fruit, e.g. Apples or pears. Then go.", ["Bring fruit, e.g. Apples or pears.", "Then go."]),
        (
            "Use the short form, i.e. The one on top. Done now.",
            ["Use the short form, i.e. The one on top.", "Done now."],
        ),
        ("The U.S. economy grew last year. Prices fell.", ["The U.S. economy grew last year.", "Prices fell."]),
        ("We flew back to the U.S. They rested.", ["We flew back to the U.S.", "They rested."]),
        ("We met at 9 a.m. and left at 5 p.m. on Friday.", ["We met at 9 a.m. and left at 5 p.m. on Friday."]),
        ("The shop opens at 9 a.m. Come early please.", ["The shop opens at 9 a.m.", "Come early please."]),
        ("Apples, pears, etc. are all fruit here. Yes.", ["Apples, pears, etc. are all fruit here.", "Yes."]),
        (
            "It was written by J. K. Rowling in Scotland. Read it.",
            ["It was written by J. K. Rowling in Scotland.", "Read it."],
        ),
    ],
    ids=[
        "title",
        "titles",
        "e.g.",
        "i.e.",
        "U.S. mid",
        "U.S. final",
        "a.m. p.m. mid",
        "a.m. final",
        "etc. mid",
        "initials",
    ],
)
def test_abbreviations_do_not_end_sentences(text: str, expected: list[str]) -> None:
    assert segment(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Pi is about 3.14 on most days. It never ends.", ["Pi is about 3.14 on most days.", "It never ends."]),
        ("The jacket costs $29.99 today. It was $45.", ["The jacket costs $29.99 today.", "It was $45."]),
        ("Pi is about 3.14. It never ends.", ["Pi is about 3.14.", "It never ends."]),
        ("The train leaves at 10:30 sharp. Be there.", ["The train leaves at 10:30 sharp.", "Be there."]),
        ("Install version v1.2.3 of the tool. It is stable.", ["Install version v1.2.3 of the tool.", "It is stable."]),
        ("Upgrade to 2.0.1. It fixes the bug.", ["Upgrade to 2.0.1.", "It fixes the bug."]),
    ],
    ids=["decimal", "price", "decimal at end", "time", "version", "version at end"],
)
def test_numbers_times_and_versions_stay_whole(text: str, expected: list[str]) -> None:
    assert segment(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "See https://example.com/docs/v1.2/index.html?q=a.b for details. It helps.",
            ["See https://example.com/docs/v1.2/index.html?q=a.b for details.", "It helps."],
        ),
        ("The site is example.com. Visit it today.", ["The site is example.com.", "Visit it today."]),
        (
            "Write to jo.doe@mail.example.co.uk for help. She answers fast.",
            ["Write to jo.doe@mail.example.co.uk for help.", "She answers fast."],
        ),
    ],
    ids=["url", "domain at end", "email"],
)
def test_urls_and_email_addresses_stay_whole(text: str, expected: list[str]) -> None:
    assert segment(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("I was thinking... maybe we should go home.", ["I was thinking... maybe we should go home."]),
        ("I was thinking… maybe we should go home now.", ["I was thinking… maybe we should go home now."]),
        ("It costs... 5 dollars, I think so.", ["It costs... 5 dollars, I think so."]),
        ("We waited for hours... Then the bus came.", ["We waited for hours...", "Then the bus came."]),
    ],
    ids=["ellipsis mid", "unicode ellipsis mid", "ellipsis before number", "ellipsis final"],
)
def test_ellipses(text: str, expected: list[str]) -> None:
    assert segment(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('He said "Go home now." Then he left.', ['He said "Go home now."', "Then he left."]),
        ("He paused (and it was odd.) He left.", ["He paused (and it was odd.) He left."]),
        ("She asked “Why not?” and then she left.", ["She asked “Why not?” and then she left."]),
        ("Really? Yes, really! Are you sure?!", ["Really? Yes, really!", "Are you sure?!"]),
    ],
    ids=["quote", "bracket", "quoted question mid-sentence", "question and exclamation"],
)
def test_closing_quotes_and_brackets_stay_with_their_sentence(text: str, expected: list[str]) -> None:
    assert segment(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "Here are three good tips:\n1. Drink more water.\n2. Sleep eight hours.\n3. Walk every day.",
            ["Here are three good tips:", "1. Drink more water.", "2. Sleep eight hours.", "3. Walk every day."],
        ),
        (
            "You will need these things:\n- a sturdy tent\n- a warm sleeping bag\n",
            ["You will need these things:", "- a sturdy tent", "- a warm sleeping bag"],
        ),
        ("First paragraph ends here\n\nSecond one starts", ["First paragraph ends here", "Second one starts"]),
        (
            "It happens in chapter 3. The story begins in Paris.",
            ["It happens in chapter 3.", "The story begins in Paris."],
        ),
    ],
    ids=["numbered list", "dashed list", "paragraphs", "number mid-line is not a list"],
)
def test_newlines_and_list_items(text: str, expected: list[str]) -> None:
    assert segment(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Sure! The capital of France is Paris.", ["Sure! The capital of France is Paris."]),
        ("Yes. No. Maybe. I honestly do not know.", ["Yes. No. Maybe.", "I honestly do not know."]),
        ("The capital of France is Paris. Yes.", ["The capital of France is Paris.", "Yes."]),
        ("Get these:\n- milk\n- eggs\n- flour\n- salt\n", ["Get these:\n- milk", "- eggs\n- flour", "- salt"]),
    ],
    ids=["short first", "several short", "short last stays alone", "short list items merge"],
)
def test_short_pieces_merge_with_what_follows(text: str, expected: list[str]) -> None:
    assert segment(text) == expected


CLAUSE = SegmenterConfig(first_clause_min_chars=30)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "The capital of France is Paris, a city of two million people, and it is lovely. It is old.",
            ["The capital of France is Paris,", "a city of two million people, and it is lovely.", "It is old."],
        ),
        ("Well, the capital of France is Paris. It is old.", ["Well, the capital of France is Paris.", "It is old."]),
        (
            "It had a population of 2,148,000 people in 2020; it has grown since then.",
            ["It had a population of 2,148,000 people in 2020;", "it has grown since then."],
        ),
        (
            "The meeting starts at exactly 10:30 tomorrow morning, so be early.",
            ["The meeting starts at exactly 10:30 tomorrow morning,", "so be early."],
        ),
    ],
    ids=["comma after enough text", "comma too early", "semicolon not the thousands commas", "not the time's colon"],
)
def test_first_chunk_may_end_at_a_clause(text: str, expected: list[str]) -> None:
    assert segment(text, CLAUSE) == expected


def test_clause_cuts_only_the_first_chunk() -> None:
    text = "The capital of France is Paris, a large city. Its river is the Seine, which flows to the sea."
    assert segment(text, CLAUSE) == [
        "The capital of France is Paris,",
        "a large city.",
        "Its river is the Seine, which flows to the sea.",
    ]


def test_clause_cut_is_off_by_default() -> None:
    text = "The capital of France is Paris, a city of two million people, and it is lovely."
    assert segment(text) == [text]


def test_long_run_without_a_boundary_is_cut_at_a_clause_then_a_space() -> None:
    config = SegmenterConfig(min_chars=5, max_chars=40)
    text = "one two three four, five six seven eight nine ten eleven twelve thirteen fourteen"
    chunks = segment(text, config)
    assert chunks == ["one two three four,", "five six seven eight nine ten eleven", "twelve thirteen fourteen"]
    assert all(len(chunk) <= 40 for chunk in chunks)


def test_a_word_longer_than_max_chars_is_cut_inside() -> None:
    config = SegmenterConfig(min_chars=5, max_chars=20)
    assert segment("x" * 50, config) == ["x" * 20, "x" * 20, "x" * 10]


def test_a_length_cut_is_released_even_when_short() -> None:
    # The only space is too early to cut at; the cut at the limit leaves "ab" + spaces + 6 x's.
    config = SegmenterConfig(min_chars=3, max_chars=8)
    assert segment("ab      xxxxxxxxxx", config) == ["ab", "xxxxxxxx", "xx"]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("He served in the U.S. Army for years. He left.", ["He served in the U.S. Army for years.", "He left."]),
        ("It opened on Jan. 5 in Rome. We went.", ["It opened on Jan. 5 in Rome.", "We went."]),
        ("The data in Fig. 3 look odd. Check them.", ["The data in Fig. 3 look odd.", "Check them."]),
        ("Room No. 5 is free today. Book it.", ["Room No. 5 is free today.", "Book it."]),
        ("Jones et al. (2021) disagree. They are wrong.", ["Jones et al. (2021) disagree.", "They are wrong."]),
        ("Turn to p. 55 for the map. It helps.", ["Turn to p. 55 for the map.", "It helps."]),
        ("We saw Mt. Rainier at dawn. It was pink.", ["We saw Mt. Rainier at dawn.", "It was pink."]),
        ("Ask Prof. Ng or Gen. Lee now. They know.", ["Ask Prof. Ng or Gen. Lee now.", "They know."]),
    ],
    ids=["U.S. Army", "Jan. 5", "Fig. 3", "No. 5", "et al. (2020)", "p. 55", "Mt. name", "titles"],
)
def test_no_false_split_at_an_abbreviation_before_a_number_or_a_name(text: str, expected: list[str]) -> None:
    assert segment(text) == expected
    assert segment_in_pieces(text, list(range(len(text)))) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "It was long . . . and then it ended . . . at last. We slept.",
            ["It was long . . . and then it ended . . . at last.", "We slept."],
        ),
        ("**The first point matters.** The second less so.", ["**The first point matters.**", "The second less so."]),
        ("_This is the key idea._ Remember it well.", ["_This is the key idea._", "Remember it well."]),
        ("Use `pip install x`. Then run it again.", ["Use `pip install x`.", "Then run it again."]),
    ],
    ids=["spaced ellipses", "bold sentence", "italic sentence", "code span"],
)
def test_spaced_ellipses_and_markdown_closers(text: str, expected: list[str]) -> None:
    assert segment(text) == expected


@pytest.mark.parametrize(("text", "expected"), CASES, ids=[text[:30] for text, _ in CASES])
def test_cases_of_the_golden_rules_kinds(text: str, expected: list[str]) -> None:
    """This project's cases of the kinds pySBD's golden rules test (bench/segmenter_cases.py)."""
    sentences = SegmenterConfig(min_chars=1, max_chars=1000)
    assert segment(text, sentences) == expected
    assert segment_in_pieces(text, list(range(len(text))), sentences) == expected


def test_the_splitter_is_asked_about_a_window_ending_one_word_after_the_candidate() -> None:
    asked: list[str] = []

    def splitter(text: str) -> list[str]:
        asked.append(text)
        return [text]  # never a boundary

    segmenter = SentenceSegmenter(splitter=splitter)
    assert segmenter.feed("Nothing ends here, or. Here") == []
    assert asked == []  # "Here" may go on
    assert segmenter.feed(" it is") == []
    # Asked once, about the text up to the word after the "." and the space after that word.
    assert asked == ["Nothing ends here, or. Here "]
    assert segmenter.finish() == ["Nothing ends here, or. Here it is"]
    assert asked == ["Nothing ends here, or. Here "]  # no sentence mark at the end: nothing to ask


def test_a_word_longer_than_the_lookahead_cap_does_not_hold_the_decision() -> None:
    asked: list[str] = []

    def splitter(text: str) -> list[str]:
        asked.append(text)
        return re.split(r"(?<=\.) ", text)

    segmenter = SentenceSegmenter(splitter=splitter)
    long_word = "x" * (LOOKAHEAD_CAP + 10)
    assert segmenter.feed("This is the first one. " + long_word[: LOOKAHEAD_CAP - 1]) == []
    assert segmenter.feed("x") == ["This is the first one."]
    assert asked == ["This is the first one. " + "x" * LOOKAHEAD_CAP]


def test_a_splitter_that_changes_the_text_gives_no_boundary_past_the_change() -> None:
    segmenter = SentenceSegmenter(splitter=lambda text: [part.upper() for part in text.split(". ")])
    assert segmenter.feed("One thing ends here. Another one begins. ") == []
    assert segmenter.finish() == ["One thing ends here. Another one begins."]


@pytest.mark.parametrize(
    ("text", "sentences", "ends"),
    [
        ("A b. C d.", ["A b. ", "C d."], [4, 9]),
        ("  A b.   C d.  ", ["A b.", "C d."], [6, 13]),
        ("A b. C d.", ["A b.", "X d."], [4]),
        ("A b. C d.", ["C d.", "A b."], []),
        ("A b. C d.", ["", "A b.", "  "], [4]),
    ],
    ids=["joined", "stripped", "altered", "out of order", "blank"],
)
def test_sentence_ends(text: str, sentences: list[str], ends: list[int]) -> None:
    assert sentence_ends(text, sentences) == ends


# --- timing: released as soon as certain, not a sentence later -----------------------------------


def test_a_sentence_is_released_by_the_end_of_the_word_after_it() -> None:
    # The splitter decides with the next word in view ("U.S. How" ends, "U.S. Army" does not).
    text = "It costs $29.99 today. Then we left."
    assert release_points(text) == [("It costs $29.99 today.", text.index(" we")), ("Then we left.", None)]


def test_a_list_marker_needs_the_word_after_it_too() -> None:
    text = "1. Buy the milk 2. Bake the bread"
    assert release_points(text, SegmenterConfig(min_chars=1)) == [
        ("1. Buy the milk", text.index(" the bread")),
        ("2. Bake the bread", None),
    ]


def test_a_newline_releases_its_line_at_once() -> None:
    text = "Here are three good tips:\n1. Drink more water.\n"
    assert release_points(text) == [
        ("Here are three good tips:", text.index("\n")),
        ("1. Drink more water.", len(text) - 1),
    ]


def test_a_clause_is_released_by_the_space_after_its_mark() -> None:
    text = "The capital of France is Paris, a lovely city."
    assert release_points(text, CLAUSE) == [
        ("The capital of France is Paris,", text.index(",") + 1),
        ("a lovely city.", None),
    ]


def test_nothing_is_released_while_the_boundary_is_uncertain() -> None:
    segmenter = SentenceSegmenter()
    assert segmenter.feed("We flew back to the U.S.") == []
    assert segmenter.feed(" ") == []
    assert segmenter.feed("economy") == []  # lowercase: not a boundary
    assert segmenter.feed(" is big. ") == []
    assert segmenter.feed("We") == []  # "We" may be the start of "Wether"
    assert segmenter.feed(" ") == ["We flew back to the U.S. economy is big."]


def test_flush_releases_the_pending_text_and_goes_on() -> None:
    segmenter = SentenceSegmenter(CLAUSE)
    assert segmenter.feed("Let me check the time for you") == []
    assert segmenter.flush() == ["Let me check the time for you"]
    assert segmenter.feed(" It is half past ten, and the sun is up.") == []
    # The first chunk was already released: no clause cut for this one.
    assert segmenter.finish() == ["It is half past ten, and the sun is up."]
    assert segmenter.chunks_released == 2


def test_feed_after_finish_is_an_error() -> None:
    segmenter = SentenceSegmenter()
    segmenter.finish()
    with pytest.raises(RuntimeError, match="after finish"):
        segmenter.feed("more")


def test_whitespace_only_gives_no_chunk() -> None:
    assert segment(" \n\n  \t") == []


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"min_chars": 0}, "min_chars must be at least 1"),
        ({"min_chars": 12, "max_chars": 20}, "max_chars must be at least twice min_chars"),
        ({"min_chars": 12, "first_clause_min_chars": 5}, "first_clause_min_chars must be between"),
        ({"max_chars": 100, "first_clause_min_chars": 100}, "first_clause_min_chars must be between"),
    ],
)
def test_config_is_checked(kwargs: dict[str, int], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        SegmenterConfig(**kwargs)


# --- invariants --------------------------------------------------------------------------------

FRAGMENTS = [
    "Hello", "world", "the", "it", "I", "A", "Then", "ok", " ", " ", " ", "  ", "\n", "\n\n", "\t",
    ".", ".", "...", "…", "!", "?", "?!", ",", ":", ";", " — ", '"', "'", ")", "(", "”", "“", "»",
    "Mr.", "Dr.", "e.g.", "i.e.", "U.S.", "a.m.", "p.m.", "etc.", "J.", "3.14", "$29.99", "10:30",
    "v1.2.3", "2,148,000", "https://example.com/a.b?x=1", "jo.doe@example.com", "1. ", "- ", "12",
]  # fmt: skip

texts = st.one_of(
    st.lists(st.sampled_from(FRAGMENTS), max_size=40).map("".join),
    st.text(alphabet="aZ .!?…,;:\n\"')(1-", max_size=80),
    st.text(alphabet="ab x\n.", max_size=60),
)
configs = st.sampled_from(
    [
        DEFAULT,
        CLAUSE,
        SegmenterConfig(min_chars=1, max_chars=16, first_clause_min_chars=4),
        SegmenterConfig(min_chars=3, max_chars=8),
    ]
)


@st.composite
def text_and_cuts(draw: st.DrawFn) -> tuple[str, list[int]]:
    text = draw(texts)
    cuts = draw(st.lists(st.integers(min_value=0, max_value=len(text)), max_size=len(text)))
    return text, cuts


@given(case=text_and_cuts(), config=configs)
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_chunks_do_not_depend_on_how_the_text_was_cut(case: tuple[str, list[int]], config: SegmenterConfig) -> None:
    text, cuts = case
    assert segment_in_pieces(text, cuts, config) == segment(text, config)


@given(case=text_and_cuts(), config=configs)
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_chunks_are_the_text_modulo_whitespace_at_the_cuts(
    case: tuple[str, list[int]], config: SegmenterConfig
) -> None:
    text, cuts = case
    chunks = segment_in_pieces(text, cuts, config)
    assert_same_text(text, chunks)
    assert all(len(chunk) <= config.max_chars for chunk in chunks)


@given(text=texts)
@settings(max_examples=200, deadline=None)
def test_one_character_at_a_time_equals_all_at_once(text: str) -> None:
    assert segment_in_pieces(text, list(range(len(text)))) == segment(text)
