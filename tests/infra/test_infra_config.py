"""Configuration: Pulumi.yaml declares every key once; parse_config accepts the defaults and names
the key and the allowed values for every invalid value, before any resource is declared."""

import re
from pathlib import Path

import pytest
import yaml  # type: ignore[import-untyped]
from hypothesis import given, settings
from hypothesis import strategies as st

from infra.config import (
    CONFIG_KEYS,
    AutoscalingConfig,
    ConfigError,
    PublicAccessConfig,
    StackConfig,
    check_memory_of_stack,
    parse_config,
)
from tests.infra.pulumi_harness import RecordedResource, declared_config, record_program, stack_config

ROOT = Path(__file__).resolve().parents[2]
NS = "voicestack"


def defaults() -> dict[str, str]:
    """What the Pulumi CLI hands the program for a stack that sets nothing (weightsDir left empty)."""
    merged = stack_config({"weightsDir": "/weights"})
    return {key.removeprefix(f"{NS}:"): value for key, value in merged.items() if key.startswith(f"{NS}:")}


def parse(**overrides: str) -> StackConfig:
    return parse_config({**defaults(), **overrides}, namespace=NS)


def test_pulumi_yaml_declares_exactly_the_keys_the_program_reads_in_the_same_order() -> None:
    assert tuple(declared_config()) == CONFIG_KEYS


@pytest.mark.parametrize("key", CONFIG_KEYS)
def test_every_key_has_a_type_a_default_and_a_description(key: str) -> None:
    spec = declared_config()[key]
    assert set(spec) == {"type", "default", "description"}, key
    assert spec["type"] in {"string", "integer", "boolean"}, key
    assert isinstance(spec["description"], str), key
    assert len(spec["description"]) > 20, key


def test_the_readme_table_shows_every_key_with_its_pulumi_yaml_default() -> None:
    rows = {}
    for line in (ROOT / "infra" / "README.md").read_text(encoding="utf-8").splitlines():
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        if len(cells) == 3 and cells[0].startswith("`") and cells[0].strip("`") in CONFIG_KEYS:
            rows[cells[0].strip("`")] = cells[1]
    expected = {}
    for key, spec in declared_config().items():
        default = spec["default"]
        expected[key] = (
            '`""`' if default == "" else f"`{str(default).lower() if isinstance(default, bool) else default}`"
        )
    assert rows == expected


def test_runtime_block_names_pip_and_a_virtualenv_and_main_is_infra() -> None:
    project = yaml.safe_load((ROOT / "Pulumi.yaml").read_text(encoding="utf-8"))
    assert project["name"] == NS
    assert project["runtime"] == {"name": "python", "options": {"toolchain": "pip", "virtualenv": ".venv"}}
    assert project["main"] == "infra/"


def test_defaults_parse_into_the_documented_stack() -> None:
    assert parse() == StackConfig(
        retain_storage=False,
        weights_dir=Path("/weights"),
        instance_type="ml.g5.xlarge",
        instance_count=1,
        health_check_timeout_s=600,
        model_download_timeout_s=600,
        autoscaling=None,
        bedrock_model_id="us.anthropic.claude-haiku-4-5-20251001-v1:0",
        speech_mode="stream",
        speech_voice=None,
        log_retention_days=30,
        alarm_email=None,
        memory_event_expiry_days=30,
        memory_id=None,
        tags=(),
        public=None,
    )


def test_public_access_is_off_by_default_and_reads_its_keys_when_on() -> None:
    assert parse(publicSignUp="true", signInMfa="required", maxSessionsPerUser="5").public is None
    assert parse(publicAccess="true").public == PublicAccessConfig(
        sign_up=False, mfa="off", domain_prefix=None, max_sessions_per_user=2
    )
    assert parse(
        publicAccess="true",
        publicSignUp="true",
        signInMfa="required",
        signInDomainPrefix="talk-to-us",
        maxSessionsPerUser="10",
    ).public == PublicAccessConfig(sign_up=True, mfa="required", domain_prefix="talk-to-us", max_sessions_per_user=10)
    assert parse(publicAccess="true", signInMfa="optional").public == PublicAccessConfig(sign_up=False, mfa="optional")


