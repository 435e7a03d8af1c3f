"""The local stack: its pure builders (environments, ports, weights, flags) and one real start of all
four processes with the zero-cost speech engine, an invocation through the page's proxy, and stop."""

from __future__ import annotations

import base64
import json
import os
import re
import signal
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest

from agent_app.models import DEMO_ANSWER
from kokoro_server import model_pin
from local.stack import (
    LOCAL_RUNTIME_ARN,
    REPO_ROOT,
    SPEECH_PACKAGE_ROOT,
    StackConfig,
    StackError,
    StackUrls,
    Weights,
    agent_env,
    agentcore_environment,
    agentcore_spec,
    build_parser,
    cached_real_weights,
    child_env,
    config_from_args,
    demo_model_reason,
    launch,
    speech_spec,
    with_ports,
)
from local.standin.agentcore_auth import ALLOWED

CA = Path("/tmp/ca.pem")
STANDIN = "https://127.0.0.1:8443"


def test_child_env_puts_both_package_roots_first_and_keeps_the_hub_offline() -> None:
    env = child_env({"PYTHONPATH": "/extra", "HF_HUB_OFFLINE": "0", "HOME": "/root"})
    assert env == {
        "PYTHONPATH": os.pathsep.join([str(REPO_ROOT), str(SPEECH_PACKAGE_ROOT), "/extra"]),
        "PYTHONUNBUFFERED": "1",
        "HF_HUB_OFFLINE": "1",
        "HOME": "/root",
    }


def test_agent_env_without_credentials_signs_with_a_dummy_key_and_uses_the_demo_model() -> None:
    base = {"BEDROCK_MODEL_ID": "anthropic.x", "AWS_PROFILE": "gone", "SPEECH_WS_URL": "ws://old"}
    env = agent_env(StackConfig(), base, credentials=False, standin_url=STANDIN, ca_file=CA)
    assert {k: v for k, v in env.items() if k.startswith(("AWS_", "SPEECH_", "SAGEMAKER_", "BEDROCK_"))} == {
        "AWS_REGION": "us-east-1",
        "AWS_ACCESS_KEY_ID": "AKIDLOCALSTANDIN0000",
        "AWS_SECRET_ACCESS_KEY": "local-stand-in-does-not-verify-signatures",
        "SPEECH_TRANSPORT": "sagemaker",
        "SPEECH_ENDPOINT_NAME": "kokoro-local",
        "AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME_HTTP2": STANDIN,
        "SAGEMAKER_CA_FILE": str(CA),
    }


def test_agent_env_with_credentials_keeps_them_and_bedrock() -> None:
    base = {
        "BEDROCK_MODEL_ID": "anthropic.x",
        "AWS_ACCESS_KEY_ID": "AKIAREAL",
        "AWS_SECRET_ACCESS_KEY": "secret",
        "AWS_SESSION_TOKEN": "token",
        "AWS_DEFAULT_REGION": "eu-west-1",
    }
    env = agent_env(StackConfig(), base, credentials=True, standin_url=STANDIN, ca_file=CA)
    assert (env["BEDROCK_MODEL_ID"], env["AWS_ACCESS_KEY_ID"], env["AWS_SESSION_TOKEN"]) == (
        "anthropic.x",
        "AKIAREAL",
        "token",
    )
    assert env["AWS_REGION"] == "eu-west-1"


def test_agent_env_websocket_transport_bypasses_the_standin() -> None:
    config = StackConfig(speech_transport="websocket", speech_port=9123)
    base = {"SPEECH_ENDPOINT_NAME": "x", "SAGEMAKER_CA_FILE": "/x", "AWS_REGION": "us-west-2"}
    env = agent_env(config, base, credentials=False, standin_url=None, ca_file=None)
    assert env["SPEECH_TRANSPORT"] == "websocket"
    assert env["SPEECH_WS_URL"] == "ws://127.0.0.1:9123/invocations-bidirectional-stream"
    assert "SPEECH_ENDPOINT_NAME" not in env
    assert "SAGEMAKER_CA_FILE" not in env
    assert "AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME_HTTP2" not in env
    assert env["AWS_REGION"] == "us-west-2"


