"""Page benchmark: `python -m bench.page` (`make bench-page`), issue #15's page targets.

Starts the local stack as `make local` does (`local.stack.launch`: the speech server on the
full-size Kokoro-82M, random weights unless `--model-dir`; the SageMaker stand-in; the agent with
the offline demo model; the page's web server), opens the real page (`local/web/`) in headless
Chromium and asks the demo question in `stream` and in `batch` mode, `--trials` times each,
alternating the order, each in a New conversation (so that history never changes the answer),
waiting every time until the answer's last sample has played through the page's AudioWorklet.

It reads what the page measures itself (`window.voicestack.current`): first audio (the first
audio event, from the moment the request was sent), playback start, underruns and the silence
they caused (samples the worklet output as zeros while waiting for audio mid-answer), and the
whole answer (request to last sample played), and where the machine's CPU went during the timed
trials (`bench.cpu_share`: each service, the rest, idle). Then it prints one table and the two targets:

- stream underruns = 0, in every trial;
- stream first audio / batch first audio <= 0.6 (medians).

`--engine zero` swaps the model for the zero-cost engine paced at `--rtf` (`bench.paced_speech`):
the same chain, almost no CPU, for development and the test.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Final, Literal

from bench.bargein import CHROMIUM, CHROMIUM_ARGS
from bench.cpu_share import describe as describe_cpu
from bench.cpu_share import shares, snapshot, ticks_per_second
from bench.paced_speech import DEFAULT_RTF, DEFAULT_SECONDS_PER_CHAR, pacing_args, positive_float
from bench.peers import cpu_name
from bench.speech import positive_int
from local.launcher import LaunchError, ProcessSpec
from local.stack import SpeechSpecBuilder, StackConfig, StackError, Weights, launch, speech_spec
from speech_protocol import SAMPLE_RATE

if TYPE_CHECKING:
    from playwright.async_api import Page

Mode = Literal["stream", "batch"]
MODES: Final[tuple[Mode, ...]] = ("stream", "batch")
Transport = Literal["sse", "websocket"]
Engine = Literal["kokoro", "zero"]

PROMPT: Final = "Tell me about streaming speech, in a few sentences."
FIRST_AUDIO_RATIO_GOAL: Final = 0.6
ANSWER_TIMEOUT_S: Final = 300.0
"""One whole answer, played out: about 25 s of audio; the full-size model on a loaded CPU is slower."""

# The page's mirror of the answer just played, flattened to what the benchmark reads.
READ_PAGE: Final = """() => {
  const s = window.voicestack;
  const c = s.current;
  return c === null ? null : {
    mode: c.mode, done: c.done, drained: c.drained, error: c.error, demo: c.demo,
    firstTextMs: c.firstTextMs, firstAudioMs: c.firstAudioMs, playbackStartMs: c.playbackStartMs,
    drainedMs: c.drainedMs, samplesReceived: c.samplesReceived, samplesPlayed: c.samplesPlayed,
    underruns: c.underruns, silentSamples: c.silentSamples, turns: s.turns.length, sessionId: s.sessionId,
  };
}"""
ANSWER_PLAYED: Final = "window.voicestack.current?.done && window.voicestack.current.drained"
POLL_MS: Final = 250
"""How often the benchmark checks whether the answer has played out (see `ask`)."""


class PageBenchError(RuntimeError):
    """The page did not give a measurement (an error, an unfinished answer); the message says which."""


@dataclass(frozen=True, slots=True)
class PageTrial:
    """One answer as the page measured it; times in ms from the moment the request was sent."""

    mode: Mode
    session_id: str
    first_text_ms: float
    first_audio_ms: float
    playback_start_ms: float
    whole_answer_ms: float
    """Until the answer's last sample was played."""
    audio_s: float
    underruns: int
    silence_s: float
    """Silence the underruns caused: samples output as zeros while waiting for audio mid-answer."""


@dataclass(frozen=True, slots=True)
class Target:
    name: str
    measured: str
    met: bool


@dataclass(frozen=True, slots=True)
class PageReport:
    setup: tuple[str, ...]
    trials: tuple[PageTrial, ...]


# --- pure parts -------------------------------------------------------------------------------------


def trial_order(trials: int) -> list[Mode]:
    """Modes in the order they are asked: stream first in odd trials, batch first in even ones, so that
    a drift (warming caches, other load) hits both modes alike."""
    order: list[Mode] = []
    for trial in range(trials):
        order += list(MODES) if trial % 2 == 0 else list(reversed(MODES))
    return order


def _number(state: Mapping[str, object], key: str) -> float:
    value = state.get(key)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise PageBenchError(f"the page's {key} is {value!r}, not a number")
    return float(value)


