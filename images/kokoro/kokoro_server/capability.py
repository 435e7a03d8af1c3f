"""What the host can compute: reduced precision on a CPU is a capability of the CPU, not a given.

Under bf16 autocast Kokoro runs its LSTMs (text encoder, prosody predictor) through oneDNN, which
has no bf16 LSTM without native bf16 instructions: on an AVX2-only CPU the first request fails
with "could not create a primitive descriptor for the LSTM forward propagation primitive". Keeping
the LSTMs in fp32 and the decoder in bf16 is no way out on such a CPU: without native bf16 every
bf16 convolution is emulated (measured on a 2-core AMD EPYC, AVX2: a 512-channel 1-D convolution
16x slower in bf16 than in fp32), and the decoder is ~95 % of the compute. So the server refuses
bf16 at start-up on such a CPU, with an error naming the missing feature and the fallback.

The decision comes from a probe (a tiny LSTM and convolution run under bf16 autocast), because that
is what the model will do; the CPU's flags only name what is missing. Both are injectable, so the
refusal path is tested on every CPU.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Final

logger = logging.getLogger(__name__)

BF16_CPU_FEATURES: Final = ("avx512_bf16", "amx_bf16")
"""Linux /proc/cpuinfo flags of native bf16 arithmetic (AVX-512 BF16, AMX BF16): either is enough."""
CPUINFO: Final = Path("/proc/cpuinfo")

Probe = Callable[[], str | None]
"""Runs a reduced-precision computation; returns None when it works, else the reason it failed."""


class UnsupportedPrecision(ValueError):
    """The configured precision cannot run on this host; a configuration error, raised at start-up."""


def parse_cpu_flags(cpuinfo: str) -> frozenset[str]:
    """The `flags` of the first processor in /proc/cpuinfo text (empty when there is none)."""
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "flags":
            return frozenset(value.split())
    return frozenset()


def host_cpu_flags() -> frozenset[str]:
    """This machine's CPU flags; empty where /proc/cpuinfo does not exist (not Linux)."""
    try:
        return parse_cpu_flags(CPUINFO.read_text(encoding="utf-8", errors="replace"))
    except OSError:
        return frozenset()


def probe_bf16_cpu() -> str | None:
    """Run an LSTM and a convolution under CPU bf16 autocast, as Kokoro does; None when both work."""
    import torch

    lstm = torch.nn.LSTM(8, 4, batch_first=True, bidirectional=True)
    conv = torch.nn.Conv1d(4, 4, 3, padding=1)
    try:
        with torch.inference_mode(), torch.autocast("cpu", dtype=torch.bfloat16):
            lstm(torch.randn(1, 5, 8))
            conv(torch.randn(1, 4, 5))
    except RuntimeError as exc:
        return str(exc).split(". Run workload", 1)[0]  # oneDNN appends a hint about ONEDNN_VERBOSE
    return None


def torch_cpu_capability() -> str:
    """The vector instruction set torch dispatches to here ("AVX2", "AVX512", ...)."""
    import torch

    return str(torch.backends.cpu.get_cpu_capability())


def bf16_refusal(reason: str, flags: frozenset[str], capability: str) -> str:
    """The start-up error for bf16 on a CPU that cannot run it. Pure."""
    has = [f for f in ("avx2", "avx512f", "avx512_bf16", "amx_bf16") if f in flags]
    return (
        "precision 'bf16' needs a CPU with native bfloat16 (cpu flag "
        + " or ".join(BF16_CPU_FEATURES)
        + f"); this CPU has {', '.join(has) or 'none of them'} (torch capability {capability}), and a bf16 "
        f"probe failed: {reason}. Use --precision fp32 (KOKORO_PRECISION=fp32)"
    )


def require_precision(
    device: str,
    precision: str,
    *,
    probe: Probe = probe_bf16_cpu,
    flags: Callable[[], frozenset[str]] = host_cpu_flags,
    capability: Callable[[], str] = torch_cpu_capability,
) -> None:
    """Raise UnsupportedPrecision when `precision` cannot run on `device` of this host.

    Only bf16 on a CPU is probed; fp16 on a CPU is refused by the engine itself, and a CUDA device
    runs both reduced precisions.
    """
    if precision != "bf16" or not device.startswith("cpu"):
        return
    reason = probe()
    if reason is not None:
        raise UnsupportedPrecision(bf16_refusal(reason, flags(), capability()))
    logger.info("bf16 probe passed on this CPU")
