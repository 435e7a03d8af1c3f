"""The agent's configuration: one typed object, read once from the environment at start-up.

Every key is declared here once, with its default. A blank value counts as unset (none of these keys
has a meaningful empty value). Invalid values raise `ConfigError` naming the key and what is allowed.
"""

from __future__ import annotations

import ipaddress
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, get_args
from urllib.parse import urlsplit

from agent_app.events import MODES, Mode

SpeechTransportKind = Literal["sagemaker", "websocket"]
TRANSPORTS: tuple[SpeechTransportKind, ...] = get_args(SpeechTransportKind)
AuthMode = Literal["iam", "jwt"]
AUTH_MODES: tuple[AuthMode, ...] = get_args(AuthMode)

DEFAULT_TRANSPORT: SpeechTransportKind = "sagemaker"
DEFAULT_MODE: Mode = "stream"
DEFAULT_DEADLINE_S = 120.0
DEFAULT_VOICES: tuple[str, ...] = ("af_heart", "af_bella", "am_michael", "bf_emma")
"""The voices the speech image serves (kokoro_server.model_pin.DEFAULT_VOICES; a test keeps them equal)."""
DEFAULT_HISTORY_MESSAGES = 20
"""Messages of a conversation the model sees: about 10 question-answer turns without tool calls."""
MIN_HISTORY_MESSAGES = 2
DEFAULT_SESSION_WAIT_S = 5.0
"""How long a call waits for the previous call of its conversation to finish (a barge-in's new question)."""
DEFAULT_AUTH: AuthMode = "iam"
DEFAULT_MAX_SESSIONS_PER_USER = 2
"""Sessions one signed-in user may have open at once: a page in two tabs (`user_sessions.py`)."""
CLIENT_ID_CHARS = (1, 128)
CLIENT_ID_PATTERN = r"[\w+]+"
"""A Cognito app client id: botocore's cognito-idp shape `ClientIdType` (a test keeps them equal)."""
_CLIENT_ID = re.compile(CLIENT_ID_PATTERN)
_JWT_ONLY_KEYS = ("AGENT_JWT_ISSUER", "AGENT_JWT_CLIENT_IDS", "AGENT_MAX_SESSIONS_PER_USER")


class ConfigError(ValueError):
    """An environment variable is missing or invalid."""

    def __init__(self, key: str, message: str) -> None:
        super().__init__(f"{key}: {message}")
        self.key = key


@dataclass(frozen=True, slots=True)
class AgentConfig:
    speech_transport: SpeechTransportKind
    """SPEECH_TRANSPORT: how the agent reaches the speech container."""
    speech_endpoint_name: str | None
    """SPEECH_ENDPOINT_NAME: the SageMaker endpoint (required with the sagemaker transport)."""
    speech_ws_url: str | None
    """SPEECH_WS_URL: ws:// or wss:// URL of the container's session route (required with websocket)."""
    speech_mode: Mode
    """SPEECH_MODE: the default mode of an invocation that does not name one."""
    speech_voice: str | None
    """SPEECH_VOICE: the default voice; unset means the container's default."""
    aws_region: str | None
    """AWS_REGION: required with Bedrock or the sagemaker transport."""
    bedrock_model_id: str | None
    """BEDROCK_MODEL_ID: the Bedrock model; unset means the offline demo model."""
    agent_deadline_s: float
    """AGENT_DEADLINE_S: every invocation ends by then, finished or not."""
    sagemaker_endpoint_url: str | None
    """AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME_HTTP2: an https:// URL replacing SageMaker's (the local stand-in)."""
    sagemaker_ca_file: Path | None
    """SAGEMAKER_CA_FILE: a PEM file of the CA to trust for that URL (the stand-in's throwaway CA)."""
    speech_voices: tuple[str, ...] = DEFAULT_VOICES
    """SPEECH_VOICES: comma-separated voices the container serves; a call naming another gets a 400."""
    agentcore_memory_id: str | None = None
    """AGENTCORE_MEMORY_ID: AgentCore Memory that keeps conversations; unset means local files."""
    session_dir: Path | None = None
    """AGENT_SESSION_DIR: where conversations are kept without AgentCore Memory (None: not kept)."""
    history_messages: int = DEFAULT_HISTORY_MESSAGES
    """AGENT_HISTORY_MESSAGES: the most recent messages of a conversation the model sees."""
    session_wait_s: float = DEFAULT_SESSION_WAIT_S
    """AGENT_SESSION_WAIT_S: how long a call waits while its conversation is busy before it is refused."""
    auth: AuthMode = DEFAULT_AUTH
    """AGENT_AUTH: `iam` (callers are the stack's IAM principals, one identity) or `jwt` (signed-in users)."""
    jwt_issuer: str | None = None
    """AGENT_JWT_ISSUER: the user pool's issuer, exactly as its tokens' `iss` (required with jwt)."""
    jwt_client_ids: tuple[str, ...] = ()
    """AGENT_JWT_CLIENT_IDS: comma-separated app client ids whose access tokens are accepted (required with jwt)."""
    max_sessions_per_user: int = DEFAULT_MAX_SESSIONS_PER_USER
    """AGENT_MAX_SESSIONS_PER_USER: sessions one signed-in user may have open at once (jwt only)."""

    @property
    def demo(self) -> bool:
        return self.bedrock_model_id is None


