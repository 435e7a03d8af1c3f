"""Rules for the speech endpoint: it runs on a GPU and gives the model time to load before health checks."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Final

from pulumi_policy import Policy

from policies.adapters import resource_policy
from policies.values import UNKNOWN, Props

ENDPOINT_CONFIGURATION_TYPE: Final = "aws:sagemaker/endpointConfiguration:EndpointConfiguration"

GPU_FAMILIES: Final = ("g4dn", "g5", "g6", "g6e", "p4d", "p4de", "p5", "p5e", "p5en")
"""SageMaker hosting instance families with NVIDIA GPUs that the speech image's CUDA 12.8/13 builds of
PyTorch run on (Turing and newer). Not p3/p3dn: those builds dropped Volta. Not inf*/g4ad: Inferentia and AMD GPUs
cannot run CUDA. Extend when AWS adds a family."""

STARTUP_TIMEOUT_RANGE: Final = (60, 3600)
"""What SageMaker accepts for containerStartupHealthCheckTimeoutInSeconds, in seconds."""

_INSTANCE_TYPE = re.compile(r"ml\.(?P<family>[a-z0-9-]+)\.[a-z0-9]+")


def _variants(props: Props) -> tuple[list[tuple[str, Mapping[str, object]]], bool]:
    """(label, variant) for each known production variant, and whether any variant (or the list) is unknown."""
    variants = props.get("productionVariants")
    if variants is UNKNOWN:
        return [], True
    labelled: list[tuple[str, Mapping[str, object]]] = []
    unknown = False
    for index, variant in enumerate(variants if isinstance(variants, list) else [], start=1):
        unknown = unknown or variant is UNKNOWN
        if isinstance(variant, Mapping):
            name = variant.get("variantName")
            labelled.append((f"'{name}'" if isinstance(name, str) else str(index), variant))
    return labelled, unknown


def _number(value: object) -> str:
    """A JSON number as a message shows it (the engine sends 600 as 600.0)."""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return repr(value)


def check_gpu_instance(props: Props) -> list[str]:
    """Every production variant runs on an instance type of `GPU_FAMILIES`."""
    variants, unknown = _variants(props)
    requirement = f"a GPU instance type (ml.{', ml.'.join(GPU_FAMILIES)})"
    if not variants and not unknown:
        return [f"The endpoint configuration must have a production variant on {requirement}; it has none."]
    messages: list[str] = []
    for label, variant in variants:
        instance_type = variant.get("instanceType")
        if instance_type is UNKNOWN:
            continue
        match = _INSTANCE_TYPE.fullmatch(instance_type) if isinstance(instance_type, str) else None
        if match is not None and match["family"] in GPU_FAMILIES:
            continue
        used = f"it uses {instance_type}" if isinstance(instance_type, str) else "it sets none (serverless)"
        messages.append(f"Production variant {label} must run on {requirement}; {used}.")
    return messages


def check_startup_timeout(props: Props) -> list[str]:
    """Every production variant sets a container start-up health check timeout SageMaker accepts."""
    low, high = STARTUP_TIMEOUT_RANGE
    messages: list[str] = []
    for label, variant in _variants(props)[0]:
        value = variant.get("containerStartupHealthCheckTimeoutInSeconds")
        if value is UNKNOWN:
            continue
        if isinstance(value, int | float) and not isinstance(value, bool) and low <= value <= high:
            continue
        state = "it is not set" if value is None else f"it is {_number(value)}"
        messages.append(
            f"Production variant {label} must set containerStartupHealthCheckTimeoutInSeconds to {low}-{high} "
            f"seconds, so that SageMaker waits for the model to load; {state}."
        )
    return messages


SAGEMAKER_GPU_INSTANCE = resource_policy(
    name="sagemaker-gpu-instance",
    description="SageMaker endpoint production variants run on a GPU instance family.",
    checks={ENDPOINT_CONFIGURATION_TYPE: check_gpu_instance},
)

SAGEMAKER_STARTUP_HEALTH_CHECK_TIMEOUT = resource_policy(
    name="sagemaker-startup-health-check-timeout",
    description="SageMaker endpoint production variants set the container start-up health check timeout.",
    checks={ENDPOINT_CONFIGURATION_TYPE: check_startup_timeout},
)

POLICIES: Final[list[Policy]] = [SAGEMAKER_GPU_INSTANCE, SAGEMAKER_STARTUP_HEALTH_CHECK_TIMEOUT]
