"""The agent runtime: the Strands agent image on Bedrock AgentCore, talking to the speech endpoint.

Its environment carries the endpoint's name (an output of the endpoint), so the runtime cannot be
created before the endpoint exists; its role may stream to that endpoint's ARN and nothing else.
Conversations live in an AgentCore Memory whose id the runtime reads from `AGENTCORE_MEMORY_ID`; the
role may use that memory and no other. The memory goes with `pulumi destroy` unless the stack
retains storage. AgentCore creates the runtime's log group itself; the stack takes it over right
after the runtime (retention, tags) and removes it after the runtime on destroy (infra/runtime_logs.py).
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

import pulumi
import pulumi_aws as aws

from infra.aws_context import AwsContext
from infra.config import SpeechMode
from infra.iam import agent_runtime_policy, agentcore_trust_policy
from infra.metrics import NAMESPACE_ENV
from infra.naming import runtime_log_group, runtime_log_group_prefix
from infra.runtime_logs import AdoptedLogGroup, AdoptedLogGroupArgs, LogGroupSweep, LogGroupSweepArgs

DEMO_PROMPT: Final = "Tell me, in three sentences, why lighthouses matter."
MEMORY_ID_ENV: Final = "AGENTCORE_MEMORY_ID"
"""The variable agent_app reads the conversation memory's id from."""


def agent_environment(
    *,
    endpoint_name: str,
    region: str,
    speech_mode: SpeechMode,
    model_id: str,
    voice: str | None,
    memory_id: str,
    metrics_namespace: str,
) -> dict[str, str]:
    """The agent's environment (see agent_app): speech over SageMaker, one endpoint, one model, one memory."""
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
    return environment


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


class AgentRuntime(pulumi.ComponentResource):
    """Conversation memory, runtime role (one endpoint, one model, one memory), runtime and its log group."""

    memory: aws.bedrock.AgentcoreMemory
    role: aws.iam.Role
    role_policy: aws.iam.RolePolicy
    runtime: aws.bedrock.AgentcoreAgentRuntime
    log_sweep: LogGroupSweep
    log_group: AdoptedLogGroup
    runtime_arn: pulumi.Output[str]
    log_group_name: pulumi.Output[str]

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
                        runtime_name=args.runtime_name,
                        memory_id=values[3],
                    )
                )
            ),
            opts=child,
        )

        environment = pulumi.Output.all(args.endpoint_name, args.aws.region, self.memory.id).apply(
            lambda values: agent_environment(
                endpoint_name=values[0],
                region=values[1],
                speech_mode=args.speech_mode,
                model_id=args.model_id,
                voice=args.speech_voice,
                memory_id=values[2],
                metrics_namespace=args.metrics_namespace,
            )
        )
        # Deleted after the runtime (which depends on it): removes any group the runtime wrote while going away.
        self.log_sweep = LogGroupSweep(
            f"{name}-log-sweep",
            LogGroupSweepArgs(
                prefix=runtime_log_group_prefix(args.runtime_name), region=args.aws.region, profile=args.aws_profile
            ),
            opts=child,
        )
        self.runtime = aws.bedrock.AgentcoreAgentRuntime(
            f"{name}-runtime",
            agent_runtime_name=args.runtime_name,
            description="voicestack: streaming voice agent (Strands + Kokoro over SageMaker bidirectional streaming)",
            role_arn=self.role.arn,
            agent_runtime_artifact={"container_configuration": {"container_uri": args.image_uri}},
            network_configuration={"network_mode": "PUBLIC"},
            protocol_configuration={"server_protocol": "HTTP"},
            environment_variables=environment,
            # AgentCore pulls the image with the role while creating the runtime; the permissions are in a
            # separate RolePolicy that the runtime reads no output of. The name is fixed: a replacement must
            # delete the old runtime first (AgentCore refuses a second runtime of the same name). The sweep is
            # a dependency only so that `pulumi destroy` deletes it after the runtime.
            opts=pulumi.ResourceOptions(
                parent=self, depends_on=[self.role_policy, self.log_sweep], delete_before_replace=True
            ),
        )
        self.runtime_arn = self.runtime.agent_runtime_arn
        # AgentCore creates this group with the runtime: taken over (retention, tags), not created.
        self.log_group = AdoptedLogGroup(
            f"{name}-logs",
            AdoptedLogGroupArgs(
                name=self.runtime.agent_runtime_id.apply(runtime_log_group),
                retention_days=args.log_retention_days,
                tags=args.tags,
                region=args.aws.region,
                profile=args.aws_profile,
            ),
            opts=child,
        )
        self.log_group_name = self.log_group.name
        self.register_outputs({"runtime_arn": self.runtime_arn, "memory_id": self.memory.id})