def _get(env: Mapping[str, str], key: str) -> str | None:
    value = env.get(key)
    if value is None or not value.strip():
        return None
    return value.strip()


def _choice[T: str](env: Mapping[str, str], key: str, allowed: tuple[T, ...], default: T) -> T:
    value = _get(env, key)
    if value is None:
        return default
    for option in allowed:
        if value == option:
            return option
    raise ConfigError(key, f"must be one of {', '.join(allowed)}; got {value!r}")


def _positive_seconds(env: Mapping[str, str], key: str, default: float) -> float:
    value = _get(env, key)
    if value is None:
        return default
    try:
        seconds = float(value)
    except ValueError:
        raise ConfigError(key, f"must be a number of seconds greater than 0; got {value!r}") from None
    if not math.isfinite(seconds) or seconds <= 0:
        raise ConfigError(key, f"must be a number of seconds greater than 0; got {value!r}")
    return seconds


def _ws_url(env: Mapping[str, str], key: str) -> str | None:
    value = _get(env, key)
    if value is None:
        return None
    parts = urlsplit(value)
    if parts.scheme not in ("ws", "wss") or not parts.hostname:
        raise ConfigError(key, f"must be a ws:// or wss:// URL with a host; got {value!r}")
    return value


def _int_at_least(env: Mapping[str, str], key: str, minimum: int, default: int) -> int:
    value = _get(env, key)
    if value is None:
        return default
    try:
        number = int(value)
    except ValueError:
        raise ConfigError(key, f"must be a whole number of at least {minimum}; got {value!r}") from None
    if number < minimum:
        raise ConfigError(key, f"must be a whole number of at least {minimum}; got {value!r}")
    return number


def _names(env: Mapping[str, str], key: str, default: tuple[str, ...]) -> tuple[str, ...]:
    value = _get(env, key)
    if value is None:
        return default
    names = tuple(dict.fromkeys(name.strip() for name in value.split(",") if name.strip()))
    if not names:
        raise ConfigError(key, f"must list at least one name, separated by commas; got {value!r}")
    return names


def default_session_dir(env: Mapping[str, str]) -> Path:
    """Local conversations live in the cache the rest of the stack uses (VOICESTACK_CACHE overrides)."""
    cache = _get(env, "VOICESTACK_CACHE")
    return (Path(cache) if cache is not None else Path.home() / ".cache" / "voicestack") / "conversations"


def _https_url(env: Mapping[str, str], key: str) -> str | None:
    value = _get(env, key)
    if value is None:
        return None
    parts = urlsplit(value)
    if parts.scheme != "https" or not parts.hostname:
        raise ConfigError(
            key, f"must be an https:// URL with a host (the client speaks HTTP/2 over TLS); got {value!r}"
        )
    return value


def _existing_file(env: Mapping[str, str], key: str) -> Path | None:
    value = _get(env, key)
    if value is None:
        return None
    path = Path(value)
    if not path.is_file():
        raise ConfigError(key, f"must name an existing file; {value!r} is not one")
    return path


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _issuer_url(env: Mapping[str, str], key: str) -> str | None:
    value = _get(env, key)
    if value is None:
        return None
    parts = urlsplit(value)
    secure = parts.scheme == "https" or (parts.scheme == "http" and _is_loopback(parts.hostname or ""))
    if (
        not secure
        or not parts.hostname
        or parts.username is not None
        or parts.query
        or parts.fragment
        or value.endswith("/")
    ):
        raise ConfigError(
            key,
            "must be the user pool's issuer as its tokens carry it, "
            "https://cognito-idp.<region>.amazonaws.com/<pool id> (http:// only on a loopback host, for a local "
            f"issuer), without a trailing '/'; got {value!r}",
        )
    return value


