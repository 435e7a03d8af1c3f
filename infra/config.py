"""The stack's configuration: every key of Pulumi.yaml's `config:` block, read once into a typed object.

Pulumi.yaml is the single place where keys, types, defaults and descriptions live; the Pulumi CLI
hands the program every declared key (its default when a stack does not set it). This module only
parses and validates, so an invalid value fails before any resource is declared, with a message
that names the key and the values it accepts. It imports nothing of Pulumi: `voicestack preflight`
resolves a stack's configuration the same way (`config_values`) without Pulumi's runtime, and
infra/program.py reads the running program's configuration into it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Literal, get_args

import yaml  # type: ignore[import-untyped]

from infra.naming import SIGN_IN_DOMAIN_PREFIX, SIGN_IN_DOMAIN_RESERVED
from kokoro_server import model_pin

SpeechMode = Literal["stream", "batch"]
SPEECH_MODES: Final[tuple[str, ...]] = get_args(SpeechMode)
ScalingMetric = Literal["concurrentRequests", "activeSessions"]
SCALING_METRICS: Final[tuple[str, ...]] = get_args(ScalingMetric)
SignInMfa = Literal["off", "optional", "required"]
SIGN_IN_MFA_MODES: Final[tuple[str, ...]] = get_args(SignInMfa)

CONFIG_KEYS: Final = (
    "retainStorage",
    "weightsDir",
    "instanceType",
    "instanceCount",
    "healthCheckTimeoutSeconds",
    "modelDownloadTimeoutSeconds",
    "autoscalingEnabled",
    "autoscalingMinCapacity",
    "autoscalingMaxCapacity",
    "autoscalingTargetConcurrency",
    "autoscalingMetric",
    "autoscalingTargetSessions",
    "bedrockModelId",
    "speechMode",
    "speechVoice",
    "logRetentionDays",
    "alarmEmail",
    "memoryEventExpiryDays",
    "memoryId",
    "tags",
    "publicAccess",
    "publicSignUp",
    "signInMfa",
    "signInDomainPrefix",
    "maxSessionsPerUser",
)
"""Every key the program reads, in the order Pulumi.yaml declares them (a test keeps the two equal)."""

GPU_INSTANCE_FAMILIES: Final = ("g4dn", "g5", "g6", "g6e", "p4d", "p4de", "p5")
"""SageMaker real-time inference families with NVIDIA GPUs that the CUDA speech image runs on."""
_INSTANCE_TYPE = re.compile(r"ml\.(?P<family>[a-z0-9]+)\.(?P<size>[0-9]*xlarge)")

INSTANCE_COUNT_RANGE: Final = (1, 20)
TIMEOUT_RANGE_S: Final = (60, 3600)
"""SageMaker accepts 60..3600 s for both the start-up health check and the model download."""
TARGET_CONCURRENCY_RANGE: Final = (1, 100)
TARGET_SESSIONS_RANGE: Final = (1, 100)
LOG_RETENTION_DAYS: Final = (
    1,
    3,
    5,
    7,
    14,
    30,
    60,
    90,
    120,
    150,
    180,
    365,
    400,
    545,
    731,
    1096,
    1827,
    2192,
    2557,
    2922,
    3288,
    3653,
)
"""The retention periods CloudWatch Logs accepts (PutRetentionPolicy); any other number is rejected."""
MEMORY_EXPIRY_RANGE_DAYS: Final = (7, 365)
"""Days AgentCore Memory keeps events. CreateMemory's model allows 3..3650, but the provider refuses anything
outside 7..365 (pulumi_aws AgentcoreMemory docs; the Terraform resource's validator), so that is the range."""
_MEMORY_ID_SUFFIX: Final = r"-[a-zA-Z0-9]{10}"
_MEMORY_ID: Final = re.compile(rf"[a-zA-Z][a-zA-Z0-9_-]{{0,99}}{_MEMORY_ID_SUFFIX}")
"""An AgentCore Memory id (bedrock-agentcore-control's memoryId pattern): the memory's name, `-`, 10 characters."""
RESERVED_TAG_KEYS: Final = ("project", "stack")
"""Default tags the program sets itself; `tags` may not override them."""
EMAIL_ADDRESS: Final = re.compile(r"[^@\s]+@[^@\s]+\.[^@\s]+")
"""One e-mail address, as the alarm topic and the sign-in pool take it (name@example.com)."""
MAX_SESSIONS_PER_USER_RANGE: Final = (1, 10)
"""Conversations one person may hold open at once on the public runtime: one per tab they talk in; more than a
handful is a script, and every session is a microVM AgentCore bills."""
_TAG_TEXT = re.compile(r"[\w\s.:/=+\-@]*")

INFERENCE_PROFILE_GEOGRAPHIES: Final = ("us", "us-gov", "eu", "apac", "jp", "au", "ca", "global")
"""Prefixes of Bedrock's system-defined cross-region inference profiles (`us.anthropic...`)."""
_FOUNDATION_MODEL_ID = re.compile(r"[a-z][a-z0-9-]*\.[a-z0-9][a-zA-Z0-9._-]*(:[0-9]+)?(:[0-9]+k)?")


class ConfigError(ValueError):
    """A configuration value that the program cannot deploy; the message names the key."""


@dataclass(frozen=True)
class AutoscalingConfig:
    """Target tracking on concurrent requests per instance, between min and max instances."""

    min_capacity: int
    max_capacity: int
    target_concurrency: int
    metric: ScalingMetric = "concurrentRequests"
    """concurrentRequests: SageMaker's concurrent requests per instance; activeSessions: the speech server's
    own gauge of open sessions per instance (a custom metric from its log lines)."""
    target_sessions: int = 4


@dataclass(frozen=True)
class PublicAccessConfig:
    """What `publicAccess: true` adds: sign-in (who may sign up, MFA, the login domain) and the per-user limit."""

    sign_up: bool
    """Anyone may create an account on the sign-in page; False: only the deployer adds people (add-user)."""
    mfa: SignInMfa = "off"
    domain_prefix: str | None = None
    """The managed login domain's prefix; None: derived from project, stack, account and region (infra/naming.py)."""
    max_sessions_per_user: int = 2


@dataclass(frozen=True)
class StackConfig:
    """The whole stack configuration, validated; built once by `parse_config`."""

    retain_storage: bool
    weights_dir: Path | None
    """A local directory holding the pinned weights; None: download the pinned Hugging Face snapshot."""
    instance_type: str
    instance_count: int
    health_check_timeout_s: int
    model_download_timeout_s: int
    autoscaling: AutoscalingConfig | None
    bedrock_model_id: str
    speech_mode: SpeechMode
    speech_voice: str | None
    """None: the agent uses the speech server's default voice."""
    log_retention_days: int = 30
    alarm_email: str | None = None
    """None: alarms go to an SNS topic nobody is subscribed to by the program."""
    memory_event_expiry_days: int = 30
    memory_id: str | None = None
    """The id of the memory this stack kept on an earlier `pulumi destroy` (retainStorage): the program
    imports it instead of creating a second memory of the same name. None: create the memory."""
    tags: tuple[tuple[str, str], ...] = ()
    """Extra default tags for every AWS resource, beside project and stack (sorted by key)."""
    public: PublicAccessConfig | None = None
    """The front door for people (publicAccess); None: the stack has none."""


def declared_config(project_file: Path) -> dict[str, dict[str, Any]]:
    """The `config:` block of a Pulumi.yaml: key -> {type, default, description}."""
    document = yaml.safe_load(project_file.read_text(encoding="utf-8"))
    block: dict[str, dict[str, Any]] = document["config"]
    return block


def cli_string(value: Any) -> str:
    """A config value as the Pulumi CLI hands it to a program: a string (YAML booleans as true/false,
    structured values as JSON)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict | list):
        return json.dumps(value)
    return str(value)


def config_values(project_file: Path, namespace: str, stack: Mapping[str, Any]) -> dict[str, str]:
    """What the CLI hands the program for one stack: every key Pulumi.yaml declares, with its default, then
    the stack's own values on top (`namespace:key` as `pulumi config --json` names them; other namespaces,
    such as `aws:`, are left out). The result is what `parse_config` takes."""
    values = {key: cli_string(spec["default"]) for key, spec in declared_config(project_file).items()}
    prefix = f"{namespace}:"
    values.update(
        {key.removeprefix(prefix): cli_string(value) for key, value in stack.items() if key.startswith(prefix)}
    )
    return values


def parse_config(values: Mapping[str, str | None], *, namespace: str) -> StackConfig:
    """Parses raw config strings (as the CLI passes them) into a `StackConfig`; raises `ConfigError`.

    Keys are read in Pulumi.yaml's order, so the first invalid one is the one reported.
    """
    reader = _Reader(values, namespace)
    retain_storage = reader.boolean("retainStorage")
    weights_dir = reader.optional("weightsDir", _absolute_path)
    instance_type = reader.parsed("instanceType", _gpu_instance_type)
    instance_count = reader.integer("instanceCount", INSTANCE_COUNT_RANGE)
    health_check_timeout_s = reader.integer("healthCheckTimeoutSeconds", TIMEOUT_RANGE_S)
    model_download_timeout_s = reader.integer("modelDownloadTimeoutSeconds", TIMEOUT_RANGE_S)
    autoscaling_enabled = reader.boolean("autoscalingEnabled")
    autoscaling = AutoscalingConfig(
        min_capacity=reader.integer("autoscalingMinCapacity", INSTANCE_COUNT_RANGE),
        max_capacity=reader.integer("autoscalingMaxCapacity", INSTANCE_COUNT_RANGE),
        target_concurrency=reader.integer("autoscalingTargetConcurrency", TARGET_CONCURRENCY_RANGE),
        metric=reader.parsed("autoscalingMetric", _scaling_metric),
        target_sessions=reader.integer("autoscalingTargetSessions", TARGET_SESSIONS_RANGE),
    )
    if autoscaling_enabled:
        _check_scaling_bounds(reader, autoscaling, instance_count)
    return StackConfig(
        retain_storage=retain_storage,
        weights_dir=weights_dir,
        instance_type=instance_type,
        instance_count=instance_count,
        health_check_timeout_s=health_check_timeout_s,
        model_download_timeout_s=model_download_timeout_s,
        autoscaling=autoscaling if autoscaling_enabled else None,
        bedrock_model_id=reader.parsed("bedrockModelId", _bedrock_model_id),
        speech_mode=reader.parsed("speechMode", _speech_mode),
        speech_voice=reader.optional("speechVoice", _served_voice),
        log_retention_days=reader.parsed("logRetentionDays", _log_retention),
        alarm_email=reader.optional("alarmEmail", _email),
        memory_event_expiry_days=reader.integer("memoryEventExpiryDays", MEMORY_EXPIRY_RANGE_DAYS),
        memory_id=reader.optional("memoryId", _memory_id),
        tags=reader.parsed("tags", _extra_tags),
        public=_public_access(reader),
    )


def _public_access(reader: _Reader) -> PublicAccessConfig | None:
    """The front door's keys, read (and so checked) whether or not it is on, like the autoscaling keys."""
    enabled = reader.boolean("publicAccess")
    public = PublicAccessConfig(
        sign_up=reader.boolean("publicSignUp"),
        mfa=reader.parsed("signInMfa", _sign_in_mfa),
        domain_prefix=reader.optional("signInDomainPrefix", _sign_in_domain_prefix),
        max_sessions_per_user=reader.integer("maxSessionsPerUser", MAX_SESSIONS_PER_USER_RANGE),
    )
    return public if enabled else None


