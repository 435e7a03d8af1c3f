"""The agent's configuration: defaults, each key's checks, and errors that name the key."""

from __future__ import annotations

from pathlib import Path

import botocore.session  # type: ignore[import-untyped]
import pytest

from agent_app.config import (
    CLIENT_ID_CHARS,
    CLIENT_ID_PATTERN,
    DEFAULT_DEADLINE_S,
    DEFAULT_HISTORY_MESSAGES,
    DEFAULT_MAX_SESSIONS_PER_USER,
    DEFAULT_SESSION_WAIT_S,
    DEFAULT_VOICES,
    ConfigError,
    load_config,
)
from kokoro_server import model_pin

WEBSOCKET = {"SPEECH_TRANSPORT": "websocket", "SPEECH_WS_URL": "ws://127.0.0.1:8081/invocations-bidirectional-stream"}
SAGEMAKER = {"SPEECH_ENDPOINT_NAME": "voicestack-kokoro", "AWS_REGION": "us-east-1"}


def test_defaults_with_the_sagemaker_transport() -> None:
    config = load_config(SAGEMAKER)
    assert config.speech_transport == "sagemaker"
    assert config.speech_endpoint_name == "voicestack-kokoro"
    assert config.aws_region == "us-east-1"
    assert config.speech_mode == "stream"
    assert config.speech_voice is None
    assert config.bedrock_model_id is None
    assert config.demo is True
    assert config.agent_deadline_s == DEFAULT_DEADLINE_S
    assert config.sagemaker_endpoint_url is None
    assert config.sagemaker_ca_file is None
    assert config.speech_voices == DEFAULT_VOICES
    assert config.agentcore_memory_id is None
    assert config.session_dir == Path.home() / ".cache" / "voicestack" / "conversations"
    assert config.history_messages == DEFAULT_HISTORY_MESSAGES == 20
    assert config.session_wait_s == DEFAULT_SESSION_WAIT_S == 5.0


def test_the_default_voices_are_the_ones_the_speech_image_serves() -> None:
    assert DEFAULT_VOICES == model_pin.DEFAULT_VOICES


def test_conversation_keys(tmp_path: Path) -> None:
    config = load_config(
        {
            **SAGEMAKER,
            "SPEECH_VOICES": "af_heart, am_adam ,af_heart",
            "SPEECH_VOICE": "am_adam",
            "AGENTCORE_MEMORY_ID": "voicestack_memory-AbC123",
            "AGENT_SESSION_DIR": str(tmp_path),
            "AGENT_HISTORY_MESSAGES": "6",
            "AGENT_SESSION_WAIT_S": "1.5",
        }
    )
    assert config.speech_voices == ("af_heart", "am_adam")
    assert config.speech_voice == "am_adam"
    assert config.agentcore_memory_id == "voicestack_memory-AbC123"
    assert config.session_dir == tmp_path
    assert config.history_messages == 6
    assert config.session_wait_s == 1.5


def test_the_session_dir_follows_the_stacks_cache(tmp_path: Path) -> None:
    assert load_config({**WEBSOCKET, "VOICESTACK_CACHE": str(tmp_path)}).session_dir == tmp_path / "conversations"


def test_every_key_read(tmp_path: Path) -> None:
    ca = tmp_path / "ca.pem"
    ca.write_text("-----BEGIN CERTIFICATE-----\n")
    config = load_config(
        {
            **SAGEMAKER,
            "SPEECH_MODE": "batch",
            "SPEECH_VOICE": "am_michael",
            "BEDROCK_MODEL_ID": "us.anthropic.claude-haiku-4-5",
            "AGENT_DEADLINE_S": "0.5",
            "AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME_HTTP2": "https://127.0.0.1:8443",
            "SAGEMAKER_CA_FILE": str(ca),
        }
    )
    assert config.speech_mode == "batch"
    assert config.speech_voice == "am_michael"
    assert config.bedrock_model_id == "us.anthropic.claude-haiku-4-5"
    assert config.demo is False
    assert config.agent_deadline_s == 0.5
    assert config.sagemaker_endpoint_url == "https://127.0.0.1:8443"
    assert config.sagemaker_ca_file == ca


def test_websocket_transport_needs_no_aws() -> None:
    config = load_config(WEBSOCKET)
    assert config.speech_transport == "websocket"
    assert config.speech_ws_url == WEBSOCKET["SPEECH_WS_URL"]
    assert config.aws_region is None


def test_blank_values_count_as_unset() -> None:
    config = load_config({**WEBSOCKET, "BEDROCK_MODEL_ID": "  ", "SPEECH_VOICE": "", "SPEECH_MODE": ""})
    assert config.bedrock_model_id is None
    assert config.speech_voice is None
    assert config.speech_mode == "stream"


