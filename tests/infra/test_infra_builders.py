"""Pure helpers of the Pulumi program: names, the torch pin parser, the ECR lifecycle rule, weight
files and their source, the agent's environment, the invoke command, the source tree, the default
tags, the deployment and scaling settings."""

import hashlib
import json
import re
import shlex
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agent_app.config import load_config as load_agent_config
from infra import naming
from infra.agent import agent_environment, invoke_command
from infra.config import AutoscalingConfig, ConfigError
from infra.images import registry_export, registry_host, speech_labels, torch_version
from infra.program import SourceError, SourceTree, default_tags
from infra.speech import container_environment, deployment_config, scalable_resource_id, target_tracking
from infra.storage import image_lifecycle_policy, tls_only_bucket_policy
from infra.weights import (
    content_type,
    file_sha256,
    resolve_weights_dir,
    s3_prefix_uri,
    weight_files,
    weights_prefix,
)
from kokoro_server.settings import load_settings
from speech_protocol import emf

RUNTIME_NAME = re.compile(r"[a-zA-Z][a-zA-Z0-9_]{0,47}")
ENDPOINT_NAME = re.compile(r"[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}")

# --- names ----------------------------------------------------------------------------------------


def test_names_of_a_plain_stack() -> None:
    assert naming.runtime_name("voicestack", "dev") == "voicestack_dev_agent"
    assert naming.memory_name("voicestack", "dev") == "voicestack_dev_memory"
    assert naming.endpoint_name("voicestack", "dev", "ml.g5.xlarge") == "voicestack-dev-speech-g5-xlarge"
    assert naming.dashboard_name("voicestack", "dev") == "voicestack-dev"


def test_the_endpoint_name_changes_with_the_instance_type_and_nothing_else() -> None:
    # A type change must replace the endpoint (UpdateEndpoint refuses it while autoscaling is registered).
    assert naming.endpoint_name("voicestack", "dev", "ml.g6.2xlarge") == "voicestack-dev-speech-g6-2xlarge"
    assert naming.endpoint_name("voicestack", "dev", "ml.g5.xlarge") != naming.endpoint_name(
        "voicestack", "dev", "ml.g5.2xlarge"
    )


def test_names_replace_characters_the_services_refuse() -> None:
    assert naming.runtime_name("voicestack", "team-a.prod") == "voicestack_team_a_prod_agent"
    assert (
        naming.endpoint_name("voicestack", "team_a.prod", "ml.g5.xlarge") == "voicestack-team-a-prod-speech-g5-xlarge"
    )
    assert naming.runtime_name("9lives", "dev") == "a_9lives_dev_agent"
    assert naming.dashboard_name("voicestack", "team a.prod") == "voicestack-team-a-prod"


def test_long_names_are_shortened_with_a_digest_that_tells_them_apart() -> None:
    first = naming.runtime_name("voicestack", "x" * 60 + "1")
    second = naming.runtime_name("voicestack", "x" * 60 + "2")
    assert len(first) == len(second) == 48
    assert first != second
    assert first.startswith("voicestack_xxx")


@given(st.text(min_size=1, max_size=120))
def test_every_stack_name_yields_names_the_services_accept(stack: str) -> None:
    assert RUNTIME_NAME.fullmatch(naming.runtime_name("voicestack", stack))
    assert RUNTIME_NAME.fullmatch(naming.public_runtime_name("voicestack", stack))
    assert RUNTIME_NAME.fullmatch(naming.memory_name("voicestack", stack))
    assert ENDPOINT_NAME.fullmatch(naming.endpoint_name("voicestack", stack, "ml.p4de.24xlarge"))
    assert re.fullmatch(r"[A-Za-z0-9_-]{1,255}", naming.dashboard_name("voicestack", stack))
    assert re.fullmatch(r"[A-Za-z0-9_-]{1,64}", naming.page_resource_name("voicestack", stack, "page-headers"))
    prefix = naming.sign_in_domain_prefix("voicestack", stack, "123456789012", "us-east-1")
    assert naming.SIGN_IN_DOMAIN_PREFIX.fullmatch(prefix), prefix
    assert not any(word in prefix for word in naming.SIGN_IN_DOMAIN_RESERVED), prefix


