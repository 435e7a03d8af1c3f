"""`python -m bench.lab`: the AWS latency measurements, reproduced side by side in one run.

1. Transport: a 267-character, four-sentence text over the speech transport (SageMaker's
   bidirectional stream; locally through the stand-in), time to first audio byte when sending the
   whole text versus the first sentence first (AWS: 329.3 ms vs 156.7 ms, -52.4 %).
2. End to end: the same prompt through the agent in `batch` and `stream` modes, alternating, each
   answer in a new session, first audio at the caller (AWS: stream 2.4x sooner in its local test,
   3.5x on the deployed runtime: the reference row).
3. Transport size: raw PCM versus base64 in JSON events for 24 clips, measured on the events the
   agent sent in step 2 (AWS: about a third larger).

Every answer of step 2 is asked through `voicestack talk`'s own client (`voicestack.talk.client.
run_turn`, what `voicestack talk --json` prints), so the lab and the command measure the same way.

Prints a table and writes a PNG of the distributions. `--target local` (default) starts the local
stack itself (speech server, stand-in, agent) and stops it at the end; locally the speech server
synthesizes each request whole (`--server-chunking none`), like the container the AWS figures
were measured on. `--target deployed` measures an AgentCore runtime and its SageMaker endpoint
(`--stack NAME`'s outputs, or `--runtime-arn ARN --endpoint-name NAME`) with the AWS SDK's
standard configuration of this shell: credentials, `AWS_ENDPOINT_URL_BEDROCK_AGENTCORE` and
`AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME_HTTP2`, `AWS_CA_BUNDLE`; the agent over InvokeAgentRuntime
(`--agent-transport sse`, as AWS measured) or the WebSocket route. Anything AgentCore-shaped will
do: the local stack with `--agentcore` is the offline proof (tests/local/test_local_lab.py).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import sys
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Literal

from agent_app.speech.transport import SpeechTransport
from bench.lab_report import (
    AgentTrial,
    EndToEndResults,
    LabResults,
    TransportResults,
    render,
    size_report,
    write_chart,
)
from bench.speech import BENCH_TEXT, positive_int
from local.launcher import LaunchError
from local.stack import StackConfig, StackError, launch
from speech_protocol import Cancel, Close, ErrorEvent, Synthesize
from voicestack.errors import CommandError, UsageError
from voicestack.pulumi_stack import StackView, read_stack
from voicestack.runtime_target import RuntimeTarget, StackReader, resolve_runtime
from voicestack.talk.client import run_turn
from voicestack.talk.targets import LocalAgent, Runtime, Target, open_conversation
from voicestack.talk.turn import Transport, TurnResult

TRANSPORT_TEXT: Final = BENCH_TEXT
"""267 characters, four sentences: the speech benchmark's text, as in the AWS transport test."""

LAB_PROMPT: Final = "How does streaming speech make a voice agent feel faster?"
SIZE_CLIPS: Final = 24
LOCAL_ENDPOINT: Final = "kokoro-local"
LOCAL_REGION: Final = "us-east-1"

Mode = Literal["batch", "stream"]
SendStrategy = Literal["whole_text", "first_sentence"]


class LabError(RuntimeError):
    """A measurement could not be taken (an error event, a missing output); the message says which."""


# --- pure helpers ----------------------------------------------------------------------------------

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


def split_sentences(text: str) -> list[str]:
    """Sentences of `text`, split after `.`, `!` or `?` followed by whitespace."""
    return [part for part in _SENTENCE_END.split(text.strip()) if part]


def requests_for(text: str, strategy: SendStrategy) -> list[Synthesize]:
    """What a client sends: the whole text in one request, or one request per sentence."""
    if strategy == "whole_text":
        return [Synthesize(text=text, request_id="whole")]
    return [Synthesize(text=sentence, request_id=f"s{i}") for i, sentence in enumerate(split_sentences(text))]


# --- measurements -----------------------------------------------------------------------------------