def _count(state: Mapping[str, object], key: str) -> int:
    value = _number(state, key)
    if value != int(value) or value < 0:
        raise PageBenchError(f"the page's {key} is {value!r}, not a count")
    return int(value)


def parse_trial(mode: Mode, state: Mapping[str, object] | None) -> PageTrial:
    """The measurement in the page's mirror (`READ_PAGE`) of an answer asked in `mode`, once played out.

    Refuses a mirror that is not a whole, error-free demo answer of that mode, alone in its
    conversation, with every sample played.
    """
    if state is None:
        raise PageBenchError("the page has no answer")
    if state.get("error") is not None:
        raise PageBenchError(f"the answer failed: {state['error']!r}")
    if state.get("done") is not True or state.get("drained") is not True:
        raise PageBenchError("the answer has not finished playing")
    if state.get("mode") != mode:
        raise PageBenchError(f"asked in {mode} mode, the page answered in {state.get('mode')!r}")
    if state.get("demo") is not True:
        raise PageBenchError("the agent did not answer with the offline demo model")
    turns = _count(state, "turns")
    if turns != 1:
        raise PageBenchError(f"the conversation has {turns} turns: New conversation did not start a new one")
    received, played = _count(state, "samplesReceived"), _count(state, "samplesPlayed")
    if received == 0 or played != received:
        raise PageBenchError(f"{played} of {received} samples were played")
    session_id = state.get("sessionId")
    if not isinstance(session_id, str) or not session_id:
        raise PageBenchError(f"the page's sessionId is {session_id!r}")
    return PageTrial(
        mode=mode,
        session_id=session_id,
        first_text_ms=_number(state, "firstTextMs"),
        first_audio_ms=_number(state, "firstAudioMs"),
        playback_start_ms=_number(state, "playbackStartMs"),
        whole_answer_ms=_number(state, "drainedMs"),
        audio_s=received / SAMPLE_RATE,
        underruns=_count(state, "underruns"),
        silence_s=_count(state, "silentSamples") / SAMPLE_RATE,
    )


def _of(trials: Sequence[PageTrial], mode: Mode) -> list[PageTrial]:
    return [t for t in trials if t.mode == mode]


def targets(trials: Sequence[PageTrial]) -> tuple[Target, Target]:
    """Issue #15's page targets: no underrun in any stream trial; stream's median first audio at most
    0.6 of batch's."""
    stream, batch = _of(trials, "stream"), _of(trials, "batch")
    if not stream or not batch:
        raise ValueError("the targets need at least one trial of each mode")
    counts = [t.underruns for t in stream]
    no_underruns = Target(
        "stream underruns = 0 (all trials)",
        ", ".join(str(c) for c in counts) + f" ({sum(t.silence_s for t in stream):.2f} s silent)",
        all(c == 0 for c in counts),
    )
    stream_ms = statistics.median(t.first_audio_ms for t in stream)
    batch_ms = statistics.median(t.first_audio_ms for t in batch)
    if not batch_ms > 0:
        raise ValueError(f"batch first audio must be > 0 ms, got {batch_ms}")
    ratio = stream_ms / batch_ms
    first_audio = Target(
        f"stream first audio / batch first audio <= {FIRST_AUDIO_RATIO_GOAL:g}",
        f"{ratio:.2f} ({stream_ms:.0f} ms / {batch_ms:.0f} ms, medians)",
        ratio <= FIRST_AUDIO_RATIO_GOAL,
    )
    return no_underruns, first_audio


_ROWS: Final[tuple[tuple[str, Callable[[PageTrial], float], str], ...]] = (
    ("first audio ms", lambda t: t.first_audio_ms, ".0f"),
    ("playback start ms", lambda t: t.playback_start_ms, ".0f"),
    ("first text ms", lambda t: t.first_text_ms, ".0f"),
    ("underruns", lambda t: t.underruns, "g"),
    ("underrun silence s", lambda t: t.silence_s, ".2f"),
    ("whole answer s (to last sample played)", lambda t: t.whole_answer_ms / 1000, ".2f"),
    ("audio s", lambda t: t.audio_s, ".2f"),
)