def check_memory_of_stack(memory_id: str | None, memory_name: str, *, namespace: str) -> None:
    """A kept memory may be adopted only by its own stack: its id must be `<memory_name>-<10 characters>`.

    The memory's name is replace-only for the provider; adopting a memory of another name would make
    the next `pulumi up` replace it, deleting the conversations the adoption is meant to keep.
    """
    if memory_id is not None and re.fullmatch(rf"{re.escape(memory_name)}{_MEMORY_ID_SUFFIX}", memory_id) is None:
        raise ConfigError(
            f"{namespace}:memoryId must be the id of this stack's memory, {memory_name}-<10 letters or digits> "
            f"(got {memory_id!r})"
        )


def _check_scaling_bounds(reader: _Reader, scaling: AutoscalingConfig, instance_count: int) -> None:
    low, high = scaling.min_capacity, scaling.max_capacity
    if low > high:
        raise ConfigError(
            f"{reader.key('autoscalingMinCapacity')} ({low}) must not exceed "
            f"{reader.key('autoscalingMaxCapacity')} ({high})"
        )
    if not low <= instance_count <= high:
        raise ConfigError(
            f"{reader.key('instanceCount')} ({instance_count}) must lie between "
            f"{reader.key('autoscalingMinCapacity')} ({low}) and {reader.key('autoscalingMaxCapacity')} ({high}) "
            "when autoscaling is enabled"
        )