def test_agent_env_sagemaker_needs_the_standin() -> None:
    with pytest.raises(ValueError, match="needs the stand-in's URL and CA file"):
        agent_env(StackConfig(), {}, credentials=False, standin_url=None, ca_file=None)


def test_demo_model_reason() -> None:
    assert demo_model_reason({}, credentials=True) == "BEDROCK_MODEL_ID is not set"
    assert demo_model_reason({"BEDROCK_MODEL_ID": "  "}, credentials=True) == "BEDROCK_MODEL_ID is not set"
    assert (
        demo_model_reason({"BEDROCK_MODEL_ID": "m"}, credentials=False)
        == "BEDROCK_MODEL_ID is set but no AWS credentials were found"
    )
    assert demo_model_reason({"BEDROCK_MODEL_ID": "m"}, credentials=True) is None


def test_with_ports_picks_free_ports_and_names_a_busy_one() -> None:
    resolved = with_ports(StackConfig(speech_port=0, standin_port=0, agent_port=0, web_port=0))
    ports = [resolved.speech_port, resolved.standin_port, resolved.agent_port, resolved.web_port]
    assert 0 not in ports
    assert len(set(ports)) == 4
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        with pytest.raises(StackError) as error:
            with_ports(StackConfig(speech_port=0, standin_port=0, agent_port=port, web_port=0))
        assert str(error.value) == (
            f"port {port} (--agent-port) is in use: is another stack running? Choose another with --agent-port"
        )
        # Ports of services that will not run are neither checked nor changed.
        skipped = with_ports(
            StackConfig(
                speech_port=0,
                agent_port=0,
                standin_port=port,
                web_port=port,
                speech_transport="websocket",
                browser_server=False,
            )
        )
        assert (skipped.standin_port, skipped.web_port) == (port, port)


def test_speech_spec_passes_engine_and_weights() -> None:
    config = StackConfig(speech_port=9001)
    zero = speech_spec(StackConfig(speech_port=9001, speech_engine="zero"), Weights(None, False, "none"), {})
    assert zero.argv == (
        sys.executable,
        "-m",
        "kokoro_server",
        "--host",
        "127.0.0.1",
        "--port",
        "9001",
        "--engine",
        "zero",
    )
    real = speech_spec(config, Weights(Path("/w"), True, "cache"), {})
    assert real.argv[-4:] == ("--engine", "kokoro", "--model-dir", "/w")
    assert real.ready_timeout_s == 600.0


def test_the_agentcore_standin_fronts_the_agent_and_tells_callers_how_to_reach_it(tmp_path: Path) -> None:
    config = StackConfig(agent_port=9100, agentcore_port=9444, agentcore=True)
    spec = agentcore_spec(config, tmp_path, {})
    assert (spec.name, spec.argv) == (
        "runtime",
        (
            sys.executable,
            "-m",
            "local.agentcore_standin",
            "--host",
            "127.0.0.1",
            "--port",
            "9444",
            "--runtime",
            f"{LOCAL_RUNTIME_ARN}=http://127.0.0.1:9100",
            "--region",
            "us-east-1",
            "--cert-dir",
            str(tmp_path),
        ),
    )
    urls = StackUrls(
        speech_url="http://127.0.0.1:1",
        speech_ws_url="ws://127.0.0.1:1/x",
        agent_url="http://127.0.0.1:9100",
        standin_url=None,
        ca_file=None,
        web_url=None,
        agentcore_url="https://127.0.0.1:9444",
        agentcore_ca_file=tmp_path / "ca.pem",
        agentcore_credentials={"AWS_ACCESS_KEY_ID": ALLOWED.access_key, "AWS_SECRET_ACCESS_KEY": ALLOWED.secret_key},
    )
    assert agentcore_environment(urls) == {
        "AWS_ENDPOINT_URL_BEDROCK_AGENTCORE": "https://127.0.0.1:9444",
        "AWS_CA_BUNDLE": str(tmp_path / "ca.pem"),
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_ACCESS_KEY_ID": "AKIDAGENTCORESTANDIN",
        "AWS_SECRET_ACCESS_KEY": "agentcore-stand-in-test-secret",
    }
    framed = speech_spec(StackConfig(speech_frame_ms=200, speech_engine="zero"), Weights(None, False, "none"), {})
    assert framed.argv[-2:] == ("--frame-ms", "200")
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        with pytest.raises(StackError, match=rf"^port {port} \(--agentcore-port\) is in use"):
            with_ports(
                StackConfig(
                    speech_port=0, standin_port=0, agent_port=0, web_port=0, agentcore=True, agentcore_port=port
                )
            )
        # Without --agentcore its port is neither checked nor changed.
        assert (
            with_ports(
                StackConfig(speech_port=0, standin_port=0, agent_port=0, web_port=0, agentcore_port=port)
            ).agentcore_port
            == port
        )