async def time_to_first_audio(transport: SpeechTransport, text: str, strategy: SendStrategy) -> float:
    """One session: send the requests, return ms until the first audio byte, then cancel and close."""
    requests = requests_for(text, strategy)
    async with transport.connect() as connection:
        started = time.perf_counter()
        for request in requests:
            await connection.send(request)
        while True:
            frame = await connection.receive()
            if frame is None:
                raise LabError(f"the session ended before any audio ({strategy})")
            if isinstance(frame, ErrorEvent):
                raise LabError(f"the speech server refused the request: {frame.code}: {frame.message}")
            if isinstance(frame, bytes) and frame:
                elapsed_ms = (time.perf_counter() - started) * 1000.0
                break
        # Only the first byte counts: stop the rest (barge-in) rather than wait for all of it.
        for request in requests:
            await connection.send(Cancel(request_id=request.request_id))
        await connection.send(Close())
        while await connection.receive() is not None:
            pass
    return elapsed_ms


async def measure_transport(
    transport: SpeechTransport, text: str, trials: int, *, say: Callable[[str], None]
) -> TransportResults:
    """`trials` sessions per strategy, alternating (so that drift hits both), after one untimed warm-up."""
    await time_to_first_audio(transport, text, "first_sentence")
    whole: list[float] = []
    first: list[float] = []
    for trial in range(trials):
        order: tuple[SendStrategy, SendStrategy] = (
            ("whole_text", "first_sentence") if trial % 2 == 0 else ("first_sentence", "whole_text")
        )
        for strategy in order:
            elapsed = await time_to_first_audio(transport, text, strategy)
            (whole if strategy == "whole_text" else first).append(elapsed)
            say(f"transport {strategy:<14} trial {trial + 1}/{trials}: {elapsed:8.1f} ms")
    return TransportResults(
        text_chars=len(text),
        sentences=len(split_sentences(text)),
        whole_text_ms=tuple(whole),
        first_sentence_ms=tuple(first),
    )


def turn_trial(result: TurnResult) -> tuple[AgentTrial, list[tuple[int, int]]]:
    """The lab's figures of one answer and its clips' sizes; LabError when it was not an answer."""
    if result.outcome != "ok":
        raise LabError(f"the agent answered {result.outcome}: {result.error_code}: {result.error_message}")
    if result.first_text_ms is None or result.first_audio_ms is None:
        raise LabError("the answer carried no text or no audio")
    trial = AgentTrial(first_text_ms=result.first_text_ms, first_audio_ms=result.first_audio_ms, total_ms=result.end_ms)
    return trial, list(result.audio_events)


async def agent_trial(target: Target, transport: Transport, mode: Mode) -> tuple[AgentTrial, list[tuple[int, int]]]:
    """One answer through voicestack talk's client, in a new session (history never changes the answer)."""
    conversation = open_conversation(target, transport, f"latency-lab-{uuid.uuid4()}")
    try:
        result = await run_turn(conversation, {"prompt": LAB_PROMPT, "mode": mode}, number=1)
    except CommandError as exc:
        raise LabError(str(exc)) from None
    finally:
        await conversation.aclose()
    return turn_trial(result)


async def measure_end_to_end(
    run_trial: Callable[[Mode], Awaitable[tuple[AgentTrial, list[tuple[int, int]]]]],
    trials: int,
    *,
    say: Callable[[str], None],
) -> tuple[EndToEndResults, list[tuple[int, int]]]:
    """`trials` invocations per mode, alternating, after one untimed warm-up; also the audio clips."""
    await run_trial("stream")
    results: dict[Mode, list[AgentTrial]] = {"batch": [], "stream": []}
    clips: list[tuple[int, int]] = []
    for trial in range(trials):
        order: tuple[Mode, Mode] = ("batch", "stream") if trial % 2 == 0 else ("stream", "batch")
        for mode in order:
            timed, trial_clips = await run_trial(mode)
            results[mode].append(timed)
            clips.extend(trial_clips)
            say(f"agent {mode:<6} trial {trial + 1}/{trials}: first audio {timed.first_audio_ms:8.1f} ms")
    return EndToEndResults(batch=tuple(results["batch"]), stream=tuple(results["stream"])), clips


