"""The speech server's settings: one typed object, read once at start-up from the CLI and environment.

Every key is declared once, as a field of `Settings` (default, description, allowed values). Its
environment variable is `KOKORO_<FIELD>` and its flag `--<field-with-dashes>`; a flag wins over
the environment, which wins over the default. An invalid value fails with an error that names the
key and the values it allows.
"""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Literal

if TYPE_CHECKING:
    from kokoro_server.concurrency import ConcurrencyPlan

ENV_PREFIX: Final = "KOKORO_"

EngineChoice = Literal["kokoro", "zero"]
Device = Literal["auto", "cpu", "cuda"]
Precision = Literal["fp32", "bf16", "fp16"]
Chunking = Literal["adaptive", "sentence", "none"]
LogLevel = Literal["debug", "info", "warning", "error"]
Concurrency = int | Literal["auto"]

MAX_CONCURRENCY: Final = 64
SAGEMAKER_MODEL_DIR: Final = Path("/opt/ml/model")
"""Where SageMaker mounts the model data (the S3 weight cache) in the container."""


class SettingsError(ValueError):
    """A setting with a value outside what it allows."""

    def __init__(self, key: str, value: str, allowed: str) -> None:
        super().__init__(f"{key}={value!r} is invalid; allowed: {allowed}")
        self.key = key
        self.value = value
        self.allowed = allowed


@dataclass(frozen=True, slots=True)
class _Spec:
    help: str
    parse: Callable[[str], Any]
    """Returns the typed value, or raises ValueError when the text is not allowed."""
    allowed: str


def _choice(*options: str) -> tuple[Callable[[str], Any], str]:
    def parse(raw: str) -> str:
        if raw not in options:
            raise ValueError(raw)
        return raw

    return parse, "one of " + ", ".join(repr(o) for o in options)


def _int_between(low: int, high: int) -> tuple[Callable[[str], Any], str]:
    def parse(raw: str) -> int:
        value = int(raw.strip())
        if not low <= value <= high:
            raise ValueError(raw)
        return value

    return parse, f"an integer from {low} to {high}"


def _seconds_between(low: float, high: float, *, off: bool = False) -> tuple[Callable[[str], Any], str]:
    """Seconds from `low` to `high`; with `off`, also 0 (the feature is turned off)."""

    def parse(raw: str) -> float:
        value = float(raw.strip())
        if not (low <= value <= high or (off and value == 0)):  # also refuses nan
            raise ValueError(raw)
        return value

    return parse, f"{'0 (off) or ' if off else ''}seconds from {low:g} to {high:g}"


def _concurrency() -> tuple[Callable[[str], Any], str]:
    parse_int, allowed = _int_between(1, MAX_CONCURRENCY)

    def parse(raw: str) -> Concurrency:
        return "auto" if raw.strip() == "auto" else parse_int(raw)

    return parse, f"'auto' or {allowed}"


def _non_empty() -> tuple[Callable[[str], Any], str]:
    def parse(raw: str) -> str:
        if not raw.strip():
            raise ValueError(raw)
        return raw.strip()

    return parse, "a non-empty string"


def _path() -> tuple[Callable[[str], Any], str]:
    parse_text, _ = _non_empty()
    return (lambda raw: Path(parse_text(raw))), "a non-empty path"


def _spec(help: str, rule: tuple[Callable[[str], Any], str]) -> dict[str, _Spec]:
    return {"spec": _Spec(help=help, parse=rule[0], allowed=rule[1])}