def test_flags_map_onto_the_config() -> None:
    assert config_from_args(build_parser().parse_args([])) == StackConfig()
    args = build_parser().parse_args(
        ["--speech-transport", "websocket", "--no-browser-server", "--agent-port", "9000", "--weights", "random"]
    )
    assert config_from_args(args) == StackConfig(
        speech_transport="websocket", browser_server=False, agent_port=9000, weights="random"
    )
    args = build_parser().parse_args(["--agentcore", "--agentcore-port", "9555", "--speech-frame-ms", "200"])
    assert config_from_args(args) == StackConfig(agentcore=True, agentcore_port=9555, speech_frame_ms=200)


def test_cached_real_weights_needs_every_file(tmp_path: Path) -> None:
    repo = tmp_path / ("models--" + model_pin.REPO_ID.replace("/", "--"))
    snapshot = repo / "snapshots" / model_pin.REVISION
    names = [model_pin.CONFIG_FILE, model_pin.CHECKPOINT_FILE]
    names += [f"{model_pin.VOICES_DIR}/{v}.pt" for v in model_pin.DEFAULT_VOICES]
    for name in names[:-1]:
        (snapshot / name).parent.mkdir(parents=True, exist_ok=True)
        (snapshot / name).write_bytes(b"x")
    assert cached_real_weights(tmp_path) is None  # the last voice is missing
    (snapshot / names[-1]).write_bytes(b"x")
    assert cached_real_weights(tmp_path) == snapshot


def sse_events(body: bytes) -> list[dict[str, Any]]:
    """AgentCore frames every event as `data: <json>\\n\\n`."""
    frames = body.split(b"\n\n")
    assert frames[-1] == b""
    events = []
    for frame in frames[:-1]:
        assert frame.startswith(b"data: ")
        events.append(json.loads(frame[len(b"data: ") :]))
    return events