def test_names_of_a_stack_open_to_people() -> None:
    assert naming.public_runtime_name("voicestack", "dev") == "voicestack_dev_public"
    assert naming.page_resource_name("voicestack", "dev", "page-headers") == "voicestack-dev-page-headers"
    # Its own log groups: the IAM runtime's prefix does not cover them, nor the other way round.
    assert (
        naming.runtime_log_group_prefix("voicestack_dev_public")
        == "/aws/bedrock-agentcore/runtimes/voicestack_dev_public-"
    )
    digest = hashlib.sha256(b"123456789012:us-east-1:voicestack:dev").hexdigest()[:10]
    assert naming.sign_in_domain_prefix("voicestack", "dev", "123456789012", "us-east-1") == f"voicestack-dev-{digest}"


def test_the_sign_in_prefix_is_the_stacks_own_in_every_account_and_region() -> None:
    # Cognito prefixes are unique per region across every AWS account: the same stack name elsewhere differs.
    prefixes = {
        naming.sign_in_domain_prefix("voicestack", "dev", account, region)
        for account in ("123456789012", "210987654321")
        for region in ("us-east-1", "eu-west-1")
    }
    assert len(prefixes) == 4
    assert all(prefix.startswith("voicestack-dev-") for prefix in prefixes)


def test_the_sign_in_prefix_leaves_out_the_words_cognito_refuses() -> None:
    digest = hashlib.sha256(b"1:us-east-1:voicestack:aws-amazon-cognito-prod").hexdigest()[:10]
    assert naming.sign_in_domain_prefix("voicestack", "aws-amazon-cognito-prod", "1", "us-east-1") == (
        f"voicestack-prod-{digest}"
    )
    # A removal that would spell a refused word anew is removed too.
    assert "aws" not in naming.sign_in_domain_prefix("voicestack", "aawsws", "1", "us-east-1")
    digest = hashlib.sha256(b"1:us-east-1:aws:amazon").hexdigest()[:10]
    assert naming.sign_in_domain_prefix("aws", "amazon", "1", "us-east-1") == digest


# --- torch pin ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "version"),
    [
        ("torch==2.10.0\n", "2.10.0"),
        ("numpy>=2\n# torch==1.0.0 was vulnerable\ntorch==2.14.1  # PYSEC-2026-2286\n", "2.14.1"),
        ("Torch==2.11.0 ; platform_machine == 'x86_64'\n", "2.11.0"),
        ("torch==2.10.0+cu128 \\\n    --hash=sha256:abc\n", "2.10.0+cu128"),
        ("torchaudio==2.10.0\ntorch==2.10.0\n", "2.10.0"),
    ],
)
def test_torch_version_reads_the_one_exact_pin(text: str, version: str) -> None:
    assert torch_version(text) == version


@pytest.mark.parametrize(
    ("text", "found"),
    [
        ("numpy>=2\n", 0),
        ("torch>=2.10\n", 0),
        ("torch==2.10\n", 0),
        ("torchaudio==2.10.0\n", 0),
        ("torch==2.10.0\ntorch==2.11.0\n", 2),
    ],
)
def test_torch_version_refuses_anything_but_exactly_one_pin(text: str, found: int) -> None:
    with pytest.raises(ValueError, match=f"^expected exactly one torch==X.Y.Z line, found {found}$"):
        torch_version(text)


def test_speech_labels_switch_on_bidirectional_streaming_and_record_torch() -> None:
    assert speech_labels("2.14.1") == {
        "com.amazonaws.sagemaker.capabilities.bidirectional-streaming": "true",
        "voicestack.torch-version": "2.14.1",
    }


