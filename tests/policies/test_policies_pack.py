"""The pack as a whole: its rules' names and levels, its manifest, and the real analyzer server.

The server test starts the pack the way the Pulumi CLI does (`python -u -m pulumi.policy <engine> .`
from the pack's folder, stack config in PULUMI_CONFIG, no PYTHONPATH) and talks to it over gRPC.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path

import grpc  # type: ignore[import-untyped]
import pytest
import yaml  # type: ignore[import-untyped]
from google.protobuf import empty_pb2, struct_pb2  # type: ignore[import-untyped]
from pulumi.runtime.proto import analyzer_pb2, analyzer_pb2_grpc
from pulumi_policy import Policy

from local.lock_exports import locked_versions, pinned
from policies.pack import ALL_POLICIES, PACK_NAME
from tests.policies.policy_runner import UNKNOWN_VALUE, urn_of

PACK_DIR = Path(__file__).resolve().parents[2] / "policies"
REPO_ROOT = PACK_DIR.parent
LABEL = "com.amazonaws.sagemaker.capabilities.bidirectional-streaming"

EXPECTED_POLICIES = {
    "speech-image-bidirectional-streaming": "mandatory",
    "speech-image-torch-version": "mandatory",
    "speech-image-docker-manifest": "mandatory",
    "iam-no-wildcard-actions": "mandatory",
    "iam-scoped-resources": "mandatory",
    "agent-invokes-only-speech-endpoint": "mandatory",
    "iam-actions-exist": "mandatory",
    "s3-bucket-encrypted": "mandatory",
    "s3-bucket-blocks-public-access": "mandatory",
    "ecr-scan-on-push": "mandatory",
    "storage-deleted-with-stack": "advisory",
    "cloudfront-https-only": "mandatory",
    "cloudfront-origin-access-scoped": "mandatory",
    "sagemaker-gpu-instance": "mandatory",
    "sagemaker-startup-health-check-timeout": "mandatory",
}


def test_the_pack_holds_exactly_the_expected_rules_at_their_levels() -> None:
    levels = {
        policy.name: policy.enforcement_level.value if policy.enforcement_level else None for policy in ALL_POLICIES
    }
    assert levels == EXPECTED_POLICIES
    assert len(ALL_POLICIES) == len(EXPECTED_POLICIES)


@pytest.mark.parametrize("policy", ALL_POLICIES, ids=lambda policy: policy.name)
def test_names_are_kebab_case_and_descriptions_one_sentence(policy: Policy) -> None:
    name, description = policy.name, policy.description
    assert re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)+", name)
    assert description[0].isupper()
    assert description.endswith(".")
    assert ". " not in description


def test_manifest_names_the_pack_and_its_own_environment() -> None:
    manifest = yaml.safe_load((PACK_DIR / "PulumiPolicy.yaml").read_text(encoding="utf-8"))
    assert manifest["name"] == PACK_NAME
    assert manifest["runtime"] == {"name": "python", "options": {"toolchain": "pip", "virtualenv": ".venv"}}


def test_pack_requirements_are_the_locked_closure_of_the_policies_extra() -> None:
    pack = pinned((PACK_DIR / "requirements.txt").read_text(encoding="utf-8"))
    assert {"pulumi", "pulumi-policy", "policy-sentry", "packaging"} <= set(pack)
    lock = locked_versions()
    assert {package: lock[package] for package in pack} == pack


# --- the analyzer server, over gRPC -----------------------------------------------------------------


@pytest.fixture(scope="module")
def analyzer() -> Iterator[analyzer_pb2_grpc.AnalyzerStub]:
    """The pack's analyzer server, started as the CLI starts it (stack config: retainStorage false)."""
    env = {key: value for key, value in os.environ.items() if key not in ("PYTHONPATH", "PULUMI_CONFIG")}
    env.update(
        PULUMI_CONFIG='{"voicestack:retainStorage": "false"}',
        PULUMI_PROJECT="voicestack",
        PULUMI_STACK="dev",
        PULUMI_DRY_RUN="true",
    )
    process = subprocess.Popen(
        [sys.executable, "-u", "-m", "pulumi.policy", "127.0.0.1:1", "."],
        cwd=PACK_DIR,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        port = process.stdout.readline().strip()
        if not port.isdigit():
            process.kill()
            _, errors = process.communicate(timeout=10)
            pytest.fail(f"the pack did not start: stdout {port!r}, stderr {errors!r}")
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            yield analyzer_pb2_grpc.AnalyzerStub(channel)
    finally:
        process.kill()
        process.communicate(timeout=10)


def struct(props: Mapping[str, object]) -> struct_pb2.Struct:
    message = struct_pb2.Struct()
    message.update(props)
    return message


def analyze_image(analyzer: analyzer_pb2_grpc.AnalyzerStub, labels: object) -> list[analyzer_pb2.AnalyzeDiagnostic]:
    props = {
        "dockerfile": {"location": "images/kokoro/Dockerfile"},
        "context": {"location": "."},
        "labels": labels,
        "push": False,
        "exports": [{"registry": {"ociMediaTypes": False, "push": True}}],
    }
    request = analyzer_pb2.AnalyzeRequest(
        type="docker-build:index:Image",
        name="images-speech",
        urn=urn_of("docker-build:index:Image", "images-speech"),
        properties=struct(props),
    )
    return list(analyzer.Analyze(request, timeout=30).diagnostics)


def test_server_describes_every_rule(analyzer: analyzer_pb2_grpc.AnalyzerStub) -> None:
    info = analyzer.GetAnalyzerInfo(empty_pb2.Empty(), timeout=30)
    assert info.name == PACK_NAME
    levels = {
        policy.name: analyzer_pb2.EnforcementLevel.Name(policy.enforcementLevel).lower() for policy in info.policies
    }
    assert levels == EXPECTED_POLICIES


def test_server_reports_a_violation_with_description_and_message(analyzer: analyzer_pb2_grpc.AnalyzerStub) -> None:
    (diagnostic,) = analyze_image(analyzer, {"voicestack.torch-version": "2.14.1+cu130"})
    assert diagnostic.policyName == "speech-image-bidirectional-streaming"
    assert diagnostic.enforcementLevel == analyzer_pb2.MANDATORY
    assert diagnostic.message == (
        "The speech image declares SageMaker's bidirectional-streaming capability label.\n"
        f'The speech image must carry the label {LABEL}="true"; it has no such label.'
    )


def test_server_passes_the_known_good_image(analyzer: analyzer_pb2_grpc.AnalyzerStub) -> None:
    assert analyze_image(analyzer, {LABEL: "true", "voicestack.torch-version": "2.14.1+cu130"}) == []


def test_server_reports_nothing_for_unknown_values_not_even_a_cannot_run_notice(
    analyzer: analyzer_pb2_grpc.AnalyzerStub,
) -> None:
    assert analyze_image(analyzer, UNKNOWN_VALUE) == []
    assert analyze_image(analyzer, {LABEL: UNKNOWN_VALUE, "voicestack.torch-version": UNKNOWN_VALUE}) == []


def test_server_reads_the_stack_config_for_the_advisory_rule(analyzer: analyzer_pb2_grpc.AnalyzerStub) -> None:
    bucket_urn = urn_of("aws:s3/bucket:Bucket", "storage-weights")
    block = {
        "blockPublicAcls": True,
        "blockPublicPolicy": True,
        "ignorePublicAcls": True,
        "restrictPublicBuckets": True,
    }
    encryption = {"rules": [{"applyServerSideEncryptionByDefault": {"sseAlgorithm": "AES256"}}]}
    dependency = {"bucket": analyzer_pb2.AnalyzerPropertyDependencies(urns=[bucket_urn])}
    resources = [
        analyzer_pb2.AnalyzerResource(
            type="aws:s3/bucket:Bucket",
            name="storage-weights",
            urn=bucket_urn,
            properties=struct({"forceDestroy": False}),
        ),
        analyzer_pb2.AnalyzerResource(
            type="aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock",
            name="storage-weights-public-access",
            urn=urn_of("aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock", "storage-weights-public-access"),
            properties=struct(block),
            propertyDependencies=dependency,
        ),
        analyzer_pb2.AnalyzerResource(
            type="aws:s3/bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration",
            name="storage-weights-encryption",
            urn=urn_of("aws:s3/bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration", "e"),
            properties=struct(encryption),
            propertyDependencies=dependency,
        ),
    ]
    response = analyzer.AnalyzeStack(analyzer_pb2.AnalyzeStackRequest(resources=resources), timeout=30)
    assert [(d.policyName, d.urn, d.enforcementLevel) for d in response.diagnostics] == [
        ("storage-deleted-with-stack", bucket_urn, analyzer_pb2.ADVISORY)
    ]
