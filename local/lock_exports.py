"""The images' requirement files, exported from `uv.lock`: the laptop, CI and every image get the same versions.

`pyproject.toml` declares the dependencies once (extras per part of the architecture); `uv.lock` pins them for
every platform we run on. Each image installs one extra's closure from a file exported here, with hashes:

- `agent_app/requirements.txt`: the `agent` extra (the AgentCore image, linux/arm64);
- `images/kokoro/requirements.txt`: the `speech` extra without torch's CUDA wheels. PyPI's torch is built for
  CUDA 13 (driver >= 580) while SageMaker's GPU hosts run driver 550, so the image takes torch at the locked
  version from the PyTorch CUDA 12.8 index instead; its line is kept (without hashes, which differ per index) so
  the Dockerfile and the Pulumi program read the version from one place;
- `policies/requirements.txt`: the `policies` extra (the policy pack's own environment).

`make lock` runs `python -m local.lock_exports` after `uv lock`; `--check` (run by the test suite) fails when a
file drifts from the lock.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

REPO_ROOT: Final = Path(__file__).resolve().parents[1]

# torch's own CUDA runtime wheels: the speech image takes them with torch from the PyTorch index.
_CUDA_WHEEL: Final = re.compile(r"^(torch|triton|nvidia-.*|cuda-.*)$")


@dataclass(frozen=True, slots=True)
class Export:
    path: str
    """Relative to the repository root."""
    extra: str
    """The pyproject extra whose closure the image installs."""
    torch_from_cuda_index: bool = False
    """Leave torch and its CUDA wheels out (hashed part) and pin torch alone on a last, unhashed line."""


EXPORTS: Final = (
    Export("agent_app/requirements.txt", "agent"),
    Export("images/kokoro/requirements.txt", "speech", torch_from_cuda_index=True),
    Export("policies/requirements.txt", "policies"),
)


def locked_versions(lock_path: Path = REPO_ROOT / "uv.lock") -> dict[str, str]:
    """Package name -> version for every package in the lock (one version each: the lock has no forks)."""
    with lock_path.open("rb") as handle:
        lock = tomllib.load(handle)
    versions: dict[str, str] = {}
    for package in lock["package"]:
        name, version = package["name"], package.get("version")
        if version is None:
            continue  # the project itself (virtual)
        if versions.setdefault(name, version) != version:
            raise ValueError(f"uv.lock holds two versions of {name}: {versions[name]} and {version}")
    return versions


def pinned(requirements: str) -> dict[str, str]:
    """Package name -> pinned version of a pip requirements file (continuations, hashes and markers allowed).

    Raises ValueError on a requirement that is not an exact `name==version` pin.
    """
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    pins: dict[str, str] = {}
    for logical in requirements.replace("\\\n", " ").splitlines():
        line = logical.split("#", 1)[0].split(" --hash=", 1)[0].strip()
        if not line:
            continue
        requirement = Requirement(line)
        specifiers = list(requirement.specifier)
        if len(specifiers) != 1 or specifiers[0].operator != "==":
            raise ValueError(f"not an exact pin: {line!r}")
        pins[canonicalize_name(requirement.name)] = specifiers[0].version
    return pins


def uv_binary() -> str:
    """The uv the Makefile bootstrapped (exported as UV), else one on the PATH."""
    found = os.environ.get("UV") or shutil.which("uv")
    if not found:
        raise FileNotFoundError("uv not found: run through `make` (it bootstraps uv) or set UV=/path/to/uv")
    return found


def render(export: Export, uv: str, root: Path = REPO_ROOT) -> str:
    """The file's exact text, from `uv export --frozen` of the lock as it is."""
    command = [uv, "export", "--frozen", "--no-emit-project", "--extra", export.extra, "--no-header"]
    torch: str | None = None
    if export.torch_from_cuda_index:
        versions = locked_versions(root / "uv.lock")
        torch = versions["torch"]
        for name in sorted(versions):
            if _CUDA_WHEEL.match(name):
                command += ["--no-emit-package", name]
    exported = subprocess.run(command, cwd=root, check=True, capture_output=True, text=True).stdout
    header = [
        f"# Exported from uv.lock (extra `{export.extra}`) by `make lock`; do not edit by hand.",
        "# The test suite fails when this file and the lock disagree.",
    ]
    text = "\n".join(header) + "\n" + exported
    if torch is not None:
        text += (
            "# torch is installed first, at this version, from the PyTorch CUDA index (images/kokoro/Dockerfile);\n"
            "# the Pulumi program labels the image with it.\n"
            f"torch=={torch}\n"
        )
    return text


def stale_exports(root: Path, uv: str) -> list[str]:
    """The export files under `root` whose text differs from what its lock gives."""
    return [
        export.path
        for export in EXPORTS
        if not (root / export.path).exists()
        or (root / export.path).read_text(encoding="utf-8") != render(export, uv, root)
    ]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--check", action="store_true", help="fail when a file differs from the lock's export")
    args = parser.parse_args(argv)
    uv = uv_binary()
    stale = stale_exports(REPO_ROOT, uv)
    if args.check:
        if stale:
            print(f"out of date with uv.lock: {', '.join(stale)} (run `make lock`)", file=sys.stderr)
            return 1
        return 0
    for path in stale:
        export = next(export for export in EXPORTS if export.path == path)
        (REPO_ROOT / path).write_text(render(export, uv), encoding="utf-8")
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
