"""Every resource of the graph, as the API request AWS receives, checked against botocore's service models.

The mocks echo whatever they are given; here each recorded resource becomes the create call the AWS
provider makes (tests/infra/aws_api.py) and is validated: unknown keys, missing required members,
types, enum values, lengths, ranges and patterns. Mutations prove that the check can fail.
"""

import copy
import dataclasses
import json
from typing import Any

import pulumi_aws as aws
import pytest

from infra.config import MEMORY_EXPIRY_RANGE_DAYS, TIMEOUT_RANGE_S
from tests.infra.aws_api import TRANSLATORS, ApiRequest, UntranslatedInput, requests_for, validate
from tests.infra.provider_docs import documented_ranges, range_problems
from tests.infra.pulumi_harness import ProgramRun, RecordedResource, run_program

CONFIGS = {
    "dev": {},
    "everything": {
        "retainStorage": "true",
        "autoscalingEnabled": "true",
        "autoscalingMaxCapacity": "3",
        "autoscalingMetric": "activeSessions",
        "alarmEmail": "ops@example.com",
        "tags": '{"team": "voice"}',
        "speechVoice": "bf_emma",
        "publicAccess": "true",
        "publicSignUp": "true",
        "signInMfa": "required",
    },
    "concurrency": {"autoscalingEnabled": "true", "instanceType": "ml.g6e.2xlarge", "logRetentionDays": "3653"},
    "public": {"publicAccess": "true", "signInMfa": "optional", "signInDomainPrefix": "talk-to-voicestack"},
}


_RUNS: dict[str, ProgramRun] = {}


def program(config: str) -> ProgramRun:
    """One run per configuration for the whole module (each run costs seconds)."""
    if config not in _RUNS:
        _RUNS[config] = run_program(CONFIGS[config])
    return _RUNS[config]


@pytest.fixture(scope="module", params=sorted(CONFIGS))
def run(request: pytest.FixtureRequest) -> ProgramRun:
    return program(request.param)


def default_tags(run: ProgramRun) -> dict[str, str]:
    [provider] = [r for r in run.resources if r.type == "pulumi:providers:aws"]
    tags: dict[str, str] = json.loads(provider.inputs["defaultTags"])["tags"]
    return tags


def aws_resources(run: ProgramRun) -> list[RecordedResource]:
    return [r for r in run.resources if r.type.startswith("aws:")]


def all_requests(run: ProgramRun) -> list[ApiRequest]:
    tags = default_tags(run)
    return [request for resource in aws_resources(run) for request in requests_for(resource, tags)]


def test_every_request_is_valid_for_its_api_model(run: ProgramRun) -> None:
    for request in all_requests(run):
        assert validate(request) == [], f"{request.source}: {request.operation}"


def test_every_input_is_within_the_ranges_the_provider_documents(run: ProgramRun) -> None:
    for resource in aws_resources(run):
        assert range_problems(resource) == [], resource.urn


def test_the_providers_ranges_are_read_from_the_installed_pulumi_aws() -> None:
    assert documented_ranges(aws.bedrock.AgentcoreMemoryArgs) == {"event_expiry_duration": (7, 365)}
    variant = documented_ranges(aws.sagemaker.EndpointConfigurationProductionVariantArgs)
    assert variant["container_startup_health_check_timeout_in_seconds"] == (60, 3600)
    assert variant["model_data_download_timeout_in_seconds"] == (60, 3600)
    # A length rule ("between 1 and 255 characters in length") is not a numeric range.
    assert documented_ranges(aws.appautoscaling.PolicyArgs) == {}


def test_the_configuration_accepts_exactly_the_providers_ranges() -> None:
    assert documented_ranges(aws.bedrock.AgentcoreMemoryArgs)["event_expiry_duration"] == MEMORY_EXPIRY_RANGE_DAYS
    variant = documented_ranges(aws.sagemaker.EndpointConfigurationProductionVariantArgs)
    assert variant["container_startup_health_check_timeout_in_seconds"] == TIMEOUT_RANGE_S
    assert variant["model_data_download_timeout_in_seconds"] == TIMEOUT_RANGE_S


