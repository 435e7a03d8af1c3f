"""`voicestack talk` end to end: the command, as a process, against the AgentCore stand-in in front of
the real local agent (demo model, zero-cost speech engine, SageMaker stand-in): one turn over the
signed WebSocket and over InvokeAgentRuntime, a conversation and its resumption, Ctrl-C barge-in,
`--out` bytes, the refusals a user meets (exit 3 with the AWS code and the fix), the 409 retry, the
reconnection after the idle timeout, `--stack`, and the cut-off AgentCore makes on a frame over
32 KB (from an agent that misbehaves on purpose: this project's agent cuts its events to fit)."""

from __future__ import annotations

import asyncio
import json
import re
import signal
import stat
import wave
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent_app.models import DEMO_ANSWER, DEMO_FOLLOW_UP
from local.standin.agentcore_auth import DENIED, EXPIRED, SSE_ONLY
from local.threaded_server import serve_in_thread
from tests.voicestack.talk_support import (
    ARN,
    OVERSIZED_FRAME,
    LiveStack,
    is_test_pattern,
    live_stack,
    oversized_agent,
    spawn_talk,
    standin_env,
    standin_process,
    talk,
)
from voicestack.agentcore import resolve_sdk
from voicestack.talk.client import run_turn
from voicestack.talk.targets import Runtime, open_conversation

pytestmark = pytest.mark.timeout(600)

SESSION_LINE = re.compile(
    r"^voicestack talk: session (\S+) with (\S+) over (websocket|sse) \(resume it with --session \1\)$"
)
SUMMARY = re.compile(
    r"^\(first text (?:[0-9.]+ s|none), first audio (?:[0-9.]+ s|none), end (?P<end>[0-9.]+) s, [0-9.]+ s of audio"
)


@pytest.fixture(scope="module")
def stack() -> Iterator[LiveStack]:
    with live_stack() as running:
        yield running


def lines(text: str) -> list[str]:
    return text.splitlines()


def test_one_turn_over_the_signed_websocket_and_its_audio(stack: LiveStack, tmp_path: Path) -> None:
    out = tmp_path / "answer.wav"
    done = talk(["--runtime-arn", ARN, "--no-play", "--out", str(out), "How does it work?"], stack.env())
    assert done.returncode == 0, done.stderr
    assert done.stdout == DEMO_ANSWER + "\n"
    err = lines(done.stderr)
    session = SESSION_LINE.fullmatch(err[0])
    assert session is not None, err
    assert session.group(2, 3) == (ARN, "websocket")
    assert SUMMARY.match(err[1]), err
    assert err[1].endswith("; stream mode, websocket)")
    wrote = re.fullmatch(rf"voicestack talk: wrote ([0-9,]+) bytes of audio to {re.escape(str(out))}", err[2])
    assert wrote is not None, err
    assert len(err) == 3
    with wave.open(str(out), "rb") as wav:
        assert (wav.getnchannels(), wav.getsampwidth(), wav.getframerate()) == (1, 2, 24000)
        pcm = wav.readframes(wav.getnframes())
    assert len(pcm) == int(wrote.group(1).replace(",", "")) > 0
    assert is_test_pattern(pcm)