def test_operations_keys_accept_their_documented_values() -> None:
    config = parse(
        autoscalingEnabled="true",
        autoscalingMetric="activeSessions",
        autoscalingTargetSessions="12",
        logRetentionDays="365",
        alarmEmail="ops@example.com",
        memoryEventExpiryDays="90",
        tags='{"team": "voice", "cost-center": "42"}',
    )
    assert config.autoscaling == AutoscalingConfig(1, 2, 4, "activeSessions", 12)
    assert (config.log_retention_days, config.alarm_email, config.memory_event_expiry_days) == (
        365,
        "ops@example.com",
        90,
    )
    assert config.tags == (("cost-center", "42"), ("team", "voice"))
    assert parse(tags="{}").tags == ()


def test_a_kept_memory_id_is_read_and_checked_against_the_stacks_memory_name() -> None:
    config = parse(memoryId="voicestack_dev_memory-AbCdE12345")
    assert config.memory_id == "voicestack_dev_memory-AbCdE12345"
    check_memory_of_stack(config.memory_id, "voicestack_dev_memory", namespace=NS)
    check_memory_of_stack(None, "voicestack_dev_memory", namespace=NS)
    with pytest.raises(ConfigError) as raised:
        check_memory_of_stack("voicestack_dev_memory_x-AbCdE12345", "voicestack_dev_memory", namespace=NS)
    assert str(raised.value) == (
        "voicestack:memoryId must be the id of this stack's memory, voicestack_dev_memory-<10 letters or digits> "
        "(got 'voicestack_dev_memory_x-AbCdE12345')"
    )


def test_empty_weights_dir_and_voice_mean_not_set() -> None:
    config = parse(weightsDir="", speechVoice="")
    assert (config.weights_dir, config.speech_voice) == (None, None)


def test_dev_stack_sets_only_declared_keys_and_does_not_retain_storage() -> None:
    stack = yaml.safe_load((ROOT / "Pulumi.dev.yaml").read_text(encoding="utf-8"))["config"]
    own = {key.removeprefix(f"{NS}:"): str(value).lower() for key, value in stack.items() if key.startswith(f"{NS}:")}
    assert set(own) <= set(CONFIG_KEYS)
    assert own["retainStorage"] == "false"
    assert stack["aws:region"] == "us-east-1"
    assert parse(**own).retain_storage is False


def test_valid_non_default_values() -> None:
    config = parse(
        retainStorage="true",
        weightsDir="~/kokoro",
        instanceType="ml.g6e.12xlarge",
        instanceCount="3",
        autoscalingEnabled="true",
        autoscalingMinCapacity="2",
        autoscalingMaxCapacity="4",
        autoscalingTargetConcurrency="8",
        bedrockModelId="amazon.nova-lite-v1:0",
        speechMode="batch",
        speechVoice="bf_emma",
    )
    assert config.retain_storage is True
    assert config.weights_dir == Path.home() / "kokoro"
    assert config.instance_type == "ml.g6e.12xlarge"
    assert config.autoscaling == AutoscalingConfig(min_capacity=2, max_capacity=4, target_concurrency=8)
    assert (config.bedrock_model_id, config.speech_mode, config.speech_voice) == (
        "amazon.nova-lite-v1:0",
        "batch",
        "bf_emma",
    )


@pytest.mark.parametrize(
    "model_id",
    [
        "anthropic.claude-3-5-haiku-20241022-v1:0",
        "eu.anthropic.claude-sonnet-4-20250514-v1:0",
        "global.anthropic.claude-haiku-4-5-20251001-v1:0",
        "us-gov.anthropic.claude-3-haiku-20240307-v1:0",
        "meta.llama3-1-8b-instruct-v1:0",
        "anthropic.claude-3-sonnet-20240229-v1:0:28k",
    ],
)
def test_model_ids_and_profiles_are_accepted(model_id: str) -> None:
    assert parse(bedrockModelId=model_id).bedrock_model_id == model_id


