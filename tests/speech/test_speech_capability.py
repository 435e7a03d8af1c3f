"""Reduced precision is a host capability: probed at start-up, refused with a configuration error.

The refusal path runs on every CPU (the probe is injected); the host's own answer is checked
against its CPU flags, and the process test expects the outcome this CPU must give.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from kokoro_server.capability import (
    UnsupportedPrecision,
    bf16_refusal,
    host_cpu_flags,
    parse_cpu_flags,
    probe_bf16_cpu,
    require_precision,
)
from kokoro_server.kokoro_engine import KokoroEngine
from kokoro_server.loader import preflight
from kokoro_server.settings import Settings
from tests.speech.speech_support import free_port, subprocess_env

CPUINFO = """processor\t: 0
vendor_id\t: AuthenticAMD
flags\t\t: fpu sse2 avx avx2 fma
bogomips\t: 4890.81

processor\t: 1
flags\t\t: fpu sse2 avx avx2 fma avx512_bf16
"""
LSTM_ERROR = "could not create a primitive descriptor for the LSTM forward propagation primitive"
BF16 = ("--precision", "bf16")
AVX2_REFUSAL = (
    "precision 'bf16' needs a CPU with native bfloat16 (cpu flag avx512_bf16 or amx_bf16); this CPU has "
    f"avx2 (torch capability AVX2), and a bf16 probe failed: {LSTM_ERROR}. "
    "Use --precision fp32 (KOKORO_PRECISION=fp32)"
)


def failing_probe() -> str:
    return LSTM_ERROR


def passing_probe() -> None:
    return None


def exploding_probe() -> str:
    raise AssertionError("the probe must not run for this configuration")


def test_cpu_flags_come_from_the_first_processor() -> None:
    assert parse_cpu_flags(CPUINFO) == frozenset({"fpu", "sse2", "avx", "avx2", "fma"})
    assert parse_cpu_flags("processor\t: 0\n") == frozenset()


def test_refusal_names_the_missing_feature_and_the_fallback() -> None:
    assert bf16_refusal(LSTM_ERROR, frozenset({"fpu", "avx2"}), "AVX2") == AVX2_REFUSAL
    assert "this CPU has none of them (torch capability DEFAULT)" in bf16_refusal("x", frozenset(), "DEFAULT")


def test_bf16_on_a_cpu_without_it_is_refused_whatever_the_host() -> None:
    with pytest.raises(UnsupportedPrecision) as refused:
        require_precision(
            "cpu", "bf16", probe=failing_probe, flags=lambda: frozenset({"avx2"}), capability=lambda: "AVX2"
        )
    assert str(refused.value) == AVX2_REFUSAL
    assert isinstance(refused.value, ValueError)


def test_bf16_passes_where_the_probe_passes_and_only_bf16_on_a_cpu_is_probed() -> None:
    require_precision("cpu", "bf16", probe=passing_probe)
    for device, precision in [("cpu", "fp32"), ("cuda", "bf16"), ("cuda", "fp16"), ("cuda:1", "bf16")]:
        require_precision(device, precision, probe=exploding_probe)


def test_preflight_refuses_before_anything_loads() -> None:
    with pytest.raises(UnsupportedPrecision, match=r"^precision 'bf16' needs a CPU with native bfloat16"):
        preflight(Settings(device="cpu", precision="bf16"), probe=failing_probe)
    preflight(Settings(device="cpu", precision="bf16"), probe=passing_probe)
    preflight(Settings(device="cpu", precision="fp32"), probe=exploding_probe)
    preflight(Settings(engine="zero", precision="bf16"), probe=exploding_probe)


def test_the_engine_refuses_bf16_before_reading_any_weights(tmp_path: Path) -> None:
    # tmp_path holds no model at all: the refusal must come first, not a missing-file error.
    with pytest.raises(UnsupportedPrecision, match=r"Use --precision fp32 \(KOKORO_PRECISION=fp32\)$"):
        KokoroEngine.load(tmp_path, precision="bf16", probe=failing_probe)


def test_the_host_probe_agrees_with_the_cpu_flags() -> None:
    flags = host_cpu_flags()
    outcome = probe_bf16_cpu()
    if flags & {"avx512_bf16", "amx_bf16"}:
        assert outcome is None  # native bf16: oneDNN has a bf16 LSTM
    elif "avx512f" not in flags:
        # Below AVX-512 (e.g. AVX2 only), oneDNN has no bf16 LSTM at all.
        assert outcome is not None
        assert "LSTM" in outcome
    # AVX-512 without BF16 is decided by the probe alone (oneDNN may emulate); the other tests cover it.


@pytest.mark.timeout(300)  # importing torch takes 90 s on a 2-core machine shared by six test runs
def test_the_process_answers_bf16_as_this_cpu_must(tmp_path: Path) -> None:
    supported = probe_bf16_cpu() is None
    absent = ("--model-dir", str(tmp_path / "absent"))
    process = subprocess.run(
        [sys.executable, "-m", "kokoro_server", "--port", str(free_port()), "--device", "cpu", *BF16, *absent],
        env=subprocess_env(),
        capture_output=True,
        text=True,
        timeout=280,
        check=False,
    )
    if supported:
        # Past the check, loading fails on the absent directory: a load failure (1), not a refusal (2).
        assert process.returncode == 1
        assert "needs a CPU with native bfloat16" not in process.stderr
    else:
        assert process.returncode == 2
        assert process.stderr.startswith("kokoro_server: precision 'bf16' needs a CPU with native bfloat16")
        assert process.stderr.rstrip().endswith("Use --precision fp32 (KOKORO_PRECISION=fp32)")