def _absolute_path(raw: str) -> Path:
    path = Path(raw).expanduser()
    if not path.is_absolute():
        # The program's working directory differs between `pulumi up` and tests; an absolute path does not.
        raise ValueError("must be an absolute path (or start with ~)")
    return path


def _gpu_instance_type(raw: str) -> str:
    match = _INSTANCE_TYPE.fullmatch(raw)
    if match is None or match["family"] not in GPU_INSTANCE_FAMILIES:
        raise ValueError(
            f"must be a SageMaker GPU instance type ml.<family>.<size>xlarge with family one of "
            f"{', '.join(GPU_INSTANCE_FAMILIES)}"
        )
    return raw


def _bedrock_model_id(raw: str) -> str:
    geography, _, rest = raw.partition(".")
    base = rest if geography in INFERENCE_PROFILE_GEOGRAPHIES else raw
    if _FOUNDATION_MODEL_ID.fullmatch(base) is None:
        raise ValueError(
            "must be a Bedrock foundation model id (provider.model, e.g. amazon.nova-lite-v1:0) or a "
            f"cross-region inference profile id (<geography>.provider.model, geography one of "
            f"{', '.join(INFERENCE_PROFILE_GEOGRAPHIES)})"
        )
    return raw


def _speech_mode(raw: str) -> SpeechMode:
    if raw == "stream":
        return "stream"
    if raw == "batch":
        return "batch"
    raise ValueError(f"must be one of {', '.join(SPEECH_MODES)}")


