"""The agent runtime: the Strands agent image on Bedrock AgentCore, talking to the speech endpoint.

Its environment carries the endpoint's name (an output of the endpoint), so the runtime cannot be
created before the endpoint exists; its role may stream to that endpoint's ARN and nothing else.
"""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass
from typing import Final

import pulumi
import pulumi_aws as aws

from infra.aws_context import AwsContext
from infra.config import SpeechMode
from infra.iam import agent_runtime_policy, agentcore_trust_policy

DEMO_PROMPT: Final = "Tell me, in three sentences, why lighthouses matter."


def agent_environment(
    *,
    endpoint_name: str,
    region: str,
    speech_mode: SpeechMode,
    model_id: str,
    voice: str | None,
) -> dict[str, str]:
    """The agent's environment (see agent_app): speech over SageMaker, one endpoint, one model."""
    environment = {
        "SPEECH_TRANSPORT": "sagemaker",
        "SPEECH_ENDPOINT_NAME": endpoint_name,
        "SPEECH_MODE": speech_mode,
        "AWS_REGION": region,
        "BEDROCK_MODEL_ID": model_id,
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


class AgentRuntime(pulumi.ComponentResource):
    """Runtime role (scoped to one endpoint and one model) and the AgentCore runtime."""

    role: aws.iam.Role
    role_policy: aws.iam.RolePolicy
    runtime: aws.bedrock.AgentcoreAgentRuntime
    runtime_arn: pulumi.Output[str]

    def __init__(self, name: str, args: AgentRuntimeArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("voicestack:index:AgentRuntime", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)

        self.role = aws.iam.Role(
            f"{name}-role",
            description="AgentCore runtime role of the voicestack agent",
            assume_role_policy=args.aws.scope().apply(lambda scope: json.dumps(agentcore_trust_policy(scope))),
            opts=child,
        )
        self.role_policy = aws.iam.RolePolicy(
            f"{name}-role-policy",
            role=self.role.id,
            policy=pulumi.Output.all(args.aws.scope(), args.endpoint_arn, args.repository_arn).apply(
                lambda values: json.dumps(
                    agent_runtime_policy(
                        values[0],
                        endpoint_arn=values[1],
                        model_id=args.model_id,
                        repository_arn=values[2],
                        runtime_name=args.runtime_name,
                    )
                )
            ),
            opts=child,
        )

        environment = pulumi.Output.all(args.endpoint_name, args.aws.region).apply(
            lambda values: agent_environment(
                endpoint_name=values[0],
                region=values[1],
                speech_mode=args.speech_mode,
                model_id=args.model_id,
                voice=args.speech_voice,
            )
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
            # separate RolePolicy that the runtime reads no output of.
            opts=pulumi.ResourceOptions(parent=self, depends_on=[self.role_policy]),
        )
        self.runtime_arn = self.runtime.agent_runtime_arn
        self.register_outputs({"runtime_arn": self.runtime_arn})
