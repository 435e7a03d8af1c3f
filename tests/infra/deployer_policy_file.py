"""Writes infra/deployer-policy/ from the program itself: `make deployer-policy`.

The program runs offline under the harness's mocks (tests/infra/pulumi_harness.py) in the
configurations that between them declare every resource type it has (autoscaling on, an alarm
e-mail, an adopted memory, the front door of publicAccess); every resource and invoke they record
becomes a `Declared` for infra/deployer_policy.py, with the roles that model and runtimes hand to
their services.

    PYTHONPATH=.:images/kokoro python -m tests.infra.deployer_policy_file          # write the files
    PYTHONPATH=.:images/kokoro python -m tests.infra.deployer_policy_file --check  # exit 1 if they differ
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Final

from infra.deployer_policy import GRANTS, Declared, deployer_policy, managed_policies, policy_json
from infra.iam import AwsScope
from infra.program import REPO_ROOT
from tests.infra.pulumi_harness import PROJECT, ProgramRun, run_program

POLICY_DIR: Final = REPO_ROOT / "infra" / "deployer-policy"
POLICY_NAME: Final = "voicestack-deployer"
"""Each file is the document of one managed policy, `voicestack-deployer-<n>`."""
ANY_ACCOUNT: Final = AwsScope(partition="aws", region="*", account_id="*")
"""One document for every stack, region and account of the project."""
ROLE: Final = "aws:iam/role:Role"
VARIANTS: Final[tuple[dict[str, str], ...]] = (
    {},
    {
        "retainStorage": "true",
        "autoscalingEnabled": "true",
        "autoscalingMetric": "activeSessions",
        "alarmEmail": "ops@example.com",
        "memoryId": "voicestack_dev_memory-AbCdE12345",
        "publicAccess": "true",
        "signInMfa": "required",
    },
)
"""Configurations that together declare every resource type the program can."""


def declared_in(run: ProgramRun) -> list[Declared]:
    """The run's resources (components left out) and invokes, with the roles their inputs name."""
    roles = {resource.urn: resource.name for resource in run.resources if resource.type == ROLE}
    declared: list[Declared] = []
    for resource in run.resources:
        if resource.type.startswith("voicestack:"):
            continue
        grant = GRANTS.get(resource.type)
        passed: dict[str, tuple[str, ...]] = {}
        if grant is not None and grant.passes_role is not None:
            prop = grant.passes_role[0]
            passed[prop] = tuple(roles[urn] for urn in resource.property_dependencies.get(prop, ()) if urn in roles)
        declared.append(Declared(resource.type, resource.name, passed))
    declared += [Declared(token, token) for token in sorted(set(run.calls))]
    return declared


def program_runs() -> list[ProgramRun]:
    return [run_program(config) for config in VARIANTS]


def generated(runs: Sequence[ProgramRun] | None = None) -> dict[str, str]:
    """File name -> text of every managed policy, from the program's declared resources in every variant."""
    declared = [item for run in (runs if runs is not None else program_runs()) for item in declared_in(run)]
    whole = deployer_policy(declared, project=PROJECT, scope=ANY_ACCOUNT)
    return {
        f"{POLICY_NAME}-{number}.json": policy_json(part)
        for number, part in enumerate(managed_policies(whole), start=1)
    }


def committed() -> dict[str, str]:
    """File name -> text of the managed policies in the repository."""
    return {path.name: path.read_text(encoding="utf-8") for path in sorted(POLICY_DIR.glob("*.json"))}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="deployer-policy", description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--check", action="store_true", help="exit 1 when the committed file differs")
    args = parser.parse_args(argv)
    files = generated()
    relative = POLICY_DIR.relative_to(REPO_ROOT)
    if args.check:
        if committed() != files:
            print(f"{relative}/ is out of date: run `make deployer-policy`", file=sys.stderr)
            return 1
        print(f"{relative}/ is what the program gives")
        return 0
    POLICY_DIR.mkdir(exist_ok=True)
    for stale in set(committed()) - set(files):
        (POLICY_DIR / stale).unlink()
    for name, text in files.items():
        (POLICY_DIR / name).write_text(text, encoding="utf-8")
        print(f"wrote {relative}/{name}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
