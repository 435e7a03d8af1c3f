"""The adaptive chunk schedule: where it cuts, how much it takes, how it learns the engine's speed. Pure."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bench.texts import FOUR_SENTENCES, LONG_ANSWER
from kokoro_server import schedule
from kokoro_server.chunking import Chunk, sentence_end
from kokoro_server.schedule import (
    AdaptiveChunker,
    Boundary,
    Cut,
    EngineSpeed,
    ScheduleParams,
    boundaries,
    budget_chars,
    cut_within,
    plan_chunk,
    sharing_factor,
)

PARAMS = ScheduleParams()
WEATHER = "Well, when the weather is fine and warm, we walk to the river and sit down. Later, we go home."


def plan(remaining: str, buffered_audio_s: float, *, first: bool = False, s_per_char: float = 0.03) -> Chunk | None:
    return plan_chunk(remaining, first=first, buffered_audio_s=buffered_audio_s, s_per_char=s_per_char)


# --- where text may be cut ------------------------------------------------------------------------


def test_boundaries_are_whitespace_cuts_ranked_by_kind_and_keep_fragments_of_15_characters() -> None:
    assert boundaries(WEATHER, PARAMS) == [
        Cut(22, Boundary.WORD),
        Cut(25, Boundary.WORD),
        Cut(30, Boundary.PHRASE),  # before "and"
        Cut(34, Boundary.WORD),
        Cut(40, Boundary.CLAUSE),  # after "warm,"
        Cut(43, Boundary.WORD),
        Cut(48, Boundary.WORD),
        Cut(51, Boundary.WORD),
        Cut(55, Boundary.WORD),
        Cut(75, Boundary.SENTENCE),
        Cut(94, Boundary.SENTENCE),
    ]
    # Not after "Well," (5 characters), not inside "sit down." (its last 15 characters), not after "Later,".


def test_boundaries_stop_at_the_limit() -> None:
    assert boundaries(WEATHER, PARAMS, limit=40) == [
        Cut(22, Boundary.WORD),
        Cut(25, Boundary.WORD),
        Cut(30, Boundary.PHRASE),
        Cut(34, Boundary.WORD),
        Cut(40, Boundary.CLAUSE),
    ]


def test_a_dash_between_spaces_ends_a_clause_but_a_hyphen_inside_a_word_does_not() -> None:
    text = "The well-known model speaks quickly — and it never stops mid-sentence at all."
    kinds = {text[: c.at].rsplit(maxsplit=1)[-1]: c.kind for c in boundaries(text, PARAMS)}
    assert kinds["—"] is Boundary.CLAUSE
    assert all("-" not in text[c.at - 1 : c.at + 1] for c in boundaries(text, PARAMS))


# --- the first chunk --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # No clause in the first sentence: the phrase before "before".
        (FOUR_SENTENCES, "Streaming speech lets a voice agent start talking"),
        # The first clause of 15+ characters ("Well," is too short), not the earlier phrase before "and".
        (WEATHER, "Well, when the weather is fine and warm,"),
        # A short sentence is not cut.
        ("Yes, I can do that for you. Right away.", "Yes, I can do that for you."),
        # Sentences shorter than 15 characters are joined until one is long enough.
        ("Hi there! How are you? Fine.", "Hi there! How are you?"),
        (LONG_ANSWER, "Sure, here is how it works."),
        # No sentence, clause or phrase boundary within 60 characters: the last word boundary within them.
        (
            "Seventy characters of plain words without any punctuation inside them here",
            "Seventy characters of plain words without any punctuation",
        ),
        # Nothing can be cut within 60 characters: the first possible cut, never inside a word.
        ("A" * 80 + " tail of the sentence.", "A" * 80),
    ],
)
def test_the_first_chunk_is_the_shortest_sensible_piece(text: str, expected: str) -> None:
    chunk = plan(text, 0.0, first=True)
    assert chunk is not None
    assert chunk.text == expected
    assert (chunk.text + chunk.rest).split() == text.split()


def test_the_first_chunk_does_not_depend_on_speed_or_buffer() -> None:
    fast = plan_chunk(WEATHER, first=True, buffered_audio_s=100.0, s_per_char=1e-4)
    slow = plan_chunk(WEATHER, first=True, buffered_audio_s=0.0, s_per_char=1.0, sharing=4.0)
    assert (
        fast
        == slow
        == Chunk("Well, when the weather is fine and warm,", " we walk to the river and sit down. Later, we go home.")
    )


@pytest.mark.parametrize(
    ("text", "crowd", "expected"),
    [
        # Alone: the phrase boundary before "before" (49 characters).
        (FOUR_SENTENCES, 0, "Streaming speech lets a voice agent start talking"),
        # Others already wait in silence: within 30 characters, here the last word boundary.
        (FOUR_SENTENCES, 1, "Streaming speech lets a voice"),
        (FOUR_SENTENCES, 3, "Streaming speech lets a voice"),
        # A clause that fits stays the cut.
        (WEATHER, 2, "Well, when the weather is fine"),
        ("Sure, here is how it works, one step after the other.", 2, "Sure, here is how it works,"),
    ],
)
def test_a_first_chunk_in_a_crowd_is_shorter(text: str, crowd: int, expected: str) -> None:
    chunk = plan_chunk(text, first=True, buffered_audio_s=0.0, s_per_char=0.03, crowd=crowd)
    assert chunk is not None
    assert chunk.text == expected
    # Later chunks are sized by the budget, never by the crowd.
    later = plan_chunk(text, first=False, buffered_audio_s=3.0, s_per_char=0.03, crowd=crowd)
    assert later == plan_chunk(text, first=False, buffered_audio_s=3.0, s_per_char=0.03)


def test_the_chunker_asks_for_the_crowd_only_for_a_first_chunk() -> None:
    asked: list[str] = []

    def crowd() -> int:
        asked.append("crowd")
        return 2

    chunker = AdaptiveChunker(EngineSpeed(), crowd=crowd)
    first = chunker.next_chunk(FOUR_SENTENCES, first=True, buffered_audio_s=0.0)
    assert first is not None
    assert first.text == "Streaming speech lets a voice"
    assert asked == ["crowd"]
    chunker.next_chunk(first.rest, first=False, buffered_audio_s=2.0)
    assert asked == ["crowd"]


def test_nothing_speakable_left_gives_none() -> None:
    assert plan("", 3.0) is None
    assert plan("   \n ", 3.0, first=True) is None


# --- the budget ---------------------------------------------------------------------------------------


def test_budget_spends_three_quarters_of_the_buffer_minus_a_margin_on_overhead_and_characters() -> None:
    # (0.75 * 4.0 - 0.15) = 2.85 s; (2.85 - 0.05) / 0.02 = 140 characters.
    assert budget_chars(4.0, s_per_char=0.02, overhead_s=0.05, sharing=1.0, params=PARAMS) == 140
    # Two jobs per engine slot: half the time for this one: (1.425 - 0.05) / 0.02 = 68.75.
    assert budget_chars(4.0, s_per_char=0.02, overhead_s=0.05, sharing=2.0, params=PARAMS) == 68
    # A drained buffer affords nothing.
    assert budget_chars(0.0, s_per_char=0.02, overhead_s=0.05, sharing=1.0, params=PARAMS) == -10


def test_budget_is_capped_by_compute_per_chunk_and_by_the_model_context() -> None:
    # 4 s of compute at most: (4.0 - 0.05) / 0.03 = 131.67, although the buffer would allow 1495.
    assert budget_chars(60.0, s_per_char=0.03, overhead_s=0.05, sharing=1.0, params=PARAMS) == 131
    # A fast engine is capped by the 300-character context.
    assert budget_chars(60.0, s_per_char=0.0005, overhead_s=0.05, sharing=1.0, params=PARAMS) == 300


def test_budget_rejects_a_speed_or_sharing_it_cannot_use() -> None:
    with pytest.raises(ValueError, match="s_per_char > 0"):
        budget_chars(1.0, s_per_char=0.0, overhead_s=0.0, sharing=1.0, params=PARAMS)
    with pytest.raises(ValueError, match="sharing >= 1"):
        budget_chars(1.0, s_per_char=0.01, overhead_s=0.0, sharing=0.5, params=PARAMS)


# --- boundary preference within the budget -----------------------------------------------------------

PREFERENCE = (
    "The weather was fine. We walked to the river, sat on the grass and watched the boats go by "
    "until it was dark and cold and the wind came up from the sea. Then we went home."
)
"""Sentence ends at 21, 152 and 171; a clause end at 45 (after "river,"); phrases at 62, 90, 108 and 117."""


@pytest.mark.parametrize(
    ("limit", "expected", "kind"),
    [
        # The sentence end keeps 21 of 100 characters (at least 20 %): a sentence wins.
        (100, "The weather was fine.", Boundary.SENTENCE),
        # 21 of 110 is under 20 %: the clause wins over the later phrases (108) and words.
        (110, "The weather was fine. We walked to the river,", Boundary.CLAUSE),
        (140, "The weather was fine. We walked to the river,", Boundary.CLAUSE),
        # The second sentence's end is within 160: the latest sentence end.
        (
            160,
            "The weather was fine. We walked to the river, sat on the grass and watched the boats go by until it "
            "was dark and cold and the wind came up from the sea.",
            Boundary.SENTENCE,
        ),
    ],
)
def test_cut_within_prefers_sentence_then_clause_ends(limit: int, expected: str, kind: Boundary) -> None:
    cut = cut_within(PREFERENCE, limit, PARAMS)
    assert cut is not None
    assert (PREFERENCE[: cut.at], cut.kind) == (expected, kind)


def test_a_phrase_boundary_wins_over_a_later_word_boundary_and_a_word_cut_is_the_last_resort() -> None:
    text = "We walked along the river for hours and talked about nothing in particular at all that afternoon."
    phrase = cut_within(text, 70, PARAMS)
    assert phrase is not None
    assert (text[: phrase.at], phrase.kind) == ("We walked along the river for hours", Boundary.PHRASE)
    plain = "We walked along the river for hours talking about nothing in particular at all this afternoon."
    word = cut_within(plain, 70, PARAMS)
    assert word is not None
    assert (plain[: word.at], word.kind) == (
        "We walked along the river for hours talking about nothing in",
        Boundary.WORD,
    )


def test_when_only_short_pieces_fit_the_longest_is_taken() -> None:
    params = ScheduleParams(min_fill=0.9)
    cut = cut_within(PREFERENCE, 140, params)
    assert cut is not None
    # No kind reaches 126 characters; the last cut within 140 is taken, whatever its kind.
    assert PREFERENCE[: cut.at] == (
        "The weather was fine. We walked to the river, sat on the grass and watched the boats go by until it "
        "was dark and cold and the wind came"
    )


def test_no_cut_fits_a_tiny_budget() -> None:
    assert cut_within(PREFERENCE, 5, PARAMS) is None


# --- growth with the buffer, and the rest of a request ------------------------------------------------


def test_chunks_grow_with_the_buffered_audio() -> None:
    rest = LONG_ANSWER[len("Sure, here is how it works.") :]
    sizes = []
    for buffered in (1.0, 2.0, 4.0, 8.0):
        chunk = plan(rest, buffered)
        assert chunk is not None
        sizes.append(len(chunk.text))
    # 1 s affords 20 characters: no cut fits, so the shortest sensible piece (the clause, 24).
    # 2 s affords 45: that clause. 4 s affords 95: the next clause (72). 8 s: capped at 4 s of
    # compute (133 characters), and the next clause ends at 174: still 72.
    assert sizes == [24, 24, 72, 72]


def test_a_remainder_that_fits_is_taken_whole_and_a_tail_is_not_left_behind() -> None:
    assert plan("Later, we go home.", 2.0) == Chunk("Later, we go home.", "")
    assert plan("  Later, we go home.  ", 2.0) == Chunk("Later, we go home.", "")


def test_after_an_underrun_the_next_chunk_is_the_shortest_piece_cut_at_a_phrase_or_stronger() -> None:
    """A gap is coming: the earliest phrase boundary (30 characters), not the first chunk's clause
    (40), which a listener waiting for the first words gets for its prosody."""
    shortest = Chunk(
        "Well, when the weather is fine", " and warm, we walk to the river and sit down. Later, we go home."
    )
    assert plan(WEATHER, 0.0) == shortest
    assert plan(WEATHER, 0.3) == shortest  # 0.075 s buffer left: under 15 characters
    assert plan(WEATHER, 0.0, first=True) == Chunk(
        "Well, when the weather is fine and warm,", " we walk to the river and sit down. Later, we go home."
    )


def test_the_measured_two_session_case_takes_the_phrase_not_the_sentence_end() -> None:
    """#15: 1.20 s of audio at 0.0475 s per character (with 0.05 s of overhead) buys 14 characters."""
    rest = " agent start talking before its answer is ready. Each sentence is synthesized as soon as it is written."
    chunk = plan_chunk(rest, first=False, buffered_audio_s=1.20, s_per_char=0.0475, overhead_s=0.05)
    assert chunk is not None
    assert chunk.text == "agent start talking"  # predicted 0.05 + 19 x 0.0475 = 0.95 s, not 2.28 s for 47