def test_registry_host_is_the_repository_url_without_the_name() -> None:
    assert registry_host("123456789012.dkr.ecr.us-east-1.amazonaws.com/storage-images-1") == (
        "123456789012.dkr.ecr.us-east-1.amazonaws.com"
    )


def test_source_tree_reports_a_missing_or_unpinned_requirements_file(tmp_path: Path) -> None:
    missing = SourceTree(root=tmp_path, speech_requirements=tmp_path / "requirements.txt")
    with pytest.raises(SourceError) as raised:
        missing.torch_version()
    assert (
        str(raised.value) == f"{tmp_path / 'requirements.txt'} not found: the speech image's torch pin is read from it"
    )
    (tmp_path / "requirements.txt").write_text("torch>=2\n", encoding="utf-8")
    with pytest.raises(SourceError) as raised:
        missing.torch_version()
    assert str(raised.value) == f"{tmp_path / 'requirements.txt'}: expected exactly one torch==X.Y.Z line, found 0"


def test_build_paths_are_relative_to_the_working_directory(tmp_path: Path) -> None:
    tree = SourceTree(root=tmp_path, speech_requirements=tmp_path / "r.txt")
    assert tree.build_path(Path(), tmp_path) == "."
    assert tree.build_path(Path("images/kokoro/Dockerfile"), tmp_path / "infra") == "../images/kokoro/Dockerfile"


# --- storage --------------------------------------------------------------------------------------


def test_lifecycle_policy_keeps_untagged_images_by_count_and_never_selects_tagged_ones() -> None:
    assert image_lifecycle_policy(10) == {
        "rules": [
            {
                "rulePriority": 1,
                "description": "Keep the 10 newest untagged images (earlier builds), expire older ones",
                "selection": {"tagStatus": "untagged", "countType": "imageCountMoreThan", "countNumber": 10},
                "action": {"type": "expire"},
            }
        ]
    }


def test_lifecycle_policy_never_expires_by_age() -> None:
    # An age rule would expire the digest a rolled-back endpoint still pulls; nothing here counts days.
    text = json.dumps(image_lifecycle_policy(3))
    assert "sinceImagePushed" not in text
    assert "days" not in text
    assert '"tagStatus": "any"' not in text
    assert '"tagStatus": "tagged"' not in text


def test_lifecycle_policy_refuses_to_keep_nothing() -> None:
    with pytest.raises(ValueError, match=r"^at least 1 untagged image must be kept, got 0$"):
        image_lifecycle_policy(0)


def test_bucket_policy_denies_every_request_without_tls() -> None:
    arn = "arn:aws:s3:::weights"
    assert tls_only_bucket_policy(arn) == {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Sid": "DenyInsecureTransport",
                "Effect": "Deny",
                "Principal": "*",
                "Action": "s3:*",
                "Resource": ["arn:aws:s3:::weights", "arn:aws:s3:::weights/*"],
                "Condition": {"Bool": {"aws:SecureTransport": "false"}},
            }
        ],
    }


def test_images_are_pushed_with_docker_v2_manifests() -> None:
    assert registry_export() == {"registry": {"oci_media_types": False, "push": True}}


def test_default_tags_are_project_stack_then_configured_ones() -> None:
    assert default_tags("voicestack", "dev", ()) == {"project": "voicestack", "stack": "dev"}
    assert default_tags("voicestack", "dev", (("cost-center", "42"), ("team", "voice"))) == {
        "project": "voicestack",
        "stack": "dev",
        "cost-center": "42",
        "team": "voice",
    }


# --- weights --------------------------------------------------------------------------------------


def test_weight_files_are_the_config_the_checkpoint_and_the_served_voices() -> None:
    assert weight_files() == (
        "config.json",
        "kokoro-v1_0.pth",
        "voices/af_heart.pt",
        "voices/af_bella.pt",
        "voices/am_michael.pt",
        "voices/bf_emma.pt",
    )
    assert weight_files(["af_heart"]) == ("config.json", "kokoro-v1_0.pth", "voices/af_heart.pt")


