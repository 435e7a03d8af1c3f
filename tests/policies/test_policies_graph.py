"""The whole pack over the real program's resource graph, recorded offline by the infra harness.

The real graph passes; each mutation (one lesson of the reference sample undone) fails with exactly
the rule that guards it, and a first preview, where everything computed from another resource is still
unknown, reports nothing.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import pulumi
import pytest

from policies.pack import ALL_POLICIES
from tests.infra.pulumi_harness import record_program, stack_config
from tests.policies.policy_runner import Finding, GraphResource, run_pack
from tests.policies.program_graph import as_first_preview, find, graph_of, mutated, without_resource

IMAGE = "docker-build:index:Image"
ROLE_POLICY = "aws:iam/rolePolicy:RolePolicy"
RUNTIME = "aws:bedrock/agentcoreAgentRuntime:AgentcoreAgentRuntime"
BUCKET = "aws:s3/bucket:Bucket"
REPOSITORY = "aws:ecr/repository:Repository"
PUBLIC_ACCESS = "aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock"
ENCRYPTION = "aws:s3/bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration"
ENDPOINT_CONFIGURATION = "aws:sagemaker/endpointConfiguration:EndpointConfiguration"

LABEL = "com.amazonaws.sagemaker.capabilities.bidirectional-streaming"
INVOKE = "sagemaker:InvokeEndpointWithBidirectionalStream"

Analyze = Callable[..., list[Finding]]


@pytest.fixture(scope="module")
def real_graph() -> list[GraphResource]:
    """The default stack (Pulumi.yaml defaults: retainStorage false) as the engine would send it."""
    return graph_of(record_program({}))


@pytest.fixture(scope="module")
def retained_graph() -> list[GraphResource]:
    """A stack that retains its storage."""
    return graph_of(record_program({"retainStorage": "true"}))


@pytest.fixture
def analyze() -> Iterator[Analyze]:
    """Runs the whole pack on a graph with the stack config the CLI would hand the pack."""
    previous = dict(pulumi.runtime.config.CONFIG.get())

    def run(graph: list[GraphResource], config: Mapping[str, str] | None = None) -> list[Finding]:
        pulumi.runtime.set_all_config(stack_config(config or {}))
        return run_pack(ALL_POLICIES, graph)

    yield run
    pulumi.runtime.set_all_config(previous)


def policy_of(props: dict[str, Any], change: Callable[[list[dict[str, Any]]], None]) -> None:
    """Edits the statements of a RolePolicy's JSON document in place."""
    document = json.loads(props["policy"])
    change(document["Statement"])
    props["policy"] = json.dumps(document)


def statement(statements: list[dict[str, Any]], sid: str) -> dict[str, Any]:
    (found,) = [entry for entry in statements if entry.get("Sid") == sid]
    return found


def rules(findings: list[Finding]) -> list[tuple[str, str | None]]:
    """(policy, resource URN) of each finding, in report order (policies in pack order; within a policy,
    resources in registration order, which the mocks do not fix)."""
    return [(finding.policy, finding.urn) for finding in findings]


def test_the_graph_holds_every_kind_of_resource_the_pack_checks(real_graph: list[GraphResource]) -> None:
    types = {resource.type for resource in real_graph}
    assert {IMAGE, ROLE_POLICY, RUNTIME, BUCKET, REPOSITORY, PUBLIC_ACCESS, ENCRYPTION, ENDPOINT_CONFIGURATION} <= types


def test_the_real_program_passes_every_rule(real_graph: list[GraphResource], analyze: Analyze) -> None:
    assert analyze(real_graph) == []


def test_the_real_program_that_retains_storage_passes_every_rule(
    retained_graph: list[GraphResource], analyze: Analyze
) -> None:
    assert analyze(retained_graph, {"retainStorage": "true"}) == []


def test_a_first_preview_of_the_real_program_reports_nothing(real_graph: list[GraphResource], analyze: Analyze) -> None:
    assert analyze(as_first_preview(real_graph)) == []


def test_removing_the_bidirectional_label_fails_the_label_rule_only(
    real_graph: list[GraphResource], analyze: Analyze
) -> None:
    graph = mutated(real_graph, IMAGE, "images-speech", lambda props: props["labels"].pop(LABEL))
    findings = analyze(graph)
    assert rules(findings) == [("speech-image-bidirectional-streaming", find(graph, IMAGE, "images-speech").urn)]
    assert findings[0].message == f'The speech image must carry the label {LABEL}="true"; it has no such label.'


def test_the_label_rule_still_fails_during_a_first_preview(real_graph: list[GraphResource], analyze: Analyze) -> None:
    graph = mutated(real_graph, IMAGE, "images-speech", lambda props: props["labels"].pop(LABEL))
    assert [finding.policy for finding in analyze(as_first_preview(graph))] == ["speech-image-bidirectional-streaming"]