def test_an_expiry_botocore_accepts_and_the_provider_refuses_fails(dev: ProgramRun) -> None:
    [memory] = [r for r in dev.resources if r.type == "aws:bedrock/agentcoreMemory:AgentcoreMemory"]
    short = dataclasses.replace(memory, inputs={**memory.inputs, "eventExpiryDuration": 5})
    # CreateMemory's model allows 3..3650: only the provider's own rule sees the problem.
    assert [validate(request) for request in requests_for(short, {})] == [[]]
    assert range_problems(short) == [
        "AgentcoreMemory.eventExpiryDuration: 5 outside 7..365 (AgentcoreMemoryArgs documents it)"
    ]
    [config] = [r for r in dev.resources if r.type == "aws:sagemaker/endpointConfiguration:EndpointConfiguration"]
    variant = {**config.inputs["productionVariants"][0], "modelDataDownloadTimeoutInSeconds": 3601}
    late = dataclasses.replace(config, inputs={**config.inputs, "productionVariants": [variant]})
    assert range_problems(late) == [
        "EndpointConfiguration.productionVariants[0].modelDataDownloadTimeoutInSeconds: 3601 outside 60..3600 "
        "(EndpointConfigurationProductionVariantArgs documents it)"
    ]


def test_every_aws_resource_type_is_translated(run: ProgramRun) -> None:
    assert {r.type for r in aws_resources(run)} <= set(TRANSLATORS)


def test_the_operations_cover_what_the_stack_creates() -> None:
    operations = {(r.service, r.operation) for r in all_requests(program("everything"))}
    assert operations == {
        ("sagemaker", "CreateModel"),
        ("sagemaker", "CreateEndpointConfig"),
        ("sagemaker", "CreateEndpoint"),
        ("bedrock-agentcore-control", "CreateAgentRuntime"),
        ("bedrock-agentcore-control", "CreateMemory"),
        ("ecr", "CreateRepository"),
        ("ecr", "PutLifecyclePolicy"),
        ("s3", "CreateBucket"),
        ("s3", "PutBucketTagging"),
        ("s3", "PutBucketEncryption"),
        ("s3", "PutPublicAccessBlock"),
        ("s3", "PutBucketPolicy"),
        ("s3", "PutObject"),
        ("iam", "CreateRole"),
        ("iam", "PutRolePolicy"),
        ("application-autoscaling", "RegisterScalableTarget"),
        ("application-autoscaling", "PutScalingPolicy"),
        ("cloudwatch", "PutMetricAlarm"),
        ("cloudwatch", "PutDashboard"),
        ("logs", "CreateLogGroup"),
        ("logs", "PutRetentionPolicy"),
        ("logs", "PutMetricFilter"),
        ("sns", "CreateTopic"),
        ("sns", "Subscribe"),
        ("s3", "PutBucketOwnershipControls"),
        ("cognito-idp", "CreateUserPool"),
        ("cognito-idp", "SetUserPoolMfaConfig"),
        ("cognito-idp", "CreateUserPoolClient"),
        ("cognito-idp", "CreateUserPoolDomain"),
        ("cognito-idp", "CreateManagedLoginBranding"),
        ("cloudfront", "CreateOriginAccessControl"),
        ("cloudfront", "CreateResponseHeadersPolicy"),
        ("cloudfront", "CreateDistributionWithTags"),
    }


def test_every_taggable_request_carries_the_default_tags() -> None:
    run = program("everything")
    expected = {"project": "voicestack", "stack": "dev", "team": "voice"}
    tagged = 0
    for request in all_requests(run):
        tags = request.params.get("Tags", request.params.get("tags", request.params.get("UserPoolTags")))
        if request.operation == "PutBucketTagging":
            tags = request.params["Tagging"]["TagSet"]
        if request.operation == "CreateDistributionWithTags":
            tags = request.params["DistributionConfigWithTags"]["Tags"]["Items"]
        if tags is None:
            continue
        tagged += 1
        as_dict = tags if isinstance(tags, dict) else {entry["Key"]: entry["Value"] for entry in tags}
        assert as_dict == expected, f"{request.source}: {request.operation}"
    # Repository, 2 roles, model, endpoint config, endpoint, scalable target, 2 runtimes, memory, the endpoint's log
    # group, topic, 9 alarms, the 2 buckets' PutBucketTagging (objects carry them in their Tagging header), the user
    # pool and the distribution. The runtimes' log groups get them from AdoptedLogGroup
    # (tests/infra/test_infra_runtime_logs.py); CloudFront's access control and headers policy and Cognito's client,
    # domain and style take no tags.
    assert tagged == 25


