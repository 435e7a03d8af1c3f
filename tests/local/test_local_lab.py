"""The latency lab: its pure computations (stats, sizes, table), its parsing and timing helpers, and
one short run against the local stack with the zero-cost speech engine."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from bench.lab import (
    TRANSPORT_TEXT,
    LabError,
    LabOptions,
    Mode,
    deployed_target,
    first_clips,
    main,
    measure_end_to_end,
    measure_transport,
    parse_args,
    requests_for,
    run_deployed,
    run_local,
    split_sentences,
    time_to_first_audio,
    turn_trial,
)
from bench.lab_report import (
    AgentTrial,
    EndToEndResults,
    LabResults,
    SizeReport,
    Summary,
    TransportResults,
    format_table,
    percent_change,
    render,
    size_report,
    speedup,
    write_chart,
)
from local.stack import LOCAL_RUNTIME_ARN, agentcore_environment, launch
from speech_protocol import Cancel, ClientMessage, Close, ErrorEvent, SynthesisStart, Synthesize
from tests.local.local_fakes import use_sdk_environment
from tests.voicestack.talk_support import AGENTCORE_STACK
from voicestack.errors import UsageError
from voicestack.pulumi_stack import StackView
from voicestack.talk.turn import TurnResult

# --- statistics and sizes ----------------------------------------------------------------------------


def test_summary_of_values() -> None:
    summary = Summary.of([3.0, 1.0, 2.0, 10.0])
    assert (summary.n, summary.mean, summary.median, summary.minimum, summary.maximum) == (4, 4.0, 2.5, 1.0, 10.0)
    assert round(summary.stdev, 6) == 4.082483
    assert Summary.of([7.0]) == Summary(n=1, mean=7.0, median=7.0, stdev=0.0, minimum=7.0, maximum=7.0)
    with pytest.raises(ValueError, match="no values"):
        Summary.of([])
    with pytest.raises(ValueError, match="finite"):
        Summary.of([1.0, float("nan")])


def test_percent_change_and_speedup_reproduce_the_aws_figures() -> None:
    assert round(percent_change(329.3, 156.7), 1) == -52.4
    assert percent_change(100.0, 150.0) == 50.0
    assert speedup(2400.0, 1000.0) == 2.4
    with pytest.raises(ValueError, match="reference must be positive"):
        percent_change(0.0, 1.0)
    with pytest.raises(ValueError, match="times must be positive"):
        speedup(1.0, 0.0)


def test_size_report_overhead_of_base64_in_json() -> None:
    report = size_report([(48_000, 64_060), (24_000, 32_060), (3, 70)])
    assert report == SizeReport(clips=3, raw_bytes=72_003, encoded_bytes=96_190)
    assert round(report.overhead_pct, 2) == 33.59
    with pytest.raises(ValueError, match="no clips"):
        size_report([])


def test_format_table_aligns_columns() -> None:
    table = format_table(["mode", "median", "n"], [["whole text", "1.0 ms", "5"], ["first", "12.5 ms", ""]])
    assert table == ("mode         median  n\n----------  -------  -\nwhole text   1.0 ms  5\nfirst       12.5 ms")
    with pytest.raises(ValueError, match="has 1 cells, expected 3"):
        format_table(["a", "b", "c"], [["x"]])


def lab_results(*, deployed: bool = False) -> LabResults:
    return LabResults(
        title="Latency lab: test",
        notes=("speech: test",),
        deployed=deployed,
        transport=TransportResults(
            text_chars=267,
            sentences=4,
            whole_text_ms=(300.0, 320.0, 340.0),
            first_sentence_ms=(150.0, 160.0, 170.0),
        ),
        end_to_end=EndToEndResults(
            batch=(AgentTrial(30.0, 2400.0, 9000.0), AgentTrial(40.0, 2600.0, 9100.0)),
            stream=(AgentTrial(35.0, 1000.0, 8000.0), AgentTrial(45.0, 1000.0, 8200.0)),
        ),
        sizes=SizeReport(clips=24, raw_bytes=1_000_000, encoded_bytes=1_334_000),
    )


def test_render_puts_local_and_aws_figures_side_by_side() -> None:
    lines = render(lab_results()).splitlines()
    assert lines[:2] == ["Latency lab: test", "  speech: test"]
    assert "Transport: 267-character, 4-sentence text, whole versus first sentence first" in lines
    row = {line.split("  ")[0]: " ".join(line.split()) for line in lines if "  " in line}
    assert row["whole text"] == "whole text 320.0 ms 320.0 ms 300.0 ms 340.0 ms 3 329.3 ms"
    assert row["first sentence first"] == "first sentence first 160.0 ms 160.0 ms 150.0 ms 170.0 ms 3 156.7 ms"
    assert row["change"] == "change -50.0 % -52.4 %"
    assert row["batch"] == "batch 2,500.0 ms 2,500.0 ms 2,400.0 ms 2,600.0 ms 2 35.0 ms 9,050.0 ms"
    assert row["stream"] == "stream 1,000.0 ms 1,000.0 ms 1,000.0 ms 1,000.0 ms 2 40.0 ms 8,100.0 ms"
    assert row["stream sooner by"] == "stream sooner by 2.5x"
    assert row["reference: AWS write-up, local test"] == "reference: AWS write-up, local test 2.4x"
    assert row["raw PCM"] == "raw PCM 1,000,000"
    assert row["base64 in JSON (SSE)"] == "base64 in JSON (SSE) 1,334,000 +33.4 % about a third larger"


def test_render_deployed_compares_with_the_deployed_speedup() -> None:
    lines = [" ".join(line.split()) for line in render(lab_results(deployed=True)).splitlines()]
    assert "stream sooner by 2.5x" in lines
    assert "reference: AWS write-up, deployed runtime 3.5x" in lines


def test_write_chart_writes_a_png(tmp_path: Path) -> None:
    path = write_chart(lab_results(), tmp_path / "sub" / "lab.png")
    assert path == tmp_path / "sub" / "lab.png"
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


# --- parsing and timing ------------------------------------------------------------------------------


def test_transport_text_and_requests() -> None:
    assert len(TRANSPORT_TEXT) == 267
    sentences = split_sentences(TRANSPORT_TEXT)
    assert len(sentences) == 4
    assert " ".join(sentences) == TRANSPORT_TEXT
    assert requests_for(TRANSPORT_TEXT, "whole_text") == [Synthesize(text=TRANSPORT_TEXT, request_id="whole")]
    assert requests_for(TRANSPORT_TEXT, "first_sentence") == [
        Synthesize(text=s, request_id=f"s{i}") for i, s in enumerate(sentences)
    ]
    assert split_sentences("One. Two?  Three! four") == ["One.", "Two?", "Three!", "four"]


def turn(**fields: Any) -> TurnResult:
    base: dict[str, Any] = {
        "turn": 1,
        "session_id": "latency-lab-x",
        "transport": "sse",
        "target": "arn:x",
        "mode": "stream",
        "outcome": "ok",
        "error_code": None,
        "error_message": None,
        "text": "Hi.",
        "first_text_ms": 20.0,
        "first_audio_ms": 30.0,
        "end_ms": 100.0,
        "connect_ms": None,
        "audio_bytes": 6,
        "audio_chunks": 2,
        "sample_rate": 24000,
        "channels": 1,
        "agent_metrics": None,
        "audio_events": ((4, 60), (2, 58)),
    }
    return TurnResult(**{**base, **fields})


def test_a_turn_of_voicestack_talk_is_a_trial_with_its_clips() -> None:
    assert turn_trial(turn()) == (
        AgentTrial(first_text_ms=20.0, first_audio_ms=30.0, total_ms=100.0),
        [(4, 60), (2, 58)],
    )
    with pytest.raises(LabError, match=r"^the agent answered error: speech_unavailable: down$"):
        turn_trial(turn(outcome="error", error_code="speech_unavailable", error_message="down"))
    with pytest.raises(LabError, match=r"^the answer carried no text or no audio$"):
        turn_trial(turn(first_audio_ms=None))


def test_first_clips_needs_enough_audio() -> None:
    clips = [(i, i + 1) for i in range(30)]
    assert first_clips(clips) == clips[:24]
    with pytest.raises(LabError, match="only 3 audio events were received; the size comparison needs 24"):
        first_clips(clips[:3])


ARN = "arn:aws:bedrock-agentcore:eu-west-1:000000000000:runtime/voicestack_dev-abcdefghij"


def dev_stack(name: str) -> StackView:
    if name != "dev":
        raise UsageError(f"--stack {name}: no such stack")
    return StackView(name, {"speechEndpointName": "ep", "agentRuntimeArn": ARN, "region": "eu-west-1"}, {})


@pytest.fixture
def no_aws(monkeypatch: pytest.MonkeyPatch) -> None:
    """None of this machine's AWS configuration; the SDK resolves AWS's own endpoint offline."""
    use_sdk_environment(monkeypatch, None, None)


def test_the_deployed_target_from_a_stack_or_the_flags(no_aws: None) -> None:
    """The runtime through voicestack's one resolver (as for talk and the page), the endpoint from
    --endpoint-name or the stack's speechEndpointName."""
    endpoint, runtime = deployed_target(LabOptions(stack="dev"), read=dev_stack)
    assert (endpoint, runtime.runtime_arn, runtime.region, runtime.stack, runtime.qualifier) == (
        "ep",
        ARN,
        "eu-west-1",
        "dev",
        None,
    )
    endpoint, runtime = deployed_target(LabOptions(stack="dev", endpoint_name="other"), read=dev_stack)
    assert (endpoint, runtime.runtime_arn) == ("other", ARN)
    endpoint, runtime = deployed_target(
        LabOptions(runtime_arn=ARN, endpoint_name="ep2", qualifier="canary"), read=dev_stack
    )
    assert (endpoint, runtime.runtime_arn, runtime.stack, runtime.qualifier) == ("ep2", ARN, None, "canary")


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (LabOptions(), "pass exactly one of --stack NAME or --runtime-arn ARN"),
        (LabOptions(runtime_arn=ARN), "--endpoint-name: the speech SageMaker endpoint is needed with --runtime-arn"),
        (LabOptions(stack="prod"), "--stack prod: no such stack"),
        (
            LabOptions(stack="dev", region="us-west-2"),
            f"--region us-west-2 is not the runtime's region: {ARN} is in eu-west-1",
        ),
    ],
)
def test_a_bad_deployed_target_names_the_flag(no_aws: None, options: LabOptions, message: str) -> None:
    with pytest.raises(UsageError) as raised:
        deployed_target(options, read=dev_stack)
    assert str(raised.value) == message


