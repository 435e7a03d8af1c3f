"""What the voice says: realistic model answers in markdown, each with its exact spoken text and chunks."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent_app.segmenter import SegmenterConfig
from agent_app.spoken import CODE_PHRASE, HOLD_CAP, SpokenSegmenter, SpokenText, to_spoken
from agent_app.spoken_inline import speak_inline

# --- a corpus of answers as models write them --------------------------------------------------

RECIPE = """\
## Pancakes

You will need:

- 2 cups of **flour**
- 1 egg
- 250 ml of milk

1. Mix everything *gently*.
2. Cook each side for 2 mins.

Enjoy! 🥞
"""

CODE_ANSWER = """\
Sure! Here is how to list files in Python:

```python
import os
for name in os.listdir("."):
    print(name)
```

Run it with `python list.py` and you will see every file.
"""

TABLE_ANSWER = """\
Here are the two plans:

| Plan | Price | Storage |
|------|------:|:-------:|
| Basic | $5 | 50 GB |
| Pro | $12.50 | 2 TB |

The **Pro** plan is the better deal.
"""

LINKS_ANSWER = (
    "You can read the [installation guide](https://docs.example.com/install?lang=en#linux) first. "
    "The full reference is at https://www.example.org/reference/v2.1/index.html. "
    "For help, write to support.team@example.co.uk or call 555-123-4567."
)

NUMBERS_ANSWER = (
    "The launch is on 2024-06-01. Tickets cost $5M in total, about 50% more than last year. "
    "The venue is 3 km from the station, and it is 20°C there in June."
)

NESTED_ANSWER = """\
### Quick answer

> **Note:** the ~~old~~ new API is faster.

* Use `fetch()` for requests ✅
* Avoid **blocking** calls