def _scaling_metric(raw: str) -> ScalingMetric:
    if raw == "concurrentRequests":
        return "concurrentRequests"
    if raw == "activeSessions":
        return "activeSessions"
    raise ValueError(f"must be one of {', '.join(SCALING_METRICS)}")


def _log_retention(raw: str) -> int:
    if not raw.isascii() or not raw.isdigit() or int(raw) not in LOG_RETENTION_DAYS:
        raise ValueError(
            f"must be one of the CloudWatch Logs retention periods {', '.join(map(str, LOG_RETENTION_DAYS))}"
        )
    return int(raw)


def _memory_id(raw: str) -> str:
    if _MEMORY_ID.fullmatch(raw) is None:
        raise ValueError("must be empty or an AgentCore Memory id, <memory name>-<10 letters or digits>")
    return raw


def _sign_in_mfa(raw: str) -> SignInMfa:
    if raw == "off":
        return "off"
    if raw == "optional":
        return "optional"
    if raw == "required":
        return "required"
    raise ValueError(f"must be one of {', '.join(SIGN_IN_MFA_MODES)}")


def _sign_in_domain_prefix(raw: str) -> str:
    reserved = [word for word in SIGN_IN_DOMAIN_RESERVED if word in raw]
    if SIGN_IN_DOMAIN_PREFIX.fullmatch(raw) is None or reserved:
        raise ValueError(
            "must be empty or 1 to 63 lower-case letters, digits and hyphens, starting and ending with a letter or "
            f"digit, without {', '.join(SIGN_IN_DOMAIN_RESERVED)} (Cognito's rule for domain prefixes)"
        )
    return raw


