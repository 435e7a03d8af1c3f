"""A stack open to people (publicAccess) under Pulumi mocks: what it adds, how it hangs together, and that a
stack without it has none of it (failure messages carry the URN of the resource concerned)."""

from __future__ import annotations

import inspect
import json
from collections.abc import Iterable
from typing import Any

import pulumi_aws as aws
import pytest

from infra import naming
from infra.page import ASSET_CACHE, CACHING_OPTIMIZED_POLICY_ID, config_json, content_security_policy, page_files
from infra.program import REPO_ROOT
from tests.infra.pulumi_harness import ACCOUNT_ID, ProgramRun, RecordedResource, run_program
from tests.infra.test_infra_program import EXPECTED, find

RUNTIME = "aws:bedrock/agentcoreAgentRuntime:AgentcoreAgentRuntime"
OBJECT = "aws:s3/bucketObjectv2:BucketObjectv2"
POOL = "aws:cognito/userPool:UserPool"
CLIENT = "aws:cognito/userPoolClient:UserPoolClient"
DOMAIN = "aws:cognito/userPoolDomain:UserPoolDomain"
BRANDING = "aws:cognito/managedLoginBranding:ManagedLoginBranding"
DISTRIBUTION = "aws:cloudfront/distribution:Distribution"
HEADERS = "aws:cloudfront/responseHeadersPolicy:ResponseHeadersPolicy"
ACCESS = "aws:cloudfront/originAccessControl:OriginAccessControl"
BUCKET = "aws:s3/bucket:Bucket"
BUCKET_POLICY = "aws:s3/bucketPolicy:BucketPolicy"
ROLE_POLICY = "aws:iam/rolePolicy:RolePolicy"
PAGE_FILES = page_files(REPO_ROOT / "local" / "web")

FRONT_DOOR = {
    ("voicestack:index:PageSite", "page"),
    (BUCKET, "page-bucket"),
    (
        "aws:s3/bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration",
        "page-bucket-encryption",
    ),
    ("aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock", "page-bucket-public-access"),
    ("aws:s3/bucketOwnershipControls:BucketOwnershipControls", "page-bucket-ownership"),
    (BUCKET_POLICY, "page-bucket-policy"),
    (ACCESS, "page-access"),
    (HEADERS, "page-headers"),
    (DISTRIBUTION, "page-distribution"),
    ("voicestack:index:SignIn", "signin"),
    (POOL, "signin-users"),
    (CLIENT, "signin-page-client"),
    (DOMAIN, "signin-domain"),
    (BRANDING, "signin-branding"),
    (RUNTIME, "agent-public-runtime"),
    ("pulumi-python:dynamic/voicestack:AdoptedLogGroup", "agent-public-logs"),
    ("pulumi-python:dynamic/voicestack:LogGroupSweep", "agent-public-log-sweep"),
    *(
        ("aws:cloudwatch/logMetricFilter:LogMetricFilter", f"monitoring-public-agent-{metric}")
        for metric in ("TimeToFirstText", "TimeToFirstAudio", "Invocations")
    ),
    ("aws:cloudwatch/metricAlarm:MetricAlarm", "monitoring-public-agent-system-errors"),
    ("aws:cloudwatch/metricAlarm:MetricAlarm", "monitoring-public-agent-throttles"),
    ("voicestack:index:PageFiles", "page-files"),
    (OBJECT, "page-files-config.json"),
    *((OBJECT, f"page-files-{file.relative.replace('/', '-')}") for file in PAGE_FILES),
}
PUBLIC_OUTPUTS = {"pageUrl", "userPoolId", "userPoolClientId", "signInDomain", "publicAgentRuntimeArn"}


@pytest.fixture(scope="module")
def dev() -> ProgramRun:
    return run_program({})


@pytest.fixture(scope="module")
def public() -> ProgramRun:
    return run_program({"publicAccess": "true"})


@pytest.fixture(scope="module")
def retained() -> ProgramRun:
    return run_program(
        {
            "publicAccess": "true",
            "retainStorage": "true",
            "publicSignUp": "true",
            "signInMfa": "required",
            "signInDomainPrefix": "talk-to-us",
            "maxSessionsPerUser": "4",
        },
        stack="prod",
    )


def names(resources: Iterable[RecordedResource]) -> set[tuple[str, str]]:
    return {(resource.type, resource.name) for resource in resources}