def test_the_schedule_of_the_long_answer_on_a_cpu_like_engine() -> None:
    """Chunk by chunk with compute 0.03 s and audio 0.06 s per character: the exact cuts."""
    rest, first, buffered, chunks = LONG_ANSWER, True, 0.0, []
    while (chunk := plan(rest, buffered, first=first)) is not None:
        chunks.append(chunk.text)
        buffered += len(chunk.text) * 0.06 - (0 if first else len(chunk.text) * 0.03)
        rest, first = chunk.rest, False
    assert chunks == [
        "Sure, here is how it works.",
        "When you ask a question,",
        "the agent starts writing its answer right away,",
        "and every sentence it finishes is sent to the speech model",  # no clause end within 88: a phrase
        "while the next one is still being written, so the first words reach your ears after a fraction of a second.",
        "The speech model runs on a GPU in the cloud, but it can also run on a laptop, where it is slower and has "
        "to be scheduled carefully:",  # capped at 4 s of compute (133 characters)
        "each piece of text is sized so that its audio is ready before the audio that is already playing runs out. "
        "That is the whole trick.",
        "If you interrupt, the agent stops talking at once, drops everything it had queued, and listens to what "
        "you say next,",
        "which makes the conversation feel much more natural.",
    ]


words = st.text(alphabet="abcdefghij", min_size=1, max_size=12)
punctuation = st.sampled_from(["", "", "", ",", ".", "!", "?", ";", " —", ":"])
texts = st.lists(st.tuples(words, punctuation), min_size=1, max_size=80).map(
    lambda pairs: " ".join(word + mark for word, mark in pairs)
)