def test_main_exits_2_naming_the_flag(no_aws: None, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--target", "deployed", "--runtime-arn", "nope", "--endpoint-name", "ep"]) == 2
    assert (
        capsys.readouterr()
        .out.splitlines()[-1]
        .startswith("lab     | failed: --runtime-arn: 'nope' is not an AgentCore runtime ARN")
    )


def test_parse_args() -> None:
    assert parse_args([]) == LabOptions()
    options = parse_args(
        ["--target", "deployed", "--trials", "2", "--runtime-arn", "arn:y", "--server-chunking", "sentence"]
    )
    assert (options.target, options.trials, options.runtime_arn, options.server_chunking) == (
        "deployed",
        2,
        "arn:y",
        "sentence",
    )
    with pytest.raises(SystemExit):
        parse_args(["--trials", "0"])
    deployed = parse_args(
        ["--target", "deployed", "--stack", "dev", "--agent-transport", "websocket", "--profile", "p"]
    )
    assert (deployed.stack, deployed.agent_transport, deployed.profile, deployed.qualifier) == (
        "dev",
        "websocket",
        "p",
        None,
    )


class ScriptedTransport:
    """A speech transport whose sessions answer with scripted frames and record what was sent."""

    def __init__(self, frames: list[Any]) -> None:
        self.frames = frames
        self.sessions: list[list[ClientMessage]] = []

    @asynccontextmanager
    async def connect(self) -> AsyncIterator[Any]:
        sent: list[ClientMessage] = []
        self.sessions.append(sent)
        frames = iter(self.frames)

        class Connection:
            async def send(self, message: ClientMessage) -> None:
                sent.append(message)

            async def receive(self) -> Any:
                return next(frames, None)

        yield Connection()


async def test_time_to_first_audio_sends_then_cancels_and_closes() -> None:
    transport = ScriptedTransport([SynthesisStart(request_id="s0"), b"\x01\x00", b"\x02\x00", None])
    elapsed = await time_to_first_audio(transport, TRANSPORT_TEXT, "first_sentence")
    assert elapsed >= 0.0
    sentences = split_sentences(TRANSPORT_TEXT)
    assert transport.sessions == [
        [
            *(Synthesize(text=s, request_id=f"s{i}") for i, s in enumerate(sentences)),
            *(Cancel(request_id=f"s{i}") for i in range(len(sentences))),
            Close(),
        ]
    ]


async def test_time_to_first_audio_reports_refusals_and_silence() -> None:
    refused = ScriptedTransport([ErrorEvent(request_id="whole", code="text_too_long", message="too long")])
    with pytest.raises(LabError, match="refused the request: text_too_long: too long"):
        await time_to_first_audio(refused, TRANSPORT_TEXT, "whole_text")
    silent = ScriptedTransport([SynthesisStart(request_id="whole"), None])
    with pytest.raises(LabError, match=r"ended before any audio \(whole_text\)"):
        await time_to_first_audio(silent, TRANSPORT_TEXT, "whole_text")


async def test_measure_transport_warms_up_then_alternates() -> None:
    transport = ScriptedTransport([b"\x00\x00", None])
    results = await measure_transport(transport, TRANSPORT_TEXT, 2, say=lambda _: None)
    first_requests = [session[0].request_id for session in transport.sessions if isinstance(session[0], Synthesize)]
    # warm-up (first sentence), then whole/first, then first/whole
    assert first_requests == ["s0", "whole", "s0", "s0", "whole"]
    assert (len(results.whole_text_ms), len(results.first_sentence_ms)) == (2, 2)
    assert (results.text_chars, results.sentences) == (267, 4)


async def test_measure_end_to_end_alternates_and_keeps_clips_of_timed_trials() -> None:
    calls: list[Mode] = []

    async def trial(mode: Mode) -> tuple[AgentTrial, list[tuple[int, int]]]:
        calls.append(mode)
        n = len(calls)
        return AgentTrial(1.0, float(n), 10.0), [(n, n + 1)]

    results, clips = await measure_end_to_end(trial, 2, say=lambda _: None)
    assert calls == ["stream", "batch", "stream", "stream", "batch"]
    assert [t.first_audio_ms for t in results.batch] == [2.0, 5.0]
    assert [t.first_audio_ms for t in results.stream] == [3.0, 4.0]
    assert clips == [(2, 3), (3, 4), (4, 5), (5, 6)]  # the warm-up's clip is not counted


# --- one real run ------------------------------------------------------------------------------------


async def test_lab_runs_against_the_local_stack(tmp_path: Path) -> None:
    options = LabOptions(
        speech_engine="zero", trials=1, e2e_trials=1, chart=tmp_path / "lab.png", log=tmp_path / "lab.log"
    )
    results = await run_local(options)
    assert results.transport.text_chars == 267
    assert (len(results.transport.whole_text_ms), len(results.transport.first_sentence_ms)) == (1, 1)
    assert (len(results.end_to_end.batch), len(results.end_to_end.stream)) == (1, 1)
    assert results.sizes.clips == 24
    # Base64 is 4/3 of the raw size; JSON and SSE framing add a little more, never less.
    assert results.sizes.encoded_bytes > results.sizes.raw_bytes * 4 // 3
    # In batch mode audio can only start after the whole scripted answer (about 2 s at 40 tokens/s).
    assert results.end_to_end.batch[0].first_audio_ms > results.end_to_end.batch[0].first_text_ms
    log = (tmp_path / "lab.log").read_text()
    assert "agent   | ready in " in log
    assert "stopped" in log


async def test_the_deployed_target_against_the_agentcore_standin(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The deployed target as on AWS, offline: the runtime is the AgentCore stand-in in front of the
    local agent, the endpoint the SageMaker stand-in, both reached through the SDK's own settings."""
    env = {k: v for k, v in os.environ.items() if k != "BEDROCK_MODEL_ID"}
    async with launch(AGENTCORE_STACK, base_env=env) as stack:
        urls = stack.urls
        assert urls.standin_url is not None
        assert urls.ca_file is not None
        assert urls.agentcore_ca_file is not None
        bundle = tmp_path / "bundle.pem"  # one bundle trusting both stand-ins, as AWS_CA_BUNDLE can
        bundle.write_bytes(urls.ca_file.read_bytes() + urls.agentcore_ca_file.read_bytes())
        for key in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_REGION", "AWS_ENDPOINT_URL"):
            monkeypatch.delenv(key, raising=False)
        monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
        monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
        for key, value in agentcore_environment(urls).items():
            monkeypatch.setenv(key, value)
        monkeypatch.setenv("AWS_CA_BUNDLE", str(bundle))
        monkeypatch.setenv("AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME_HTTP2", urls.standin_url)
        for transport in ("sse", "websocket"):
            options = LabOptions(
                target="deployed",
                trials=1,
                e2e_trials=1,
                endpoint_name=AGENTCORE_STACK.endpoint_name,
                runtime_arn=LOCAL_RUNTIME_ARN,
                region="us-east-1",
                agent_transport=transport,
            )
            results = await run_deployed(options)
            assert results.deployed
            assert results.notes == (
                f"speech: SageMaker endpoint {AGENTCORE_STACK.endpoint_name} at {urls.standin_url}",
                f"agent: AgentCore runtime {LOCAL_RUNTIME_ARN} through "
                + ("InvokeAgentRuntime" if transport == "sse" else "the WebSocket route")
                + f" at {urls.agentcore_url}",
            )
            assert results.agent_route == ("SSE" if transport == "sse" else "WebSocket")
            assert (len(results.end_to_end.batch), len(results.end_to_end.stream)) == (1, 1)
            assert results.end_to_end.batch[0].first_audio_ms > results.end_to_end.batch[0].first_text_ms
            assert results.sizes.clips == 24
            assert results.sizes.encoded_bytes > results.sizes.raw_bytes * 4 // 3
            lines = [" ".join(line.split()) for line in render(results).splitlines()]
            assert "reference: AWS write-up, deployed runtime 3.5x" in lines
