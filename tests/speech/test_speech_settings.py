"""Server settings: defaults, environment, flags over environment, and errors naming the key."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from kokoro_server.settings import Settings, SettingsError, load_settings
from tests.speech.speech_support import subprocess_env


def test_defaults_are_sagemakers_contract() -> None:
    settings = load_settings([], {})
    assert settings == Settings()
    assert (settings.host, settings.port, settings.model_dir) == ("0.0.0.0", 8080, Path("/opt/ml/model"))
    assert (settings.engine, settings.device, settings.precision, settings.chunking) == (
        "kokoro",
        "auto",
        "fp32",
        "adaptive",
    )
    assert (settings.max_concurrent, settings.max_text_chars, settings.frame_ms) == ("auto", 5000, 1000)


def test_environment_then_flags_override_defaults() -> None:
    env = {"KOKORO_PORT": "9000", "KOKORO_MODEL_DIR": "/weights", "KOKORO_MAX_CONCURRENT": "3", "KOKORO_ENGINE": "zero"}
    assert load_settings([], env) == Settings(port=9000, model_dir=Path("/weights"), max_concurrent=3, engine="zero")
    assert load_settings(["--port", "9100", "--max-concurrent", "auto"], env) == Settings(
        port=9100, model_dir=Path("/weights"), max_concurrent="auto", engine="zero"
    )


def test_sagemakers_serve_argument_is_accepted() -> None:
    assert load_settings(["serve", "--device", "cuda"], {}) == Settings(device="cuda")


@pytest.mark.parametrize(
    ("argv", "env", "message"),
    [
        ([], {"KOKORO_PORT": "http"}, "KOKORO_PORT='http' is invalid; allowed: an integer from 1 to 65535"),
        (["--port", "0"], {}, "--port='0' is invalid; allowed: an integer from 1 to 65535"),
        ([], {"KOKORO_DEVICE": "tpu"}, "KOKORO_DEVICE='tpu' is invalid; allowed: one of 'auto', 'cpu', 'cuda'"),
        (["--precision", "int8"], {}, "--precision='int8' is invalid; allowed: one of 'fp32', 'bf16', 'fp16'"),
        (
            ["--max-concurrent", "0"],
            {},
            "--max-concurrent='0' is invalid; allowed: 'auto' or an integer from 1 to 64",
        ),
        ([], {"KOKORO_ENGINE": "Kokoro"}, "KOKORO_ENGINE='Kokoro' is invalid; allowed: one of 'kokoro', 'zero'"),
        ([], {"KOKORO_MODEL_DIR": " "}, "KOKORO_MODEL_DIR=' ' is invalid; allowed: a non-empty path"),
        (["--chunking", "word"], {}, "--chunking='word' is invalid; allowed: one of 'adaptive', 'sentence', 'none'"),
        (["--frame-ms", "5"], {}, "--frame-ms='5' is invalid; allowed: an integer from 20 to 10000"),
        (
            [],
            {"KOKORO_LOG_LEVEL": "loud"},
            "KOKORO_LOG_LEVEL='loud' is invalid; allowed: one of 'debug', 'info', 'warning', 'error'",
        ),
    ],
)
def test_invalid_values_name_the_key_and_the_allowed_values(argv: list[str], env: dict[str, str], message: str) -> None:
    with pytest.raises(SettingsError) as caught:
        load_settings(argv, env)
    assert str(caught.value) == message


def test_a_valid_flag_hides_an_invalid_environment_value() -> None:
    assert load_settings(["--port", "8081"], {"KOKORO_PORT": "nope"}).port == 8081


@pytest.mark.parametrize(("value", "device", "expected"), [("auto", "cuda", 2), (3, "cpu", 3), (1, "cuda", 1)])
def test_concurrency_resolves_auto_per_device(value: int | str, device: str, expected: int) -> None:
    settings = load_settings(["--max-concurrent", str(value)], {})
    assert settings.concurrency_for("cpu" if device == "cpu" else "cuda").concurrency == expected


def test_auto_concurrency_on_a_cpu_follows_the_rule_for_this_machines_cores() -> None:
    from kokoro_server.concurrency import auto_plan, usable_cores

    settings = load_settings([], {})
    assert settings.concurrency_for("cpu") == auto_plan("cpu", usable_cores())


def test_the_command_line_reports_a_bad_setting_and_exits_2() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "kokoro_server", "--port", "eighty"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env=subprocess_env(),
    )
    assert result.returncode == 2
    assert result.stderr.strip() == "kokoro_server: --port='eighty' is invalid; allowed: an integer from 1 to 65535"


def test_limit_defaults() -> None:
    settings = Settings()
    assert (settings.max_sessions, settings.max_queued_requests) == (128, 100)
    assert (settings.idle_timeout_s, settings.ws_ping_interval_s, settings.ws_ping_timeout_s) == (300.0, 20.0, 20.0)
    assert (settings.synthesis_timeout_s, settings.metrics_interval_s) == (120.0, 10.0)


def test_limits_from_environment_and_flags() -> None:
    env = {
        "KOKORO_MAX_SESSIONS": "8",
        "KOKORO_MAX_QUEUED_REQUESTS": "5",
        "KOKORO_IDLE_TIMEOUT_S": "30",
        "KOKORO_WS_PING_INTERVAL_S": "0",
        "KOKORO_SYNTHESIS_TIMEOUT_S": "2.5",
        "KOKORO_METRICS_INTERVAL_S": "60",
    }
    expected = Settings(
        max_sessions=8,
        max_queued_requests=5,
        idle_timeout_s=30.0,
        ws_ping_interval_s=0.0,
        synthesis_timeout_s=2.5,
        metrics_interval_s=60.0,
    )
    assert load_settings([], env) == expected
    assert load_settings(["--ws-ping-timeout-s", "3", "--max-sessions", "9"], env) == Settings(
        max_sessions=9,
        max_queued_requests=5,
        idle_timeout_s=30.0,
        ws_ping_interval_s=0.0,
        ws_ping_timeout_s=3.0,
        synthesis_timeout_s=2.5,
        metrics_interval_s=60.0,
    )


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--max-sessions", "0"], "--max-sessions='0' is invalid; allowed: an integer from 1 to 100000"),
        (["--max-queued-requests", "x"], "--max-queued-requests='x' is invalid; allowed: an integer from 1 to 100000"),
        (["--idle-timeout-s", "0"], "--idle-timeout-s='0' is invalid; allowed: seconds from 0.1 to 86400"),
        (["--idle-timeout-s", "nan"], "--idle-timeout-s='nan' is invalid; allowed: seconds from 0.1 to 86400"),
        (
            ["--ws-ping-interval-s", "-1"],
            "--ws-ping-interval-s='-1' is invalid; allowed: 0 (off) or seconds from 0.1 to 3600",
        ),
        (["--ws-ping-timeout-s", "0"], "--ws-ping-timeout-s='0' is invalid; allowed: seconds from 0.1 to 3600"),
        (["--synthesis-timeout-s", "inf"], "--synthesis-timeout-s='inf' is invalid; allowed: seconds from 0.1 to 3600"),
        (["--metrics-interval-s", "0.01"], "--metrics-interval-s='0.01' is invalid; allowed: seconds from 0.1 to 3600"),
    ],
)
def test_invalid_limits_name_the_key_and_the_allowed_values(argv: list[str], message: str) -> None:
    with pytest.raises(SettingsError) as caught:
        load_settings(argv, {})
    assert str(caught.value) == message