@settings(max_examples=200, deadline=None)
@given(
    text=texts,
    buffers=st.lists(st.floats(min_value=0.0, max_value=30.0), min_size=1, max_size=5),
    s_per_char=st.floats(min_value=1e-4, max_value=0.2),
    sharing=st.floats(min_value=1.0, max_value=4.0),
)
def test_chunks_never_cut_inside_a_word_and_cover_the_whole_text(
    text: str, buffers: list[float], s_per_char: float, sharing: float
) -> None:
    rest, first, pieces = text, True, []
    for step in range(len(text) + 1):
        chunk = plan_chunk(
            rest, first=first, buffered_audio_s=buffers[step % len(buffers)], s_per_char=s_per_char, sharing=sharing
        )
        if chunk is None:
            break
        assert chunk.text
        assert chunk.text == chunk.text.strip()
        assert len(chunk.rest) < len(rest)
        pieces.append(chunk.text)
        rest, first = chunk.rest, False
    else:
        pytest.fail("the schedule did not finish")
    assert " ".join(pieces).split() == text.split()


# --- the engine's speed --------------------------------------------------------------------------------


def test_engine_speed_starts_from_its_prior_then_takes_the_first_observation() -> None:
    speed = EngineSpeed(prior_s_per_char=0.03, overhead_s=0.05, alpha=0.5)
    assert speed.s_per_char == 0.03
    speed.observe(100, 1.05)  # (1.05 - 0.05) / 100
    assert speed.s_per_char == pytest.approx(0.01)
    speed.observe(50, 2.05)  # 0.04: averaged with weight 0.5
    assert speed.s_per_char == pytest.approx(0.025)
    assert speed.observations == 2
    assert speed.predict_s(40) == pytest.approx(0.05 + 40 * 0.025)