def _client_ids(env: Mapping[str, str], key: str) -> tuple[str, ...]:
    ids = _names(env, key, ())
    shortest, longest = CLIENT_ID_CHARS
    for client_id in ids:
        if not shortest <= len(client_id) <= longest or _CLIENT_ID.fullmatch(client_id) is None:
            raise ConfigError(
                key,
                f"must list app client ids ({shortest} to {longest} letters, digits, '_' or '+'); got {client_id!r}",
            )
    return ids


def load_config(env: Mapping[str, str]) -> AgentConfig:
    """Read and check the agent's configuration (pass `os.environ`)."""
    transport = _choice(env, "SPEECH_TRANSPORT", TRANSPORTS, DEFAULT_TRANSPORT)
    config = AgentConfig(
        speech_transport=transport,
        speech_endpoint_name=_get(env, "SPEECH_ENDPOINT_NAME"),
        speech_ws_url=_ws_url(env, "SPEECH_WS_URL"),
        speech_mode=_choice(env, "SPEECH_MODE", MODES, DEFAULT_MODE),
        speech_voice=_get(env, "SPEECH_VOICE"),
        aws_region=_get(env, "AWS_REGION"),
        bedrock_model_id=_get(env, "BEDROCK_MODEL_ID"),
        agent_deadline_s=_positive_seconds(env, "AGENT_DEADLINE_S", DEFAULT_DEADLINE_S),
        sagemaker_endpoint_url=_https_url(env, "AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME_HTTP2"),
        sagemaker_ca_file=_existing_file(env, "SAGEMAKER_CA_FILE"),
        speech_voices=_names(env, "SPEECH_VOICES", DEFAULT_VOICES),
        agentcore_memory_id=_get(env, "AGENTCORE_MEMORY_ID"),
        session_dir=Path(dir_) if (dir_ := _get(env, "AGENT_SESSION_DIR")) is not None else default_session_dir(env),
        history_messages=_int_at_least(env, "AGENT_HISTORY_MESSAGES", MIN_HISTORY_MESSAGES, DEFAULT_HISTORY_MESSAGES),
        session_wait_s=_positive_seconds(env, "AGENT_SESSION_WAIT_S", DEFAULT_SESSION_WAIT_S),
        auth=_choice(env, "AGENT_AUTH", AUTH_MODES, DEFAULT_AUTH),
        jwt_issuer=_issuer_url(env, "AGENT_JWT_ISSUER"),
        jwt_client_ids=_client_ids(env, "AGENT_JWT_CLIENT_IDS"),
        max_sessions_per_user=_int_at_least(env, "AGENT_MAX_SESSIONS_PER_USER", 1, DEFAULT_MAX_SESSIONS_PER_USER),
    )
    if config.auth == "jwt":
        if config.jwt_issuer is None:
            raise ConfigError(
                "AGENT_JWT_ISSUER",
                "is required when AGENT_AUTH is jwt (https://cognito-idp.<region>.amazonaws.com/<pool id>)",
            )
        if not config.jwt_client_ids:
            raise ConfigError("AGENT_JWT_CLIENT_IDS", "is required when AGENT_AUTH is jwt (the page's app client id)")
    else:
        for key in _JWT_ONLY_KEYS:
            if _get(env, key) is not None:
                raise ConfigError(key, "applies to signed-in users only: set AGENT_AUTH=jwt, or leave it unset")
    if config.speech_voice is not None and config.speech_voice not in config.speech_voices:
        voices = ", ".join(config.speech_voices)
        raise ConfigError("SPEECH_VOICE", f"must be one of SPEECH_VOICES ({voices}); got {config.speech_voice!r}")
    if config.agentcore_memory_id is not None and config.aws_region is None:
        raise ConfigError("AWS_REGION", "is required when AGENTCORE_MEMORY_ID is set")
    if transport == "sagemaker":
        if config.speech_endpoint_name is None:
            raise ConfigError("SPEECH_ENDPOINT_NAME", "is required when SPEECH_TRANSPORT is sagemaker")
        if config.aws_region is None:
            raise ConfigError("AWS_REGION", "is required when SPEECH_TRANSPORT is sagemaker")
    elif config.speech_ws_url is None:
        raise ConfigError("SPEECH_WS_URL", "is required when SPEECH_TRANSPORT is websocket")
    if config.bedrock_model_id is not None and config.aws_region is None:
        raise ConfigError("AWS_REGION", "is required when BEDROCK_MODEL_ID is set")
    return config
