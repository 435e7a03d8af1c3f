"""The page benchmark: its pure parts (trial order, reading the page's mirror, the targets, the table,
the paced speech server's process), the driver against the real page with a fake agent, and one
short run of the whole benchmark on the zero-cost engine (structure only: never timings)."""

from __future__ import annotations

import asyncio
import os
import sys
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from bench import paced_speech
from bench.bargein import CHROMIUM, CHROMIUM_ARGS
from bench.page import (
    ANSWER_PLAYED,
    PROMPT,
    READ_PAGE,
    PageBenchError,
    PageOptions,
    PageReport,
    PageTrial,
    Target,
    ask,
    paced_speech_spec,
    parse_args,
    parse_trial,
    render,
    run,
    targets,
    trial_order,
)
from bench.peers import cpu_name
from local.launcher import HttpProbe
from local.stack import StackConfig, Weights
from tests.local.local_fakes import WebStacks, agent_events, paced_script, pcm_bytes, pcm_samples, sse_bytes

if TYPE_CHECKING:
    from playwright.async_api import Page

RATE = 24_000
QUANTUM = 128
"""Samples per Web Audio render quantum: the worklet outputs silence in these steps."""


def trial(mode: str, first_audio_ms: float, underruns: int = 0, silence_s: float = 0.0, n: int = 0) -> PageTrial:
    return PageTrial(
        mode=mode,  # type: ignore[arg-type]
        session_id=f"{mode}-{n}",
        first_text_ms=100.0 + n,
        first_audio_ms=first_audio_ms,
        playback_start_ms=first_audio_ms + 5,
        whole_answer_ms=26_000.0 + 1000 * n,
        audio_s=25.0,
        underruns=underruns,
        silence_s=silence_s,
    )


def mirror(**changes: object) -> dict[str, object]:
    """The page's mirror (`READ_PAGE`) of a played-out stream answer, with `changes`."""
    state: dict[str, object] = {
        "mode": "stream",
        "done": True,
        "drained": True,
        "error": None,
        "demo": True,
        "firstTextMs": 80.5,
        "firstAudioMs": 900.25,
        "playbackStartMs": 905,
        "drainedMs": 26_500.75,
        "samplesReceived": 600_000,
        "samplesPlayed": 600_000,
        "underruns": 2,
        "silentSamples": 3_600,
        "turns": 1,
        "sessionId": "a" * 36,
    }
    state.update(changes)
    return state


# --- pure parts ---------------------------------------------------------------------------------------


def test_trial_order_alternates_which_mode_goes_first() -> None:
    assert trial_order(1) == ["stream", "batch"]
    assert trial_order(3) == ["stream", "batch", "batch", "stream", "stream", "batch"]
    assert trial_order(0) == []


def test_parse_trial_reads_every_measure_exactly() -> None:
    assert parse_trial("stream", mirror()) == PageTrial(
        mode="stream",
        session_id="a" * 36,
        first_text_ms=80.5,
        first_audio_ms=900.25,
        playback_start_ms=905.0,
        whole_answer_ms=26_500.75,
        audio_s=25.0,
        underruns=2,
        silence_s=0.15,
    )


@pytest.mark.parametrize(
    ("mode", "state", "message"),
    [
        ("stream", None, "the page has no answer"),
        ("stream", mirror(error={"code": "model_error", "message": "x"}), "the answer failed: {'code': 'model_error'"),
        ("stream", mirror(done=False), "the answer has not finished playing"),
        ("stream", mirror(drained=False), "the answer has not finished playing"),
        ("batch", mirror(), "asked in batch mode, the page answered in 'stream'"),
        ("stream", mirror(demo=False), "the agent did not answer with the offline demo model"),
        ("stream", mirror(turns=2), "the conversation has 2 turns: New conversation did not start a new one"),
        ("stream", mirror(samplesPlayed=599_999), "599999 of 600000 samples were played"),
        ("stream", mirror(samplesReceived=0, samplesPlayed=0), "0 of 0 samples were played"),
        ("stream", mirror(sessionId=""), "the page's sessionId is ''"),
        ("stream", mirror(firstAudioMs=None), "the page's firstAudioMs is None, not a number"),
        ("stream", mirror(drainedMs=True), "the page's drainedMs is True, not a number"),
        ("stream", mirror(underruns=1.5), "the page's underruns is 1.5, not a count"),
        ("stream", mirror(silentSamples=-128), "the page's silentSamples is -128.0, not a count"),
    ],
)
def test_parse_trial_refuses_what_is_not_a_whole_demo_answer(
    mode: str, state: dict[str, object] | None, message: str
) -> None:
    with pytest.raises(PageBenchError) as error:
        parse_trial(mode, state)  # type: ignore[arg-type]
    assert str(error.value).startswith(message)


