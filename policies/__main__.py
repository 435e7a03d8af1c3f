"""Starts the policy pack: `pulumi preview --policy-pack policies` runs this file.

Creating the `PolicyPack` starts the analyzer's gRPC server and blocks, so it happens only here; the
rules stay importable (and testable) from their modules.
"""

from __future__ import annotations

import sys
from pathlib import Path

from pulumi_policy import EnforcementLevel, PolicyPack


def main() -> None:
    """Serves the pack to the Pulumi engine until it is stopped."""
    # The CLI runs this file with runpy.run_path, which puts only this folder on sys.path. The rules
    # are the `policies` package, the same modules the tests import, so the folder above must be there.
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from policies.pack import ALL_POLICIES, PACK_NAME

    PolicyPack(name=PACK_NAME, policies=ALL_POLICIES, enforcement_level=EnforcementLevel.MANDATORY)


if __name__ == "__main__":
    main()
