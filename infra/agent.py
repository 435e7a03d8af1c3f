"""The agent runtime: the Strands agent image on Bedrock AgentCore, talking to the speech endpoint.

Its environment carries the endpoint's name (an output of the endpoint), so the runtime cannot be
created before the endpoint exists; its role may stream to that endpoint's ARN and nothing else.
Conversations live in an AgentCore Memory whose id the runtime reads from `AGENTCORE_MEMORY_ID`; the
role may use that memory and no other. The memory goes with `pulumi destroy` unless the stack
retains storage. AgentCore creates the runtime's log group itself; the stack takes it over right
after the runtime (retention, tags) and removes it after the runtime on destroy (infra/runtime_logs.py).

A stack open to people (publicAccess) runs a second runtime beside this one: the same image, role,
memory and environment, but authorized by the sign-in pool's tokens instead of IAM (a runtime takes
one or the other), so the IAM-signed tools keep the first and the page gets the second. Its
environment adds the agent's contract for checking those tokens itself (`auth_environment`), and
AgentCore passes the `Authorization` header through to it (allowed only with a JWT authorizer).
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

import pulumi
import pulumi_aws as aws

from infra.aws_context import AwsContext
from infra.config import SpeechMode
from infra.iam import agent_runtime_policy, agentcore_trust_policy
from infra.metrics import NAMESPACE_ENV
from infra.naming import runtime_log_group, runtime_log_group_prefix
from infra.runtime_logs import AdoptedLogGroup, AdoptedLogGroupArgs, LogGroupSweep, LogGroupSweepArgs
from infra.signin import discovery_url

DEMO_PROMPT: Final = "Tell me, in three sentences, why lighthouses matter."
MEMORY_ID_ENV: Final = "AGENTCORE_MEMORY_ID"
"""The variable agent_app reads the conversation memory's id from."""

# The agent's contract for the runtime that people reach (infra/README.md, "The agent contract").
AUTH_ENV: Final = "AGENT_AUTH"
"""`iam` on the IAM-authorized runtime (the local stack sets none, which means the same), `jwt` on the public one."""
JWT_ISSUER_ENV: Final = "AGENT_JWT_ISSUER"
"""The tokens' issuer (`iss`); its discovery document and JWKS are below it (infra/signin.py)."""
JWT_CLIENT_IDS_ENV: Final = "AGENT_JWT_CLIENT_IDS"
"""Comma-separated app client ids a token's `client_id` claim must be one of."""
MAX_SESSIONS_ENV: Final = "AGENT_MAX_SESSIONS_PER_USER"
"""Conversations one user (the token's `sub`) may hold open at once."""
PASSED_HEADERS: Final = ("Authorization",)
"""What the public runtime lets through to the container: the bearer token, for the agent's own check and the
user it keys memory on (AgentCore allows `Authorization` in the allowlist only with a JWT authorizer)."""


@dataclass(frozen=True)
class JwtAuth:
    """The tokens the public runtime accepts: signed by `issuer`'s keys, for one of `client_ids`."""

    issuer: str
    client_ids: tuple[str, ...]
    max_sessions_per_user: int


def auth_environment(auth: JwtAuth | None) -> dict[str, str]:
    """The agent's authorization contract: `AGENT_AUTH=iam` (None), or `jwt` with the issuer, the allowed
    client ids and the per-user session limit."""
    if auth is None:
        return {AUTH_ENV: "iam"}
    if not auth.client_ids or any("," in client or not client for client in auth.client_ids):
        raise ValueError(f"a JWT runtime needs one or more client ids without commas, got {auth.client_ids!r}")
    return {
        AUTH_ENV: "jwt",
        JWT_ISSUER_ENV: auth.issuer,
        JWT_CLIENT_IDS_ENV: ",".join(auth.client_ids),
        MAX_SESSIONS_ENV: str(auth.max_sessions_per_user),
    }


def jwt_authorizer(issuer: str, client_ids: Sequence[str]) -> dict[str, Any]:
    """AgentCore's custom JWT authorizer for `issuer`: signature (the issuer's JWKS, found through its discovery
    document), expiry and the `client_id` claim are checked before the request reaches the container."""
    return {"custom_jwt_authorizer": {"discovery_url": discovery_url(issuer), "allowed_clients": list(client_ids)}}