def test_engine_speed_ignores_empty_chunks_and_never_reaches_zero() -> None:
    speed = EngineSpeed(overhead_s=0.05)
    speed.observe(0, 1.0)
    speed.observe(10, -1.0)
    assert (speed.s_per_char, speed.observations) == (0.03, 0)
    speed.observe(10, 0.01)  # cheaper than the overhead
    assert speed.s_per_char == speed.floor_s_per_char


def test_engine_speed_rejects_unusable_parameters() -> None:
    with pytest.raises(ValueError, match="alpha"):
        EngineSpeed(alpha=0.0)
    with pytest.raises(ValueError, match="prior_s_per_char"):
        EngineSpeed(prior_s_per_char=0.0)


def test_the_chunker_takes_more_text_once_it_has_measured_a_faster_engine() -> None:
    rest = LONG_ANSWER[len("Sure, here is how it works.") :]
    chunker = AdaptiveChunker(EngineSpeed())
    before = chunker.next_chunk(rest, first=False, buffered_audio_s=2.0)
    chunker.observe("x" * 100, 0.05 + 100 * 0.01)  # three times faster than the prior
    after = chunker.next_chunk(rest, first=False, buffered_audio_s=2.0)
    assert before is not None
    assert after is not None
    # Prior 0.03 s per character: (0.75 * 2.0 - 0.15 - 0.05) / 0.03 = 43 characters; measured 0.01: 130.
    assert before.text == "When you ask a question,"
    assert after.text == "When you ask a question, the agent starts writing its answer right away,"


