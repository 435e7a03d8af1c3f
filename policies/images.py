"""Rules for the container images: the speech image can stream, its PyTorch is not vulnerable, and it is
pushed with Docker v2 manifests, which SageMaker accepts."""

from __future__ import annotations

from pathlib import PurePosixPath
from typing import Final

from packaging.version import InvalidVersion, Version
from pulumi_policy import Policy

from policies.adapters import resource_policy
from policies.values import UNKNOWN, Props, Unknown, lookup

IMAGE_TYPE: Final = "docker-build:index:Image"

SPEECH_DOCKERFILE: Final = ("images", "kokoro", "Dockerfile")
"""Where the speech image's Dockerfile lives, relative to the repository root.

The speech image is told apart by its Dockerfile, not by its labels: the labels are what is checked.
"""

# Stated here rather than imported from speech_protocol: the rule checks AWS's contract on its own,
# so a typo there cannot make the server and the check agree on a wrong label.
BIDIRECTIONAL_LABEL: Final = "com.amazonaws.sagemaker.capabilities.bidirectional-streaming"
TORCH_VERSION_LABEL: Final = "voicestack.torch-version"
MIN_TORCH_VERSION: Final = Version("2.10.0")
TORCH_ADVISORY: Final = "PYSEC-2026-2286"


def is_speech_image(props: Props) -> bool | Unknown:
    """Whether a `docker-build` Image builds the speech Dockerfile (`UNKNOWN` if its path is unknown).

    Without an explicit Dockerfile, docker builds `<context>/Dockerfile`.
    """
    location = lookup(props, "dockerfile", "location")
    if location is None and lookup(props, "dockerfile", "inline") is None:
        context = lookup(props, "context", "location")
        location = context if context is UNKNOWN or not isinstance(context, str) else f"{context}/Dockerfile"
    if location is UNKNOWN:
        return UNKNOWN
    if not isinstance(location, str):
        return False
    return PurePosixPath(location.replace("\\", "/")).parts[-len(SPEECH_DOCKERFILE) :] == SPEECH_DOCKERFILE


def check_bidirectional_label(props: Props) -> list[str]:
    """The speech image carries the bidirectional-streaming label with the value "true"."""
    if is_speech_image(props) is not True:
        return []
    value = lookup(props, "labels", BIDIRECTIONAL_LABEL)
    if value is UNKNOWN:
        return []
    requirement = f'The speech image must carry the label {BIDIRECTIONAL_LABEL}="true"'
    if value is None:
        return [f"{requirement}; it has no such label."]
    if value != "true":
        return [f'{requirement}; it is "{value}".']
    return []


def check_torch_version(props: Props) -> list[str]:
    """The speech image's PyTorch version label says 2.10.0 or later (local suffixes like +cu130 allowed)."""
    if is_speech_image(props) is not True:
        return []
    value = lookup(props, "labels", TORCH_VERSION_LABEL)
    if value is UNKNOWN:
        return []
    if value is None:
        return [
            f"The speech image must carry the label {TORCH_VERSION_LABEL} with its PyTorch version, "
            f"at least {MIN_TORCH_VERSION} ({TORCH_ADVISORY}); it has no such label."
        ]
    try:
        version = Version(str(value))
    except InvalidVersion:
        return [
            f"The speech image's label {TORCH_VERSION_LABEL} must be a PyTorch version of at least "
            f'{MIN_TORCH_VERSION} ({TORCH_ADVISORY}); "{value}" is not a version.'
        ]
    if version < MIN_TORCH_VERSION:
        return [
            f"The speech image must pin PyTorch {MIN_TORCH_VERSION} or later ({TORCH_ADVISORY}); "
            f"its label {TORCH_VERSION_LABEL} says {value}."
        ]
    return []


def check_docker_manifest(props: Props) -> list[str]:
    """The speech image is pushed only through registry exports that disable OCI media types.

    `push: true` adds a registry export whose media type BuildKit chooses (OCI since 0.31), and SageMaker
    CreateModel rejects "application/vnd.oci.image.manifest.v1+json" (aws/amazon-sagemaker-feedback#180).
    """
    if is_speech_image(props) is not True:
        return []
    requirement = (
        "The speech image must be pushed with Docker v2 manifests (a registry export with ociMediaTypes false)"
    )
    push = props.get("push")
    exports = props.get("exports")
    if push is UNKNOWN or exports is UNKNOWN:
        return []
    if push is True:
        return [f"{requirement}; it sets push: true, which leaves the media type to BuildKit (OCI by default)."]
    registries = (
        [entry.get("registry") for entry in exports if isinstance(entry, dict)] if isinstance(exports, list) else []
    )
    pushed = [registry for registry in registries if isinstance(registry, dict)]
    if not pushed:
        return [f"{requirement}; it has no registry export."]
    messages: list[str] = []
    for registry in pushed:
        oci = registry.get("ociMediaTypes")
        if oci is UNKNOWN:
            continue
        if oci is not False:
            shown = "unset (BuildKit's default, OCI)" if oci is None else f"{oci}"
            messages.append(f"{requirement}; a registry export has ociMediaTypes {shown}.")
    return messages


SPEECH_IMAGE_BIDIRECTIONAL = resource_policy(
    name="speech-image-bidirectional-streaming",
    description="The speech image declares SageMaker's bidirectional-streaming capability label.",
    checks={IMAGE_TYPE: check_bidirectional_label},
)

SPEECH_IMAGE_TORCH_VERSION = resource_policy(
    name="speech-image-torch-version",
    description=f"The speech image pins PyTorch {MIN_TORCH_VERSION} or later, which fixes {TORCH_ADVISORY}.",
    checks={IMAGE_TYPE: check_torch_version},
)

SPEECH_IMAGE_DOCKER_MANIFEST = resource_policy(
    name="speech-image-docker-manifest",
    description="The speech image is pushed with Docker v2 manifests, which SageMaker CreateModel accepts.",
    checks={IMAGE_TYPE: check_docker_manifest},
)

POLICIES: Final[list[Policy]] = [SPEECH_IMAGE_BIDIRECTIONAL, SPEECH_IMAGE_TORCH_VERSION, SPEECH_IMAGE_DOCKER_MANIFEST]