def find_request(run: ProgramRun, operation: str) -> ApiRequest:
    matches = [r for r in all_requests(run) if r.operation == operation]
    assert matches, operation
    return matches[0]


def mutated(request: ApiRequest, path: tuple[str | int, ...], value: Any) -> ApiRequest:
    params = copy.deepcopy(request.params)
    node: Any = params
    for key in path[:-1]:
        node = node[key]
    if value is DELETE:
        del node[path[-1]]
    else:
        node[path[-1]] = value
    return ApiRequest(request.service, request.operation, params, request.source)


DELETE = object()


@pytest.fixture(scope="module")
def dev() -> ProgramRun:
    return program("dev")


def test_an_unknown_inference_ami_version_fails(dev: ProgramRun) -> None:
    request = find_request(dev, "CreateEndpointConfig")
    wrong = mutated(request, ("ProductionVariants", 0, "InferenceAmiVersion"), "al2-ami-sagemaker-inference-gpu-9")
    [problem] = validate(wrong)
    assert problem.startswith(
        "CreateEndpointConfig.ProductionVariants[0].InferenceAmiVersion: 'al2-ami-sagemaker-inference-gpu-9' is not "
        "one of al2-ami-sagemaker-inference-gpu-2, "
    ), problem
    assert "al2-ami-sagemaker-inference-gpu-3-1" in problem


@pytest.mark.parametrize(
    ("operation", "path", "value", "expected"),
    [
        (
            "CreateEndpointConfig",
            ("ProductionVariants", 0, "InstanceType"),
            "ml.g5.tiny",
            "CreateEndpointConfig.ProductionVariants[0].InstanceType: 'ml.g5.tiny' is not one of",
        ),
        ("CreateModel", ("PrimaryContainer", "Imagee"), "x", 'Unknown parameter in PrimaryContainer: "Imagee"'),
        ("PutMetricFilter", ("filterPattern",), DELETE, 'Missing required parameter in input: "filterPattern"'),
        (
            "CreateModel",
            ("PrimaryContainer", "ModelDataSource", "S3DataSource", "CompressionType"),
            "none",
            "CreateModel.PrimaryContainer.ModelDataSource.S3DataSource.CompressionType: 'none' is not one of",
        ),
        (
            "CreateAgentRuntime",
            ("agentRuntimeName",),
            "voicestack-dev-agent",
            "CreateAgentRuntime.agentRuntimeName: 'voicestack-dev-agent' does not match",
        ),
        (
            "CreateAgentRuntime",
            ("networkConfiguration", "networkMode"),
            "INTERNET",
            "CreateAgentRuntime.networkConfiguration.networkMode: 'INTERNET' is not one of",
        ),
        (
            "CreateMemory",
            ("eventExpiryDuration",),
            4000,
            "CreateMemory.eventExpiryDuration: 4000 above the maximum 3650",
        ),
        (
            "PutMetricAlarm",
            ("ComparisonOperator",),
            "Above",
            "PutMetricAlarm.ComparisonOperator: 'Above' is not one of",
        ),
        ("PutRetentionPolicy", ("retentionInDays",), "30", "Invalid type for parameter retentionInDays"),
        (
            "CreateEndpoint",
            ("DeploymentConfig", "BlueGreenUpdatePolicy", "TrafficRoutingConfiguration", "Type"),
            "ROLLING",
            "CreateEndpoint.DeploymentConfig.BlueGreenUpdatePolicy.TrafficRoutingConfiguration.Type: 'ROLLING' is not",
        ),
        ("CreateRepository", ("imageTagMutability",), "SOMETIMES", "CreateRepository.imageTagMutability: 'SOMETIMES'"),
    ],
)
def test_a_wrong_value_fails_with_the_member_named(
    dev: ProgramRun, operation: str, path: tuple[str | int, ...], value: Any, expected: str
) -> None:
    problems = validate(mutated(find_request(dev, operation), path, value))
    assert len(problems) == 1, problems
    assert problems[0].startswith(expected), problems


