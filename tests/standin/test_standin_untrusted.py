"""An untrusted certificate: the CRT stays silent for 10-30 s; the transport gives up at its open timeout."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.standin.standin_support import REPO_ROOT


def test_untrusted_certificate_is_unavailable_at_the_open_timeout() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "tests.standin.standin_untrusted_probe"],
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
        timeout=30,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == {
        "code": "speech_unavailable",
        "message": "endpoint speech: no response within 1.0 s "
        "(an untrusted TLS certificate looks like this: the CRT reports it only after 10-30 s)",
    }