GPU = (
    "must be a SageMaker GPU instance type ml.<family>.<size>xlarge with family one of g4dn, g5, g6, g6e, p4d, p4de, p5"
)
MODEL = (
    "must be a Bedrock foundation model id (provider.model, e.g. amazon.nova-lite-v1:0) or a cross-region "
    "inference profile id (<geography>.provider.model, geography one of us, us-gov, eu, apac, jp, au, ca, global)"
)


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("retainStorage", "yes", "voicestack:retainStorage must be one of true, false (got 'yes')"),
        ("retainStorage", "True", "voicestack:retainStorage must be one of true, false (got 'True')"),
        ("autoscalingEnabled", "1", "voicestack:autoscalingEnabled must be one of true, false (got '1')"),
        (
            "weightsDir",
            "weights/kokoro",
            "voicestack:weightsDir must be an absolute path (or start with ~) (got 'weights/kokoro')",
        ),
        ("instanceType", "ml.m5.xlarge", f"voicestack:instanceType {GPU} (got 'ml.m5.xlarge')"),
        ("instanceType", "g5.xlarge", f"voicestack:instanceType {GPU} (got 'g5.xlarge')"),
        ("instanceType", "ml.g5.large", f"voicestack:instanceType {GPU} (got 'ml.g5.large')"),
        ("instanceCount", "0", "voicestack:instanceCount must be an integer from 1 to 20 (got '0')"),
        ("instanceCount", "21", "voicestack:instanceCount must be an integer from 1 to 20 (got '21')"),
        ("instanceCount", "1.5", "voicestack:instanceCount must be an integer from 1 to 20 (got '1.5')"),
        ("instanceCount", "-1", "voicestack:instanceCount must be an integer from 1 to 20 (got '-1')"),
        ("instanceCount", "\u0662", "voicestack:instanceCount must be an integer from 1 to 20 (got '\u0662')"),
        (
            "healthCheckTimeoutSeconds",
            "59",
            "voicestack:healthCheckTimeoutSeconds must be an integer from 60 to 3600 (got '59')",
        ),
        (
            "modelDownloadTimeoutSeconds",
            "3601",
            "voicestack:modelDownloadTimeoutSeconds must be an integer from 60 to 3600 (got '3601')",
        ),
        (
            "autoscalingMinCapacity",
            "0",
            "voicestack:autoscalingMinCapacity must be an integer from 1 to 20 (got '0')",
        ),
        (
            "autoscalingMaxCapacity",
            "many",
            "voicestack:autoscalingMaxCapacity must be an integer from 1 to 20 (got 'many')",
        ),
        (
            "autoscalingTargetConcurrency",
            "101",
            "voicestack:autoscalingTargetConcurrency must be an integer from 1 to 100 (got '101')",
        ),
        ("bedrockModelId", "claude", f"voicestack:bedrockModelId {MODEL} (got 'claude')"),
        ("bedrockModelId", "us.claude", f"voicestack:bedrockModelId {MODEL} (got 'us.claude')"),
        ("bedrockModelId", "", f"voicestack:bedrockModelId {MODEL} (got '')"),
        (
            "bedrockModelId",
            "arn:aws:bedrock:us-east-1:123456789012:application-inference-profile/x",
            f"voicestack:bedrockModelId {MODEL} "
            "(got 'arn:aws:bedrock:us-east-1:123456789012:application-inference-profile/x')",
        ),
        ("speechMode", "fast", "voicestack:speechMode must be one of stream, batch (got 'fast')"),
        (
            "autoscalingMetric",
            "cpu",
            "voicestack:autoscalingMetric must be one of concurrentRequests, activeSessions (got 'cpu')",
        ),
        (
            "autoscalingTargetSessions",
            "0",
            "voicestack:autoscalingTargetSessions must be an integer from 1 to 100 (got '0')",
        ),
        (
            "logRetentionDays",
            "31",
            "voicestack:logRetentionDays must be one of the CloudWatch Logs retention periods 1, 3, 5, 7, 14, 30, "
            "60, 90, 120, 150, 180, 365, 400, 545, 731, 1096, 1827, 2192, 2557, 2922, 3288, 3653 (got '31')",
        ),
        (
            "alarmEmail",
            "ops",
            "voicestack:alarmEmail must be empty or one e-mail address (name@example.com) (got 'ops')",
        ),
        (
            "memoryEventExpiryDays",
            "2",
            "voicestack:memoryEventExpiryDays must be an integer from 7 to 365 (got '2')",
        ),
        # CreateMemory's model accepts 3..3650; the provider refuses anything under 7 (tests/infra/provider_docs.py).
        (
            "memoryEventExpiryDays",
            "6",
            "voicestack:memoryEventExpiryDays must be an integer from 7 to 365 (got '6')",
        ),
        (
            "memoryId",
            "voicestack_dev_memory",
            "voicestack:memoryId must be empty or an AgentCore Memory id, <memory name>-<10 letters or digits> "
            "(got 'voicestack_dev_memory')",
        ),
        (
            "memoryId",
            "arn:aws:bedrock-agentcore:us-east-1:123456789012:memory/voicestack_dev_memory-AbCdE12345",
            "voicestack:memoryId must be empty or an AgentCore Memory id, <memory name>-<10 letters or digits> "
            "(got 'arn:aws:bedrock-agentcore:us-east-1:123456789012:memory/voicestack_dev_memory-AbCdE12345')",
        ),
        (
            "tags",
            "team=voice",
            'voicestack:tags must be a JSON object of string values, e.g. {"team": "voice"} (got \'team=voice\')',
        ),
        ("tags", '{"team": 1}', "voicestack:tags value of tag 'team' must be a string (got '{\"team\": 1}')"),
        (
            "tags",
            '{"project": "x"}',
            "voicestack:tags tag 'project' is reserved: keys may not start with aws: or be one of project, stack "
            '(got \'{"project": "x"}\')',
        ),
        (
            "tags",
            '{"aws:owner": "x"}',
            "voicestack:tags tag 'aws:owner' is reserved: keys may not start with aws: or be one of project, stack "
            '(got \'{"aws:owner": "x"}\')',
        ),
        ("publicAccess", "on", "voicestack:publicAccess must be one of true, false (got 'on')"),
        ("publicSignUp", "1", "voicestack:publicSignUp must be one of true, false (got '1')"),
        ("signInMfa", "totp", "voicestack:signInMfa must be one of off, optional, required (got 'totp')"),
        ("signInMfa", "OFF", "voicestack:signInMfa must be one of off, optional, required (got 'OFF')"),
        ("maxSessionsPerUser", "0", "voicestack:maxSessionsPerUser must be an integer from 1 to 10 (got '0')"),
        ("maxSessionsPerUser", "11", "voicestack:maxSessionsPerUser must be an integer from 1 to 10 (got '11')"),
        *(
            (
                "signInDomainPrefix",
                prefix,
                "voicestack:signInDomainPrefix must be empty or 1 to 63 lower-case letters, digits and hyphens, "
                "starting and ending with a letter or digit, without aws, amazon, cognito (Cognito's rule for "
                f"domain prefixes) (got {prefix!r})",
            )
            for prefix in ("Talk", "-talk", "talk-", "talk.to.us", "x" * 64, "my-aws-agent", "amazonian", "cognitouser")
        ),
        (
            "speechVoice",
            "zz_nobody",
            "voicestack:speechVoice must be empty or one of the served voices af_heart, af_bella, am_michael, "
            "bf_emma (got 'zz_nobody')",
        ),
    ],
)
def test_invalid_values_name_the_key_and_the_allowed_values(key: str, value: str, message: str) -> None:
    with pytest.raises(ConfigError) as raised:
        parse(**{key: value})
    assert str(raised.value) == message


