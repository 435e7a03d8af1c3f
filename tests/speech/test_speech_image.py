"""The speech image, checked from its files (no Docker engine): label, port, user, pins from the lock, entrypoint."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from packaging.version import Version

from local.lock_exports import locked_versions, pinned
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


def requirements() -> dict[str, str]:
    return pinned((IMAGE_DIR / "requirements.txt").read_text(encoding="utf-8"))


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
    # SageMaker's inference container contract: "SageMaker AI expects all containers to run with root users".
    assert args_of(dockerfile, "USER") == []
    assert json.loads(args_of(dockerfile, "ENTRYPOINT")[-1]) == ["python", "-m", "kokoro_server"]
    assert not args_of(dockerfile, "CMD"), "SageMaker passes 'serve' as the command"


def test_the_server_code_and_protocol_are_copied_from_the_repository_root(dockerfile: list[tuple[str, str]]) -> None:
    copies = args_of(dockerfile, "COPY")
    assert "speech_protocol/ /opt/voicestack/speech_protocol/" in copies
    assert "images/kokoro/kokoro_server/ /opt/voicestack/kokoro_server/" in copies
    assert any("PYTHONPATH=/opt/voicestack" in env for env in args_of(dockerfile, "ENV"))


def test_torch_comes_from_the_pytorch_cuda_index_then_the_rest_from_the_lock(dockerfile: list[tuple[str, str]]) -> None:
    index = next(args for args in args_of(dockerfile, "ARG") if args.startswith("TORCH_INDEX="))
    assert re.fullmatch(r"TORCH_INDEX=https://download\.pytorch\.org/whl/cu\d+", index), index
    assert args_of(dockerfile, "COPY")[0] == "images/kokoro/requirements.txt /tmp/requirements.txt"
    (install,) = [run for run in args_of(dockerfile, "RUN") if "requirements.txt" in run]
    steps = [step.strip() for step in install.split("&&")]
    assert steps == [
        'pip install --index-url "${TORCH_INDEX}" "$(grep -E \'^torch==\' /tmp/requirements.txt)"',
        "grep -vE '^torch==' /tmp/requirements.txt > /tmp/locked.txt",
        "pip install --no-deps --require-hashes -r /tmp/locked.txt",
        'pip install --no-deps "${SPACY_MODEL}"',
        "pip check",
        "python -c \"import spacy; spacy.load('en_core_web_sm')\"",
        "rm /tmp/requirements.txt /tmp/locked.txt",
    ]


def test_requirements_pin_a_torch_without_pysec_2026_2286() -> None:
    lines = (IMAGE_DIR / "requirements.txt").read_text(encoding="utf-8").splitlines()
    assert "torch==2.14.1" in lines  # the Pulumi program reads this exact line to label the image
    assert Version(requirements()["torch"]) >= Version("2.10.0")


def test_every_requirement_is_the_locked_version_with_hashes() -> None:
    lock = locked_versions()
    pins = requirements()
    assert {name: lock[name] for name in pins} == pins
    text = (IMAGE_DIR / "requirements.txt").read_text(encoding="utf-8")
    # Everything but torch (its hashes differ per index) is installed with --require-hashes.
    for block in text.split("\n"):
        if re.match(r"^[a-z0-9]", block) and not block.startswith("torch=="):
            assert block.endswith("\\"), f"{block!r} has no hashes"
    # torch's CUDA 13 wheels from PyPI never reach the image: torch brings its CUDA 12.8 ones.
    assert not [name for name in pins if name.startswith(("nvidia-", "cuda-")) or name == "triton"]
    assert {"kokoro", "misaki", "spacy", "starlette", "uvicorn", "websockets", "numpy"} <= set(pins)


def test_the_official_spacy_english_model_is_installed_at_build_time(dockerfile: list[tuple[str, str]]) -> None:
    model = next(args for args in args_of(dockerfile, "ARG") if args.startswith("SPACY_MODEL="))
    assert model == (
        'SPACY_MODEL="en_core_web_sm @ https://github.com/explosion/spacy-models/releases/download/'
        'en_core_web_sm-3.8.0/en_core_web_sm-3.8.0-py3-none-any.whl"'
    )