def _email(raw: str) -> str:
    if EMAIL_ADDRESS.fullmatch(raw) is None:
        raise ValueError("must be empty or one e-mail address (name@example.com)")
    return raw


def _extra_tags(raw: str) -> tuple[tuple[str, str], ...]:
    """A JSON object of string tags (empty string or {} for none), within AWS's tag rules."""
    if raw == "":
        return ()
    try:
        parsed = json.loads(raw)
    except json.JSONDecodeError:
        raise ValueError('must be a JSON object of string values, e.g. {"team": "voice"}') from None
    if not isinstance(parsed, dict):
        raise ValueError('must be a JSON object of string values, e.g. {"team": "voice"}')
    tags: list[tuple[str, str]] = []
    for key, value in parsed.items():
        if not isinstance(value, str):
            raise ValueError(f"value of tag {key!r} must be a string")
        if not 1 <= len(key) <= 128 or len(value) > 256 or not _TAG_TEXT.fullmatch(key + value):
            raise ValueError(
                f"tag {key!r} must have a key of 1 to 128 and a value of at most 256 letters, digits, spaces "
                "or _.:/=+-@"
            )
        if key.lower().startswith("aws:") or key in RESERVED_TAG_KEYS:
            raise ValueError(
                f"tag {key!r} is reserved: keys may not start with aws: or be one of {', '.join(RESERVED_TAG_KEYS)}"
            )
        tags.append((key, value))
    # AWS allows 50 tags per resource; project and stack take two.
    if len(tags) > 48:
        raise ValueError(f"must hold at most 48 tags, got {len(tags)}")
    return tuple(sorted(tags))


def _served_voice(raw: str) -> str:
    if raw not in model_pin.DEFAULT_VOICES:
        raise ValueError(f"must be empty or one of the served voices {', '.join(model_pin.DEFAULT_VOICES)}")
    return raw


class _Reader:
    """Reads one key at a time and turns every parse failure into a `ConfigError` naming that key."""

    def __init__(self, values: Mapping[str, str | None], namespace: str) -> None:
        self._values = values
        self._namespace = namespace

    def key(self, name: str) -> str:
        return f"{self._namespace}:{name}"

    def raw(self, name: str) -> str:
        value = self._values.get(name)
        if value is None:
            raise ConfigError(
                f"{self.key(name)} is not set; Pulumi.yaml declares it with a default (Pulumi CLI >= 3.44)"
            )
        return value

    def parsed[T](self, name: str, parse: Callable[[str], T]) -> T:
        raw = self.raw(name)
        try:
            return parse(raw)
        except ValueError as error:
            raise ConfigError(f"{self.key(name)} {error} (got {raw!r})") from None

    def optional[T](self, name: str, parse: Callable[[str], T]) -> T | None:
        """An empty string means "not set" for string keys whose Pulumi.yaml default is ""."""
        return None if self.raw(name) == "" else self.parsed(name, parse)

    def boolean(self, name: str) -> bool:
        return self.parsed(name, _boolean)

    def integer(self, name: str, bounds: tuple[int, int]) -> int:
        low, high = bounds

        def parse(raw: str) -> int:
            if not raw.isascii() or not raw.isdigit() or not low <= int(raw) <= high:
                raise ValueError(f"must be an integer from {low} to {high}")
            return int(raw)

        return self.parsed(name, parse)


def _boolean(raw: str) -> bool:
    if raw == "true":
        return True
    if raw == "false":
        return False
    raise ValueError("must be one of true, false")