def first_clips(clips: Sequence[tuple[int, int]], count: int = SIZE_CLIPS) -> list[tuple[int, int]]:
    if len(clips) < count:
        raise LabError(f"only {len(clips)} audio events were received; the size comparison needs {count}")
    return list(clips[:count])


# --- targets ------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class LabOptions:
    target: Literal["local", "deployed"] = "local"
    trials: int = 5
    e2e_trials: int = 3
    chart: Path = Path("build/latency-lab.png")
    log: Path = Path("build/latency-lab.log")
    server_chunking: Literal["none", "sentence"] = "none"
    speech_engine: Literal["kokoro", "zero"] = "kokoro"
    speech_transport: Literal["sagemaker", "websocket"] = "sagemaker"
    weights: Literal["auto", "real", "random"] = "auto"
    model_dir: Path | None = None
    endpoint_name: str | None = None
    runtime_arn: str | None = None
    region: str | None = None
    stack: str | None = None
    """A Pulumi stack whose outputs name the deployed target (`voicestack.pulumi_stack`)."""
    profile: str | None = None
    qualifier: str | None = None
    """The runtime endpoint; None: AgentCore's DEFAULT."""
    agent_transport: Transport = "sse"
    """How the deployed agent is asked: InvokeAgentRuntime (SSE, as AWS measured) or the WebSocket route."""


def say(line: str) -> None:
    print(f"lab     | {line}", flush=True)


async def run_local(options: LabOptions) -> LabResults:
    # Imported here: the SageMaker client (awscrt, smithy) loads only when the lab runs.
    from botocore.credentials import Credentials  # type: ignore[import-untyped]

    from agent_app.speech.sagemaker import SageMakerTransport
    from agent_app.speech.websocket import WebSocketTransport

    config = StackConfig(
        speech_port=0,
        standin_port=0,
        agent_port=0,
        web_port=0,
        browser_server=False,
        speech_transport=options.speech_transport,
        speech_engine=options.speech_engine,
        speech_chunking=options.server_chunking,
        weights=options.weights,
        model_dir=options.model_dir,
        endpoint_name=LOCAL_ENDPOINT,
    )
    options.log.parent.mkdir(parents=True, exist_ok=True)
    with options.log.open("w", encoding="utf-8") as log_file:

        def sink(name: str, line: str) -> None:
            log_file.write(f"{name:<8}| {line}\n")
            log_file.flush()
            if name == "stack" or line.startswith("ready in "):
                print(f"{name:<8}| {line}", flush=True)

        say(f"starting the local stack (service logs: {options.log})")
        # The scripted answer: the demo model, whatever this shell's Bedrock configuration.
        env = {k: v for k, v in os.environ.items() if k != "BEDROCK_MODEL_ID"}
        async with launch(config, sink=sink, base_env=env) as stack:
            urls = stack.urls
            transport: SpeechTransport
            if options.speech_transport == "sagemaker":
                assert urls.standin_url is not None
                transport = SageMakerTransport(
                    LOCAL_ENDPOINT,
                    region=LOCAL_REGION,
                    endpoint_url=urls.standin_url,
                    ca_file=urls.ca_file,
                    # The stand-in requires a signature but does not verify it.
                    credentials=Credentials("AKIDLOCALSTANDIN0000", "local-stand-in-does-not-verify-signatures"),
                )
            else:
                transport = WebSocketTransport(urls.speech_ws_url)
            transport_results = await measure_transport(transport, TRANSPORT_TEXT, options.trials, say=say)
            agent = LocalAgent(urls.agent_url)

            async def trial(mode: Mode) -> tuple[AgentTrial, list[tuple[int, int]]]:
                return await agent_trial(agent, "sse", mode)

            try:
                end_to_end, clips = await measure_end_to_end(trial, options.e2e_trials, say=say)
            finally:
                await agent.aclose()
            engine = (
                "zero-cost test engine (no model)"
                if options.speech_engine == "zero"
                else "Kokoro-82M " + ("published weights" if stack.weights.real else "random weights (noise audio)")
            )
    via = "the SageMaker stand-in (HTTP/2, event stream)" if options.speech_transport == "sagemaker" else "WebSocket"
    return LabResults(
        title="Latency lab: local stack",
        notes=(
            f"speech: {engine}, server chunking '{options.server_chunking}', via {via}",
            "agent: the offline demo model (a scripted answer at 40 tokens/s)",
        ),
        deployed=False,
        transport=transport_results,
        end_to_end=end_to_end,
        sizes=size_report(first_clips(clips)),
    )