def test_prefix_is_named_after_the_pinned_revision() -> None:
    assert weights_prefix() == "hexgrad/Kokoro-82M/f3ff3571791e39611d31c381e3a41a3af07b4987"
    assert weights_prefix("org/model", "abc") == "org/model/abc"
    assert s3_prefix_uri("bucket", "org/model/abc") == "s3://bucket/org/model/abc/"


def test_content_types() -> None:
    assert content_type("config.json") == "application/json"
    assert content_type("voices/af_heart.pt") == "application/octet-stream"


def test_file_sha256_matches_hashlib_across_block_boundaries(tmp_path: Path) -> None:
    data = bytes(range(256)) * 5000  # > 1 MiB: more than one read block
    path = tmp_path / "blob"
    path.write_bytes(data)
    assert file_sha256(path) == hashlib.sha256(data).hexdigest()


def complete_weights(directory: Path) -> Path:
    for relative in weight_files():
        (directory / relative).parent.mkdir(parents=True, exist_ok=True)
        (directory / relative).write_bytes(b"x")
    return directory


def test_configured_weights_dir_is_used_and_nothing_is_downloaded(tmp_path: Path) -> None:
    def download() -> Path:
        raise AssertionError("downloaded although weightsDir is set")

    assert resolve_weights_dir(complete_weights(tmp_path), download=download) == tmp_path


def test_without_weights_dir_the_pinned_snapshot_is_used(tmp_path: Path) -> None:
    calls: list[str] = []

    def download() -> Path:
        calls.append("download")
        return complete_weights(tmp_path)

    assert resolve_weights_dir(None, download=download) == tmp_path
    assert calls == ["download"]