def test_an_old_torch_pin_fails_the_torch_rule_only(real_graph: list[GraphResource], analyze: Analyze) -> None:
    graph = mutated(
        real_graph, IMAGE, "images-speech", lambda props: props["labels"].update({"voicestack.torch-version": "2.9.1"})
    )
    findings = analyze(graph)
    assert rules(findings) == [("speech-image-torch-version", find(graph, IMAGE, "images-speech").urn)]
    assert findings[0].message == (
        "The speech image must pin PyTorch 2.10.0 or later (PYSEC-2026-2286); "
        "its label voicestack.torch-version says 2.9.1."
    )


def test_a_wildcard_action_fails_the_wildcard_rule_only(real_graph: list[GraphResource], analyze: Analyze) -> None:
    def add_wildcard(statements: list[dict[str, Any]]) -> None:
        statement(statements, "InvokeInferenceProfile")["Action"].append("bedrock:*")

    graph = mutated(real_graph, ROLE_POLICY, "agent-role-policy", lambda props: policy_of(props, add_wildcard))
    findings = analyze(graph)
    assert rules(findings) == [("iam-no-wildcard-actions", find(graph, ROLE_POLICY, "agent-role-policy").urn)]
    assert findings[0].message == (
        'Statement "InvokeInferenceProfile" of the policy must name each action it allows; it allows "bedrock:*".'
    )


def test_invoke_widened_to_any_resource_fails_the_invoke_and_resource_rules(
    real_graph: list[GraphResource], analyze: Analyze
) -> None:
    def widen(statements: list[dict[str, Any]]) -> None:
        statement(statements, "StreamToSpeechEndpoint")["Resource"] = ["*"]

    graph = mutated(real_graph, ROLE_POLICY, "agent-role-policy", lambda props: policy_of(props, widen))
    policy_urn = find(graph, ROLE_POLICY, "agent-role-policy").urn
    findings = analyze(graph)
    assert rules(findings) == [
        ("iam-scoped-resources", policy_urn),
        ("agent-invokes-only-speech-endpoint", policy_urn),
        ("agent-invokes-only-speech-endpoint", find(graph, RUNTIME, "agent-runtime").urn),
    ]
    assert findings[1].message == (
        f"The role of AgentCore runtime 'agent-runtime' may call {INVOKE} only on endpoint "
        "voicestack-dev-speech-g5-xlarge; "
        'statement "StreamToSpeechEndpoint" of its policy also allows it on "*".'
    )
    assert findings[2].message == (
        f"The role of AgentCore runtime 'agent-runtime' must allow {INVOKE} on endpoint "
        "voicestack-dev-speech-g5-xlarge; "
        "none of its policies does."
    )


def test_invoke_widened_to_every_endpoint_fails_the_invoke_rule_only(
    real_graph: list[GraphResource], analyze: Analyze
) -> None:
    def widen(statements: list[dict[str, Any]]) -> None:
        entry = statement(statements, "StreamToSpeechEndpoint")
        entry["Resource"] = [*entry["Resource"], "arn:aws:sagemaker:us-east-1:123456789012:endpoint/*"]

    graph = mutated(real_graph, ROLE_POLICY, "agent-role-policy", lambda props: policy_of(props, widen))
    assert rules(analyze(graph)) == [
        ("agent-invokes-only-speech-endpoint", find(graph, ROLE_POLICY, "agent-role-policy").urn)
    ]


def test_a_public_bucket_fails_the_public_access_rule_only(real_graph: list[GraphResource], analyze: Analyze) -> None:
    graph = without_resource(real_graph, PUBLIC_ACCESS)
    assert rules(analyze(graph)) == [("s3-bucket-blocks-public-access", find(graph, BUCKET, "storage-weights").urn)]


def test_an_unencrypted_bucket_fails_the_encryption_rule_only(
    real_graph: list[GraphResource], analyze: Analyze
) -> None:
    graph = without_resource(real_graph, ENCRYPTION)
    assert rules(analyze(graph)) == [("s3-bucket-encrypted", find(graph, BUCKET, "storage-weights").urn)]


def test_a_repository_without_scanning_fails_the_scan_rule_only(
    real_graph: list[GraphResource], analyze: Analyze
) -> None:
    graph = mutated(
        real_graph,
        REPOSITORY,
        "storage-images",
        lambda props: props["imageScanningConfiguration"].update(scanOnPush=False),
    )
    assert rules(analyze(graph)) == [("ecr-scan-on-push", find(graph, REPOSITORY, "storage-images").urn)]


def test_a_cpu_instance_fails_the_gpu_rule_only(real_graph: list[GraphResource], analyze: Analyze) -> None:
    graph = mutated(
        real_graph,
        ENDPOINT_CONFIGURATION,
        "speech-config",
        lambda props: props["productionVariants"][0].update(instanceType="ml.m5.xlarge"),
    )
    assert rules(analyze(graph)) == [
        ("sagemaker-gpu-instance", find(graph, ENDPOINT_CONFIGURATION, "speech-config").urn)
    ]