@pytest.mark.parametrize("transport", ["sagemaker", "websocket"])
async def test_stack_starts_answers_and_stops(transport: str) -> None:
    config = StackConfig(
        speech_port=0,
        standin_port=0,
        agent_port=0,
        web_port=0,
        speech_engine="zero",
        speech_transport="sagemaker" if transport == "sagemaker" else "websocket",
        speech_ready_timeout_s=60,
    )
    log: list[tuple[str, str]] = []
    # No BEDROCK_MODEL_ID: the demo model answers, whatever this machine's AWS configuration.
    env = {k: v for k, v in os.environ.items() if k != "BEDROCK_MODEL_ID"}
    async with launch(config, sink=lambda name, line: log.append((name, line)), base_env=env) as stack:
        processes = list(stack.group.processes)
        names = [p.spec.name for p in processes]
        assert sorted(names) == sorted(["speech", "agent", "web", *(["standin"] if transport == "sagemaker" else [])])
        assert stack.demo_model
        assert stack.urls.web_url is not None
        async with httpx.AsyncClient(base_url=stack.urls.web_url, timeout=60) as client:
            health = await client.get("/api/health")
            assert health.status_code == 200
            assert health.json()["agent"]["status"] == "Healthy"
            response = await client.post("/api/invoke", json={"prompt": "hello", "mode": "stream"})
    assert all(p.returncode is not None for p in processes)
    assert (
        "stack",
        "agent model: the offline demo model (BEDROCK_MODEL_ID is not set): a canned answer at 40 tokens/s",
    ) in log

    assert response.status_code == 200
    events = sse_events(response.content)
    kinds = [e["type"] for e in events]
    assert kinds[0] == "agent_start"
    assert kinds[-3:] == ["audio_end", "metrics", "agent_end"]
    assert "error" not in kinds
    assert events[0] == {"type": "agent_start", "mode": "stream", "model": "demo", "demo": True}
    assert "".join(e["text"] for e in events if e["type"] == "text_delta") == DEMO_ANSWER
    chunks = [e for e in events if e["type"] == "audio_chunk"]
    assert [c["seq"] for c in chunks] == list(range(len(chunks)))
    pcm = b"".join(base64.b64decode(c["audio"]) for c in chunks)
    assert events[-3] == {"type": "audio_end", "chunks": len(chunks), "bytes": len(pcm)}
    # The zero-cost engine's test pattern: sample k of a sentence is (k % 251) - 125.
    first = [int.from_bytes(pcm[i : i + 2], "little", signed=True) for i in range(0, 8, 2)]
    assert first == [-125, -124, -123, -122]


def test_the_command_prints_the_page_url_and_stops_cleanly_on_ctrl_c() -> None:
    """`python -m local.stack` as a user runs it: the last line names the page; SIGINT stops all."""
    argv = [sys.executable, "-m", "local.stack", "--speech-engine", "zero"]
    argv += ["--speech-port", "0", "--standin-port", "0", "--agent-port", "0", "--web-port", "0"]
    argv += ["--agentcore", "--agentcore-port", "0"]
    env = {k: v for k, v in os.environ.items() if k != "BEDROCK_MODEL_ID"}
    process = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines: list[str] = []
    try:
        assert process.stdout is not None
        for line in process.stdout:
            lines.append(line.rstrip("\n"))
            if line.startswith("open ") or process.poll() is not None:
                break
        url = lines[-1].removeprefix("open ")
        assert re.fullmatch(r"http://127\.0\.0\.1:\d+", url), lines
        page = httpx.get(url + "/", timeout=10)
        assert page.status_code == 200
        assert "<title>voicestack · local</title>" in page.text
        process.send_signal(signal.SIGINT)
        rest, _ = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    lines += rest.splitlines()
    assert process.returncode == 0, lines
    assert lines[-1] == "stack   | stopped"
    pids = [int(m.group(1)) for line in lines if (m := re.search(r"\| ready in [\d.]+ s \(pid (\d+)\)$", line))]
    assert len(pids) == 5  # speech, standin, agent, runtime (the AgentCore stand-in), web
    for pid in pids:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
    stopped = [line.split("|")[0].strip() for line in lines if "| stopped (" in line]
    assert stopped == ["web", "runtime", "agent", "standin", "speech"]  # newest first
    runtime = [line for line in lines if line.startswith("stack   |   runtime  https://127.0.0.1:")]
    assert len(runtime) == 1, lines
    assert runtime[0].endswith(f"(AgentCore Runtime stand-in: {LOCAL_RUNTIME_ARN})")
    talk = [line for line in lines if line.startswith("stack   |   talk     env AWS_ENDPOINT_URL_BEDROCK_AGENTCORE=")]
    assert len(talk) == 1, lines
    assert talk[0].endswith(f"voicestack talk --runtime-arn {LOCAL_RUNTIME_ARN}")
    assert not any("WARNING" in line for line in lines if line.startswith("stack "))
