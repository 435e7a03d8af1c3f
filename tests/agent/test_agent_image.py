"""What can be checked of the agent image without a Docker engine: the Dockerfile and the pins."""

from __future__ import annotations

import re
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = (ROOT / "agent_app" / "Dockerfile").read_text()
REQUIREMENTS = [
    Requirement(line)
    for line in (ROOT / "agent_app" / "requirements.txt").read_text().splitlines()
    if line.strip() and not line.startswith("#")
]


def instructions(keyword: str) -> list[str]:
    return [line.split(None, 1)[1] for line in DOCKERFILE.splitlines() if line.startswith(keyword + " ")]


def lock_pins() -> dict[str, str]:
    pins: dict[str, str] = {}
    for line in (ROOT / "requirements.lock").read_text().splitlines():
        if "==" in line and not line.startswith("#"):
            name, version = line.split("==", 1)
            pins[canonicalize_name(re.sub(r"\[.*\]", "", name))] = version.split(";")[0].strip()
    return pins


def test_the_base_image_is_python_3_12_for_arm64() -> None:
    assert instructions("FROM") == ["--platform=linux/arm64 python:3.12-slim"]


def test_it_serves_port_8080_on_all_interfaces() -> None:
    assert instructions("EXPOSE") == ["8080"]
    assert "DOCKER_CONTAINER=1" in instructions("ENV")
    assert instructions("CMD") == ['["python", "-m", "agent_app", "--port", "8080"]']


def test_it_runs_as_a_non_root_user() -> None:
    users = instructions("USER")
    assert users == ["10001"]
    assert DOCKERFILE.index("USER ") > DOCKERFILE.index("RUN pip install")


def test_it_copies_the_protocol_and_the_agent_from_the_repository_root() -> None:
    copies = instructions("COPY")
    assert "speech_protocol/ /app/speech_protocol/" in copies
    assert "agent_app/ /app/agent_app/" in copies
    assert not any(copy.startswith(("images/", "tests/", "local/")) for copy in copies)


def test_every_requirement_is_pinned_to_the_lock() -> None:
    pins = lock_pins()
    for requirement in REQUIREMENTS:
        specifiers = list(requirement.specifier)
        assert len(specifiers) == 1, f"{requirement} must be pinned with =="
        assert specifiers[0].operator == "=="
        assert pins[canonicalize_name(requirement.name)] == specifiers[0].version, (
            f"{requirement} differs from the lock"
        )


def test_the_agents_direct_dependencies_are_there() -> None:
    names = {canonicalize_name(requirement.name): requirement for requirement in REQUIREMENTS}
    for name in ("strands-agents", "bedrock-agentcore", "aws-sdk-sagemaker-runtime-http2", "boto3", "websockets"):
        assert canonicalize_name(name) in names, name
    assert "awscrt" in names[canonicalize_name("aws-sdk-sagemaker-runtime-http2")].extras
    # The speech engine's stack never goes into the agent image.
    assert not {"torch", "kokoro", "misaki", "numpy"} & set(names)