def test_targets_met() -> None:
    trials = [trial("stream", 900.0, n=0), trial("batch", 3000.0, n=0), trial("stream", 1100.0, n=1)]
    trials += [trial("batch", 2000.0, n=1), trial("stream", 1000.0, n=2), trial("batch", 2500.0, n=2)]
    assert targets(trials) == (
        Target("stream underruns = 0 (all trials)", "0, 0, 0 (0.00 s silent)", True),
        Target("stream first audio / batch first audio <= 0.6", "0.40 (1000 ms / 2500 ms, medians)", True),
    )


def test_targets_not_met_by_one_underrun_or_a_ratio_just_over() -> None:
    trials = [trial("stream", 1201.0, underruns=0), trial("stream", 1201.0, underruns=1, silence_s=0.25)]
    trials += [trial("batch", 2000.0), trial("batch", 2000.0)]
    assert targets(trials) == (
        Target("stream underruns = 0 (all trials)", "0, 1 (0.25 s silent)", False),
        Target("stream first audio / batch first audio <= 0.6", "0.60 (1201 ms / 2000 ms, medians)", False),
    )
    exactly = [trial("stream", 1200.0), trial("batch", 2000.0)]
    assert targets(exactly)[1].met is True


def test_targets_need_both_modes() -> None:
    with pytest.raises(ValueError, match="at least one trial of each mode"):
        targets([trial("stream", 1000.0)])
    with pytest.raises(ValueError, match=r"batch first audio must be > 0 ms, got 0\.0"):
        targets([trial("stream", 1000.0), trial("batch", 0.0)])


def test_render_gives_the_median_and_every_trial_per_mode_then_the_targets() -> None:
    trials = (
        trial("stream", 900.0, n=0),
        trial("batch", 3000.0, n=0),
        trial("batch", 2000.0, underruns=1, silence_s=0.5, n=1),
        trial("stream", 1100.0, underruns=2, silence_s=0.75, n=1),
    )
    report = PageReport(setup=("Page benchmark: test", "machine: CPU X, 2 cores"), trials=trials)
    assert render(report).splitlines() == [
        "Page benchmark: test",
        "machine: CPU X, 2 cores",
        "",
        "| measure | stream median | stream trials | batch median | batch trials |",
        "|---|---|---|---|---|",
        "| first audio ms | 1000 | 900, 1100 | 2500 | 3000, 2000 |",
        "| playback start ms | 1005 | 905, 1105 | 2505 | 3005, 2005 |",
        "| first text ms | 100 | 100, 101 | 100 | 100, 101 |",
        "| underruns | 1 | 0, 2 | 0.5 | 0, 1 |",
        "| underrun silence s | 0.38 | 0.00, 0.75 | 0.25 | 0.00, 0.50 |",
        "| whole answer s (to last sample played) | 26.50 | 26.00, 27.00 | 26.50 | 26.00, 27.00 |",
        "| audio s | 25.00 | 25.00, 25.00 | 25.00 | 25.00, 25.00 |",
        "",
        "| target | measured | result |",
        "|---|---|---|",
        "| stream underruns = 0 (all trials) | 0, 2 (0.75 s silent) | NOT met |",
        "| stream first audio / batch first audio <= 0.6 | 0.40 (1000 ms / 2500 ms, medians) | met |",
    ]


def test_render_without_one_mode_has_no_targets() -> None:
    report = PageReport(setup=("s",), trials=(trial("stream", 900.0),))
    assert render(report).splitlines() == [
        "s",
        "",
        "| measure | stream median | stream trials |",
        "|---|---|---|",
        "| first audio ms | 900 | 900 |",
        "| playback start ms | 905 | 905 |",
        "| first text ms | 100 | 100 |",
        "| underruns | 0 | 0 |",
        "| underrun silence s | 0.00 | 0.00 |",
        "| whole answer s (to last sample played) | 26.00 | 26.00 |",
        "| audio s | 25.00 | 25.00 |",
    ]


