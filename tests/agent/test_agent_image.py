"""What can be checked of the agent image without a Docker engine: the Dockerfile and the pins."""

from __future__ import annotations

from pathlib import Path

from local.lock_exports import locked_versions, pinned

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = (ROOT / "agent_app" / "Dockerfile").read_text()
REQUIREMENTS_TEXT = (ROOT / "agent_app" / "requirements.txt").read_text()
PINS = pinned(REQUIREMENTS_TEXT)


def instructions(keyword: str) -> list[str]:
    return [line.split(None, 1)[1] for line in DOCKERFILE.splitlines() if line.startswith(keyword + " ")]


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


def test_dependencies_are_installed_from_the_lock_with_hashes() -> None:
    (install,) = [run for run in instructions("RUN") if "requirements.txt" in run]
    assert install == ("pip install --no-compile --no-deps --require-hashes -r /app/agent_app/requirements.txt \\"), (
        "--no-deps: the file is the whole closure, exported from uv.lock"
    )
    assert "&& pip check" in DOCKERFILE


def test_every_requirement_is_the_locked_version() -> None:
    lock = locked_versions()
    assert {name: lock[name] for name in PINS} == PINS


def test_the_agents_direct_dependencies_are_there() -> None:
    for name in ("strands-agents", "bedrock-agentcore", "aws-sdk-sagemaker-runtime-http2", "awscrt", "boto3", "pysbd"):
        assert name in PINS, name
    # The speech engine's stack never goes into the agent image.
    assert not {"torch", "kokoro", "misaki", "numpy"} & set(PINS)
