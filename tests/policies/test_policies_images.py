"""The speech image rules: the bidirectional-streaming label and the PyTorch version pin."""

from __future__ import annotations

from collections.abc import Mapping

import pytest

from policies import images
from speech_protocol import BIDIRECTIONAL_LABEL
from tests.policies.policy_runner import UNKNOWN_VALUE, check_resource, with_value, without

IMAGE = images.IMAGE_TYPE
LABEL = "com.amazonaws.sagemaker.capabilities.bidirectional-streaming"
LABEL_REQUIRED = f'The speech image must carry the label {LABEL}="true"'

SPEECH_IMAGE: dict[str, object] = {
    "context": {"location": "."},
    "dockerfile": {"location": "images/kokoro/Dockerfile"},
    "platforms": ["linux/amd64"],
    "labels": {LABEL: "true", "voicestack.torch-version": "2.14.1+cu130"},
    "push": True,
    "tags": ["123456789012.dkr.ecr.us-east-1.amazonaws.com/voicestack:speech"],
}
AGENT_IMAGE = with_value(without(SPEECH_IMAGE, ["labels"]), ["dockerfile", "location"], "agent_app/Dockerfile")


def label_messages(props: Mapping[str, object]) -> list[str]:
    return check_resource(images.SPEECH_IMAGE_BIDIRECTIONAL, IMAGE, props)


def torch_messages(props: Mapping[str, object]) -> list[str]:
    return check_resource(images.SPEECH_IMAGE_TORCH_VERSION, IMAGE, props)


def test_the_label_is_the_one_the_speech_server_declares() -> None:
    assert images.BIDIRECTIONAL_LABEL == BIDIRECTIONAL_LABEL == LABEL


def test_known_good_speech_image_passes_both_rules() -> None:
    assert label_messages(SPEECH_IMAGE) == []
    assert torch_messages(SPEECH_IMAGE) == []


def test_agent_image_is_not_the_speech_image() -> None:
    assert label_messages(AGENT_IMAGE) == []
    assert torch_messages(AGENT_IMAGE) == []


def test_other_resource_types_are_not_checked() -> None:
    assert (
        check_resource(images.SPEECH_IMAGE_BIDIRECTIONAL, "docker:index/image:Image", without(SPEECH_IMAGE, ["labels"]))
        == []
    )


def test_label_with_another_value_fails() -> None:
    assert label_messages(with_value(SPEECH_IMAGE, ["labels", LABEL], "True")) == [f'{LABEL_REQUIRED}; it is "True".']


def test_label_missing_fails() -> None:
    assert label_messages(without(SPEECH_IMAGE, ["labels", LABEL])) == [f"{LABEL_REQUIRED}; it has no such label."]


def test_labels_property_missing_fails() -> None:
    assert label_messages(without(SPEECH_IMAGE, ["labels"])) == [f"{LABEL_REQUIRED}; it has no such label."]


@pytest.mark.parametrize(
    "path",
    [["labels"], ["labels", LABEL], ["dockerfile", "location"], ["dockerfile"]],
    ids=["labels", "label-value", "dockerfile-location", "dockerfile"],
)
def test_unknown_values_during_preview_report_nothing(path: list[str]) -> None:
    broken = without(SPEECH_IMAGE, ["labels"]) if path[0] != "labels" else SPEECH_IMAGE
    assert label_messages(with_value(broken, path, UNKNOWN_VALUE)) == []
    assert torch_messages(with_value(broken, path, UNKNOWN_VALUE)) == []


@pytest.mark.parametrize(
    "location",
    ["./images/kokoro/Dockerfile", "/home/dev/voicestack/images/kokoro/Dockerfile", "../images/kokoro/Dockerfile"],
)
def test_speech_image_is_recognised_by_any_spelling_of_its_dockerfile_path(location: str) -> None:
    props = with_value(without(SPEECH_IMAGE, ["labels", LABEL]), ["dockerfile", "location"], location)
    assert label_messages(props) == [f"{LABEL_REQUIRED}; it has no such label."]


def test_speech_image_without_dockerfile_is_recognised_by_its_context() -> None:
    props = with_value(without(SPEECH_IMAGE, ["dockerfile"]), ["context", "location"], "images/kokoro")
    assert label_messages(without(props, ["labels", LABEL])) == [f"{LABEL_REQUIRED}; it has no such label."]


def test_inline_dockerfile_is_not_taken_for_the_speech_image() -> None:
    props = with_value(SPEECH_IMAGE, ["dockerfile"], {"inline": "FROM scratch"})
    assert label_messages(without(props, ["labels"])) == []


@pytest.mark.parametrize("version", ["2.10.0", "2.10", "2.14.1+cu130", "2.10.1", "3.0.0"])
def test_torch_versions_from_2_10_0_pass(version: str) -> None:
    assert torch_messages(with_value(SPEECH_IMAGE, ["labels", "voicestack.torch-version"], version)) == []


@pytest.mark.parametrize("version", ["2.9.1", "2.9.1+cu128", "2.10.0rc1", "1.13.1", "2.1.10"])
def test_torch_versions_before_2_10_0_fail(version: str) -> None:
    assert torch_messages(with_value(SPEECH_IMAGE, ["labels", "voicestack.torch-version"], version)) == [
        "The speech image must pin PyTorch 2.10.0 or later (PYSEC-2026-2286); "
        f"its label voicestack.torch-version says {version}."
    ]


def test_torch_version_that_is_not_a_version_fails() -> None:
    assert torch_messages(with_value(SPEECH_IMAGE, ["labels", "voicestack.torch-version"], ">=2.10")) == [
        "The speech image's label voicestack.torch-version must be a PyTorch version of at least 2.10.0 "
        '(PYSEC-2026-2286); ">=2.10" is not a version.'
    ]


def test_torch_version_label_missing_fails() -> None:
    expected = [
        "The speech image must carry the label voicestack.torch-version with its PyTorch version, "
        "at least 2.10.0 (PYSEC-2026-2286); it has no such label."
    ]
    assert torch_messages(without(SPEECH_IMAGE, ["labels", "voicestack.torch-version"])) == expected
    assert torch_messages(without(SPEECH_IMAGE, ["labels"])) == expected


def test_each_rule_reports_only_its_own_label() -> None:
    assert label_messages(without(SPEECH_IMAGE, ["labels", "voicestack.torch-version"])) == []
    assert torch_messages(without(SPEECH_IMAGE, ["labels", LABEL])) == []