def test_the_paced_speech_server_is_the_stacks_speech_process_with_another_module() -> None:
    config = StackConfig(speech_port=9001, speech_engine="zero")
    spec = paced_speech_spec(0.5, 0.015)(config, Weights(None, real=False, source="none"), {"PATH": "/bin"})
    assert spec.argv == (
        sys.executable,
        "-m",
        "bench.paced_speech",
        "--host",
        "127.0.0.1",
        "--port",
        "9001",
        "--engine",
        "zero",
        "--rtf",
        "0.5",
        "--seconds-per-char",
        "0.015",
    )
    assert (spec.name, spec.probe) == ("speech", HttpProbe("http://127.0.0.1:9001/ping"))
    assert spec.env["HF_HUB_OFFLINE"] == "1"


def test_the_paced_speech_server_refuses_the_model_and_bad_pacing(capsys: pytest.CaptureFixture[str]) -> None:
    assert paced_speech.main(["--engine", "kokoro", "--port", "9001"]) == 2
    assert capsys.readouterr().err == (
        "bench.paced_speech: needs --engine zero (got 'kokoro'): it paces the zero-cost engine\n"
    )
    assert paced_speech.main(["--engine", "zero", "--port", "0"]) == 2
    assert "--port='0' is invalid" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit_info:
        paced_speech.main(["--engine", "zero", "--rtf", "0"])
    assert exit_info.value.code == 2
    assert "argument --rtf: must be > 0, got 0" in capsys.readouterr().err


def test_parse_args_defaults_and_choices() -> None:
    assert parse_args([]) == PageOptions()
    defaults = PageOptions()
    assert (defaults.trials, defaults.warmup, defaults.engine, defaults.transport) == (3, 1, "kokoro", "sse")
    options = parse_args(["--engine", "zero", "--trials", "1", "--warmup", "0", "--rtf", "0.25"])
    assert (options.engine, options.trials, options.warmup, options.rtf) == ("zero", 1, 0, 0.25)
    assert parse_args(["--model-dir", "/weights"]).model_dir == Path("/weights")


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--trials", "0"], "argument --trials: must be at least 1, got 0"),
        (["--warmup", "-1"], "argument --warmup: must be at least 0, got -1"),
        (["--rtf", "nan"], "argument --rtf: must be > 0, got nan"),
        (["--seconds-per-char", "-1"], "argument --seconds-per-char: must be > 0, got -1"),
        (["--engine", "gpu"], "argument --engine: invalid choice: 'gpu'"),
        (["--engine", "zero", "--model-dir", "/w"], "--model-dir needs --engine kokoro"),
    ],
)
def test_bad_arguments_are_refused_before_anything_starts(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        parse_args(argv)
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err


# --- the driver on the real page, against a fake agent ----------------------------------------------


@asynccontextmanager
async def page_at(url: str) -> AsyncIterator[Page]:
    """The page in headless Chromium (async API: the benchmark's own), health checked; uncaught page
    errors fail the test."""
    from playwright.async_api import async_playwright

    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS)
        try:
            page = await browser.new_page()
            problems: list[str] = []
            page.on("pageerror", lambda exc: problems.append(str(exc)))
            await page.goto(url + "/")
            await page.wait_for_function("document.getElementById('health').dataset.state === 'ok'")
            yield page
            assert problems == []
        finally:
            await browser.close()


def one_second_answer(payload: dict[str, Any]) -> list[bytes]:
    events = agent_events(payload["mode"], pcm_bytes(pcm_samples(RATE)), chunk_sizes=[4800, 9600, 33_600])
    return [sse_bytes(events)]


@pytest.mark.browser
async def test_the_driver_asks_each_mode_in_a_new_conversation_and_reads_the_page(web_stacks: WebStacks) -> None:
    stack = web_stacks.start(paced_script(one_second_answer, delay_s=0.01))
    async with page_at(stack.url) as page:
        trials = [await ask(page, mode, "sse", timeout_s=20) for mode in ("stream", "batch", "stream")]
    assert stack.agent.requests == [
        {"prompt": PROMPT, "mode": "stream"},
        {"prompt": PROMPT, "mode": "batch"},
        {"prompt": PROMPT, "mode": "stream"},
    ]
    # Each question went out in its own conversation, and the trial knows which.
    assert stack.agent.session_ids == [t.session_id for t in trials]
    assert len(set(stack.agent.session_ids)) == 3
    assert [(t.mode, t.audio_s, t.underruns, t.silence_s) for t in trials] == [
        ("stream", 1.0, 0, 0.0),
        ("batch", 1.0, 0, 0.0),
        ("stream", 1.0, 0, 0.0),
    ]


