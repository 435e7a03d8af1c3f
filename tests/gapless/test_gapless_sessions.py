"""The naive sentence split against the adaptive schedule, through the playback simulator.

Sessions are modelled deterministically (`gapless_support.simulate_sessions`) on an engine that
costs like this 2-core CPU: 0.06 s of audio and 0.03 s of compute per character (real-time
factor 0.5), or 0.015 s (reduced precision on a faster CPU). The naive split must stutter where
the schedule must not, and the schedule must not delay the first audio.
"""

from __future__ import annotations

import pytest

from bench.texts import FOUR_SENTENCES, LONG_ANSWER
from kokoro_server.chunking import ChunkPolicy, SentenceChunker
from kokoro_server.schedule import AdaptiveChunker, EngineSpeed, ListenerBoard, sharing_factor
from tests.gapless.gapless_support import SimClock, SimulatedSession, simulate_sessions

CPU_S_PER_CHAR = 0.03


def naive(texts: list[str], compute_s_per_char: float = CPU_S_PER_CHAR) -> list[SimulatedSession]:
    policies: list[ChunkPolicy] = [SentenceChunker() for _ in texts]
    return simulate_sessions(policies, texts, compute_s_per_char=compute_s_per_char)


def adaptive(
    texts: list[str],
    compute_s_per_char: float = CPU_S_PER_CHAR,
    *,
    speed: EngineSpeed | None = None,
    learn: bool = True,
    board: bool = True,
) -> list[SimulatedSession]:
    """One AdaptiveChunker per session, sharing a speed estimate, the load and (optionally) a board."""
    speed = speed or EngineSpeed()
    clock, jobs = SimClock(), [0]
    shared_board = ListenerBoard() if board else None
    policies: list[ChunkPolicy] = [
        AdaptiveChunker(speed, sharing=lambda: sharing_factor(jobs[0], 1), board=shared_board, clock=clock)
        for _ in texts
    ]
    return simulate_sessions(
        policies,
        texts,
        clock=clock,
        compute_s_per_char=compute_s_per_char,
        learn=(lambda text, seconds: speed.observe(len(text), seconds)) if learn else None,
        on_load=lambda n: jobs.__setitem__(0, n),
    )


def silences(sessions: list[SimulatedSession]) -> list[float]:
    return [round(s.playback.silence_s, 2) for s in sessions]


def test_the_naive_split_stutters_on_a_long_second_sentence_and_the_schedule_does_not() -> None:
    [split] = naive([LONG_ANSWER])
    # 27 characters play 1.62 s from 0.81 s; the 239-character sentence is ready only at 7.98 s.
    assert split.chunks[1] == LONG_ANSWER[28:267]
    assert split.playback.underruns == 1
    assert split.playback.silence_s == pytest.approx(7.98 - 2.43)
    [scheduled] = adaptive([LONG_ANSWER])
    assert (scheduled.playback.silence_s, scheduled.playback.underruns) == (0.0, 0)
    assert scheduled.playback.time_to_first_audio_s == split.playback.time_to_first_audio_s == pytest.approx(0.81)
    assert " ".join(scheduled.chunks).split() == " ".join(split.chunks).split() == LONG_ANSWER.split()


def test_on_the_four_sentences_the_schedule_starts_sooner_and_plays_without_a_gap() -> None:
    [split] = naive([FOUR_SENTENCES])
    [scheduled] = adaptive([FOUR_SENTENCES])
    assert (split.playback.silence_s, scheduled.playback.silence_s) == (0.0, 0.0)
    # The naive first chunk is the whole first sentence (77 characters); the schedule's stops at "talking" (49).
    assert split.playback.time_to_first_audio_s == pytest.approx(77 * CPU_S_PER_CHAR)
    assert scheduled.playback.time_to_first_audio_s == pytest.approx(49 * CPU_S_PER_CHAR)


def test_a_schedule_that_does_not_learn_the_machine_speed_stutters_like_the_naive_split() -> None:
    gpu_prior = EngineSpeed(prior_s_per_char=0.001)
    [blind] = adaptive([LONG_ANSWER], speed=gpu_prior, learn=False)
    assert blind.playback.silence_s > 5.0
    [learning] = adaptive([LONG_ANSWER], speed=EngineSpeed(prior_s_per_char=0.001))
    assert learning.playback.silence_s == 0.0


def test_two_sessions_on_a_faster_engine_are_gapless_with_the_schedule_only() -> None:
    texts = [LONG_ANSWER, LONG_ANSWER]
    assert silences(naive(texts, 0.015)) == [2.37, 5.55]
    assert silences(adaptive(texts, 0.015)) == [0.0, 0.0]
    assert silences(adaptive([LONG_ANSWER, FOUR_SENTENCES], 0.015)) == [0.0, 0.0]


def test_without_the_load_the_schedule_stutters_when_two_sessions_share_the_engine() -> None:
    speed = EngineSpeed()
    policies: list[ChunkPolicy] = [AdaptiveChunker(speed) for _ in range(2)]  # believes it is alone
    blind = simulate_sessions(
        policies,
        [LONG_ANSWER, LONG_ANSWER],
        compute_s_per_char=0.015,
        learn=lambda text, seconds: speed.observe(len(text), seconds),
    )
    assert sum(silences(blind)) > 0.5


def test_sizing_for_the_most_urgent_listener_cuts_the_silence_near_saturation() -> None:
    # 0.025 s per character: two sessions use 83 % of the engine. Without the board the session with
    # more audio buffered takes big chunks and the other one runs dry.
    texts = [LONG_ANSWER, LONG_ANSWER]
    without = sum(silences(adaptive(texts, 0.025, board=False)))
    with_board = sum(silences(adaptive(texts, 0.025)))
    assert without > 5.0
    assert with_board < without / 3


def test_the_board_keeps_the_tightest_other_listener_and_drops_those_that_ran_out() -> None:
    board = ListenerBoard()
    a, b, c = object(), object(), object()
    board.report(a, 10.0)
    board.report(b, 12.0)
    board.report(c, 4.0)
    assert board.tightest(5.0, exclude=a) == 7.0  # c ran out at 4.0 and is dropped
    assert board.tightest(5.0, exclude=b) == 5.0
    board.forget(a)
    assert board.tightest(5.0, exclude=b) is None
    assert board.tightest(13.0, exclude=a) is None


def test_the_chunker_sizes_for_the_tightest_listener_and_forgets_its_own_when_done() -> None:
    clock, board = SimClock(now=100.0), ListenerBoard()
    urgent = object()
    board.report(urgent, 101.0)  # another listener has 1 s of audio left
    chunker = AdaptiveChunker(EngineSpeed(), board=board, clock=clock)
    rest = LONG_ANSWER[len("Sure, here is how it works.") :]
    chunk = chunker.next_chunk(rest, first=False, buffered_audio_s=8.0)
    assert chunk is not None
    assert chunk.text == "When you ask a question,"  # sized for 1 s, not 8 s
    assert board.tightest(100.0, exclude=urgent) == 8.0  # its own listener, reported
    last = chunker.next_chunk("That is all.", first=False, buffered_audio_s=8.0)
    assert last is not None
    assert last.rest == ""
    assert board.tightest(100.0, exclude=urgent) is None