SPEECH_ENDPOINT_OUTPUT: Final = "speechEndpointName"
"""The stack output naming the speech SageMaker endpoint (infra/program.py `StackOutputs.exported`)."""


def deployed_target(options: LabOptions, read: StackReader = read_stack) -> tuple[str, RuntimeTarget]:
    """(the speech endpoint's name, the runtime) of the deployed target: the runtime from `--stack` or
    `--runtime-arn` (`voicestack.runtime_target`, as for `voicestack talk` and the page), the endpoint
    from `--endpoint-name` or the stack's `speechEndpointName`. `UsageError` (exit 2) names the flag."""
    views: dict[str, StackView] = {}

    def read_once(name: str) -> StackView:
        views[name] = read(name)
        return views[name]

    runtime = resolve_runtime(
        stack=options.stack,
        runtime_arn=options.runtime_arn,
        region=options.region,
        profile=options.profile,
        qualifier=options.qualifier,
        read=read_once,
    )
    if options.endpoint_name is not None:
        return options.endpoint_name, runtime
    if options.stack is None:
        raise UsageError("--endpoint-name: the speech SageMaker endpoint is needed with --runtime-arn")
    endpoint = views[options.stack].output(SPEECH_ENDPOINT_OUTPUT)
    if not isinstance(endpoint, str):
        raise UsageError(f"--stack {options.stack}: output {SPEECH_ENDPOINT_OUTPUT} must be a string")
    return endpoint, runtime


async def run_deployed(options: LabOptions) -> LabResults:
    from agent_app.speech.sagemaker import SageMakerTransport  # heavy (awscrt): loaded only when used

    # Off the loop: reading a stack runs the Pulumi CLI.
    endpoint, target = await asyncio.to_thread(deployed_target, options)
    runtime = Runtime.for_target(target)
    arn, region, sdk = target.runtime_arn, target.region, target.sdk
    speech_url = os.environ.get("AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME_HTTP2") or None
    say(f"measuring the deployed stack: endpoint {endpoint}, agent {arn} ({region}) at {sdk.endpoint_url}")
    # The SageMaker client takes the same SDK settings: its endpoint override, the CA bundle boto3 trusts.
    transport = SageMakerTransport(endpoint, region=region, endpoint_url=speech_url, ca_file=sdk.ca_bundle)
    try:
        transport_results = await measure_transport(transport, TRANSPORT_TEXT, options.trials, say=say)
    finally:
        await transport.aclose()

    async def trial(mode: Mode) -> tuple[AgentTrial, list[tuple[int, int]]]:
        return await agent_trial(runtime, options.agent_transport, mode)

    try:
        end_to_end, clips = await measure_end_to_end(trial, options.e2e_trials, say=say)
    finally:
        await runtime.aclose()
    route = "WebSocket" if options.agent_transport == "websocket" else "SSE"
    api = "the WebSocket route" if options.agent_transport == "websocket" else "InvokeAgentRuntime"
    return LabResults(
        title="Latency lab: deployed stack",
        notes=(
            f"speech: SageMaker endpoint {endpoint}" + (f" at {speech_url}" if speech_url else ""),
            f"agent: AgentCore runtime {arn} through {api} at {sdk.endpoint_url}",
        ),
        deployed=True,
        transport=transport_results,
        end_to_end=end_to_end,
        sizes=size_report(first_clips(clips)),
        agent_route=route,
    )