def agent_environment(
    *,
    endpoint_name: str,
    region: str,
    speech_mode: SpeechMode,
    model_id: str,
    voice: str | None,
    memory_id: str,
    metrics_namespace: str,
    auth: JwtAuth | None = None,
) -> dict[str, str]:
    """The agent's environment (see agent_app): speech over SageMaker, one endpoint, one model, one memory, and
    how its callers are authorized (`auth_environment`)."""
    environment = {
        "SPEECH_TRANSPORT": "sagemaker",
        "SPEECH_ENDPOINT_NAME": endpoint_name,
        "SPEECH_MODE": speech_mode,
        "AWS_REGION": region,
        "BEDROCK_MODEL_ID": model_id,
        MEMORY_ID_ENV: memory_id,
        NAMESPACE_ENV: metrics_namespace,
    }
    if voice is not None:
        environment["SPEECH_VOICE"] = voice
    return {**environment, **auth_environment(auth)}


def invoke_command(runtime_arn: str, region: str, prompt: str = DEMO_PROMPT) -> str:
    """A shell command that invokes the deployed agent and prints its SSE events as they arrive."""
    return shlex.join(
        [
            "aws",
            "bedrock-agentcore",
            "invoke-agent-runtime",
            "--region",
            region,
            "--agent-runtime-arn",
            runtime_arn,
            "--content-type",
            "application/json",
            "--accept",
            "text/event-stream",
            "--cli-binary-format",
            "raw-in-base64-out",
            "--payload",
            json.dumps({"prompt": prompt}),
            "/dev/stdout",
        ]
    )


@dataclass(frozen=True)
class AgentRuntimeArgs:
    """The image, the endpoint it speaks through, the model it thinks with, where it lives."""

    runtime_name: str
    image_uri: pulumi.Input[str]
    repository_arn: pulumi.Input[str]
    endpoint_name: pulumi.Input[str]
    endpoint_arn: pulumi.Input[str]
    model_id: str
    speech_mode: SpeechMode
    speech_voice: str | None
    aws: AwsContext
    memory_name: str
    memory_event_expiry_days: int
    retain_memory: bool
    memory_id: str | None
    """A memory this stack kept on an earlier destroy, imported instead of created; None: create one."""
    metrics_namespace: str
    log_retention_days: int
    tags: Mapping[str, str]
    """The stack's default tags: the log group AgentCore creates gets them from the stack, not the provider."""
    aws_profile: str | None = None
    """The stack's `aws:profile`, for the boto3 calls that manage the runtime's log group."""
    public: PublicEntryArgs | None = None
    """The second, JWT-authorized runtime of a stack open to people; None: the IAM runtime alone."""


@dataclass(frozen=True)
class PublicEntryArgs:
    """The public runtime's name and the sign-in pool whose tokens it accepts."""

    runtime_name: str
    issuer: pulumi.Input[str]
    client_id: pulumi.Input[str]
    max_sessions_per_user: int


@dataclass(frozen=True)
class HostedRuntime:
    """One AgentCore runtime with what the stack keeps around it: the sweep of its log groups on destroy, and
    the log group AgentCore creates for it, taken over."""

    runtime: aws.bedrock.AgentcoreAgentRuntime
    log_sweep: LogGroupSweep
    log_group: AdoptedLogGroup

    @property
    def arn(self) -> pulumi.Output[str]:
        return self.runtime.agent_runtime_arn


