"""The key check, end to end: a real server, a real socket, an engine that costs like this CPU.

`ZeroCostEngine(compute_s_per_char=0.03)` sleeps 0.03 s per character and makes 0.06 s of audio per
character (real-time factor 0.5, like the full-size model in fp32 on 2 cores). The same answer is
requested from a server with the naive sentence split and one with the adaptive schedule, both at
once (the engines sleep, so neither slows the other); each recording is played by the simulator.
The naive split stutters after its first sentence; the schedule must not, and must not start later.
"""

from __future__ import annotations

import asyncio

from bench.gapless import serving
from bench.recording import record_session
from bench.texts import LONG_ANSWER
from kokoro_server.app import create_app
from kokoro_server.engine import ZeroCostEngine
from kokoro_server.settings import Settings

CPU_S_PER_CHAR = 0.03
TEXT = LONG_ANSWER[:267]
"""The answer's first two sentences: 27 characters, then 239 (about 8 s of compute in all)."""


async def test_the_naive_split_leaves_the_listener_in_silence_and_the_schedule_does_not() -> None:
    naive_engine = ZeroCostEngine(compute_s_per_char=CPU_S_PER_CHAR)
    adaptive_engine = ZeroCostEngine(compute_s_per_char=CPU_S_PER_CHAR)
    with (
        serving(create_app(Settings(chunking="sentence"), naive_engine)) as naive_url,
        serving(create_app(Settings(chunking="adaptive"), adaptive_engine)) as adaptive_url,
    ):
        naive, adaptive = await asyncio.gather(record_session(naive_url, TEXT), record_session(adaptive_url, TEXT))
    split, scheduled = naive.playback(), adaptive.playback()

    assert [text for text, _, _ in naive_engine.calls] == [TEXT[:27], TEXT[28:]]
    # First audio after 0.81 s of compute plays 1.62 s; the second sentence needs 7.17 s more.
    assert split.underruns == 1
    assert 4.5 < split.silence_s < 6.0

    assert (scheduled.silence_s, scheduled.underruns) == (0.0, 0)
    assert adaptive_engine.calls[0][0] == TEXT[:27]  # the same first chunk: no later first audio
    assert scheduled.time_to_first_audio_s < split.time_to_first_audio_s + 0.2
    assert len(adaptive_engine.calls) > 2
    assert " ".join(text for text, _, _ in adaptive_engine.calls).split() == TEXT.split()