@dataclass(frozen=True, slots=True)
class Settings:
    """What the speech server is configured to do; build it with `load_settings` in production."""

    host: str = field(
        default="0.0.0.0", metadata=_spec("address to listen on (SageMaker needs all interfaces)", _non_empty())
    )
    port: int = field(default=8080, metadata=_spec("port to listen on (SageMaker calls 8080)", _int_between(1, 65535)))
    model_dir: Path = field(
        default=SAGEMAKER_MODEL_DIR,
        metadata=_spec(
            "directory with config.json, kokoro-v1_0.pth and voices/; when the default is absent (not on "
            "SageMaker), the pinned revision is downloaded unless HF_HUB_OFFLINE is set",
            _path(),
        ),
    )
    engine: EngineChoice = field(
        default="kokoro",
        metadata=_spec("'kokoro' (the model) or 'zero' (instant test audio, no model)", _choice("kokoro", "zero")),
    )
    device: Device = field(
        default="auto",
        metadata=_spec("where the model runs; 'auto' picks cuda when available", _choice("auto", "cpu", "cuda")),
    )
    precision: Precision = field(default="fp32", metadata=_spec("model precision", _choice("fp32", "bf16", "fp16")))
    max_concurrent: Concurrency = field(
        default="auto",
        metadata=_spec(
            "syntheses running at once; 'auto' is 2 on a CPU of up to 3 cores, one per 2 cores above, 2 on a "
            "GPU (see kokoro_server/concurrency.py); more waits",
            _concurrency(),
        ),
    )
    max_text_chars: int = field(
        default=5000, metadata=_spec("longest text one request may carry", _int_between(1, 100_000))
    )
    max_sessions: int = field(
        default=128,
        metadata=_spec(
            "WebSocket sessions open at once; one more is refused with HTTP 503 before the upgrade",
            _int_between(1, 100_000),
        ),
    )
    max_queued_requests: int = field(
        default=100,
        metadata=_spec(
            "requests one session may have accepted and not finished; one more gets an error frame "
            "'queue_full' and the session goes on",
            _int_between(1, 100_000),
        ),
    )
    idle_timeout_s: float = field(
        default=300.0,
        metadata=_spec(
            "a session with no request in progress that receives no message for this long is closed "
            "(1001, reason 'idle timeout')",
            _seconds_between(0.1, 86_400),
        ),
    )
    ws_ping_interval_s: float = field(
        default=20.0,
        metadata=_spec(
            "seconds between the server's WebSocket keepalive pings, so half-open connections end",
            _seconds_between(0.1, 3600, off=True),
        ),
    )
    ws_ping_timeout_s: float = field(
        default=20.0,
        metadata=_spec(
            "a ping unanswered for this long closes the connection (1011 'keepalive ping timeout')",
            _seconds_between(0.1, 3600),
        ),
    )
    synthesis_timeout_s: float = field(
        default=120.0,
        metadata=_spec(
            "longest one engine call may run: its request then fails with 'synthesis_failed', its slot "
            "stays taken until the call returns, and /ping answers 503 while every slot is taken so",
            _seconds_between(0.1, 3600),
        ),
    )
    metrics_interval_s: float = field(
        default=10.0,
        metadata=_spec(
            "seconds between the ActiveSessions/QueuedRequests gauge lines (CloudWatch EMF, printed only "
            "when VOICESTACK_METRICS_NAMESPACE is set)",
            _seconds_between(0.1, 3600),
        ),
    )
    frame_ms: int = field(
        default=1000,
        metadata=_spec("longest audio frame sent to the client, in milliseconds", _int_between(20, 10_000)),
    )
    chunking: Chunking = field(
        default="adaptive",
        metadata=_spec(
            "'adaptive': each chunk sized so that it is ready before the audio already sent runs out (from "
            "the engine's measured speed, the audio buffered ahead and the load); 'sentence': first clause, "
            "then sentence by sentence (the naive split); 'none': whole text at once (for comparisons)",
            _choice("adaptive", "sentence", "none"),
        ),
    )
    log_level: LogLevel = field(
        default="info", metadata=_spec("logging level", _choice("debug", "info", "warning", "error"))
    )

    def concurrency_for(self, device: Literal["cpu", "cuda"]) -> ConcurrencyPlan:
        """Syntheses allowed at once on `device` and the cores they share, resolving 'auto' from
        this machine's cores. The rule and the measurement behind it are in `concurrency`."""
        from kokoro_server.concurrency import configured_plan

        return configured_plan(self.max_concurrent, device)


def env_var(name: str) -> str:
    return ENV_PREFIX + name.upper()


def flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def _specs() -> list[tuple[str, _Spec, Any]]:
    return [(f.name, f.metadata["spec"], f.default) for f in dataclasses.fields(Settings)]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m kokoro_server",
        description="Kokoro-82M speech server: GET /ping, POST /invocations, WS /invocations-bidirectional-stream.",
    )
    # SageMaker starts a container as `<entrypoint> serve`; accept that word and nothing else.
    parser.add_argument("command", nargs="?", choices=["serve"], help="accepted for SageMaker; optional")
    for name, spec, default in _specs():
        parser.add_argument(
            flag(name),
            dest=name,
            default=None,
            metavar="VALUE",
            help=f"{spec.help}; {spec.allowed} (env {env_var(name)}, default {default})",
        )
    return parser


def load_settings(argv: Sequence[str], environ: Mapping[str, str]) -> Settings:
    """Settings from command-line `argv` (without the program name) over `environ` over defaults.

    Raises SettingsError naming the flag or variable and its allowed values.
    """
    args = build_parser().parse_args(list(argv))
    values: dict[str, Any] = {}
    for name, spec, _ in _specs():
        cli_value: str | None = getattr(args, name)
        if cli_value is not None:
            key, raw = flag(name), cli_value
        elif env_var(name) in environ:
            key, raw = env_var(name), environ[env_var(name)]
        else:
            continue
        try:
            values[name] = spec.parse(raw)
        except ValueError:
            raise SettingsError(key, raw, spec.allowed) from None
    return Settings(**values)
