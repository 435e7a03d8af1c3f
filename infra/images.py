"""The two container images, built with BuildKit from the repository root and pushed to ECR.

The speech image (images/kokoro/Dockerfile) is linux/amd64 for SageMaker's GPU instances and carries
the label that turns on SageMaker's bidirectional streaming; the agent image (agent_app/Dockerfile)
is linux/arm64, the only architecture AgentCore runs. Consumers get `<repository>@<digest>`, so a
rebuilt image replaces exactly what changed and a moved tag never changes a running endpoint.

Both are pushed with Docker v2 manifests (`registry` export, `oci_media_types=False`), not with
`push=True`: that leaves the media type to BuildKit, whose default became OCI manifests (0.31), and
SageMaker `CreateModel` rejects "application/vnd.oci.image.manifest.v1+json"
(aws/amazon-sagemaker-feedback#180). AgentCore gets the same format, so one rule covers both.

docker-build deletes the manifests it pushed when an Image is deleted; a stack that retains its
storage keeps them (`retain`), or `pulumi destroy` would leave a kept repository with no image in it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

import pulumi
import pulumi_aws as aws
import pulumi_docker_build as docker_build

from speech_protocol import BIDIRECTIONAL_LABEL

TORCH_VERSION_LABEL: Final = "voicestack.torch-version"
SPEECH_PLATFORM: Final = docker_build.Platform.LINUX_AMD64
AGENT_PLATFORM: Final = docker_build.Platform.LINUX_ARM64
_TORCH_PIN: Final = re.compile(r"torch==(?P<version>[0-9]+\.[0-9]+\.[0-9]+(?:\+[a-z0-9.]+)?)", re.IGNORECASE)


def torch_version(requirements: str) -> str:
    """The torch version pinned (exactly once, `torch==X.Y.Z`) in a requirements file's text."""
    pins: list[str] = []
    for line in requirements.splitlines():
        # Drop comments, environment markers and continuation backslashes; keep the requirement itself.
        requirement = line.split("#", 1)[0].split(";", 1)[0].rstrip().removesuffix("\\").strip()
        if match := _TORCH_PIN.fullmatch(requirement):
            pins.append(match["version"])
    if len(pins) != 1:
        raise ValueError(f"expected exactly one torch==X.Y.Z line, found {len(pins)}")
    return pins[0]


def speech_labels(torch: str) -> dict[str, str]:
    """Labels of the speech image: SageMaker's bidirectional-streaming switch and the torch it ships."""
    return {BIDIRECTIONAL_LABEL: "true", TORCH_VERSION_LABEL: torch}


def registry_export() -> docker_build.ExportArgsDict:
    """Push to the tagged repository with Docker distribution v2 manifests (not OCI)."""
    return {"registry": {"oci_media_types": False, "push": True}}


def registry_host(repository_url: str) -> str:
    """`<account>.dkr.ecr.<region>.amazonaws.com/<name>` -> the registry host BuildKit logs in to."""
    return repository_url.split("/", 1)[0]


@dataclass(frozen=True)
class ImagesArgs:
    """Paths are as BuildKit gets them (relative to the program's working directory)."""

    repository_url: pulumi.Input[str]
    registry_id: pulumi.Input[str]
    context: str
    speech_dockerfile: str
    agent_dockerfile: str
    torch_version: str
    retain: bool
    """Keep the pushed images in the repository when the Image resources are deleted (retained storage)."""


class Images(pulumi.ComponentResource):
    """Builds and pushes both images; `speech_uri` and `agent_uri` are digest-pinned references."""

    speech: docker_build.Image
    agent: docker_build.Image
    speech_uri: pulumi.Output[str]
    agent_uri: pulumi.Output[str]

    def __init__(self, name: str, args: ImagesArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("voicestack:index:Images", name, None, opts)
        repository_url = pulumi.Output.from_input(args.repository_url)
        token = aws.ecr.get_authorization_token_output(
            registry_id=args.registry_id, opts=pulumi.InvokeOutputOptions(parent=self)
        )
        registry: docker_build.RegistryArgsDict = {
            "address": repository_url.apply(registry_host),
            "username": token.user_name,
            "password": pulumi.Output.secret(token.password),
        }

        def image(
            suffix: str, dockerfile: str, platform: docker_build.Platform, labels: dict[str, str] | None
        ) -> docker_build.Image:
            return docker_build.Image(
                f"{name}-{suffix}",
                context={"location": args.context},
                dockerfile={"location": dockerfile},
                platforms=[platform],
                labels=labels,
                tags=[pulumi.Output.concat(repository_url, ":", suffix)],
                # push=True would add a second registry export whose manifest media type BuildKit picks (OCI
                # since 0.31, see module docstring); the explicit export pushes Docker v2 manifests instead.
                push=False,
                exports=[registry_export()],
                registries=[registry],
                # Previews stay fast: a GPU image with torch takes minutes to build.
                build_on_preview=False,
                opts=pulumi.ResourceOptions(parent=self, retain_on_delete=args.retain),
            )

        self.speech = image("speech", args.speech_dockerfile, SPEECH_PLATFORM, speech_labels(args.torch_version))
        self.agent = image("agent", args.agent_dockerfile, AGENT_PLATFORM, None)
        self.speech_uri = pulumi.Output.concat(repository_url, "@", self.speech.digest)
        self.agent_uri = pulumi.Output.concat(repository_url, "@", self.agent.digest)
        self.register_outputs({"speech_uri": self.speech_uri, "agent_uri": self.agent_uri})