async def test_the_wav_is_byte_for_byte_the_pcm_that_arrived(
    stack: LiveStack, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same code as the command (run_turn, then write_wav), watched from inside."""
    from voicestack.talk.audio import write_wav

    for key, value in stack.env().items():
        monkeypatch.setenv(key, value)
    target = Runtime(ARN, await asyncio.to_thread(resolve_sdk), "DEFAULT")
    heard: list[bytes] = []

    class Recording:
        def play(self, pcm: bytes) -> None:
            heard.append(pcm)

        def clear(self) -> None:
            raise AssertionError("nothing stopped this answer")

        async def drain(self) -> None:
            return None

        def close(self) -> None:
            return None

    for transport in ("websocket", "sse"):
        heard.clear()
        conversation = open_conversation(target, transport, "t" * 36 + transport)
        result = await run_turn(conversation, {"prompt": "Hi?"}, number=1, player=Recording(), keep_audio=True)
        await conversation.aclose()
        assert result.outcome == "ok", result
        write_wav(tmp_path / f"{transport}.wav", result.pcm, sample_rate=result.sample_rate, channels=result.channels)
        with wave.open(str(tmp_path / f"{transport}.wav"), "rb") as wav:
            assert wav.readframes(wav.getnframes()) == b"".join(heard) == result.pcm
        assert len(heard) == result.audio_chunks
    await target.aclose()


def test_one_turn_over_invoke_agent_runtime_as_json(stack: LiveStack) -> None:
    done = talk(
        ["--runtime-arn", ARN, "--transport", "sse", "--json", "--no-play", "--mode", "batch", "Hi?"], stack.env()
    )
    assert done.returncode == 0, done.stderr
    (line,) = lines(done.stdout)
    turn = json.loads(line)
    assert {k: turn[k] for k in ("turn", "transport", "target", "mode", "outcome", "error", "text", "connect_ms")} == {
        "turn": 1,
        "transport": "sse",
        "target": ARN,
        "mode": "batch",
        "outcome": "ok",
        "error": None,
        "text": DEMO_ANSWER,
        "connect_ms": None,
    }
    assert 0 < turn["first_text_ms"] <= turn["first_audio_ms"] <= turn["end_ms"]
    assert turn["audio_bytes"] > 0
    assert turn["agent_metrics"]["mode"] == "batch"


def test_a_conversation_keeps_its_session_and_resumes_it(stack: LiveStack) -> None:
    done = talk(
        ["--runtime-arn", ARN, "--json", "--no-play"], stack.env(), stdin="First question?\n\nSecond question?\n"
    )
    assert done.returncode == 0, done.stderr
    first, second = (json.loads(line) for line in lines(done.stdout))
    assert (first["turn"], second["turn"]) == (1, 2)
    assert first["session_id"] == second["session_id"]
    assert first["text"] == DEMO_ANSWER
    assert second["text"] == DEMO_FOLLOW_UP.format(previous="First question?") + DEMO_ANSWER
    assert second["connect_ms"] is None  # the same connection
    again = talk(["--runtime-arn", ARN, "--json", "--no-play", "--session", first["session_id"], "Third?"], stack.env())
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["text"] == DEMO_FOLLOW_UP.format(previous="Second question?") + DEMO_ANSWER
    assert lines(again.stderr)[0] == (f"voicestack talk: resuming {first['session_id']} with {ARN} over websocket")


async def read_line_matching(stream: asyncio.StreamReader, pattern: re.Pattern[str], seen: list[str]) -> re.Match[str]:
    while True:
        raw = await asyncio.wait_for(stream.readline(), 60)
        if not raw:
            raise AssertionError(f"the stream ended before {pattern.pattern}; seen: {seen}")
        line = raw.decode().rstrip("\n")
        seen.append(line)
        if (match := pattern.search(line)) is not None:
            return match


async def test_ctrl_c_stops_an_answer_and_ctrl_c_at_the_prompt_quits(stack: LiveStack) -> None:
    process = await spawn_talk(["--runtime-arn", ARN, "--no-play"], stack.env())
    assert process.stdin is not None
    assert process.stdout is not None
    assert process.stderr is not None
    err: list[str] = []
    await read_line_matching(process.stderr, SESSION_LINE, err)
    process.stdin.write(b"Tell me everything.\n")
    await process.stdin.drain()
    first_text = await asyncio.wait_for(process.stdout.read(1), 60)  # the answer has started
    assert first_text
    process.send_signal(signal.SIGINT)  # barge-in
    await read_line_matching(process.stderr, re.compile(r"^\(stopped\)$"), err)
    stopped = await read_line_matching(process.stderr, SUMMARY, err)
    assert float(stopped.group("end")) < 5.0  # the agent confirmed the stop (turn_stopped)
    process.stdin.write(b"And now?\n")
    await process.stdin.drain()
    await read_line_matching(process.stderr, SUMMARY, err)
    process.send_signal(signal.SIGINT)  # at the prompt: quit
    assert await asyncio.wait_for(process.wait(), 30) == 0
    text = (await process.stdout.read()).decode()
    assert text.endswith(DEMO_ANSWER + "\n")  # the second answer, to its end
    assert "(stopped)" in err
    assert not any("Traceback" in line for line in err)


async def test_ctrl_c_during_a_single_answer_exits_130(stack: LiveStack) -> None:
    process = await spawn_talk(["--url", stack.agent_url, "--no-play", "Tell me everything."], stack.env())
    assert process.stdout is not None
    assert process.stderr is not None
    assert await asyncio.wait_for(process.stdout.read(1), 60)
    process.send_signal(signal.SIGINT)
    assert await asyncio.wait_for(process.wait(), 30) == 130
    err = (await process.stderr.read()).decode().splitlines()
    assert err[1] == "(stopped)"
    assert SUMMARY.match(err[2])


def test_the_local_agent_without_aws_over_both_routes(stack: LiveStack) -> None:
    for transport in ("websocket", "sse"):
        done = talk(["--url", stack.agent_url, "--transport", transport, "--no-play", "Hi?"], stack.env())
        assert done.returncode == 0, done.stderr
        assert done.stdout == DEMO_ANSWER + "\n"
        session = SESSION_LINE.fullmatch(lines(done.stderr)[0])
        assert session is not None, done.stderr
        assert session.group(2, 3) == (stack.agent_url, transport)


@pytest.mark.parametrize(
    ("principal", "transport", "expected"),
    [
        (
            DENIED,
            "websocket",
            "voicestack talk: the runtime refused the call: AccessDeniedException (403): User: "
            "arn:aws:iam::000000000000:user/voicestack-no-invoke is not authorized to perform: "
            f"bedrock-agentcore:InvokeAgentRuntimeWithWebSocketStream on resource: {ARN} because no identity-based "
            "policy allows the bedrock-agentcore:InvokeAgentRuntimeWithWebSocketStream action. Fix: allow "
            f"bedrock-agentcore:InvokeAgentRuntimeWithWebSocketStream on {ARN} in the IAM policy of the identity you "
            "call with (`aws sts get-caller-identity` shows which) (or use --transport sse, which needs only "
            "bedrock-agentcore:InvokeAgentRuntime)",
        ),
        (
            SSE_ONLY,
            "sse",
            None,  # allowed: InvokeAgentRuntime is all it needs
        ),
        (
            EXPIRED,
            "sse",
            "voicestack talk: the runtime refused the call: ExpiredTokenException (403): The security token included "
            "in the request is expired. Fix: your AWS credentials have expired: renew them (`aws sso login` for an "
            "SSO profile, or a new session for assumed-role or environment credentials) and run again",
        ),
    ],
)
def test_refused_credentials_exit_3_with_the_code_and_the_fix(
    stack: LiveStack, principal: object, transport: str, expected: str | None
) -> None:
    from local.standin.agentcore_auth import Principal

    assert isinstance(principal, Principal)
    env = stack.env(AWS_ACCESS_KEY_ID=principal.access_key, AWS_SECRET_ACCESS_KEY=principal.secret_key)
    if principal.session_token:
        env["AWS_SESSION_TOKEN"] = principal.session_token
    done = talk(["--runtime-arn", ARN, "--transport", transport, "--no-play", "Hi?"], env)
    if expected is None:
        assert done.returncode == 0, done.stderr
        return
    assert done.returncode == 3
    assert done.stdout == ""
    assert lines(done.stderr)[-1] == expected
    assert "Traceback" not in done.stderr


def test_a_wrong_secret_and_an_unknown_runtime(stack: LiveStack) -> None:
    done = talk(["--runtime-arn", ARN, "--no-play", "Hi?"], stack.env(AWS_SECRET_ACCESS_KEY="not-the-secret"))
    assert done.returncode == 3
    assert lines(done.stderr)[-1].startswith(
        "voicestack talk: the runtime refused the call: InvalidSignatureException (403): The request signature we "
    )
    assert lines(done.stderr)[-1].endswith(
        "Fix: the secret key does not match the access key: check AWS_SECRET_ACCESS_KEY or the profile's credentials"
    )
    unknown = ARN.replace("localstand", "elsewhere0")
    done = talk(["--runtime-arn", unknown, "--transport", "sse", "--no-play", "Hi?"], stack.env())
    assert done.returncode == 3
    assert lines(done.stderr)[-1].startswith(
        "voicestack talk: the runtime refused the call: ResourceNotFoundException (404): No endpoint or agent found "
        f"with qualifier 'DEFAULT' for agent '{unknown}'. Fix: no runtime {unknown} with endpoint DEFAULT in "
        "us-east-1, or it is not READY yet"
    )


@pytest.mark.parametrize("conflicts", [1, 2])
def test_a_starting_session_is_retried_once(stack: LiveStack, conflicts: int) -> None:
    with standin_process(stack.agent_url, "--conflicts-per-new-session", str(conflicts)) as ready:
        for transport in ("websocket", "sse"):  # each call is a new session, with its own conflicts
            done = talk(["--runtime-arn", ARN, "--transport", transport, "--no-play", "Hi?"], standin_env(ready))
            if conflicts == 1:
                assert done.returncode == 0, done.stderr
                assert done.stdout == DEMO_ANSWER + "\n"
                continue
            assert done.returncode == 3
            assert re.fullmatch(
                r"voicestack talk: the runtime refused the call: RetryableConflictException \(409\): Session \S+ is "
                r"starting; retry the request\. Fix: the session was still starting or stopping \(retried once\): "
                r"wait a few seconds and run again, or leave out --session to start a new one",
                lines(done.stderr)[-1],
            ), done.stderr


async def test_a_conversation_reconnects_on_its_session_after_the_idle_timeout(stack: LiveStack) -> None:
    with standin_process(stack.agent_url, "--idle-timeout", "1") as ready:
        process = await spawn_talk(["--runtime-arn", ARN, "--json", "--no-play"], standin_env(ready))
        assert process.stdin is not None
        assert process.stdout is not None
        assert process.stderr is not None
        process.stdin.write(b"Before the pause?\n")
        first = json.loads(await asyncio.wait_for(process.stdout.readline(), 60))
        await asyncio.sleep(2.5)  # the stand-in ends the idle session after 1 s
        process.stdin.write(b"After it?\n")
        second = json.loads(await asyncio.wait_for(process.stdout.readline(), 60))
        process.stdin.close()
        assert await asyncio.wait_for(process.wait(), 30) == 0
        err = (await process.stderr.read()).decode().splitlines()
    assert first["session_id"] == second["session_id"]
    assert second["connect_ms"] is not None  # a new connection...
    assert second["text"] == DEMO_FOLLOW_UP.format(previous="Before the pause?") + DEMO_ANSWER  # ...same session
    assert err[1] == (
        f"voicestack talk: reconnecting on session {first['session_id']} (the connection had closed: 1001 session "
        "idle for 1 s)"
    )


def test_stack_reads_the_runtime_from_pulumi(stack: LiveStack, tmp_path: Path) -> None:
    pulumi = tmp_path / "pulumi"
    outputs = {"agentRuntimeArn": ARN, "region": "us-east-1"}
    pulumi.write_text(
        "#!/bin/sh\n"
        'if [ "$1 $2" = "stack output" ]; then echo \'' + json.dumps(outputs) + "'; exit 0; fi\n"
        'if [ "$1" = "config" ]; then echo "{}"; exit 0; fi\n'
        "exit 1\n"
    )
    pulumi.chmod(pulumi.stat().st_mode | stat.S_IEXEC)
    env = stack.env()
    env["PATH"] = f"{tmp_path}:{env['PATH']}"
    done = talk(["--stack", "dev", "--json", "--no-play", "Hi?"], env)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["target"] == ARN
    done = talk(["--stack", "dev", "--region", "eu-west-1", "Hi?"], env)
    assert done.returncode == 2
    assert (
        lines(done.stderr)[-1]
        == f"voicestack talk: --region eu-west-1 is not the runtime's region: {ARN} is in us-east-1"
    )


def test_an_unreachable_agent_exits_3(stack: LiveStack) -> None:
    done = talk(["--url", "http://127.0.0.1:9", "--no-play", "Hi?"], stack.env())
    assert done.returncode == 3
    assert lines(done.stderr)[-1].startswith("voicestack talk: cannot reach the agent at http://127.0.0.1:9: ")
    assert lines(done.stderr)[-1].endswith("Fix: start the local stack (`make local`) or pass --url")


def test_a_frame_over_agentcores_limit_cuts_the_answer_off_with_1009() -> None:
    """An agent that sends a frame over 32 KB (this project's agent never does: agent_app.frames):
    AgentCore, like its stand-in, closes the WebSocket, and talk says so (exit 3, the fix)."""
    with serve_in_thread(oversized_agent()) as agent, standin_process(agent.http_url) as ready:
        done = talk(["--runtime-arn", ARN, "--no-play", "Hi?"], standin_env(ready))
    assert done.returncode == 3, done.stderr
    assert lines(done.stderr)[-1] == (
        "voicestack talk: the answer was cut off: the connection closed with 1009 (frame of "
        f"{len(OVERSIZED_FRAME)} bytes exceeds the 32000-byte limit). Fix: a WebSocket message was over AgentCore's "
        "32 KB frame limit: ask a shorter question, or check that the runtime runs this project's agent (it keeps "
        "every event under the limit); --transport sse has no frame limit"
    )
    assert done.stdout == "\n"  # the turn had started; nothing of it was said
