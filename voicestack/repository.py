"""The repository the `voicestack` command runs from: its Pulumi.yaml, and the program's packages.

Only `voicestack` is installed (pyproject.toml, editable); `infra` and `kokoro_server` are read from
the repository, as infra/__main__.py reads them for `pulumi up`. A command that reuses the program's
own parsing (the preflight reads the stack's configuration with infra/config.py) calls
`make_importable()` first, so that it works from the console script too, not only under the
Makefile's PYTHONPATH.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Final

import yaml  # type: ignore[import-untyped]

REPO_ROOT: Final = Path(__file__).resolve().parent.parent
PULUMI_YAML: Final = REPO_ROOT / "Pulumi.yaml"
_ROOTS: Final = (REPO_ROOT, REPO_ROOT / "images" / "kokoro")


def make_importable() -> None:
    """Puts the repository root and images/kokoro on sys.path (once, after what is already there)."""
    for root in _ROOTS:
        if str(root) not in sys.path:
            sys.path.append(str(root))


def project_name(project_file: Path = PULUMI_YAML) -> str:
    """The Pulumi project's name (the namespace of its config keys)."""
    document = yaml.safe_load(project_file.read_text(encoding="utf-8"))
    name = document.get("name") if isinstance(document, dict) else None
    if not isinstance(name, str) or not name:
        raise ValueError(f"{project_file} names no project")
    return name