def policy_of(resource: RecordedResource) -> dict[str, Any]:
    document: dict[str, Any] = json.loads(resource.inputs["policy"])
    return document


# --- present exactly when asked for -----------------------------------------------------------------


def test_a_stack_without_public_access_has_none_of_the_front_door(dev: ProgramRun) -> None:
    assert names(dev.resources) & FRONT_DOOR == set()
    assert set(dev.outputs) & PUBLIC_OUTPUTS == set()
    runtimes = [r for r in dev.resources if r.type == RUNTIME]
    assert [r.name for r in runtimes] == ["agent-runtime"]
    assert "authorizerConfiguration" not in runtimes[0].inputs, runtimes[0].urn
    assert "requestHeaderConfiguration" not in runtimes[0].inputs, runtimes[0].urn


def test_a_public_stack_adds_exactly_the_front_door(public: ProgramRun, dev: ProgramRun) -> None:
    assert names(public.resources) == EXPECTED | FRONT_DOOR
    assert len(public.resources) == len(EXPECTED | FRONT_DOOR)
    assert set(public.outputs) == set(dev.outputs) | PUBLIC_OUTPUTS


def test_children_of_the_new_components_are_parented_and_named_after_them(public: ProgramRun) -> None:
    components = {r.urn: r for r in public.resources if r.type.startswith("voicestack:")}
    for resource in public.resources:
        if (resource.type, resource.name) not in FRONT_DOOR or resource.urn in components:
            continue
        assert resource.parent in components, resource.urn
        assert resource.name.startswith(f"{components[resource.parent].name}-"), resource.urn


# --- the public runtime -----------------------------------------------------------------------------


def test_the_public_runtime_runs_the_same_image_role_and_memory(public: ProgramRun) -> None:
    iam = find(public.resources, RUNTIME, "agent-runtime")
    jwt = find(public.resources, RUNTIME, "agent-public-runtime")
    assert jwt.inputs["agentRuntimeName"] == "voicestack_dev_public", jwt.urn
    for key in ("agentRuntimeArtifact", "roleArn", "networkConfiguration", "protocolConfiguration"):
        assert jwt.inputs[key] == iam.inputs[key], f"{jwt.urn}: {key}"
    assert jwt.delete_before_replace is True, jwt.urn
    role_policy = find(public.resources, ROLE_POLICY, "agent-role-policy")
    assert role_policy.urn in jwt.dependencies, jwt.urn


def test_the_public_runtime_environment_is_the_agent_contract(public: ProgramRun) -> None:
    iam = find(public.resources, RUNTIME, "agent-runtime").inputs["environmentVariables"]
    jwt = find(public.resources, RUNTIME, "agent-public-runtime").inputs["environmentVariables"]
    pool, client = public.outputs["userPoolId"], public.outputs["userPoolClientId"]
    assert iam["AGENT_AUTH"] == "iam"
    assert jwt == {
        **iam,
        "AGENT_AUTH": "jwt",
        "AGENT_JWT_ISSUER": f"https://cognito-idp.us-east-1.amazonaws.com/{pool}",
        "AGENT_JWT_CLIENT_IDS": client,
        "AGENT_MAX_SESSIONS_PER_USER": "2",
    }


def test_the_public_runtime_accepts_the_pools_tokens_for_the_page_client_and_passes_them_on(
    public: ProgramRun, retained: ProgramRun
) -> None:
    jwt = find(public.resources, RUNTIME, "agent-public-runtime")
    pool, client = public.outputs["userPoolId"], public.outputs["userPoolClientId"]
    assert jwt.inputs["authorizerConfiguration"] == {
        "customJwtAuthorizer": {
            "discoveryUrl": f"https://cognito-idp.us-east-1.amazonaws.com/{pool}/.well-known/openid-configuration",
            "allowedClients": [client],
        }
    }, jwt.urn
    assert jwt.inputs["requestHeaderConfiguration"] == {"requestHeaderAllowlists": ["Authorization"]}, jwt.urn
    dependencies = set(jwt.property_dependencies["authorizerConfiguration"])
    assert {
        find(public.resources, POOL, "signin-users").urn,
        find(public.resources, CLIENT, "signin-page-client").urn,
    } <= dependencies, jwt.urn
    prod = find(retained.resources, RUNTIME, "agent-public-runtime")
    assert prod.inputs["environmentVariables"]["AGENT_MAX_SESSIONS_PER_USER"] == "4", prod.urn


