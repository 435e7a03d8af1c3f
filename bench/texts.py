"""The texts the speech benchmarks speak, defined once."""

from __future__ import annotations

from typing import Final

FOUR_SENTENCES: Final = (
    "Streaming speech lets a voice agent start talking before its answer is ready. "
    "Each sentence is synthesized as soon as the language model finishes writing it. "
    "The listener hears the first words in a fraction of a second instead of waiting. "
    "This is why latency matters."
)
"""267 characters, four sentences of 77, 79, 80 and 28 characters, no commas."""

LONG_ANSWER: Final = (
    "Sure, here is how it works. When you ask a question, the agent starts writing its answer right away, "
    "and every sentence it finishes is sent to the speech model while the next one is still being written, "
    "so the first words reach your ears after a fraction of a second. "
    "The speech model runs on a GPU in the cloud, but it can also run on a laptop, where it is slower "
    "and has to be scheduled carefully: each piece of text is sized so that its audio is ready before "
    "the audio that is already playing runs out. That is the whole trick. "
    "If you interrupt, the agent stops talking at once, drops everything it had queued, and listens to what "
    "you say next, which makes the conversation feel much more natural."
)
"""700 characters, sentences of 27, 239, 237, 24 and 169: after a short first sentence a long one, which a
sentence split cannot synthesize before the first one has finished playing."""