def test_public_keys_are_checked_while_public_access_is_off() -> None:
    # Like the autoscaling keys: a typo is reported the day it is made, not the day the door opens.
    with pytest.raises(ConfigError) as raised:
        parse(signInMfa="sometimes")
    assert str(raised.value) == "voicestack:signInMfa must be one of off, optional, required (got 'sometimes')"


def test_a_missing_key_is_named() -> None:
    values = defaults()
    del values["instanceType"]
    with pytest.raises(ConfigError) as raised:
        parse_config(values, namespace=NS)
    assert str(raised.value) == (
        "voicestack:instanceType is not set; Pulumi.yaml declares it with a default (Pulumi CLI >= 3.44)"
    )


def test_autoscaling_minimum_above_maximum_is_rejected_when_enabled() -> None:
    with pytest.raises(ConfigError) as raised:
        parse(autoscalingEnabled="true", autoscalingMinCapacity="3", autoscalingMaxCapacity="2")
    assert str(raised.value) == (
        "voicestack:autoscalingMinCapacity (3) must not exceed voicestack:autoscalingMaxCapacity (2)"
    )


def test_instance_count_outside_the_autoscaling_range_is_rejected_when_enabled() -> None:
    with pytest.raises(ConfigError) as raised:
        parse(autoscalingEnabled="true", instanceCount="3")
    assert str(raised.value) == (
        "voicestack:instanceCount (3) must lie between voicestack:autoscalingMinCapacity (1) and "
        "voicestack:autoscalingMaxCapacity (2) when autoscaling is enabled"
    )