# --- command line ------------------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None = None) -> LabOptions:
    defaults = LabOptions()
    parser = argparse.ArgumentParser(prog="python -m bench.lab", description=__doc__.splitlines()[0])
    parser.add_argument("--target", choices=["local", "deployed"], default=defaults.target)
    parser.add_argument("--trials", type=positive_int, default=defaults.trials, help="transport trials per mode")
    parser.add_argument("--e2e-trials", type=positive_int, default=defaults.e2e_trials, help="agent trials per mode")
    parser.add_argument("--chart", type=Path, default=defaults.chart, help="PNG to write (%(default)s)")
    parser.add_argument("--log", type=Path, default=defaults.log, help="local stack's service logs (%(default)s)")
    local = parser.add_argument_group("local target")
    local.add_argument(
        "--server-chunking",
        choices=["none", "sentence"],
        default=defaults.server_chunking,
        help="none: the server synthesizes each request whole, as the AWS sample did; sentence: ours",
    )
    local.add_argument("--speech-engine", choices=["kokoro", "zero"], default=defaults.speech_engine)
    local.add_argument("--speech-transport", choices=["sagemaker", "websocket"], default=defaults.speech_transport)
    local.add_argument("--weights", choices=["auto", "real", "random"], default=defaults.weights)
    local.add_argument("--model-dir", type=Path, default=None)
    deployed = parser.add_argument_group("deployed target: --stack NAME, or --runtime-arn ARN --endpoint-name NAME")
    deployed.add_argument("--stack", default=None, help="the Pulumi stack whose outputs name the target")
    deployed.add_argument("--runtime-arn", default=None, help="the AgentCore runtime ARN (without Pulumi)")
    deployed.add_argument("--endpoint-name", default=None, help="the speech SageMaker endpoint (default: the stack's)")
    deployed.add_argument("--region", default=None, help="the runtime's region (default: the ARN's)")
    deployed.add_argument("--profile", default=None, help="the AWS profile (default: the SDK's usual chain)")
    deployed.add_argument("--qualifier", default=None, help="the runtime endpoint (default: DEFAULT)")
    deployed.add_argument(
        "--agent-transport",
        choices=["sse", "websocket"],
        default=defaults.agent_transport,
        help="sse: InvokeAgentRuntime, as AWS measured (default); websocket: the runtime's WebSocket route",
    )
    args = parser.parse_args(argv)
    return LabOptions(
        target=args.target,
        trials=args.trials,
        e2e_trials=args.e2e_trials,
        chart=args.chart,
        log=args.log,
        server_chunking=args.server_chunking,
        speech_engine=args.speech_engine,
        speech_transport=args.speech_transport,
        weights=args.weights,
        model_dir=args.model_dir,
        endpoint_name=args.endpoint_name,
        runtime_arn=args.runtime_arn,
        region=args.region,
        stack=args.stack,
        profile=args.profile,
        qualifier=args.qualifier,
        agent_transport=args.agent_transport,
    )


def main(argv: Sequence[str] | None = None) -> int:
    options = parse_args(argv)
    try:
        results = asyncio.run(run_deployed(options) if options.target == "deployed" else run_local(options))
    except (LabError, StackError) as exc:
        say(f"failed: {exc}")
        return 1
    except CommandError as exc:  # a flag of the deployed target (exit 2), as voicestack talk says it
        say(f"failed: {exc}")
        return int(exc.code)
    except LaunchError as exc:
        say(f"failed: {exc}; its last lines:")
        for line in exc.recent:
            say(f"  {line}")
        return 1
    print()
    print(render(results))
    print()
    print(f"chart: {write_chart(results, options.chart)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