def test_missing_weights_dir_and_missing_files_are_named(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as raised:
        resolve_weights_dir(tmp_path / "absent")
    assert str(raised.value) == f"voicestack:weightsDir {tmp_path / 'absent'} is not a directory"
    complete_weights(tmp_path)
    (tmp_path / "voices" / "bf_emma.pt").unlink()
    with pytest.raises(ConfigError) as raised:
        resolve_weights_dir(None, download=lambda: tmp_path)
    assert str(raised.value) == f"Hugging Face snapshot {tmp_path} lacks required weight files: voices/bf_emma.pt"


# --- speech and agent -----------------------------------------------------------------------------


def test_container_environment_points_at_the_mounted_weights_and_stays_offline() -> None:
    assert container_environment("voicestack/dev") == {
        "KOKORO_MODEL_DIR": "/opt/ml/model",
        "KOKORO_ENGINE": "kokoro",
        "KOKORO_DEVICE": "cuda",
        "HF_HUB_OFFLINE": "1",
        "VOICESTACK_METRICS_NAMESPACE": "voicestack/dev",
    }


def test_the_metrics_namespace_variable_is_the_one_the_containers_read() -> None:
    assert emf.MetricsEmitter.from_env("speech", container_environment("voicestack/dev")).namespace == "voicestack/dev"


def test_the_speech_server_reads_the_container_environment_as_intended() -> None:
    settings = load_settings([], container_environment("voicestack/dev"))
    assert (settings.model_dir, settings.engine, settings.device) == (Path("/opt/ml/model"), "kokoro", "cuda")


def test_scalable_resource_id() -> None:
    assert scalable_resource_id("voicestack-dev-speech") == "endpoint/voicestack-dev-speech/variant/AllTraffic"


def test_deployment_is_blue_green_all_at_once_and_rolls_back_on_the_alarm() -> None:
    assert deployment_config("speech-5xx") == {
        "blue_green_update_policy": {
            "traffic_routing_configuration": {"type": "ALL_AT_ONCE", "wait_interval_in_seconds": 0},
            "termination_wait_in_seconds": 300,
            "maximum_execution_timeout_in_seconds": 3600,
        },
        "auto_rollback_configuration": {"alarms": [{"alarm_name": "speech-5xx"}]},
    }


def test_scaling_on_concurrent_requests_or_on_open_sessions() -> None:
    concurrency = AutoscalingConfig(1, 3, 4, "concurrentRequests", 9)
    sessions = AutoscalingConfig(1, 3, 4, "activeSessions", 9)
    assert target_tracking(concurrency, "voicestack/dev") == {
        "target_value": 4.0,
        "predefined_metric_specification": {
            "predefined_metric_type": "SageMakerVariantConcurrentRequestsPerModelHighResolution"
        },
        "scale_out_cooldown": 60,
        "scale_in_cooldown": 600,
    }
    assert target_tracking(sessions, "voicestack/dev") == {
        "target_value": 9.0,
        "customized_metric_specification": {
            "metric_name": "ActiveSessions",
            "namespace": "voicestack/dev/logs",
            "dimensions": [{"name": "Service", "value": "speech"}],
            "statistic": "Average",
            "unit": "Count",
        },
        "scale_out_cooldown": 60,
        "scale_in_cooldown": 600,
    }


def test_agent_environment_without_and_with_a_voice() -> None:
    def environment(voice: str | None) -> dict[str, str]:
        return agent_environment(
            endpoint_name="voicestack-dev-speech",
            region="eu-west-1",
            speech_mode="batch",
            model_id="amazon.nova-lite-v1:0",
            voice=voice,
            memory_id="voicestack_dev_memory-abc",
            metrics_namespace="voicestack/dev",
        )

    expected = {
        "SPEECH_TRANSPORT": "sagemaker",
        "SPEECH_ENDPOINT_NAME": "voicestack-dev-speech",
        "SPEECH_MODE": "batch",
        "AWS_REGION": "eu-west-1",
        "BEDROCK_MODEL_ID": "amazon.nova-lite-v1:0",
        "AGENTCORE_MEMORY_ID": "voicestack_dev_memory-abc",
        "VOICESTACK_METRICS_NAMESPACE": "voicestack/dev",
        "AGENT_AUTH": "iam",
    }
    assert environment(None) == expected
    assert environment("bf_emma") == {**expected, "SPEECH_VOICE": "bf_emma"}


def test_the_agent_reads_the_runtime_environment_as_intended() -> None:
    environment = agent_environment(
        endpoint_name="voicestack-dev-speech",
        region="us-east-1",
        speech_mode="stream",
        model_id="us.anthropic.claude-haiku-4-5-20251001-v1:0",
        voice="af_bella",
        memory_id="voicestack_dev_memory-abc",
        metrics_namespace="voicestack/dev",
    )
    config = load_agent_config(environment)
    assert (
        config.speech_transport,
        config.speech_endpoint_name,
        config.speech_mode,
        config.speech_voice,
        config.aws_region,
        config.bedrock_model_id,
    ) == (
        "sagemaker",
        "voicestack-dev-speech",
        "stream",
        "af_bella",
        "us-east-1",
        "us.anthropic.claude-haiku-4-5-20251001-v1:0",
    )


def test_invoke_command_is_one_shell_line_with_a_json_payload() -> None:
    arn = "arn:aws:bedrock-agentcore:us-east-1:123456789012:runtime/voicestack_dev_agent-abc"
    words = shlex.split(invoke_command(arn, "us-east-1", prompt="Hi, it's me"))
    assert words[:3] == ["aws", "bedrock-agentcore", "invoke-agent-runtime"]
    options = dict(zip(words[3:-1:2], words[4:-1:2], strict=True))
    assert options == {
        "--region": "us-east-1",
        "--agent-runtime-arn": arn,
        "--content-type": "application/json",
        "--accept": "text/event-stream",
        "--cli-binary-format": "raw-in-base64-out",
        "--payload": '{"prompt": "Hi, it\'s me"}',
    }
    assert json.loads(options["--payload"]) == {"prompt": "Hi, it's me"}
    assert words[-1] == "/dev/stdout"
