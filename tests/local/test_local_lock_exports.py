"""The images' requirement files against uv.lock: exported exactly, and drift caught."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from infra.images import torch_version
from local.lock_exports import EXPORTS, REPO_ROOT, locked_versions, pinned, render, stale_exports, uv_binary


def test_every_committed_export_is_what_the_lock_gives() -> None:
    assert stale_exports(REPO_ROOT, uv_binary()) == []


def test_a_pin_that_drifts_from_the_lock_is_caught(tmp_path: Path) -> None:
    for name in ["pyproject.toml", "uv.lock", *(export.path for export in EXPORTS)]:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(REPO_ROOT / name, tmp_path / name)
    agent = tmp_path / "agent_app" / "requirements.txt"
    text = agent.read_text(encoding="utf-8")
    boto3 = locked_versions()["boto3"]
    agent.write_text(text.replace(f"\nboto3=={boto3} ", "\nboto3==1.0.0 "), encoding="utf-8")
    assert pinned(agent.read_text(encoding="utf-8"))["boto3"] == "1.0.0"
    assert stale_exports(tmp_path, uv_binary()) == ["agent_app/requirements.txt"]


def test_the_speech_torch_pin_is_the_locked_torch_and_what_the_image_is_labelled_with() -> None:
    (speech,) = [export for export in EXPORTS if export.extra == "speech"]
    text = render(speech, uv_binary())
    assert text.endswith(f"\ntorch=={locked_versions()['torch']}\n")
    assert torch_version(text) == locked_versions()["torch"]


@pytest.mark.parametrize(
    ("line", "message"),
    [("torch>=2.10", "not an exact pin: 'torch>=2.10'"), ("kokoro", "not an exact pin: 'kokoro'")],
)
def test_a_requirement_that_is_not_an_exact_pin_is_refused(line: str, message: str) -> None:
    with pytest.raises(ValueError, match=f"^{message}$"):
        pinned(line + "\n")


def test_pins_are_read_through_continuations_markers_and_hashes() -> None:
    text = (
        "# comment\n"
        "Foo_Bar==1.2.3 ; sys_platform == 'linux' \\\n"
        "    --hash=sha256:aa \\\n"
        "    --hash=sha256:bb\n"
        "    # via something\n"
        "torch==2.14.1\n"
    )
    assert pinned(text) == {"foo-bar": "1.2.3", "torch": "2.14.1"}
