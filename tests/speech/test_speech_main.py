"""`python -m kokoro_server` as a process: it serves, stops cleanly, and exits 1 when the model cannot load."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest
from websockets.sync.client import connect

from kokoro_server.engine import ZeroCostEngine
from kokoro_server.loader import configured_model_dir
from kokoro_server.settings import Settings
from tests.speech.speech_support import chunks_of, free_port, subprocess_env

pytestmark = pytest.mark.timeout(60)


@contextmanager
def server_process(*args: str) -> Iterator[tuple[subprocess.Popen[str], int]]:
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "kokoro_server", "serve", "--host", "127.0.0.1", "--port", str(port), *args],
        env=subprocess_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        yield process, port
    finally:
        if process.poll() is None:
            process.kill()
        process.communicate(timeout=10)  # also closes the output pipe


def wait_for_ping(port: int, process: subprocess.Popen[str]) -> httpx.Response:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and process.poll() is None:
        try:
            response = httpx.get(f"http://127.0.0.1:{port}/ping", timeout=1)
        except httpx.TransportError:
            time.sleep(0.05)
            continue
        if response.status_code == 200:
            return response
        time.sleep(0.05)
    raise AssertionError(f"server never became ready (exit code {process.poll()})")


def test_the_process_serves_the_protocol_and_stops_on_sigterm() -> None:
    with server_process("--engine", "zero") as (process, port):
        assert wait_for_ping(port, process).json() == {"status": "ready"}
        with connect(f"ws://127.0.0.1:{port}/invocations-bidirectional-stream") as ws:
            ws.send(b'{"text": "Hello there.", "request_id": "p"}')
            start = json.loads(ws.recv(timeout=10))
            audio = ws.recv(timeout=10)
            complete = json.loads(ws.recv(timeout=10))
        process.send_signal(signal.SIGTERM)
        output, _ = process.communicate(timeout=15)
        code = process.returncode

    assert start == {
        "type": "synthesis_start",
        "request_id": "p",
        "sample_rate": 24000,
        "format": "pcm_s16le",
        "channels": 1,
    }
    assert audio == ZeroCostEngine().synthesize(chunks_of("Hello there.")[0], "af_heart", 1.0).pcm
    assert (complete["type"], complete["request_id"], complete["chunks"]) == ("synthesis_complete", "p", 1)
    # uvicorn shuts down gracefully, then re-raises the signal so the exit status reports it.
    assert "Application shutdown complete." in output
    assert code == -signal.SIGTERM


def test_a_model_that_cannot_load_makes_the_process_exit_1(tmp_path: Path) -> None:
    with server_process("--engine", "kokoro", "--device", "cpu", "--model-dir", str(tmp_path / "absent")) as (
        process,
        _,
    ):
        output, _ = process.communicate(timeout=30)
        code = process.returncode

    assert code == 1
    assert "loading the speech engine failed" in output
    assert f"model directory {tmp_path / 'absent'} is missing" in output


def test_only_the_default_sagemaker_directory_may_be_absent(tmp_path: Path) -> None:
    # On this machine /opt/ml/model does not exist: the pinned revision is used instead.
    assert not Path("/opt/ml/model").exists()
    assert configured_model_dir(Settings()) is None
    assert configured_model_dir(Settings(model_dir=tmp_path / "typo")) == tmp_path / "typo"
