"""Sentence-boundary cases of the kinds pySBD's English golden rules test, written for this project.

Each case is a text and its sentences, exactly. The kinds follow the golden rules (abbreviations
before names and numbers, initialisms at the end of a sentence or not, list markers inline, quotes,
repeated marks, spaced ellipses, addresses, money), and add what a model's answer brings to a voice
(markdown emphasis around a sentence, the issue's "U.S. Army", "Jan. 5", "Fig. 3", "et al. (2020)").
The golden rules themselves are MIT-licensed and live in pySBD's repository; `bench/segmenters.py`
scores them too when given a local copy of that file.
"""

from __future__ import annotations

from typing import Final

Case = tuple[str, list[str]]

CASES: Final[list[Case]] = [
    # plain ends
    ("The river is long. It flows north.", ["The river is long.", "It flows north."]),
    ("Where is the station? It is close.", ["Where is the station?", "It is close."]),
    ("Watch out! The floor is wet.", ["Watch out!", "The floor is wet."]),
    # abbreviations before a name or a number: never an end
    ("He served in the U.S. Army for ten years.", ["He served in the U.S. Army for ten years."]),
    ("We moved there on Jan. 5 last year.", ["We moved there on Jan. 5 last year."]),
    ("The curve in Fig. 3 is flat.", ["The curve in Fig. 3 is flat."]),
    ("Track No. 5 is the best one.", ["Track No. 5 is the best one."]),
    ("Smith et al. (2020) found the same.", ["Smith et al. (2020) found the same."]),
    ("The table is on p. 55 of the report.", ["The table is on p. 55 of the report."]),
    ("We climbed Mt. Fuji in the summer.", ["We climbed Mt. Fuji in the summer."]),
    ("Ask Dr. Patel about it tomorrow.", ["Ask Dr. Patel about it tomorrow."]),
    ("The letter was signed by Anna K. Berg herself.", ["The letter was signed by Anna K. Berg herself."]),
    ("St. Paul's is near the old st. market.", ["St. Paul's is near the old st. market."]),
    ("That was Ford Jr.'s first car.", ["That was Ford Jr.'s first car."]),
    # abbreviations that may end a sentence
    ("Is Mary and co. coming tonight?", ["Is Mary and co. coming tonight?"]),
    ("Ask Mary and co. They were there.", ["Ask Mary and co.", "They were there."]),
    ("He sold it to Hart & Co. at a loss.", ["He sold it to Hart & Co. at a loss."]),
    ("He sold it to Hart & Co. It was a loss.", ["He sold it to Hart & Co.", "It was a loss."]),
    # initialisms
    ("She toured the U.K. last spring.", ["She toured the U.K. last spring."]),
    ("They studied in the U.K. Where did you study?", ["They studied in the U.K.", "Where did you study?"]),
    ("He works for the U.S. Navy in Norfolk.", ["He works for the U.S. Navy in Norfolk."]),
    ("She has lived in the U.S. for six years.", ["She has lived in the U.S. for six years."]),
    ("The shop opens at 8 a.m. and closes at noon.", ["The shop opens at 8 a.m. and closes at noon."]),
    # numbers, money, addresses
    ("The ticket is $12.50 for adults.", ["The ticket is $12.50 for adults."]),
    ("The ticket is $12.50. Kids go free.", ["The ticket is $12.50.", "Kids go free."]),
    ("Write to Tom.Lee@mail.example.org. He replies fast.", ["Write to Tom.Lee@mail.example.org.", "He replies fast."]),
    (
        "The page is https://docs.example.net/guide/v2.html. Read it first.",
        ["The page is https://docs.example.net/guide/v2.html.", "Read it first."],
    ),
    ("It is at No. 221.7.4. The door is green.", ["It is at No. 221.7.4.", "The door is green."]),
    # quotes and brackets
    ("He looked up, 'That is fine.' he said.", ["He looked up, 'That is fine.' he said."]),
    ('He looked up, "That is fine." He smiled.', ['He looked up, "That is fine."', "He smiled."]),
    (
        "She paints (She studied art for ten years.) in the old barn.",
        ["She paints (She studied art for ten years.) in the old barn."],
    ),
    ("She works at Yahoo! in the sales team.", ["She works at Yahoo! in the sales team."]),
    # repeated marks
    ("Wow!! That was fast.", ["Wow!!", "That was fast."]),
    ("Really?! You won?", ["Really?!", "You won?"]),
    # list markers inline
    ("1. Buy the milk 2. Bake the bread", ["1. Buy the milk", "2. Bake the bread"]),
    ("1) Buy the milk. 2) Bake the bread.", ["1) Buy the milk.", "2) Bake the bread."]),
    ("• 3. Buy the milk • 4. Bake the bread", ["• 3. Buy the milk", "• 4. Bake the bread"]),
    ("a. Buy the milk b. Bake the bread c. Eat it", ["a. Buy the milk", "b. Bake the bread", "c. Eat it"]),
    # initials and a pronoun at the end
    ("It was you and I. Did you see Henry V. Gray there?", ["It was you and I.", "Did you see Henry V. Gray there?"]),
    # ellipses
    ("I thought that.... Then it rained.", ["I thought that....", "Then it rained."]),
    ("It was . . . well, odd . . . but fine.", ["It was . . . well, odd . . . but fine."]),
    ('"The sea [...] was calm [...]" (Lee 12).', ['"The sea [...] was calm [...]" (Lee 12).']),
    ("Wait... what happened here?", ["Wait... what happened here?"]),
    # markdown around a sentence
    ("**This part matters.** The rest is detail.", ["**This part matters.**", "The rest is detail."]),
    ("*Quick note.* Then we start.", ["*Quick note.*", "Then we start."]),
]  # fmt: skip
