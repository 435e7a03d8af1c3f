"""Support for `voicestack talk`'s end-to-end tests: the local stack (real agent, zero-cost speech
engine) with the AgentCore stand-in in front, run on its own thread, and the command as a process."""

from __future__ import annotations

import asyncio
import base64
import itertools
import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.routing import WebSocketRoute
from starlette.websockets import WebSocket

from local.stack import LOCAL_RUNTIME_ARN, StackConfig, StackUrls, agentcore_environment, launch

REPO_ROOT = Path(__file__).resolve().parents[2]
ARN = LOCAL_RUNTIME_ARN
START_TIMEOUT_S = 300.0
TALK_TIMEOUT_S = 120.0

AWS_KEYS = (
    "AWS_PROFILE",
    "AWS_DEFAULT_PROFILE",
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_REGION",
    "AWS_DEFAULT_REGION",
    "AWS_CA_BUNDLE",
    "AWS_ENDPOINT_URL",
    "AWS_ENDPOINT_URL_BEDROCK_AGENTCORE",
    "BEDROCK_MODEL_ID",
)


@dataclass(frozen=True)
class LiveStack:
    urls: StackUrls

    @property
    def agent_url(self) -> str:
        return self.urls.agent_url

    def env(self, **overrides: str) -> dict[str, str]:
        """A caller's environment: the stand-in's endpoint, CA and test credentials, no other AWS setting."""
        return caller_env(**{**agentcore_environment(self.urls), **overrides})


def caller_env(**settings: str) -> dict[str, str]:
    """This process's environment without its AWS configuration, plus `settings` (the SDK's endpoint,
    CA bundle, region and credentials of a stand-in), for `voicestack talk` as a process."""
    env = {k: v for k, v in os.environ.items() if k not in AWS_KEYS}
    env["AWS_CONFIG_FILE"] = "/nonexistent/aws-config"
    env["AWS_SHARED_CREDENTIALS_FILE"] = "/nonexistent/aws-credentials"
    env["AWS_EC2_METADATA_DISABLED"] = "true"
    env["PYTHONPATH"] = os.pathsep.join([str(REPO_ROOT), str(REPO_ROOT / "images" / "kokoro")])
    env["PYTHONUNBUFFERED"] = "1"
    env.update(settings)
    return env


AGENTCORE_STACK = StackConfig(
    speech_port=0,
    standin_port=0,
    agent_port=0,
    web_port=0,
    agentcore_port=0,
    browser_server=False,
    speech_engine="zero",
    agentcore=True,
)
"""The local stack with the AgentCore stand-in in front of the agent, on free ports, with the
zero-cost speech engine at the speech server's default frames (the talk and lab tests use it)."""


@contextmanager
def live_stack(*, log: list[str] | None = None) -> Iterator[LiveStack]:
    """The local stack with the AgentCore stand-in, served from a thread of its own until the block ends."""
    config = AGENTCORE_STACK
    ready = threading.Event()
    stop = threading.Event()
    found: list[LiveStack | BaseException] = []
    lines = log if log is not None else []
    env = {k: v for k, v in os.environ.items() if k != "BEDROCK_MODEL_ID"}

    async def serve() -> None:
        try:
            async with launch(config, sink=lambda name, line: lines.append(f"{name}| {line}"), base_env=env) as stack:
                found.append(LiveStack(stack.urls))
                ready.set()
                await asyncio.to_thread(stop.wait)
        except BaseException as exc:  # reported to the test's thread below
            found.append(exc)
            ready.set()
            raise

    thread = threading.Thread(target=lambda: asyncio.run(serve()), name="live-stack", daemon=True)
    thread.start()
    try:
        if not ready.wait(START_TIMEOUT_S):
            raise RuntimeError("the local stack did not start in time:\n" + "\n".join(lines[-40:]))
        if isinstance(found[0], BaseException):
            raise RuntimeError("the local stack did not start:\n" + "\n".join(lines[-40:])) from found[0]
        yield found[0]
    finally:
        stop.set()
        thread.join(60)


def talk_argv(args: Sequence[str]) -> list[str]:
    return [sys.executable, "-m", "voicestack", "talk", *args]


async def spawn_talk(args: Sequence[str], env: Mapping[str, str]) -> asyncio.subprocess.Process:
    """`voicestack talk ARGS` as a process whose stdin, stdout and stderr the test holds."""
    return await asyncio.create_subprocess_exec(
        *talk_argv(args),
        cwd=REPO_ROOT,
        env=dict(env),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )


def talk(args: Sequence[str], env: Mapping[str, str], *, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    """`voicestack talk ARGS` as a process, to its end."""
    return subprocess.run(
        talk_argv(args),
        cwd=REPO_ROOT,
        env=dict(env),
        input=stdin,
        capture_output=True,
        text=True,
        timeout=TALK_TIMEOUT_S,
        check=False,
    )


@contextmanager
def standin_process(agent_url: str, *flags: str) -> Iterator[dict[str, Any]]:
    """Another AgentCore stand-in in front of the same agent (`python -m local.agentcore_standin`)."""
    argv = [sys.executable, "-m", "local.agentcore_standin", "--port", "0", "--runtime", f"{ARN}={agent_url}", *flags]
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO_ROOT), str(REPO_ROOT / "images" / "kokoro")])
    with subprocess.Popen(
        argv, cwd=REPO_ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
    ) as process:
        try:
            assert process.stdout is not None
            ready = json.loads(process.stdout.readline())
            yield ready
        finally:
            process.terminate()
            process.wait(timeout=30)


def standin_env(ready: Mapping[str, Any]) -> dict[str, str]:
    """A caller's environment for the stand-in of `ready` (its ready line): endpoint, CA, region, credentials."""
    return caller_env(
        AWS_ENDPOINT_URL_BEDROCK_AGENTCORE=str(ready["url"]),
        AWS_CA_BUNDLE=str(ready["ca_file"]),
        AWS_DEFAULT_REGION=str(ready["region"]),
        **{key: str(value) for key, value in ready["credentials"].items()},
    )


OVERSIZED_FRAME = json.dumps(
    {"type": "audio_chunk", "turn": 1, "seq": 0, "audio": base64.b64encode(bytes(48_000)).decode("ascii")}
)
"""One second of PCM in one event (64,057 bytes): what the agent sent before it cut its events to
AgentCore's frames (`agent_app.frames`), over the 32 KB limit."""


def oversized_agent() -> Starlette:
    """An agent that breaks AgentCore's frame limit on purpose: asked a question over `WS /ws`, it starts
    the turn (`agent_start`), then sends `OVERSIZED_FRAME`, and waits for the caller to leave."""

    async def conversation(websocket: WebSocket) -> None:
        await websocket.accept()
        while (await websocket.receive())["type"] != "websocket.disconnect":
            await websocket.send_text(json.dumps({"type": "agent_start", "turn": 1, "model": "oversized"}))
            await websocket.send_text(OVERSIZED_FRAME)

    return Starlette(routes=[WebSocketRoute("/ws", conversation)])


def is_test_pattern(pcm: bytes) -> bool:
    """The zero-cost engine's audio, chunk after chunk: samples -125, -124, ... 125, -125, ... restarting
    at -125 whenever a chunk starts. A lost, doubled or reordered byte breaks the pattern."""
    samples = [int.from_bytes(pcm[i : i + 2], "little", signed=True) for i in range(0, len(pcm), 2)]
    if len(pcm) % 2 or not samples or samples[0] != -125:
        return False
    return all(b == a + 1 or b == -125 for a, b in itertools.pairwise(samples))