def render(report: PageReport) -> str:
    """The setup lines, a markdown table (per mode: median, then every trial in order), the targets."""
    modes = [m for m in MODES if _of(report.trials, m)]
    header = ["measure"] + [f"{m} {part}" for m in modes for part in ("median", "trials")]
    lines = [*report.setup, "", "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for name, value, spec in _ROWS:
        cells = [name]
        for mode in modes:
            values = [value(t) for t in _of(report.trials, mode)]
            cells.append(format(statistics.median(values), spec))
            cells.append(", ".join(format(v, spec) for v in values))
        lines.append("| " + " | ".join(cells) + " |")
    if len(modes) == len(MODES):
        lines += ["", "| target | measured | result |", "|---|---|---|"]
        lines += [f"| {t.name} | {t.measured} | {'met' if t.met else 'NOT met'} |" for t in targets(report.trials)]
    return "\n".join(lines)


def paced_speech_spec(rtf: float, seconds_per_char: float) -> SpeechSpecBuilder:
    """The stack's speech server process, on the zero-cost engine paced by `bench.paced_speech`."""

    def build(config: StackConfig, weights: Weights, env: Mapping[str, str]) -> ProcessSpec:
        spec = speech_spec(config, weights, env)
        module = spec.argv.index("kokoro_server")
        argv = (
            *spec.argv[:module],
            "bench.paced_speech",
            *spec.argv[module + 1 :],
            *pacing_args(rtf, seconds_per_char),
        )
        return replace(spec, argv=argv)

    return build


# --- the run ----------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PageOptions:
    trials: int = 3
    warmup: int = 1
    """Untimed stream answers first: the first call through each client and the worklet costs more."""
    engine: Engine = "kokoro"
    model_dir: Path | None = None
    rtf: float = DEFAULT_RTF
    seconds_per_char: float = DEFAULT_SECONDS_PER_CHAR
    transport: Transport = "sse"
    log: Path = Path("build/page-bench.log")
    answer_timeout_s: float = ANSWER_TIMEOUT_S


def engine_label(options: PageOptions, real_weights: bool) -> str:
    if options.engine == "zero":
        return f"zero-cost engine at RTF {options.rtf:g} ({options.seconds_per_char:g} s of audio per character)"
    return "full-size Kokoro-82M on the CPU, " + ("published weights" if real_weights else "random weights")


async def ask(page: Page, mode: Mode, transport: Transport, timeout_s: float) -> PageTrial:
    """One question in a New conversation, as a user would ask it; returns once it has played out."""
    from playwright.async_api import TimeoutError as PlaywrightTimeout

    await page.click("#new-conversation")
    await page.check(f"input[name=mode][value={mode}]")
    await page.check(f"input[name=transport][value={transport}]")
    await page.fill("#prompt", PROMPT)
    await page.click("#speak")
    try:
        # Polled every 250 ms, not on every animation frame (Playwright's default): a rAF loop makes
        # the page produce 60 frames a second, CPU the page alone would not use. The figures are
        # the page's own timestamps, so the polling interval does not change them.
        await page.wait_for_function(ANSWER_PLAYED, timeout=timeout_s * 1000, polling=POLL_MS)
    except PlaywrightTimeout:
        raise PageBenchError(f"the {mode} answer had not played out after {timeout_s:g} s") from None
    return parse_trial(mode, await page.evaluate(READ_PAGE))


def describe(trial: PageTrial, index: int, total: int) -> str:
    return (
        f"  {trial.mode:<6} trial {index}/{total}: first audio {trial.first_audio_ms:.0f} ms,"
        f" playback {trial.playback_start_ms:.0f} ms, underruns {trial.underruns} ({trial.silence_s:.2f} s silent),"
        f" whole answer {trial.whole_answer_ms / 1000:.2f} s for {trial.audio_s:.2f} s of audio"
    )


async def drive_page(
    url: str,
    options: PageOptions,
    say: Callable[[str], None],
    around_trials: Callable[[], AbstractContextManager[object]] = nullcontext,
) -> tuple[list[PageTrial], list[str]]:
    """The trials in headless Chromium (inside `around_trials()`, the warm-up before it); also
    returns what the page reported as errors."""
    from playwright.async_api import async_playwright  # loaded only when a browser runs

    problems: list[str] = []
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS)
        try:
            page = await browser.new_page()
            page.on("pageerror", lambda exc: problems.append(f"uncaught: {exc}"))
            await page.goto(url + "/")
            await page.wait_for_function("document.getElementById('health').dataset.state === 'ok'", timeout=60_000)
            for n in range(options.warmup):
                warm = await ask(page, "stream", options.transport, options.answer_timeout_s)
                say(f"  warm-up {n + 1}/{options.warmup}: first audio {warm.first_audio_ms:.0f} ms (not counted)")
            trials: list[PageTrial] = []
            order = trial_order(options.trials)
            with around_trials():
                for i, mode in enumerate(order):
                    trial = await ask(page, mode, options.transport, options.answer_timeout_s)
                    trials.append(trial)
                    say(describe(trial, i // len(MODES) + 1, options.trials))
        finally:
            await browser.close()
    return trials, problems


async def run(options: PageOptions, *, say: Callable[[str], None] = print) -> PageReport:
    """Start the stack, run the trials in the page, stop the stack; the report to render."""
    config = StackConfig(
        speech_port=0,
        standin_port=0,
        agent_port=0,
        web_port=0,
        speech_engine="zero" if options.engine == "zero" else "kokoro",
        weights="random",  # the generated checkpoint unless --model-dir: never a download mid-benchmark
        model_dir=options.model_dir,
    )
    speech = paced_speech_spec(options.rtf, options.seconds_per_char) if options.engine == "zero" else speech_spec
    # The scripted answer: the demo model, whatever this shell's Bedrock configuration.
    env = {k: v for k, v in os.environ.items() if k != "BEDROCK_MODEL_ID"}
    options.log.parent.mkdir(parents=True, exist_ok=True)
    with options.log.open("w", encoding="utf-8") as log_file:

        def sink(name: str, line: str) -> None:
            log_file.write(f"{name:<8}| {line}\n")
            log_file.flush()
            if name == "stack":
                say(f"{name:<8}| {line}")

        say(f"starting the local stack (service logs: {options.log})")
        async with launch(config, sink=sink, base_env=env, speech=speech) as stack:
            if not stack.demo_model or stack.urls.web_url is None:
                raise PageBenchError("the stack did not start the demo model and the page")
            label = engine_label(options, stack.weights.real)
            say(f"stack ready: {label}; asking in the page")
            pids = {process.spec.name: process.pid for process in stack.group.processes}
            cpu: list[str] = []

            @contextmanager
            def sample_cpu() -> Iterator[None]:
                before = snapshot(pids)
                yield
                cpu.append(describe_cpu(shares(before, snapshot(pids), ticks_per_second()), before.cpus))

            trials, problems = await drive_page(stack.urls.web_url, options, say, sample_cpu)
    if problems:
        raise PageBenchError("the page reported errors: " + "; ".join(problems))
    sessions = [t.session_id for t in trials]
    if len(set(sessions)) != len(sessions):
        raise PageBenchError("two trials shared a conversation")
    setup = (
        f"Page benchmark: {label}; SageMaker stand-in; demo model at 40 tokens/s; {options.transport.upper()};"
        f" {options.trials} trial(s) per mode, alternating, {options.warmup} warm-up",
        f"machine: {cpu_name()}, {os.cpu_count()} cores",
        "times in the page from the moment the request was sent; audio through its AudioWorklet player",
        *(f"during the timed trials, {line} (the rest: the browser and this benchmark)" for line in cpu),
    )
    return PageReport(setup=setup, trials=tuple(trials))


# --- command line ------------------------------------------------------------------------------------


def non_negative_int(raw: str) -> int:
    value = int(raw)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be at least 0, got {value}")
    return value


def parse_args(argv: Sequence[str] | None = None) -> PageOptions:
    defaults = PageOptions()
    parser = argparse.ArgumentParser(prog="python -m bench.page", description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=positive_int, default=defaults.trials, help="answers per mode (%(default)s)")
    parser.add_argument(
        "--warmup", type=non_negative_int, default=defaults.warmup, help="untimed stream answers first (%(default)s)"
    )
    parser.add_argument("--engine", choices=["kokoro", "zero"], default=defaults.engine)
    parser.add_argument("--model-dir", type=Path, help="kokoro engine: weights (default: generated random weights)")
    parser.add_argument(
        "--rtf", type=positive_float, default=defaults.rtf, help="zero engine: compute s per audio s (%(default)s)"
    )
    parser.add_argument(
        "--seconds-per-char",
        type=positive_float,
        default=defaults.seconds_per_char,
        help="zero engine: audio s per character (%(default)s)",
    )
    parser.add_argument("--transport", choices=["sse", "websocket"], default=defaults.transport)
    parser.add_argument("--log", type=Path, default=defaults.log, help="the stack's service logs (%(default)s)")
    args = parser.parse_args(argv)
    if args.model_dir is not None and args.engine == "zero":
        parser.error("--model-dir needs --engine kokoro")
    return PageOptions(
        trials=args.trials,
        warmup=args.warmup,
        engine=args.engine,
        model_dir=args.model_dir,
        rtf=args.rtf,
        seconds_per_char=args.seconds_per_char,
        transport=args.transport,
        log=args.log,
    )


def main(argv: Sequence[str] | None = None) -> int:
    options = parse_args(argv)
    if not CHROMIUM.exists():
        print(f"{CHROMIUM} is missing: run `make system-deps` (apt-get install chromium)", file=sys.stderr)
        return 1
    try:
        report = asyncio.run(run(options))
    except (LaunchError, StackError, PageBenchError) as exc:
        print(f"page benchmark failed: {exc}", file=sys.stderr)
        return 1
    print()
    print(render(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