@pytest.mark.browser
async def test_an_answer_that_never_ends_is_reported_not_waited_for_forever(web_stacks: WebStacks) -> None:
    events = agent_events("stream", pcm_bytes(pcm_samples(RATE // 10)), chunk_sizes=[4800])
    body = sse_bytes(events)
    opened = body[: body.index(b"data: ", body.index(b'"audio_chunk"'))]

    async def endless(_: dict[str, Any]) -> AsyncIterator[bytes]:
        yield opened
        while True:
            await asyncio.sleep(0.05)
            yield b": keep-alive\n\n"

    stack = web_stacks.start(endless)
    async with page_at(stack.url) as page:
        with pytest.raises(PageBenchError) as error:
            await ask(page, "stream", "sse", timeout_s=1.5)
        await page.click("#stop")
    assert str(error.value) == "the stream answer had not played out after 1.5 s"


@pytest.mark.browser
async def test_an_underrun_is_counted_with_the_silence_it_caused(web_stacks: WebStacks) -> None:
    """The agent holds the stream after 0.1 s of audio until the player has run dry."""
    events = agent_events("stream", pcm_bytes(pcm_samples(RATE // 2)), chunk_sizes=[4800, 4801, 4799, 4800, 4800])
    body = sse_bytes(events)
    hold_at = body.rindex(b"data: ", 0, body.index(b'"seq": 1'))
    release = threading.Event()

    async def held(_: dict[str, Any]) -> AsyncIterator[bytes]:
        yield body[:hold_at]
        await asyncio.to_thread(release.wait, 20)
        yield body[hold_at:]

    stack = web_stacks.start(held)
    async with page_at(stack.url) as page:
        await page.click("#speak")
        await page.wait_for_function("window.voicestack.current?.underruns === 1", timeout=20_000)
        release.set()
        await page.wait_for_function(ANSWER_PLAYED, timeout=20_000)
        state = await page.evaluate(READ_PAGE)
    measured = parse_trial("stream", state)
    assert (measured.underruns, measured.audio_s) == (1, 0.5)
    # 2,400 samples are 18 whole quanta and 96 samples: the quantum that ran dry played 96 and output
    # 32 zeros, then every quantum until playback resumed was silent.
    assert state["silentSamples"] % QUANTUM == 32
    assert measured.silence_s == state["silentSamples"] / RATE
    assert isinstance(state["drainedMs"], int | float)


# --- the whole benchmark, briefly ---------------------------------------------------------------------


@pytest.mark.browser
async def test_the_benchmark_runs_the_local_stack_and_the_page_in_both_modes(tmp_path: Path) -> None:
    said: list[str] = []
    log = tmp_path / "page-bench.log"
    options = PageOptions(engine="zero", trials=1, warmup=0, seconds_per_char=0.01, log=log)
    report = await run(options, say=said.append)

    assert [t.mode for t in report.trials] == ["stream", "batch"]
    assert len({t.session_id for t in report.trials}) == 2
    for measured in report.trials:
        assert measured.audio_s > 0
        # Silence only ever comes from an underrun.
        assert (measured.underruns == 0) == (measured.silence_s == 0.0)
    assert report.setup[0] == (
        "Page benchmark: zero-cost engine at RTF 0.5 (0.01 s of audio per character); SageMaker stand-in;"
        " demo model at 40 tokens/s; SSE; 1 trial(s) per mode, alternating, 0 warm-up"
    )
    assert report.setup[1] == f"machine: {cpu_name()}, {os.cpu_count()} cores"
    cpu = report.setup[3]
    assert cpu.startswith("during the timed trials, CPU (cores of ")
    assert cpu.endswith(" (the rest: the browser and this benchmark)")
    for name in ("speech", "standin", "agent", "web", "the rest", "idle"):
        assert f" {name} " in cpu, name
    assert "stack ready: zero-cost engine at RTF 0.5 (0.01 s of audio per character); asking in the page" in said
    progress = [line for line in said if " trial " in line]
    assert [line.split(":")[0] for line in progress] == ["  stream trial 1/1", "  batch  trial 1/1"]
    table = render(report).splitlines()
    assert [line.split(" | ")[0] for line in table[-2:]] == [
        "| stream underruns = 0 (all trials)",
        "| stream first audio / batch first audio <= 0.6",
    ]
    services = log.read_text()
    # The whole chain as `make local` runs it, with the paced engine in the speech server's place.
    for name in ("speech", "standin", "agent", "web"):
        assert f"{name:<8}| ready in " in services, name
    assert "offline demo model" in services
