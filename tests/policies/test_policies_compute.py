"""The speech endpoint rules: GPU instance family, container start-up health check timeout."""

from __future__ import annotations

from collections.abc import Mapping

import pytest

from infra.config import GPU_INSTANCE_FAMILIES
from policies import compute
from tests.policies.policy_runner import UNKNOWN_VALUE, check_resource, with_value, without

ENDPOINT_CONFIGURATION = "aws:sagemaker/endpointConfiguration:EndpointConfiguration"
GPU_TYPES = "ml.g4dn, ml.g5, ml.g6, ml.g6e, ml.p4d, ml.p4de, ml.p5, ml.p5e, ml.p5en"

# Numbers arrive as floats, as the engine sends them.
GOOD_VARIANT: dict[str, object] = {
    "variantName": "AllTraffic",
    "modelName": "speech-model-1a2b3c",
    "instanceType": "ml.g6.xlarge",
    "initialInstanceCount": 1.0,
    "containerStartupHealthCheckTimeoutInSeconds": 600.0,
    "modelDataDownloadTimeoutInSeconds": 1200.0,
}
CONFIGURATION: dict[str, object] = {"productionVariants": [GOOD_VARIANT]}
VARIANT: list[str | int] = ["productionVariants", 0]


def gpu_messages(props: Mapping[str, object]) -> list[str]:
    return check_resource(compute.SAGEMAKER_GPU_INSTANCE, ENDPOINT_CONFIGURATION, props)


def timeout_messages(props: Mapping[str, object]) -> list[str]:
    return check_resource(compute.SAGEMAKER_STARTUP_HEALTH_CHECK_TIMEOUT, ENDPOINT_CONFIGURATION, props)


def test_known_good_configuration_passes_both_rules() -> None:
    assert gpu_messages(CONFIGURATION) == []
    assert timeout_messages(CONFIGURATION) == []


@pytest.mark.parametrize(
    "instance_type",
    ["ml.g4dn.xlarge", "ml.g5.2xlarge", "ml.g6e.xlarge", "ml.p4d.24xlarge", "ml.p5.48xlarge", "ml.p5en.48xlarge"],
)
def test_gpu_families_pass(instance_type: str) -> None:
    assert gpu_messages(with_value(CONFIGURATION, [*VARIANT, "instanceType"], instance_type)) == []


@pytest.mark.parametrize(
    "instance_type",
    # CPU, Inferentia, AMD GPU (no CUDA), and Volta (CUDA 13 builds of PyTorch no longer run on it).
    ["ml.m5.xlarge", "ml.c7i.2xlarge", "ml.inf2.xlarge", "ml.g4ad.xlarge", "ml.p3.2xlarge", "g5.xlarge", "ml.g5"],
)
def test_other_instance_types_fail(instance_type: str) -> None:
    assert gpu_messages(with_value(CONFIGURATION, [*VARIANT, "instanceType"], instance_type)) == [
        f"Production variant 'AllTraffic' must run on a GPU instance type ({GPU_TYPES}); it uses {instance_type}."
    ]


def test_serverless_variant_fails() -> None:
    variant = with_value(
        without(CONFIGURATION, [*VARIANT, "instanceType"]), [*VARIANT, "serverlessConfig"], {"maxConcurrency": 5.0}
    )
    assert gpu_messages(variant) == [
        f"Production variant 'AllTraffic' must run on a GPU instance type ({GPU_TYPES}); it sets none (serverless)."
    ]


def test_every_variant_is_checked_and_unnamed_ones_are_numbered() -> None:
    second = {"modelName": "m", "instanceType": "ml.m5.large", "initialInstanceCount": 1.0}
    props = with_value(CONFIGURATION, ["productionVariants"], [GOOD_VARIANT, second])
    assert gpu_messages(props) == [
        f"Production variant 2 must run on a GPU instance type ({GPU_TYPES}); it uses ml.m5.large."
    ]
    assert timeout_messages(props) == [
        "Production variant 2 must set containerStartupHealthCheckTimeoutInSeconds to 60-3600 seconds, so that "
        "SageMaker waits for the model to load; it is not set."
    ]


def test_configuration_without_variants_fails_the_gpu_rule_only() -> None:
    assert gpu_messages(without(CONFIGURATION, ["productionVariants"])) == [
        f"The endpoint configuration must have a production variant on a GPU instance type ({GPU_TYPES}); it has none."
    ]
    assert timeout_messages(without(CONFIGURATION, ["productionVariants"])) == []


def test_missing_timeout_fails() -> None:
    assert timeout_messages(without(CONFIGURATION, [*VARIANT, "containerStartupHealthCheckTimeoutInSeconds"])) == [
        "Production variant 'AllTraffic' must set containerStartupHealthCheckTimeoutInSeconds to 60-3600 seconds, "
        "so that SageMaker waits for the model to load; it is not set."
    ]


@pytest.mark.parametrize(("timeout", "shown"), [(30.0, "30"), (3601.0, "3601"), (0.0, "0"), ("600", "'600'")])
def test_timeout_outside_what_sagemaker_accepts_fails(timeout: object, shown: str) -> None:
    assert timeout_messages(
        with_value(CONFIGURATION, [*VARIANT, "containerStartupHealthCheckTimeoutInSeconds"], timeout)
    ) == [
        "Production variant 'AllTraffic' must set containerStartupHealthCheckTimeoutInSeconds to 60-3600 seconds, "
        f"so that SageMaker waits for the model to load; it is {shown}."
    ]


@pytest.mark.parametrize("timeout", [60.0, 3600.0, 900])
def test_timeout_bounds_are_inclusive(timeout: object) -> None:
    assert (
        timeout_messages(with_value(CONFIGURATION, [*VARIANT, "containerStartupHealthCheckTimeoutInSeconds"], timeout))
        == []
    )


@pytest.mark.parametrize(
    "path",
    [
        ["productionVariants"],
        [*VARIANT],
        [*VARIANT, "instanceType"],
        [*VARIANT, "containerStartupHealthCheckTimeoutInSeconds"],
    ],
    ids=["variants", "variant", "instance-type", "timeout"],
)
def test_unknown_values_during_preview_report_nothing(path: list[str | int]) -> None:
    broken = with_value(CONFIGURATION, [*VARIANT, "instanceType"], "ml.m5.xlarge")
    broken = without(broken, [*VARIANT, "containerStartupHealthCheckTimeoutInSeconds"])
    assert gpu_messages(with_value(CONFIGURATION, path, UNKNOWN_VALUE)) == []
    assert timeout_messages(with_value(CONFIGURATION, path, UNKNOWN_VALUE)) == []
    if len(path) == 3:  # the unknown field itself: the other (broken) field is still judged
        return
    assert gpu_messages(with_value(broken, path, UNKNOWN_VALUE)) == []
    assert timeout_messages(with_value(broken, path, UNKNOWN_VALUE)) == []


def test_gpu_families_agree_with_what_the_program_accepts() -> None:
    assert set(GPU_INSTANCE_FAMILIES) <= set(compute.GPU_FAMILIES)