def test_no_start_up_timeout_fails_the_timeout_rule_only(real_graph: list[GraphResource], analyze: Analyze) -> None:
    graph = mutated(
        real_graph,
        ENDPOINT_CONFIGURATION,
        "speech-config",
        lambda props: props["productionVariants"][0].pop("containerStartupHealthCheckTimeoutInSeconds"),
    )
    assert rules(analyze(graph)) == [
        ("sagemaker-startup-health-check-timeout", find(graph, ENDPOINT_CONFIGURATION, "speech-config").urn)
    ]


def test_retained_storage_in_a_stack_that_does_not_retain_is_an_advisory_finding(
    retained_graph: list[GraphResource], analyze: Analyze
) -> None:
    findings = analyze(retained_graph, {"retainStorage": "false"})
    # Resources register concurrently, so the two findings come in either order.
    assert sorted(rules(findings)) == sorted(
        [
            ("storage-deleted-with-stack", find(retained_graph, REPOSITORY, "storage-images").urn),
            ("storage-deleted-with-stack", find(retained_graph, BUCKET, "storage-weights").urn),
        ]
    )
    assert {finding.enforcement_level.value for finding in findings} == {"advisory"}


# --- a stack open to people ------------------------------------------------------------------------

POOL = "aws:cognito/userPool:UserPool"
DISTRIBUTION = "aws:cloudfront/distribution:Distribution"
BUCKET_POLICY = "aws:s3/bucketPolicy:BucketPolicy"
PUBLIC = {"publicAccess": "true"}


@pytest.fixture(scope="module")
def public_graph() -> list[GraphResource]:
    return graph_of(record_program(PUBLIC))


@pytest.fixture(scope="module")
def public_retained_graph() -> list[GraphResource]:
    return graph_of(record_program({**PUBLIC, "retainStorage": "true"}))


def test_the_public_stack_passes_every_rule(
    public_graph: list[GraphResource], public_retained_graph: list[GraphResource], analyze: Analyze
) -> None:
    assert analyze(public_graph, PUBLIC) == []
    assert analyze(public_retained_graph, {**PUBLIC, "retainStorage": "true"}) == []
    assert analyze(as_first_preview(public_graph), PUBLIC) == []


def test_the_storage_rules_hold_the_page_bucket_too(public_graph: list[GraphResource], analyze: Analyze) -> None:
    graph = [r for r in public_graph if (r.type, r.name) != (PUBLIC_ACCESS, "page-bucket-public-access")]
    assert rules(analyze(graph, PUBLIC)) == [("s3-bucket-blocks-public-access", find(graph, BUCKET, "page-bucket").urn)]
    graph = [r for r in public_graph if (r.type, r.name) != (ENCRYPTION, "page-bucket-encryption")]
    assert rules(analyze(graph, PUBLIC)) == [("s3-bucket-encrypted", find(graph, BUCKET, "page-bucket").urn)]


def test_origin_access_for_any_distribution_fails_the_scope_rule_only(
    public_graph: list[GraphResource], analyze: Analyze
) -> None:
    def unscope(statements: list[dict[str, Any]]) -> None:
        del statement(statements, "CloudFrontReadsThePage")["Condition"]

    graph = mutated(public_graph, BUCKET_POLICY, "page-bucket-policy", lambda props: policy_of(props, unscope))
    findings = analyze(graph, PUBLIC)
    assert rules(findings) == [
        ("cloudfront-origin-access-scoped", find(graph, BUCKET_POLICY, "page-bucket-policy").urn)
    ]
    assert findings[0].message.endswith(
        "so that no other distribution reads it through origin access control; it has no Condition."
    )


def test_plain_http_fails_the_https_rule_only(public_graph: list[GraphResource], analyze: Analyze) -> None:
    graph = mutated(
        public_graph,
        DISTRIBUTION,
        "page-distribution",
        lambda props: props["defaultCacheBehavior"].update(viewerProtocolPolicy="allow-all"),
    )
    assert rules(analyze(graph, PUBLIC)) == [
        ("cloudfront-https-only", find(graph, DISTRIBUTION, "page-distribution").urn)
    ]


def test_a_kept_user_pool_in_a_stack_that_does_not_retain_is_an_advisory_finding(
    public_retained_graph: list[GraphResource], analyze: Analyze
) -> None:
    findings = analyze(public_retained_graph, {**PUBLIC, "retainStorage": "false"})
    assert sorted(rules(findings)) == sorted(
        [
            ("storage-deleted-with-stack", find(public_retained_graph, REPOSITORY, "storage-images").urn),
            ("storage-deleted-with-stack", find(public_retained_graph, BUCKET, "storage-weights").urn),
            ("storage-deleted-with-stack", find(public_retained_graph, POOL, "signin-users").urn),
        ]
    )