@pytest.mark.parametrize(
    ("operation", "path", "value", "expected"),
    [
        (
            "CreateUserPoolDomain",
            ("Domain",),
            "Talk-To-Voicestack",
            "CreateUserPoolDomain.Domain: 'Talk-To-Voicestack' does not match",
        ),
        (
            "CreateUserPoolClient",
            ("AuthSessionValidity",),
            30,
            "CreateUserPoolClient.AuthSessionValidity: 30 above the maximum 15",
        ),
        (
            "CreateUserPoolClient",
            ("RefreshTokenRotation", "Feature"),
            "ON",
            "CreateUserPoolClient.RefreshTokenRotation.Feature: 'ON' is not one of ENABLED, DISABLED",
        ),
        (
            "CreateUserPool",
            ("Policies", "PasswordPolicy", "MinimumLength"),
            100,
            "CreateUserPool.Policies.PasswordPolicy.MinimumLength: 100 above the maximum 99",
        ),
        (
            "SetUserPoolMfaConfig",
            ("MfaConfiguration",),
            "REQUIRED",
            "SetUserPoolMfaConfig.MfaConfiguration: 'REQUIRED' is not one of OFF, ON, OPTIONAL",
        ),
        (
            "CreateResponseHeadersPolicy",
            ("ResponseHeadersPolicyConfig", "SecurityHeadersConfig", "FrameOptions", "FrameOption"),
            "NONE",
            "CreateResponseHeadersPolicy.ResponseHeadersPolicyConfig.SecurityHeadersConfig.FrameOptions.FrameOption: "
            "'NONE' is not one of DENY, SAMEORIGIN",
        ),
        (
            "CreateResponseHeadersPolicy",
            ("ResponseHeadersPolicyConfig", "SecurityHeadersConfig", "ContentSecurityPolicy", "Override"),
            DELETE,
            "Missing required parameter in ResponseHeadersPolicyConfig.SecurityHeadersConfig.ContentSecurityPolicy: "
            '"Override"',
        ),
        (
            "CreateDistributionWithTags",
            ("DistributionConfigWithTags", "DistributionConfig", "DefaultCacheBehavior", "ViewerProtocolPolicy"),
            "http-only",
            "CreateDistributionWithTags.DistributionConfigWithTags.DistributionConfig.DefaultCacheBehavior."
            "ViewerProtocolPolicy: 'http-only' is not one of allow-all, https-only, redirect-to-https",
        ),
        (
            "CreateOriginAccessControl",
            ("OriginAccessControlConfig", "SigningProtocol"),
            "sigv2",
            "CreateOriginAccessControl.OriginAccessControlConfig.SigningProtocol: 'sigv2' is not one of sigv4, sigv4a",
        ),
        (
            "CreateAgentRuntime",
            ("requestHeaderConfiguration", "requestHeaderAllowlist", 0),
            "X-Forwarded-For;",
            "CreateAgentRuntime.requestHeaderConfiguration.requestHeaderAllowlist[0]: 'X-Forwarded-For;' does not "
            "match",
        ),
        (
            "CreateAgentRuntime",
            ("authorizerConfiguration", "customJWTAuthorizer", "discoveryUrl"),
            "https://cognito-idp.us-east-1.amazonaws.com/us-east-1_X",
            "CreateAgentRuntime.authorizerConfiguration.customJWTAuthorizer.discoveryUrl: "
            "'https://cognito-idp.us-east-1.amazonaws.com/us-east-1_X' does not match",
        ),
    ],
)
def test_a_wrong_value_of_the_front_door_fails_with_the_member_named(
    operation: str, path: tuple[str | int, ...], value: Any, expected: str
) -> None:
    run = program("public")
    request = find_request(run, operation)
    if operation == "CreateAgentRuntime":
        [request] = [r for r in all_requests(run) if r.operation == operation and "authorizerConfiguration" in r.params]
    problems = validate(mutated(request, path, value))
    assert len(problems) == 1, problems
    assert problems[0].startswith(expected), problems


def test_an_input_nobody_translates_fails(dev: ProgramRun) -> None:
    [endpoint] = [r for r in dev.resources if r.type == "aws:sagemaker/endpoint:Endpoint"]
    extra = RecordedResource(
        type=endpoint.type,
        name=endpoint.name,
        urn=endpoint.urn,
        inputs={**endpoint.inputs, "retainAllVariantProperties": True},
        parent=endpoint.parent,
        dependencies=endpoint.dependencies,
        property_dependencies=endpoint.property_dependencies,
        outputs=endpoint.outputs,
    )
    with pytest.raises(UntranslatedInput, match=r"inputs \['retainAllVariantProperties'\] are not translated"):
        requests_for(extra, {})
