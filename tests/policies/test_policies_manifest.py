"""The speech-image-docker-manifest rule: SageMaker accepts Docker v2 manifests, not OCI ones."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pulumi
import pytest

from policies import images
from policies.pack import ALL_POLICIES
from tests.infra.pulumi_harness import record_program, stack_config
from tests.policies.policy_runner import UNKNOWN_VALUE, check_resource, run_pack, with_value
from tests.policies.program_graph import find, graph_of, mutated

IMAGE = images.IMAGE_TYPE
REQUIRED = "The speech image must be pushed with Docker v2 manifests (a registry export with ociMediaTypes false)"

GOOD: dict[str, object] = {
    "context": {"location": "."},
    "dockerfile": {"location": "images/kokoro/Dockerfile"},
    "push": False,
    "exports": [{"registry": {"ociMediaTypes": False, "push": True}}],
    "tags": ["123456789012.dkr.ecr.us-east-1.amazonaws.com/voicestack:speech"],
}


def messages(props: Mapping[str, object]) -> list[str]:
    return check_resource(images.SPEECH_IMAGE_DOCKER_MANIFEST, IMAGE, props)


def test_a_registry_export_without_oci_media_types_passes() -> None:
    assert messages(GOOD) == []


def test_push_true_fails() -> None:
    assert messages(with_value(GOOD, ["push"], True)) == [
        f"{REQUIRED}; it sets push: true, which leaves the media type to BuildKit (OCI by default)."
    ]


def test_an_export_that_leaves_the_media_type_to_buildkit_fails() -> None:
    assert messages(with_value(GOOD, ["exports"], [{"registry": {"push": True}}])) == [
        f"{REQUIRED}; a registry export has ociMediaTypes unset (BuildKit's default, OCI)."
    ]


def test_oci_media_types_fail() -> None:
    assert messages(with_value(GOOD, ["exports", 0, "registry", "ociMediaTypes"], True)) == [
        f"{REQUIRED}; a registry export has ociMediaTypes True."
    ]


def test_no_registry_export_fails() -> None:
    assert messages(with_value(GOOD, ["exports"], [{"docker": {}}])) == [f"{REQUIRED}; it has no registry export."]


def test_the_agent_image_is_not_judged() -> None:
    assert (
        messages(with_value(with_value(GOOD, ["push"], True), ["dockerfile", "location"], "agent_app/Dockerfile")) == []
    )


@pytest.mark.parametrize("path", [["push"], ["exports"], ["exports", 0, "registry", "ociMediaTypes"]])
def test_unknown_values_during_preview_report_nothing(path: list[str | int]) -> None:
    assert messages(with_value(GOOD, path, UNKNOWN_VALUE)) == []


def test_the_real_speech_image_passes_and_push_true_fails_this_rule_only() -> None:
    previous = dict(pulumi.runtime.config.CONFIG.get())
    try:
        pulumi.runtime.set_all_config(stack_config({}))
        graph = graph_of(record_program({}))
        assert run_pack(ALL_POLICIES, graph) == []

        def push(props: dict[str, Any]) -> None:
            props["push"] = True

        broken = mutated(graph, IMAGE, "images-speech", push)
        findings = run_pack(ALL_POLICIES, broken)
    finally:
        pulumi.runtime.set_all_config(previous)
    assert [(f.policy, f.urn) for f in findings] == [
        ("speech-image-docker-manifest", find(broken, IMAGE, "images-speech").urn)
    ]