def test_the_role_may_write_both_runtimes_logs(public: ProgramRun) -> None:
    statements = {s["Sid"]: s for s in policy_of(find(public.resources, ROLE_POLICY, "agent-role-policy"))["Statement"]}
    group = f"arn:aws:logs:us-east-1:{ACCOUNT_ID}:log-group:/aws/bedrock-agentcore/runtimes"
    assert statements["CreateLogGroup"]["Resource"] == [
        f"{group}/voicestack_dev_agent-*",
        f"{group}/voicestack_dev_agent-*:*",
        f"{group}/voicestack_dev_public-*",
        f"{group}/voicestack_dev_public-*:*",
    ]
    assert statements["WriteLogs"]["Resource"] == [
        f"{group}/voicestack_dev_agent-*:log-stream:*",
        f"{group}/voicestack_dev_public-*:log-stream:*",
    ]


def test_the_public_runtimes_log_group_is_taken_over_and_swept(public: ProgramRun) -> None:
    logs = find(public.resources, "pulumi-python:dynamic/voicestack:AdoptedLogGroup", "agent-public-logs")
    sweep = find(public.resources, "pulumi-python:dynamic/voicestack:LogGroupSweep", "agent-public-log-sweep")
    runtime = find(public.resources, RUNTIME, "agent-public-runtime")
    assert logs.inputs["name"] == f"/aws/bedrock-agentcore/runtimes/{runtime.outputs['agentRuntimeId']}-DEFAULT"
    assert sweep.inputs["prefix"] == "/aws/bedrock-agentcore/runtimes/voicestack_dev_public-", sweep.urn
    assert sweep.urn in runtime.dependencies, runtime.urn


def test_the_public_runtime_is_watched_like_the_first(public: ProgramRun) -> None:
    runtime = find(public.resources, RUNTIME, "agent-public-runtime")
    logs = find(public.resources, "pulumi-python:dynamic/voicestack:AdoptedLogGroup", "agent-public-logs")
    iam_filter = find(
        public.resources, "aws:cloudwatch/logMetricFilter:LogMetricFilter", "monitoring-agent-Invocations"
    )
    public_filter = find(
        public.resources, "aws:cloudwatch/logMetricFilter:LogMetricFilter", "monitoring-public-agent-Invocations"
    )
    # The same series: the experience alarm and the dashboard count every caller.
    assert {k: v for k, v in public_filter.inputs.items() if k != "logGroupName"} == {
        k: v for k, v in iam_filter.inputs.items() if k != "logGroupName"
    }, public_filter.urn
    assert public_filter.inputs["logGroupName"] == logs.inputs["name"], public_filter.urn
    errors = find(public.resources, "aws:cloudwatch/metricAlarm:MetricAlarm", "monitoring-public-agent-system-errors")
    assert errors.inputs["dimensions"] == {
        "Resource": runtime.outputs["agentRuntimeArn"],
        "Operation": "InvokeAgentRuntime",
        "Name": "voicestack_dev_public::DEFAULT",
    }, errors.urn
    assert errors.inputs["alarmDescription"] == "AgentCore runtime voicestack_dev_public: server-side errors"
    dashboard = find(public.resources, "aws:cloudwatch/dashboard:Dashboard", "monitoring-dashboard")
    [widget] = [
        w
        for w in json.loads(dashboard.inputs["dashboardBody"])["widgets"]
        if w["properties"]["title"] == "Agent runtime errors and throttles"
    ]
    assert [
        metric[1] for metric in widget["properties"]["metrics"] if metric[7] == "voicestack_dev_public::DEFAULT"
    ] == [
        "SystemErrors",
        "UserErrors",
        "Throttles",
    ]


# --- sign-in ----------------------------------------------------------------------------------------