def test_the_chunker_takes_less_text_when_sessions_share_the_engine() -> None:
    rest = LONG_ANSWER[len("Sure, here is how it works.") :]
    load = [1.0]
    chunker = AdaptiveChunker(EngineSpeed(), sharing=lambda: load[0])
    alone = chunker.next_chunk(rest, first=False, buffered_audio_s=4.0)
    load[0] = 2.0
    shared = chunker.next_chunk(rest, first=False, buffered_audio_s=4.0)
    assert alone is not None
    assert shared is not None
    # Alone: (3.0 - 0.15 - 0.05) / 0.03 = 93 characters; two jobs per slot: (2.85 / 2 - 0.05) / 0.03 = 45.
    assert alone.text == "When you ask a question, the agent starts writing its answer right away,"
    assert shared.text == "When you ask a question,"


@pytest.mark.parametrize(
    ("jobs", "slots", "expected"),
    [(0, 1, 1.0), (1, 1, 2.0), (3, 1, 4.0), (1, 2, 1.0), (3, 2, 2.0)],
)
def test_sharing_factor_counts_jobs_per_engine_slot_including_the_new_one(
    jobs: int, slots: int, expected: float
) -> None:
    assert sharing_factor(jobs, slots) == expected


def test_schedule_params_reject_inconsistent_values() -> None:
    with pytest.raises(ValueError, match="safety"):
        ScheduleParams(safety=1.5)
    with pytest.raises(ValueError, match="min_piece_chars"):
        ScheduleParams(min_piece_chars=80)
    with pytest.raises(ValueError, match=r"^need min_piece_chars <= crowd_first_max_chars <= first_max_chars$"):
        ScheduleParams(crowd_first_max_chars=70)
    with pytest.raises(ValueError, match=r"^need min_piece_chars <= crowd_first_max_chars <= first_max_chars$"):
        ScheduleParams(crowd_first_max_chars=10)


def _boundaries_by_slicing(text: str, params: ScheduleParams) -> list[Cut]:
    """The rule `boundaries` implements, written the obvious way (a slice and strip per cut), as an oracle."""
    best: dict[int, Boundary] = {}
    pos = 0
    while pos < len(text):
        start = len(text) - len(text[pos:].lstrip())
        if start >= len(text):
            break
        end = max(start + sentence_end(text[start:]), start + 1)
        best[end] = Boundary.SENTENCE
        sentence = text[start:end]
        inner = [(m.start(), Boundary.WORD) for m in re.finditer(r"\s+", sentence)]
        inner += [(m.start(), Boundary.PHRASE) for m in schedule._PHRASE_START.finditer(sentence)]
        inner += [(m.end(), Boundary.CLAUSE) for m in schedule._CLAUSE_END.finditer(sentence)]
        for offset, kind in inner:
            left, right = sentence[:offset].strip(), sentence[offset:].strip()
            long_enough = len(left) >= params.min_piece_chars and len(right) >= params.min_piece_chars
            if long_enough and best.get(start + offset, Boundary.WORD) <= kind:
                best[start + offset] = kind
        pos = end
    return [Cut(at, kind) for at, kind in sorted(best.items())]


@given(
    st.lists(
        st.sampled_from(["Well", "and", "so", ",", ";", " ", "  ", "\n", ". ", "Mr. ", "— ", "but ", "A. ", "x", "\t"]),
        max_size=80,
    ).map("".join)
)
def test_boundaries_agree_with_the_slicing_rule(text: str) -> None:
    assert boundaries(text, PARAMS) == _boundaries_by_slicing(text, PARAMS)
