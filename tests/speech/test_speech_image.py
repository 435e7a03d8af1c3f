"""The speech image, checked from its files (no Docker engine here): label, port, user, torch pin, entrypoint."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.version import Version

from speech_protocol import BIDIRECTIONAL_LABEL
from tests.speech.speech_support import REPO_ROOT

IMAGE_DIR = REPO_ROOT / "images" / "kokoro"


def instructions(dockerfile: Path) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) pairs, continuation lines joined, comments dropped."""
    joined: list[str] = []
    pending = ""
    for raw in dockerfile.read_text(encoding="utf-8").splitlines():
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        joined.append(pending + line)
        pending = ""
    assert not pending, "the Dockerfile ends inside a continued line"
    pairs = []
    for line in joined:
        keyword, _, args = line.partition(" ")
        pairs.append((keyword.upper(), args.strip()))
    return pairs


def requirements() -> dict[str, Requirement]:
    lines = (IMAGE_DIR / "requirements.txt").read_text(encoding="utf-8").splitlines()
    reqs = [Requirement(line) for line in lines if line.strip() and not line.startswith("#")]
    return {req.name.lower().replace("_", "-"): req for req in reqs}


def lock_versions() -> dict[str, str]:
    pins = {}
    for line in (REPO_ROOT / "requirements.lock").read_text(encoding="utf-8").splitlines():
        if "==" in line and not line.startswith("#"):
            name, version = line.split("==", 1)
            pins[name.strip().lower().replace("_", "-")] = version.strip()
    return pins


@pytest.fixture(scope="module")
def dockerfile() -> list[tuple[str, str]]:
    return instructions(IMAGE_DIR / "Dockerfile")


def args_of(dockerfile: list[tuple[str, str]], keyword: str) -> list[str]:
    return [args for kw, args in dockerfile if kw == keyword]


def test_label_enables_bidirectional_streaming(dockerfile: list[tuple[str, str]]) -> None:
    labels = " ".join(args_of(dockerfile, "LABEL"))
    assert f"{BIDIRECTIONAL_LABEL}=true" in labels.split()


def test_base_is_a_cuda_runtime_image_with_python_312(dockerfile: list[tuple[str, str]]) -> None:
    base_arg = next(args for args in args_of(dockerfile, "ARG") if args.startswith("CUDA_IMAGE="))
    assert re.fullmatch(r"CUDA_IMAGE=nvidia/cuda:[\d.]+-runtime-ubuntu24\.04", base_arg), base_arg
    assert args_of(dockerfile, "FROM") == ["${CUDA_IMAGE}"]
    assert any("python3.12 -m venv /opt/venv" in run for run in args_of(dockerfile, "RUN"))


def test_port_user_and_entrypoint(dockerfile: list[tuple[str, str]]) -> None:
    assert args_of(dockerfile, "EXPOSE") == ["8080"]
    users = args_of(dockerfile, "USER")
    assert users, "the image must switch to a non-root user"
    assert users[-1] not in ("root", "0", "0:0")
    # The user switch comes after the last RUN: nothing installed later runs as root by accident.
    keywords = [kw for kw, _ in dockerfile]
    assert max(i for i, kw in enumerate(keywords) if kw == "RUN") < keywords.index("USER")
    assert json.loads(args_of(dockerfile, "ENTRYPOINT")[-1]) == ["python", "-m", "kokoro_server"]
    assert not args_of(dockerfile, "CMD"), "SageMaker passes 'serve' as the command"


def test_the_server_code_and_protocol_are_copied_from_the_repository_root(dockerfile: list[tuple[str, str]]) -> None:
    copies = args_of(dockerfile, "COPY")
    assert "speech_protocol/ /opt/voicestack/speech_protocol/" in copies
    assert "images/kokoro/kokoro_server/ /opt/voicestack/kokoro_server/" in copies
    assert any("PYTHONPATH=/opt/voicestack" in env for env in args_of(dockerfile, "ENV"))


def test_torch_comes_from_the_pytorch_cuda_index_at_the_pinned_version(dockerfile: list[tuple[str, str]]) -> None:
    index = next(args for args in args_of(dockerfile, "ARG") if args.startswith("TORCH_INDEX="))
    assert re.fullmatch(r"TORCH_INDEX=https://download\.pytorch\.org/whl/cu\d+", index), index
    install = " ".join(args_of(dockerfile, "RUN"))
    assert 'pip install --index-url "${TORCH_INDEX}" "$(grep -E \'^torch==\' /tmp/requirements.txt)"' in install
    assert "pip install -r /tmp/requirements.txt -c /tmp/constraints.txt" in install


def test_requirements_pin_a_torch_without_pysec_2026_2286() -> None:
    lines = (IMAGE_DIR / "requirements.txt").read_text(encoding="utf-8").splitlines()
    assert "torch==2.14.1" in lines  # the Pulumi program reads this exact line to label the image
    (spec,) = requirements()["torch"].specifier
    assert spec.operator == "=="
    assert Version(spec.version) >= Version("2.10.0")


def test_every_requirement_is_pinned_to_the_tested_version() -> None:
    lock = lock_versions()
    for name, req in requirements().items():
        if req.url is not None:
            continue
        (spec,) = req.specifier
        assert spec.operator == "==", f"{name} is not pinned"
        assert lock[name] == spec.version, f"{name}: image pins {spec.version}, tests run {lock[name]}"


def test_the_official_spacy_english_model_is_installed_at_build_time() -> None:
    req = requirements()["en-core-web-sm"]
    assert req.url == (
        "https://github.com/explosion/spacy-models/releases/download/en_core_web_sm-3.8.0/en_core_web_sm-3.8.0-py3-none-any.whl"
    )