def test_autoscaling_bounds_are_not_cross_checked_while_autoscaling_is_off() -> None:
    config = parse(autoscalingMinCapacity="3", autoscalingMaxCapacity="2", instanceCount="5")
    assert (config.autoscaling, config.instance_count) == (None, 5)


def test_an_invalid_value_stops_the_program_before_any_resource() -> None:
    registered: list[RecordedResource] = []
    with pytest.raises(ConfigError) as raised:
        record_program({"speechMode": "fast"}, sink=registered)
    assert str(raised.value) == "voicestack:speechMode must be one of stream, batch (got 'fast')"
    assert registered == []


def test_an_incomplete_weights_dir_stops_the_program_before_any_resource(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text("{}", encoding="utf-8")
    registered: list[RecordedResource] = []
    with pytest.raises(ConfigError) as raised:
        record_program({"weightsDir": str(tmp_path)}, sink=registered)
    assert str(raised.value) == (
        f"voicestack:weightsDir {tmp_path} lacks required weight files: kokoro-v1_0.pth, voices/af_heart.pt, "
        "voices/af_bella.pt, voices/am_michael.pt, voices/bf_emma.pt"
    )
    assert registered == []


# --- hostile values: every string either parses into what the API accepts, or fails naming the key ------

ANY_TEXT = st.text(st.characters(codec="utf-8"), max_size=80)


def outcome(**overrides: str) -> StackConfig | str:
    """The parsed configuration, or the error's message."""
    try:
        return parse(**overrides)
    except ConfigError as error:
        return str(error)


@settings(derandomize=True, max_examples=300)
@given(ANY_TEXT)
def test_any_sign_in_prefix_is_a_valid_domain_or_a_named_error(raw: str) -> None:
    config = outcome(publicAccess="true", signInDomainPrefix=raw)
    if isinstance(config, str):
        assert config.startswith("voicestack:signInDomainPrefix must be empty or 1 to 63 lower-case letters")
        return
    assert config.public is not None
    prefix = config.public.domain_prefix
    assert prefix is None if raw == "" else prefix == raw
    if prefix is not None:
        assert re.fullmatch(r"^[a-z0-9](?:[a-z0-9\-]{0,61}[a-z0-9])?$", prefix)  # CreateUserPoolDomain's pattern
        assert not any(word in prefix for word in ("aws", "amazon", "cognito"))


@settings(derandomize=True, max_examples=300)
@given(ANY_TEXT, ANY_TEXT)
def test_any_mfa_or_session_limit_is_one_of_the_allowed_values_or_a_named_error(mfa: str, sessions: str) -> None:
    config = outcome(publicAccess="true", signInMfa=mfa, maxSessionsPerUser=sessions)
    if isinstance(config, str):
        assert config.startswith(("voicestack:signInMfa must be one of", "voicestack:maxSessionsPerUser must be"))
        return
    assert config.public is not None
    assert config.public.mfa in ("off", "optional", "required")
    assert 1 <= config.public.max_sessions_per_user <= 10