def test_the_pool_signs_in_by_e_mail_with_a_strong_password_and_no_self_sign_up(public: ProgramRun) -> None:
    pool = find(public.resources, POOL, "signin-users")
    inputs = pool.inputs
    assert inputs["usernameAttributes"] == ["email"], pool.urn
    assert inputs["autoVerifiedAttributes"] == ["email"], pool.urn
    assert inputs["usernameConfiguration"] == {"caseSensitive": False}, pool.urn
    assert inputs["passwordPolicy"] == {
        "minimumLength": 12,
        "requireLowercase": True,
        "requireUppercase": True,
        "requireNumbers": True,
        "requireSymbols": True,
        "temporaryPasswordValidityDays": 7,
    }, pool.urn
    assert inputs["adminCreateUserConfig"]["allowAdminCreateUserOnly"] is True, pool.urn
    invite = inputs["adminCreateUserConfig"]["inviteMessageTemplate"]
    assert public.outputs["pageUrl"] in invite["emailMessage"], pool.urn
    assert inputs["mfaConfiguration"] == "OFF", pool.urn
    assert "softwareTokenMfaConfiguration" not in inputs, pool.urn
    assert inputs["userPoolTier"] == "ESSENTIALS", pool.urn
    assert inputs["accountRecoverySetting"] == {"recoveryMechanisms": [{"name": "verified_email", "priority": 1}]}


def test_sign_up_and_mfa_follow_the_configuration(retained: ProgramRun) -> None:
    pool = find(retained.resources, POOL, "signin-users")
    assert pool.inputs["adminCreateUserConfig"]["allowAdminCreateUserOnly"] is False, pool.urn
    assert pool.inputs["mfaConfiguration"] == "ON", pool.urn
    assert pool.inputs["softwareTokenMfaConfiguration"] == {"enabled": True}, pool.urn


@pytest.mark.parametrize(("run", "retain"), [("public", False), ("retained", True)])
def test_the_pool_is_kept_exactly_when_storage_is_and_the_rest_always_goes(
    run: str, retain: bool, request: pytest.FixtureRequest
) -> None:
    resources: list[RecordedResource] = request.getfixturevalue(run).resources
    pool = find(resources, POOL, "signin-users")
    assert pool.retain_on_delete is retain, pool.urn
    assert pool.inputs["deletionProtection"] == ("ACTIVE" if retain else "INACTIVE"), pool.urn
    # The client, domain and style are configuration; a kept domain would hold its prefix against the next deploy.
    for resource in resources:
        if (resource.type, resource.name) in FRONT_DOOR and resource is not pool:
            assert resource.retain_on_delete is False, resource.urn
    page_bucket = find(resources, BUCKET, "page-bucket")
    assert page_bucket.inputs["forceDestroy"] is True, page_bucket.urn


def test_the_page_client_is_public_and_uses_the_code_flow_back_to_the_page(public: ProgramRun) -> None:
    client = find(public.resources, CLIENT, "signin-page-client")
    page = public.outputs["pageUrl"]
    inputs = client.inputs
    assert inputs["generateSecret"] is False, client.urn
    assert inputs["allowedOauthFlowsUserPoolClient"] is True, client.urn
    assert inputs["allowedOauthFlows"] == ["code"], client.urn
    assert inputs["allowedOauthScopes"] == ["openid", "email"], client.urn
    assert inputs["supportedIdentityProviders"] == ["COGNITO"], client.urn
    assert (inputs["callbackUrls"], inputs["logoutUrls"], inputs["defaultRedirectUri"]) == ([page], [page], page)
    assert inputs["explicitAuthFlows"] == ["ALLOW_USER_SRP_AUTH"], client.urn
    assert inputs["refreshTokenRotation"] == {"feature": "ENABLED", "retryGracePeriodSeconds": 10}, client.urn
    assert inputs["enableTokenRevocation"] is True, client.urn
    assert inputs["preventUserExistenceErrors"] == "ENABLED", client.urn
    assert (inputs["accessTokenValidity"], inputs["idTokenValidity"], inputs["refreshTokenValidity"]) == (15, 15, 12)
    assert inputs["tokenValidityUnits"] == {"accessToken": "minutes", "idToken": "minutes", "refreshToken": "hours"}
    distribution = find(public.resources, DISTRIBUTION, "page-distribution")
    assert distribution.urn in client.property_dependencies["callbackUrls"], client.urn


