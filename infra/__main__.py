"""Pulumi entry point (`main: infra/` in Pulumi.yaml): make the repository importable, run the program.

Pulumi runs this directory with only `infra/` on sys.path; the program imports `infra.*`,
`speech_protocol` (repository root) and `kokoro_server.model_pin` (images/kokoro), so both roots
are added here and `pulumi up` needs no PYTHONPATH.
"""

import sys
from pathlib import Path

_REPO_ROOT = Path(__file__).resolve().parent.parent
for _root in (_REPO_ROOT / "images" / "kokoro", _REPO_ROOT):
    if str(_root) not in sys.path:
        sys.path.insert(0, str(_root))

from infra.program import run  # noqa: E402  (needs the sys.path entries above)

run()