---
That's all.
"""

CORPUS = [
    pytest.param(
        RECIPE,
        "Pancakes.\nYou will need:\n2 cups of flour.\n1 egg.\n250 milliliters of milk.\n"
        "1. Mix everything gently.\n2. Cook each side for 2 minutes.\nEnjoy!",
        [
            "Pancakes.\nYou will need:",
            "2 cups of flour.",
            "1 egg.\n250 milliliters of milk.",
            "1. Mix everything gently.",
            "2. Cook each side for 2 minutes.",
            "Enjoy!",
        ],
        id="headings, bullets, numbered list, units, emoji",
    ),
    pytest.param(
        CODE_ANSWER,
        f"Sure! Here is how to list files in Python:\n{CODE_PHRASE}\n"
        "Run it with python list.py and you will see every file.",
        [
            "Sure! Here is how to list files in Python:",
            CODE_PHRASE,
            "Run it with python list.py and you will see every file.",
        ],
        id="code fence not read, inline code read",
    ),
    pytest.param(
        TABLE_ANSWER,
        "Here are the two plans:\nPlan, Price, Storage.\nBasic, $5, 50 gigabytes.\nPro, $12.50, 2 terabytes.\n"
        "The Pro plan is the better deal.",
        [
            "Here are the two plans:",
            "Plan, Price, Storage.",
            "Basic, $5, 50 gigabytes.",
            "Pro, $12.50, 2 terabytes.",
            "The Pro plan is the better deal.",
        ],
        id="table rows read as lists, the rule row dropped",
    ),
    pytest.param(
        LINKS_ANSWER,
        "You can read the installation guide first. The full reference is at example dot org. "
        "For help, write to support dot team at example dot co dot uk or call "
        "five five five, one two three, four five six seven.",
        [
            "You can read the installation guide first.",
            "The full reference is at example dot org.",
            "For help, write to support dot team at example dot co dot uk or call "
            "five five five, one two three, four five six seven.",
        ],
        id="link text, bare URL, e-mail, phone",
    ),
    pytest.param(
        NUMBERS_ANSWER,
        "The launch is on June 1, 2024. Tickets cost $5 million in total, about 50% more than last year. "
        "The venue is 3 kilometers from the station, and it is 20 degrees Celsius there in June.",
        [
            "The launch is on June 1, 2024.",
            "Tickets cost $5 million in total, about 50% more than last year.",
            "The venue is 3 kilometers from the station, and it is 20 degrees Celsius there in June.",
        ],
        id="date, money scale, percent left to the G2P, unit, temperature",
    ),
    pytest.param(
        NESTED_ANSWER,
        "Quick answer.\nNote: the old new API is faster.\nUse fetch() for requests.\nAvoid blocking calls.\n"
        "That's all.",
        [
            "Quick answer.",
            "Note: the old new API is faster.",
            "Use fetch() for requests.",
            "Avoid blocking calls.",
            "That's all.",
        ],
        id="quote, strike-through, star bullets, emoji at an item's end, rule",
    ),
    pytest.param(
        "**This is bold.** And this is not. *Italic ends here.* Then _more_ text.",
        "This is bold. And this is not. Italic ends here. Then more text.",
        ["This is bold.", "And this is not.", "Italic ends here.", "Then more text."],
        id="a sentence ends at its emphasis closer",
    ),
]

SEGMENTS = SegmenterConfig()


def spoken_chunks(markdown: str, cuts: list[int] | None = None) -> list[str]:
    segmenter = SpokenSegmenter(SEGMENTS)
    bounds = [0, *sorted(set(cuts or [])), len(markdown)]
    chunks: list[str] = []
    for start, end in itertools.pairwise(bounds):
        chunks += segmenter.feed(markdown[start:end])
    return chunks + segmenter.finish()


def spoken_in_pieces(markdown: str, cuts: list[int]) -> str:
    spoken = SpokenText()
    bounds = [0, *sorted(set(cuts)), len(markdown)]
    out = "".join(spoken.feed(markdown[start:end]) for start, end in itertools.pairwise(bounds))
    return (out + spoken.flush()).strip()


@pytest.mark.parametrize(("markdown", "spoken", "chunks"), CORPUS)
def test_answer_is_spoken_as_a_person_would_say_it(markdown: str, spoken: str, chunks: list[str]) -> None:
    assert to_spoken(markdown) == spoken


@pytest.mark.parametrize(("markdown", "spoken", "chunks"), CORPUS)
def test_answer_is_spoken_in_these_chunks(markdown: str, spoken: str, chunks: list[str]) -> None:
    assert spoken_chunks(markdown) == chunks


@pytest.mark.parametrize(("markdown", "spoken", "chunks"), CORPUS)
def test_one_character_at_a_time_says_the_same(markdown: str, spoken: str, chunks: list[str]) -> None:
    every = list(range(len(markdown)))
    assert spoken_in_pieces(markdown, every) == spoken
    assert spoken_chunks(markdown, every) == chunks


# --- one rule at a time ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "spoken"),
    [
        ("see `ls -la` output", "see ls -la output"),
        ("the ``a `b` c`` span", "the a `b` c span"),
        ("![a diagram](img.png) shows it", "a diagram shows it"),
        ("[click here](https://x.io/a) now", "click here now"),
        ("<https://example.com/path>", "example dot com"),
        ("visit www.example.com/a today", "visit example dot com today"),
        ("at https://example.com.", "at example dot com."),
        ("mail a.b@c.io.", "mail a dot b at c dot io."),
        ("call 555.123.4567", "call five five five, one two three, four five six seven"),
        ("it is 2024-13-01", "it is 2024-13-01"),
        ("pay $3.5B soon", "pay $3.5 billion soon"),
        ("1 km and 2 km", "1 kilometer and 2 kilometers"),
        ("weighs 5kg", "weighs 5 kilograms"),
        ("it is 72°F", "it is 72 degrees Fahrenheit"),
        ("a 90° turn", "a 90° turn"),
        ("it is -5°C", "it is minus 5 degrees Celsius"),
        ("at 5 GHz", "at 5 GHz"),
        ("snake_case stays", "snake_case stays"),
        ("2 * 3 is 6", "2 * 3 is 6"),
        ("line<br>break", "line break"),
        (r"a \*literal\* star", "a *literal* star"),
        ("no 3 kmh unit", "no 3 kmh unit"),
        ("it took 1 ms", "it took 1 millisecond"),
        ("pi is 3.14 m", "pi is 3.14 m"),
    ],
    ids=lambda value: str(value)[:24],
)
def test_inline_rules(text: str, spoken: str) -> None:
    assert speak_inline(text) == spoken


@pytest.mark.parametrize(
    ("markdown", "spoken"),
    [
        ("Nice work 🎉!", "Nice work!"),
        ("👍 Sounds good.", "Sounds good."),
        ("Family 👨‍👩‍👧 trip 🇫🇷 to Paris.", "Family trip to Paris."),
        ("Press 1️⃣ now.", "Press 1 now."),
    ],
)
def test_emoji_are_removed_cleanly(markdown: str, spoken: str) -> None:
    assert to_spoken(markdown) == spoken


def test_an_unclosed_code_block_ends_with_its_message() -> None:
    spoken = SpokenText()
    assert spoken.feed("Here:\n```\nx = 1\n") == f"Here:\n{CODE_PHRASE}\n"
    assert spoken.flush() == ""
    # The next message is prose again, not code.
    assert spoken.feed("Done now.\n") == "Done now.\n"


def test_code_is_announced_when_the_fence_opens_not_when_it_closes() -> None:
    spoken = SpokenText()
    assert spoken.feed("```bash\n") == f"{CODE_PHRASE}\n"
    assert spoken.feed("rm -rf build\n") == ""
    assert spoken.feed("```\n") == ""
    assert spoken.feed("Done.\n") == "Done.\n"


def test_a_fence_inside_code_with_fewer_marks_does_not_close_it() -> None:
    assert to_spoken("````\n```\nstill code\n````\nAfter.") == f"{CODE_PHRASE}\nAfter."


def test_a_paragraph_is_released_word_by_word_not_line_by_line() -> None:
    spoken = SpokenText()
    assert spoken.feed("The first sentence ends here. The") == "The first sentence ends here."
    assert spoken.feed(" second") == " The"


def test_a_number_is_held_until_the_word_after_it() -> None:
    spoken = SpokenText()
    assert spoken.feed("It is 3 ") == "It is"
    assert spoken.feed("km away") == " 3 kilometers"


def test_a_table_row_is_held_to_its_end() -> None:
    spoken = SpokenText()
    assert spoken.feed("| a | b") == ""
    assert spoken.feed(" |\n") == "a, b.\n"


def test_what_is_shown_is_not_changed() -> None:
    # The segmenter only sees spoken text; its input markdown is not modified in place.
    markdown = "**Bold** [link](https://x.io)"
    to_spoken(markdown)
    assert markdown == "**Bold** [link](https://x.io)"


def test_flush_ends_the_current_line_and_goes_on() -> None:
    segmenter = SpokenSegmenter(SEGMENTS)
    assert segmenter.feed("- Let me check the **time**") == []
    assert segmenter.flush() == ["Let me check the time."]
    assert segmenter.feed(" It is **half past ten**, and the sun is up. ") == []
    assert segmenter.finish() == ["It is half past ten, and the sun is up."]
    assert segmenter.chunks_released == 2


# --- any split of the stream says the same -----------------------------------------------------

MARKDOWN_FRAGMENTS = [
    "Hello", "world", "The", "it", " ", " ", "  ", "\n", "\n\n", ".", "!", "?", ",", ":", "**", "*", "_", "~~",
    "`", "```", "```py\n", "~~~\n", "# ", "## ", "- ", "* ", "1. ", "2) ", "> ", "| ", " | ", "|---|---|", "---",
    "[", "]", "(", ")", "[docs](https://x.io/a)", "https://example.com/a.b?c=d", "jo.doe@example.com",
    "555-123-4567", "(555) 123-4567", "+1 555 123 4567", "2024-06-01", "3", "3 km", "km", "$5M", "50%", "20°C",
    "🎉", "👍🏽", "✅", "<br>", "\\*", "U.S.", "Mr.", "e.g.", "...", ". . .",
]  # fmt: skip

markdown_texts = st.lists(st.sampled_from(MARKDOWN_FRAGMENTS), max_size=40).map("".join)


@st.composite
def markdown_and_cuts(draw: st.DrawFn) -> tuple[str, list[int]]:
    text = draw(markdown_texts)
    cuts = draw(st.lists(st.integers(min_value=0, max_value=len(text)), max_size=len(text)))
    return text, cuts


@given(case=markdown_and_cuts())
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_spoken_text_does_not_depend_on_how_the_stream_was_cut(case: tuple[str, list[int]]) -> None:
    text, cuts = case
    assert spoken_in_pieces(text, cuts) == to_spoken(text)


@given(case=markdown_and_cuts())
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_spoken_chunks_do_not_depend_on_how_the_stream_was_cut(case: tuple[str, list[int]]) -> None:
    text, cuts = case
    assert spoken_chunks(text, cuts) == spoken_chunks(text)


def test_an_unclosed_bracket_holds_a_line_only_up_to_the_cap() -> None:
    spoken = SpokenText()
    words = " ".join(["word"] * 100)  # 499 characters
    released = spoken.feed("See [" + words + " more")
    assert released.startswith("See [word word")
    assert len(released) > HOLD_CAP
    assert released + spoken.flush() == "See [" + words + " more\n"