def test_token_lifetimes_are_within_what_the_provider_documents(public: ProgramRun) -> None:
    # pulumi_aws states these bounds with units ("between 5 minutes and 1 day"), which provider_docs' numeric
    # ranges do not read: checked here, and the wording too, so that an upgrade that changes them is seen.
    doc = inspect.getdoc(vars(aws.cognito.UserPoolClientArgs)["__init__"]) or ""
    assert "access_token_validity: Time limit, between 5 minutes and 1 day" in doc
    assert "id_token_validity: Time limit, between 5 minutes and 1 day" in doc
    assert "refresh_token_validity: Time limit, between 60 minutes and 10 years" in doc
    minutes = {"minutes": 1, "hours": 60, "days": 1440}
    inputs = find(public.resources, CLIENT, "signin-page-client").inputs
    units = inputs["tokenValidityUnits"]
    for key, unit, low, high in (
        ("accessTokenValidity", "accessToken", 5, 1440),
        ("idTokenValidity", "idToken", 5, 1440),
        ("refreshTokenValidity", "refreshToken", 60, 10 * 365 * 1440),
    ):
        assert low <= inputs[key] * minutes[units[unit]] <= high, key


def test_the_login_domain_prefix_is_derived_from_the_stack_and_account_or_configured(
    public: ProgramRun, retained: ProgramRun
) -> None:
    derived = naming.sign_in_domain_prefix("voicestack", "dev", ACCOUNT_ID, "us-east-1")
    domain = find(public.resources, DOMAIN, "signin-domain")
    assert domain.inputs["domain"] == derived, domain.urn
    assert domain.inputs["managedLoginVersion"] == 2, domain.urn
    assert domain.delete_before_replace is True, domain.urn
    assert public.outputs["signInDomain"] == f"https://{derived}.auth.us-east-1.amazoncognito.com"
    assert find(retained.resources, DOMAIN, "signin-domain").inputs["domain"] == "talk-to-us"
    branding = find(public.resources, BRANDING, "signin-branding")
    assert branding.inputs["useCognitoProvidedValues"] is True, branding.urn
    assert branding.inputs["clientId"] == public.outputs["userPoolClientId"], branding.urn


# --- the hosted page --------------------------------------------------------------------------------


