"""The deployer's local tools, checked before `pulumi up`: Pulumi CLI, AWS CLI, Docker with buildx.

What infra/README.md requires of them:

- the Pulumi CLI at least as new as the `pulumi` Python SDK the program runs with (uv.lock): the
  program relies on the engine's project-level config defaults, import-then-update of an adopted
  memory, and dynamic providers run on a plain `pulumi destroy`;
- the AWS CLI v2 with the `aws bedrock-agentcore invoke-agent-runtime` command (the stack's
  `invokeCommand` output), asked for its argument skeleton, which calls no AWS API;
- Docker with buildx whose builder offers linux/amd64 (the speech image, for SageMaker's GPU
  instances) and linux/arm64 (the agent image, the only architecture AgentCore runs).

Each check runs its command through a `Runner` (tests give canned processes) and parses its output
with a pure function.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Callable, Sequence
from importlib import metadata
from typing import Final

from packaging.version import InvalidVersion, Version

from voicestack.checks import Outcome

Runner = Callable[[Sequence[str]], "subprocess.CompletedProcess[str]"]
"""Runs a command line (text, output captured); raises FileNotFoundError when the program is missing."""

COMMAND_TIMEOUT_S: Final = 180
"""`docker buildx inspect --bootstrap` may start a builder container: minutes, not hours."""
PLATFORMS: Final = ("linux/amd64", "linux/arm64")
"""The speech image's platform and the agent image's (infra/images.py)."""
INSTALL_PULUMI: Final = "install the Pulumi CLI {version} or later: https://www.pulumi.com/docs/install/"
INSTALL_AWS_CLI: Final = (
    "install or update the AWS CLI v2: https://docs.aws.amazon.com/cli/latest/userguide/getting-started-install.html"
)
INSTALL_BUILDX: Final = "install Docker with the buildx plugin: https://docs.docker.com/build/install-buildx/"
ADD_ARM64: Final = (
    "docker run --privileged --rm tonistiigi/binfmt --install arm64  "
    "(QEMU emulation for the agent's linux/arm64 image; Docker Desktop ships it)"
)
ADD_AMD64: Final = "docker run --privileged --rm tonistiigi/binfmt --install amd64  (QEMU for the speech image)"


def run_command(argv: Sequence[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(argv), capture_output=True, text=True, check=False, timeout=COMMAND_TIMEOUT_S)


def required_pulumi_cli() -> Version:
    """The Pulumi SDK version the program runs with: the CLI must be at least this new."""
    return Version(metadata.version("pulumi"))


def parse_pulumi_version(text: str) -> Version | None:
    """`pulumi version` prints `v3.272.0`; a development build `v3.273.0-alpha.x1234` counts as its release
    (a semantic-version suffix, which PEP 440 does not read)."""
    release = text.strip().removeprefix("v").split("-", 1)[0].split("+", 1)[0]
    try:
        return Version(release)
    except InvalidVersion:
        return None


def parse_aws_cli_version(text: str) -> Version | None:
    """`aws --version` prints `aws-cli/2.31.13 Python/3.13.7 Linux/6.8.0 exe/x86_64.ubuntu.24`."""
    match = re.match(r"aws-cli/(?P<version>\S+)", text.strip())
    if match is None:
        return None
    try:
        return Version(match["version"])
    except InvalidVersion:
        return None


def parse_buildx_platforms(text: str) -> tuple[str, ...]:
    """Every platform in the `Platforms:` lines of `docker buildx inspect` (a `*` marks a configured one)."""
    found: list[str] = []
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "Platforms":
            found += [platform.strip().rstrip("*") for platform in value.split(",") if platform.strip()]
    return tuple(dict.fromkeys(found))


def _attempt(run: Runner, argv: Sequence[str]) -> subprocess.CompletedProcess[str] | str:
    """The finished process, or why there is none (the program is missing, or it hung)."""
    try:
        return run(argv)
    except FileNotFoundError:
        return f"`{argv[0]}` is not on the PATH"
    except subprocess.TimeoutExpired:
        return f"`{' '.join(argv)}` did not answer in {COMMAND_TIMEOUT_S} s"


def check_pulumi_cli(run: Runner, required: Version) -> Outcome:
    name = "pulumi cli"
    fix = INSTALL_PULUMI.format(version=required)
    done = _attempt(run, ["pulumi", "version"])
    if isinstance(done, str):
        return Outcome.failed(name, done, fix)
    version = parse_pulumi_version(done.stdout) if done.returncode == 0 else None
    if version is None:
        return Outcome.failed(name, f"`pulumi version` printed {_first_line(done)!r}", fix)
    if version < required:
        return Outcome.failed(name, f"v{version}, older than the program's SDK {required}", fix)
    return Outcome.passed(name, f"v{version} (needs {required} or later)")


def check_aws_cli(run: Runner) -> Outcome:
    name = "aws cli"
    done = _attempt(run, ["aws", "--version"])
    if isinstance(done, str):
        return Outcome.failed(name, done, INSTALL_AWS_CLI)
    version = parse_aws_cli_version(done.stdout or done.stderr) if done.returncode == 0 else None
    if version is None:
        return Outcome.failed(name, f"`aws --version` printed {_first_line(done)!r}", INSTALL_AWS_CLI)
    if version.major != 2:
        return Outcome.failed(name, f"{version} is not the AWS CLI v2", INSTALL_AWS_CLI)
    # The positional outfile comes first: --generate-cli-skeleton takes an optional value of its own.
    skeleton = _attempt(
        run, ["aws", "bedrock-agentcore", "invoke-agent-runtime", "/dev/null", "--generate-cli-skeleton"]
    )
    if isinstance(skeleton, str) or skeleton.returncode != 0:
        return Outcome.failed(
            name,
            f"{version} has no `aws bedrock-agentcore invoke-agent-runtime` (the stack's invokeCommand)",
            INSTALL_AWS_CLI,
        )
    return Outcome.passed(name, f"{version}, with `aws bedrock-agentcore invoke-agent-runtime`")


def check_docker_buildx(run: Runner) -> Outcome:
    name = "docker buildx"
    done = _attempt(run, ["docker", "buildx", "inspect", "--bootstrap"])
    if isinstance(done, str):
        return Outcome.failed(name, done, INSTALL_BUILDX)
    if done.returncode != 0:
        return Outcome.failed(name, f"`docker buildx inspect` failed: {_first_line(done)}", INSTALL_BUILDX)
    offered = parse_buildx_platforms(done.stdout)
    missing = [platform for platform in PLATFORMS if platform not in offered]
    if missing:
        shown = ", ".join(offered) or "no platform"
        fix = ADD_ARM64 if "linux/arm64" in missing else ADD_AMD64
        return Outcome.failed(name, f"the builder offers {shown}, not {' or '.join(missing)}", fix)
    return Outcome.passed(name, f"the builder offers {', '.join(PLATFORMS)}")


def tool_outcomes(run: Runner = run_command) -> list[Outcome]:
    """The three tool checks, in the order the README lists the prerequisites."""
    return [check_pulumi_cli(run, required_pulumi_cli()), check_aws_cli(run), check_docker_buildx(run)]


def _first_line(done: subprocess.CompletedProcess[str]) -> str:
    text = (done.stderr or done.stdout or "").strip()
    return text.splitlines()[0] if text else f"nothing (exit status {done.returncode})"
