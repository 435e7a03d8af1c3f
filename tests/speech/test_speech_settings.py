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
    assert settings.concurrency_for("cpu" if device == "cpu" else "cuda") == expected


def test_auto_concurrency_on_a_cpu_follows_the_rule_for_this_machines_cores() -> None:
    from kokoro_server.concurrency import auto_plan, usable_cores

    settings = load_settings([], {})
    assert settings.concurrency_for("cpu") == auto_plan("cpu", usable_cores()).concurrency


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