class AgentRuntime(pulumi.ComponentResource):
    """Conversation memory, runtime role (one endpoint, one model, one memory), runtime and its log group; on a
    stack open to people, the public runtime beside it (same image, role, memory)."""

    memory: aws.bedrock.AgentcoreMemory
    role: aws.iam.Role
    role_policy: aws.iam.RolePolicy
    runtime: aws.bedrock.AgentcoreAgentRuntime
    log_sweep: LogGroupSweep
    log_group: AdoptedLogGroup
    runtime_arn: pulumi.Output[str]
    log_group_name: pulumi.Output[str]
    public: HostedRuntime | None

    def __init__(self, name: str, args: AgentRuntimeArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("voicestack:index:AgentRuntime", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)

        # Named (the API requires a name): a replacement must delete the old memory first. A retained stack
        # keeps the conversations on `pulumi destroy`, like the other storage; since AgentCore refuses a second
        # memory of the same name, the next deploy adopts the kept one (`memoryId`: imported, then updated to
        # the program's settings), so the agent finds its history again.
        self.memory = aws.bedrock.AgentcoreMemory(
            f"{name}-memory",
            name=args.memory_name,
            description="voicestack: conversation history of the voice agent",
            event_expiry_duration=args.memory_event_expiry_days,
            opts=pulumi.ResourceOptions(
                parent=self,
                delete_before_replace=True,
                retain_on_delete=args.retain_memory,
                import_=args.memory_id,
            ),
        )

        runtime_names = [args.runtime_name] + ([args.public.runtime_name] if args.public is not None else [])
        self.role = aws.iam.Role(
            f"{name}-role",
            description="AgentCore runtime role of the voicestack agent",
            assume_role_policy=args.aws.scope().apply(lambda scope: json.dumps(agentcore_trust_policy(scope))),
            opts=child,
        )
        self.role_policy = aws.iam.RolePolicy(
            f"{name}-role-policy",
            role=self.role.id,
            policy=pulumi.Output.all(args.aws.scope(), args.endpoint_arn, args.repository_arn, self.memory.id).apply(
                lambda values: json.dumps(
                    agent_runtime_policy(
                        values[0],
                        endpoint_arn=values[1],
                        model_id=args.model_id,
                        repository_arn=values[2],
                        runtime_names=runtime_names,
                        memory_id=values[3],
                    )
                )
            ),
            opts=child,
        )

        def environment(auth: pulumi.Input[JwtAuth] | None) -> pulumi.Output[dict[str, str]]:
            return pulumi.Output.all(args.endpoint_name, args.aws.region, self.memory.id, auth).apply(
                lambda values: agent_environment(
                    endpoint_name=values[0],
                    region=values[1],
                    speech_mode=args.speech_mode,
                    model_id=args.model_id,
                    voice=args.speech_voice,
                    memory_id=values[2],
                    metrics_namespace=args.metrics_namespace,
                    auth=values[3],
                )
            )

        hosted = self._hosted(
            name,
            args,
            runtime_name=args.runtime_name,
            description="voicestack: streaming voice agent (Strands + Kokoro over SageMaker bidirectional streaming)",
            environment=environment(None),
        )
        self.runtime, self.log_sweep, self.log_group = hosted.runtime, hosted.log_sweep, hosted.log_group
        self.runtime_arn = hosted.arn
        self.log_group_name = self.log_group.name

        self.public = None
        if args.public is not None:
            entry = args.public
            auth = pulumi.Output.all(entry.issuer, entry.client_id).apply(
                lambda values: JwtAuth(values[0], (values[1],), entry.max_sessions_per_user)
            )
            self.public = self._hosted(
                f"{name}-public",
                args,
                runtime_name=entry.runtime_name,
                description="voicestack: the voice agent for signed-in people (the page's runtime, JWT-authorized)",
                environment=environment(auth),
                authorizer=pulumi.Output.all(entry.issuer, entry.client_id).apply(
                    lambda values: jwt_authorizer(values[0], [values[1]])
                ),
            )
        self.register_outputs({"runtime_arn": self.runtime_arn, "memory_id": self.memory.id})

    def _hosted(
        self,
        name: str,
        args: AgentRuntimeArgs,
        *,
        runtime_name: str,
        description: str,
        environment: pulumi.Input[Mapping[str, str]],
        authorizer: pulumi.Input[Any] | None = None,
    ) -> HostedRuntime:
        """One runtime of the agent's image with the role, its log sweep and its adopted log group."""
        child = pulumi.ResourceOptions(parent=self)
        # Deleted after the runtime (which depends on it): removes any group the runtime wrote while going away.
        log_sweep = LogGroupSweep(
            f"{name}-log-sweep",
            LogGroupSweepArgs(
                prefix=runtime_log_group_prefix(runtime_name), region=args.aws.region, profile=args.aws_profile
            ),
            opts=child,
        )
        runtime = aws.bedrock.AgentcoreAgentRuntime(
            f"{name}-runtime",
            agent_runtime_name=runtime_name,
            description=description,
            role_arn=self.role.arn,
            agent_runtime_artifact={"container_configuration": {"container_uri": args.image_uri}},
            network_configuration={"network_mode": "PUBLIC"},
            protocol_configuration={"server_protocol": "HTTP"},
            environment_variables=environment,
            authorizer_configuration=authorizer,
            request_header_configuration=(
                None if authorizer is None else {"request_header_allowlists": list(PASSED_HEADERS)}
            ),
            # AgentCore pulls the image with the role while creating the runtime; the permissions are in a
            # separate RolePolicy that the runtime reads no output of. The name is fixed: a replacement must
            # delete the old runtime first (AgentCore refuses a second runtime of the same name). The sweep is
            # a dependency only so that `pulumi destroy` deletes it after the runtime.
            opts=pulumi.ResourceOptions(
                parent=self, depends_on=[self.role_policy, log_sweep], delete_before_replace=True
            ),
        )
        # AgentCore creates this group with the runtime: taken over (retention, tags), not created.
        log_group = AdoptedLogGroup(
            f"{name}-logs",
            AdoptedLogGroupArgs(
                name=runtime.agent_runtime_id.apply(runtime_log_group),
                retention_days=args.log_retention_days,
                tags=args.tags,
                region=args.aws.region,
                profile=args.aws_profile,
            ),
            opts=child,
        )
        return HostedRuntime(runtime, log_sweep, log_group)