def test_only_the_distribution_reads_the_bucket_and_only_over_tls(public: ProgramRun) -> None:
    bucket = find(public.resources, BUCKET, "page-bucket")
    policy = find(public.resources, BUCKET_POLICY, "page-bucket-policy")
    distribution = find(public.resources, DISTRIBUTION, "page-distribution")
    arn = bucket.outputs["arn"]
    [deny, allow] = policy_of(policy)["Statement"]
    assert deny["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}, policy.urn
    assert allow == {
        "Sid": "CloudFrontReadsThePage",
        "Effect": "Allow",
        "Principal": {"Service": "cloudfront.amazonaws.com"},
        "Action": "s3:GetObject",
        "Resource": f"{arn}/*",
        "Condition": {"StringEquals": {"AWS:SourceArn": distribution.outputs["arn"]}},
    }, policy.urn
    assert distribution.urn in policy.property_dependencies["policy"], policy.urn
    ownership = find(
        public.resources, "aws:s3/bucketOwnershipControls:BucketOwnershipControls", "page-bucket-ownership"
    )
    assert ownership.inputs["rule"] == {"objectOwnership": "BucketOwnerEnforced"}, ownership.urn


def test_the_distribution_serves_the_bucket_over_https_with_the_headers_policy(public: ProgramRun) -> None:
    distribution = find(public.resources, DISTRIBUTION, "page-distribution")
    bucket = find(public.resources, BUCKET, "page-bucket")
    access = find(public.resources, ACCESS, "page-access")
    headers = find(public.resources, HEADERS, "page-headers")
    inputs = distribution.inputs
    [origin] = inputs["origins"]
    assert origin["domainName"] == bucket.outputs["bucketRegionalDomainName"], distribution.urn
    assert access.urn in distribution.property_dependencies["origins"], distribution.urn
    assert headers.urn in distribution.property_dependencies["defaultCacheBehavior"], distribution.urn
    assert inputs["defaultRootObject"] == "index.html", distribution.urn
    behavior = inputs["defaultCacheBehavior"]
    assert behavior["viewerProtocolPolicy"] == "redirect-to-https", distribution.urn
    assert behavior["allowedMethods"] == ["GET", "HEAD"], distribution.urn
    assert behavior["cachePolicyId"] == CACHING_OPTIMIZED_POLICY_ID, distribution.urn
    assert inputs["viewerCertificate"] == {"cloudfrontDefaultCertificate": True}, distribution.urn
    assert access.inputs == {
        "name": "voicestack-dev-page",
        "description": "voicestack dev: the voice agent's page",
        "originAccessControlOriginType": "s3",
        "signingBehavior": "always",
        "signingProtocol": "sigv4",
    }, access.urn
    assert public.outputs["pageUrl"] == f"https://{distribution.outputs['domainName']}/"


def test_the_headers_policy_carries_the_content_security_policy_and_the_security_headers(public: ProgramRun) -> None:
    headers = find(public.resources, HEADERS, "page-headers")
    assert headers.inputs["name"] == "voicestack-dev-page-headers", headers.urn
    assert headers.inputs["securityHeadersConfig"] == {
        "contentSecurityPolicy": {
            "contentSecurityPolicy": content_security_policy(
                region="us-east-1", sign_in_domain=public.outputs["signInDomain"]
            ),
            "override": True,
        },
        "strictTransportSecurity": {
            "accessControlMaxAgeSec": 63_072_000,
            "includeSubdomains": True,
            "preload": False,
            "override": True,
        },
        "contentTypeOptions": {"override": True},
        "frameOptions": {"frameOption": "DENY", "override": True},
        "referrerPolicy": {"referrerPolicy": "no-referrer", "override": True},
    }, headers.urn


def test_every_page_file_is_uploaded_with_its_type_and_caching(public: ProgramRun) -> None:
    bucket = find(public.resources, BUCKET, "page-bucket")
    for file in PAGE_FILES:
        obj = find(public.resources, OBJECT, f"page-files-{file.relative.replace('/', '-')}")
        assert obj.inputs["bucket"] == bucket.outputs["bucket"], obj.urn
        assert obj.inputs["key"] == file.relative, obj.urn
        assert obj.inputs["source"].path == str(REPO_ROOT / "local" / "web" / file.relative), obj.urn
        assert (obj.inputs["contentType"], obj.inputs["cacheControl"]) == (file.content_type, file.cache_control)
    assert find(public.resources, OBJECT, "page-files-app.js").inputs["cacheControl"] == ASSET_CACHE
    assert find(public.resources, OBJECT, "page-files-index.html").inputs["cacheControl"] == "no-cache"


def test_config_json_is_the_page_contract_with_this_stacks_values(public: ProgramRun) -> None:
    obj = find(public.resources, OBJECT, "page-files-config.json")
    out = public.outputs
    assert (obj.inputs["key"], obj.inputs["contentType"], obj.inputs["cacheControl"]) == (
        "config.json",
        "application/json",
        "no-cache",
    )
    assert obj.inputs["content"] == config_json(
        {
            "stack": "dev",
            "region": "us-east-1",
            "runtimeArn": out["publicAgentRuntimeArn"],
            "qualifier": "DEFAULT",
            "auth": {
                "kind": "oidc",
                "authority": f"https://cognito-idp.us-east-1.amazonaws.com/{out['userPoolId']}",
                "clientId": out["userPoolClientId"],
                "redirectUri": out["pageUrl"],
                "postLogoutRedirectUri": out["pageUrl"],
                "scope": "openid email",
                "signInDomain": out["signInDomain"],
            },
        }
    ), obj.urn
    assert out["publicAgentRuntimeArn"].startswith(
        f"arn:aws:bedrock-agentcore:us-east-1:{ACCOUNT_ID}:runtime/voicestack_dev_public-"
    )
    assert out["publicAgentRuntimeArn"] != out["agentRuntimeArn"]


def test_the_region_reaches_the_front_door() -> None:
    frankfurt = run_program({"publicAccess": "true", "aws:region": "eu-central-1"})
    headers = find(frankfurt.resources, HEADERS, "page-headers")
    csp = headers.inputs["securityHeadersConfig"]["contentSecurityPolicy"]["contentSecurityPolicy"]
    assert "wss://bedrock-agentcore.eu-central-1.amazonaws.com" in csp, headers.urn
    assert frankfurt.outputs["signInDomain"].endswith(".auth.eu-central-1.amazoncognito.com")
    config = json.loads(find(frankfurt.resources, OBJECT, "page-files-config.json").inputs["content"])
    assert config["region"] == "eu-central-1"
    assert config["auth"]["authority"].startswith("https://cognito-idp.eu-central-1.amazonaws.com/eu-central-1_")