@pytest.mark.parametrize(
    ("env", "key", "message"),
    [
        (
            {**SAGEMAKER, "SPEECH_TRANSPORT": "grpc"},
            "SPEECH_TRANSPORT",
            "must be one of sagemaker, websocket; got 'grpc'",
        ),
        ({**SAGEMAKER, "SPEECH_MODE": "Stream"}, "SPEECH_MODE", "must be one of stream, batch; got 'Stream'"),
        ({"AWS_REGION": "us-east-1"}, "SPEECH_ENDPOINT_NAME", "is required when SPEECH_TRANSPORT is sagemaker"),
        ({"SPEECH_ENDPOINT_NAME": "e"}, "AWS_REGION", "is required when SPEECH_TRANSPORT is sagemaker"),
        ({"SPEECH_TRANSPORT": "websocket"}, "SPEECH_WS_URL", "is required when SPEECH_TRANSPORT is websocket"),
        ({**WEBSOCKET, "SPEECH_WS_URL": "http://h:1/x"}, "SPEECH_WS_URL", "must be a ws:// or wss:// URL"),
        ({**WEBSOCKET, "SPEECH_WS_URL": "ws:///x"}, "SPEECH_WS_URL", "must be a ws:// or wss:// URL with a host"),
        ({**WEBSOCKET, "BEDROCK_MODEL_ID": "m"}, "AWS_REGION", "is required when BEDROCK_MODEL_ID is set"),
        ({**WEBSOCKET, "AGENT_DEADLINE_S": "0"}, "AGENT_DEADLINE_S", "greater than 0; got '0'"),
        ({**WEBSOCKET, "AGENT_DEADLINE_S": "-3"}, "AGENT_DEADLINE_S", "greater than 0; got '-3'"),
        ({**WEBSOCKET, "AGENT_DEADLINE_S": "nan"}, "AGENT_DEADLINE_S", "greater than 0; got 'nan'"),
        ({**WEBSOCKET, "AGENT_DEADLINE_S": "soon"}, "AGENT_DEADLINE_S", "must be a number of seconds"),
        (
            {**SAGEMAKER, "AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME_HTTP2": "http://127.0.0.1:8443"},
            "AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME_HTTP2",
            "must be an https:// URL",
        ),
        ({**SAGEMAKER, "SAGEMAKER_CA_FILE": "/nonexistent/ca.pem"}, "SAGEMAKER_CA_FILE", "must name an existing file"),
        (
            {**WEBSOCKET, "SPEECH_VOICE": "xx_nobody"},
            "SPEECH_VOICE",
            "must be one of SPEECH_VOICES (af_heart, af_bella, am_michael, bf_emma); got 'xx_nobody'",
        ),
        ({**WEBSOCKET, "SPEECH_VOICES": " , "}, "SPEECH_VOICES", "must list at least one name"),
        ({**WEBSOCKET, "AGENTCORE_MEMORY_ID": "m-1"}, "AWS_REGION", "is required when AGENTCORE_MEMORY_ID is set"),
        ({**WEBSOCKET, "AGENT_HISTORY_MESSAGES": "1"}, "AGENT_HISTORY_MESSAGES", "at least 2; got '1'"),
        ({**WEBSOCKET, "AGENT_HISTORY_MESSAGES": "ten"}, "AGENT_HISTORY_MESSAGES", "whole number of at least 2"),
        ({**WEBSOCKET, "AGENT_SESSION_WAIT_S": "0"}, "AGENT_SESSION_WAIT_S", "greater than 0; got '0'"),
    ],
    ids=lambda value: value if isinstance(value, str) and value.isupper() else "",
)
def test_invalid_values_name_the_key(env: dict[str, str], key: str, message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load_config(env)
    assert caught.value.key == key
    assert str(caught.value).startswith(f"{key}: ")
    assert message in str(caught.value)


# --- signed-in users (the JWT-authorized runtime's keys) --------------------------------------------------

ISSUER = "https://cognito-idp.us-east-1.amazonaws.com/us-east-1_Ab12Cd34E"
JWT = {
    **WEBSOCKET,
    "AGENT_AUTH": "jwt",
    "AGENT_JWT_ISSUER": ISSUER,
    "AGENT_JWT_CLIENT_IDS": "5rr0n8t1gq4hm0c6t5u1l7ugr2",
}


def test_an_iam_runtime_sets_none_of_the_jwt_keys() -> None:
    for env in (WEBSOCKET, {**WEBSOCKET, "AGENT_AUTH": "iam"}):
        config = load_config(env)
        assert (config.auth, config.jwt_issuer, config.jwt_client_ids) == ("iam", None, ())
        assert config.max_sessions_per_user == DEFAULT_MAX_SESSIONS_PER_USER == 2


def test_a_jwt_runtime_reads_the_pool_its_clients_and_the_limit() -> None:
    config = load_config({**JWT, "AGENT_JWT_CLIENT_IDS": " abc123 ,def+456,abc123", "AGENT_MAX_SESSIONS_PER_USER": "5"})
    assert config.auth == "jwt"
    assert config.jwt_issuer == ISSUER
    assert config.jwt_client_ids == ("abc123", "def+456")
    assert config.max_sessions_per_user == 5
    assert load_config(JWT).max_sessions_per_user == 2


@pytest.mark.parametrize(
    "issuer", ["http://127.0.0.1:9000/us-east-1_Local", "http://localhost:9000/pool", "http://[::1]:9000/pool"]
)
def test_a_local_issuer_may_be_plain_http_on_a_loopback_host(issuer: str) -> None:
    assert load_config({**JWT, "AGENT_JWT_ISSUER": issuer}).jwt_issuer == issuer


ISSUER_RULE = (
    "must be the user pool's issuer as its tokens carry it, https://cognito-idp.<region>.amazonaws.com/<pool id> "
    "(http:// only on a loopback host, for a local issuer), without a trailing '/'; got "
)


@pytest.mark.parametrize(
    ("env", "key", "message"),
    [
        ({**WEBSOCKET, "AGENT_AUTH": "cognito"}, "AGENT_AUTH", "must be one of iam, jwt; got 'cognito'"),
        ({**WEBSOCKET, "AGENT_AUTH": "JWT"}, "AGENT_AUTH", "must be one of iam, jwt; got 'JWT'"),
        (
            {**WEBSOCKET, "AGENT_AUTH": "jwt", "AGENT_JWT_CLIENT_IDS": "abc"},
            "AGENT_JWT_ISSUER",
            "is required when AGENT_AUTH is jwt (https://cognito-idp.<region>.amazonaws.com/<pool id>)",
        ),
        (
            {**WEBSOCKET, "AGENT_AUTH": "jwt", "AGENT_JWT_ISSUER": ISSUER},
            "AGENT_JWT_CLIENT_IDS",
            "is required when AGENT_AUTH is jwt (the page's app client id)",
        ),
        ({**JWT, "AGENT_JWT_ISSUER": ISSUER + "/"}, "AGENT_JWT_ISSUER", ISSUER_RULE + repr(ISSUER + "/")),
        (
            {**JWT, "AGENT_JWT_ISSUER": "http://cognito-idp.us-east-1.amazonaws.com/p"},
            "AGENT_JWT_ISSUER",
            ISSUER_RULE + "'http://cognito-idp.us-east-1.amazonaws.com/p'",
        ),
        ({**JWT, "AGENT_JWT_ISSUER": "cognito-idp/p"}, "AGENT_JWT_ISSUER", ISSUER_RULE + "'cognito-idp/p'"),
        ({**JWT, "AGENT_JWT_ISSUER": ISSUER + "?x=1"}, "AGENT_JWT_ISSUER", ISSUER_RULE + repr(ISSUER + "?x=1")),
        (
            {**JWT, "AGENT_JWT_ISSUER": "https://u:p@example.com/p"},
            "AGENT_JWT_ISSUER",
            ISSUER_RULE + "'https://u:p@example.com/p'",
        ),
        (
            {**JWT, "AGENT_JWT_CLIENT_IDS": "good,bad id"},
            "AGENT_JWT_CLIENT_IDS",
            "must list app client ids (1 to 128 letters, digits, '_' or '+'); got 'bad id'",
        ),
        (
            {**JWT, "AGENT_JWT_CLIENT_IDS": " , "},
            "AGENT_JWT_CLIENT_IDS",
            "must list at least one name, separated by commas; got ','",
        ),
        (
            {**JWT, "AGENT_MAX_SESSIONS_PER_USER": "0"},
            "AGENT_MAX_SESSIONS_PER_USER",
            "must be a whole number of at least 1; got '0'",
        ),
        (
            {**JWT, "AGENT_MAX_SESSIONS_PER_USER": "two"},
            "AGENT_MAX_SESSIONS_PER_USER",
            "must be a whole number of at least 1; got 'two'",
        ),
        (
            {**WEBSOCKET, "AGENT_JWT_ISSUER": ISSUER},
            "AGENT_JWT_ISSUER",
            "applies to signed-in users only: set AGENT_AUTH=jwt, or leave it unset",
        ),
        (
            {**WEBSOCKET, "AGENT_AUTH": "iam", "AGENT_JWT_CLIENT_IDS": "abc"},
            "AGENT_JWT_CLIENT_IDS",
            "applies to signed-in users only: set AGENT_AUTH=jwt, or leave it unset",
        ),
        (
            {**WEBSOCKET, "AGENT_MAX_SESSIONS_PER_USER": "3"},
            "AGENT_MAX_SESSIONS_PER_USER",
            "applies to signed-in users only: set AGENT_AUTH=jwt, or leave it unset",
        ),
    ],
    ids=lambda value: value if isinstance(value, str) and value.isupper() else "",
)
def test_invalid_auth_values_name_the_key(env: dict[str, str], key: str, message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load_config(env)
    assert str(caught.value) == f"{key}: {message}"


def test_client_ids_are_held_to_cognitos_model() -> None:
    shape = botocore.session.get_session().get_service_model("cognito-idp").shape_for("ClientIdType")
    assert (shape.metadata["min"], shape.metadata["max"]) == CLIENT_ID_CHARS
    assert shape.metadata["pattern"] == CLIENT_ID_PATTERN
