"""The runtime's log group, which AgentCore creates itself: taken over after the runtime, removed after it.

What the graph declares and in which order is tested with the other log groups
(tests/infra/test_infra_operations.py). Here: the dynamic providers' CloudWatch Logs calls, against
botocore's Stubber, whose requests and responses are checked against the Logs service model; and the
providers stored in the graph, loaded in a bare interpreter as `pulumi destroy` loads them.
"""

from __future__ import annotations

import base64
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import botocore.session  # type: ignore[import-untyped]
import pytest
from botocore.stub import Stubber  # type: ignore[import-untyped]

from infra.runtime_logs import adopted_log_group_provider, log_group_sweep_provider
from tests.infra.pulumi_harness import ProgramRun, RecordedResource, run_program

ADOPTED = "pulumi-python:dynamic/voicestack:AdoptedLogGroup"
SWEEP = "pulumi-python:dynamic/voicestack:LogGroupSweep"
GROUP = "/aws/bedrock-agentcore/runtimes/voicestack_dev_agent-AbCdE12345-DEFAULT"
GROUP_ARN = f"arn:aws:logs:eu-west-1:123456789012:log-group:{GROUP}"
PREFIX = "/aws/bedrock-agentcore/runtimes/voicestack_dev_agent-"
TAGS = {"project": "voicestack", "stack": "dev"}
PROPS: dict[str, Any] = {"name": GROUP, "retentionInDays": 30.0, "tags": TAGS, "region": "eu-west-1"}


@pytest.fixture(scope="module")
def dev() -> ProgramRun:
    return run_program({})


def find(run: ProgramRun, type_: str, name: str) -> RecordedResource:
    [match] = [r for r in run.resources if (r.type, r.name) == (type_, name)]
    return match


# --- the providers' calls, against the Logs service model ------------------------------------------


@pytest.fixture
def logs() -> Iterator[tuple[Any, Stubber]]:
    client = botocore.session.get_session().create_client(
        "logs", region_name="eu-west-1", aws_access_key_id="AKIDEXAMPLE", aws_secret_access_key="secret"
    )
    with Stubber(client) as stubber:
        yield client, stubber
        stubber.assert_no_pending_responses()


def connector(client: Any, seen: list[tuple[str, str | None]]) -> Any:
    def connect(region: str, profile: str | None) -> Any:
        seen.append((region, profile))
        return client

    return connect


def described(*names: str, token: str | None = None) -> dict[str, Any]:
    response: dict[str, Any] = {
        "logGroups": [
            {
                "logGroupName": name,
                "logGroupArn": f"arn:aws:logs:eu-west-1:123456789012:log-group:{name}",
                "arn": f"arn:aws:logs:eu-west-1:123456789012:log-group:{name}:*",
                "creationTime": 1767225600000,
                "storedBytes": 0,
            }
            for name in names
        ]
    }
    if token is not None:
        response["nextToken"] = token
    return response


def test_create_takes_over_the_group_agentcore_created(logs: tuple[Any, Stubber]) -> None:
    client, stubber = logs
    stubber.add_client_error(
        "create_log_group",
        service_error_code="ResourceAlreadyExistsException",
        service_message="The specified log group already exists",
        http_status_code=400,
        expected_params={"logGroupName": GROUP, "tags": TAGS},
    )
    # A prefix match may return longer names: the exact one is picked.
    stubber.add_response("describe_log_groups", described(GROUP, f"{GROUP}-old"), {"logGroupNamePrefix": GROUP})
    stubber.add_response("tag_resource", {}, {"resourceArn": GROUP_ARN, "tags": TAGS})
    stubber.add_response("put_retention_policy", {}, {"logGroupName": GROUP, "retentionInDays": 30})
    seen: list[tuple[str, str | None]] = []
    result = adopted_log_group_provider(connector(client, seen)).create(dict(PROPS))
    assert (result.id, result.outs) == (GROUP, PROPS)
    assert seen == [("eu-west-1", None)]


def test_create_makes_the_group_when_agentcore_has_not_yet(logs: tuple[Any, Stubber]) -> None:
    client, stubber = logs
    stubber.add_response("create_log_group", {}, {"logGroupName": GROUP, "tags": TAGS})
    stubber.add_response("put_retention_policy", {}, {"logGroupName": GROUP, "retentionInDays": 30})
    result = adopted_log_group_provider(connector(client, [])).create({**PROPS, "profile": "deployer"})
    assert result.id == GROUP


def test_another_create_error_is_not_swallowed(logs: tuple[Any, Stubber]) -> None:
    client, stubber = logs
    stubber.add_client_error("create_log_group", service_error_code="AccessDeniedException", http_status_code=400)
    with pytest.raises(client.exceptions.ClientError, match="AccessDeniedException"):
        adopted_log_group_provider(connector(client, [])).create(dict(PROPS))


def test_update_sets_the_new_retention_and_moves_only_the_changed_tags(logs: tuple[Any, Stubber]) -> None:
    client, stubber = logs
    stubber.add_response("put_retention_policy", {}, {"logGroupName": GROUP, "retentionInDays": 90})
    stubber.add_response("describe_log_groups", described(GROUP), {"logGroupNamePrefix": GROUP})
    stubber.add_response("tag_resource", {}, {"resourceArn": GROUP_ARN, "tags": {"team": "voice"}})
    stubber.add_response("untag_resource", {}, {"resourceArn": GROUP_ARN, "tagKeys": ["stack"]})
    news = {**PROPS, "retentionInDays": 90.0, "tags": {"project": "voicestack", "team": "voice"}}
    result = adopted_log_group_provider(connector(client, [])).update(GROUP, dict(PROPS), news)
    assert result.outs == news


def test_update_of_the_retention_alone_touches_no_tag(logs: tuple[Any, Stubber]) -> None:
    client, stubber = logs
    stubber.add_response("put_retention_policy", {}, {"logGroupName": GROUP, "retentionInDays": 7})
    adopted_log_group_provider(connector(client, [])).update(GROUP, dict(PROPS), {**PROPS, "retentionInDays": 7})


def test_diff_replaces_on_a_new_name_and_updates_retention_and_tags_in_place() -> None:
    provider = adopted_log_group_provider()
    renamed = provider.diff(GROUP, PROPS, {**PROPS, "name": f"{PREFIX}Other12345-DEFAULT"})
    assert (renamed.changes, renamed.replaces) == (True, ["name"])
    longer = provider.diff(GROUP, PROPS, {**PROPS, "retentionInDays": 90})
    assert (longer.changes, longer.replaces) == (True, [])
    same = provider.diff(GROUP, PROPS, {**PROPS, "profile": "another"})
    assert (same.changes, same.replaces) == (False, [])


def test_delete_removes_the_group_and_a_missing_one_is_not_an_error(logs: tuple[Any, Stubber]) -> None:
    client, stubber = logs
    stubber.add_response("delete_log_group", {}, {"logGroupName": GROUP})
    stubber.add_client_error(
        "delete_log_group",
        service_error_code="ResourceNotFoundException",
        service_message="The specified log group does not exist.",
        http_status_code=400,
        expected_params={"logGroupName": GROUP},
    )
    provider = adopted_log_group_provider(connector(client, []))
    provider.delete(GROUP, dict(PROPS))
    provider.delete(GROUP, dict(PROPS))


def test_the_sweep_calls_nothing_on_create(logs: tuple[Any, Stubber]) -> None:
    client, _ = logs
    seen: list[tuple[str, str | None]] = []
    result = log_group_sweep_provider(connector(client, seen)).create({"prefix": PREFIX, "region": "eu-west-1"})
    assert (result.id, seen) == (PREFIX, [])


def test_the_sweep_deletes_every_group_left_under_the_prefix(logs: tuple[Any, Stubber]) -> None:
    client, stubber = logs
    first, second, third = (f"{PREFIX}{suffix}-DEFAULT" for suffix in ("AbCdE12345", "FgHiJ67890", "KlMnO24680"))
    stubber.add_response(
        "describe_log_groups", described(first, second, token="page-2"), {"logGroupNamePrefix": PREFIX}
    )
    stubber.add_response("describe_log_groups", described(third), {"logGroupNamePrefix": PREFIX, "nextToken": "page-2"})
    stubber.add_response("delete_log_group", {}, {"logGroupName": first})
    stubber.add_client_error(
        "delete_log_group",
        service_error_code="ResourceNotFoundException",
        http_status_code=400,
        expected_params={"logGroupName": second},
    )
    stubber.add_response("delete_log_group", {}, {"logGroupName": third})
    log_group_sweep_provider(connector(client, [])).delete(PREFIX, {"prefix": PREFIX, "region": "eu-west-1"})


def test_the_sweep_of_an_empty_prefix_deletes_nothing(logs: tuple[Any, Stubber]) -> None:
    client, stubber = logs
    stubber.add_response("describe_log_groups", {"logGroups": []}, {"logGroupNamePrefix": PREFIX})
    log_group_sweep_provider(connector(client, [])).delete(PREFIX, {"prefix": PREFIX, "region": "eu-west-1"})


# --- what `pulumi destroy` loads, without the program -----------------------------------------------

_LOAD = """
import base64, importlib.util, sys
import dill
# The precondition that makes this test mean something: the repository is not importable here.
assert importlib.util.find_spec("infra") is None, "infra is importable: the test would prove nothing"
provider = dill.loads(base64.b64decode(sys.stdin.read()))
diff = provider.diff("id", {"name": "a", "prefix": "p", "region": "r"}, {"name": "b", "prefix": "p", "region": "r"})
ours = sorted(name for name in sys.modules if name.split(".")[0] in ("infra", "tests", "voicestack"))
print(type(provider).__name__, diff.changes, ours)
"""


@pytest.mark.parametrize(
    ("type_", "name", "expected"),
    [
        (ADOPTED, "agent-logs", "AdoptedLogGroupProvider True []"),
        (SWEEP, "agent-log-sweep", "LogGroupSweepProvider False []"),
    ],
)
def test_the_stored_providers_load_in_a_bare_interpreter(
    dev: ProgramRun, tmp_path: Path, type_: str, name: str, expected: str
) -> None:
    """The dynamic provider process of `pulumi destroy` has the venv but not the repository: the providers
    stored in the state must be whole by themselves (pickled by value), never a reference to infra."""
    stored = find(dev, type_, name).inputs["__provider"]
    base64.b64decode(stored, validate=True)
    environment = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    completed = subprocess.run(
        [sys.executable, "-c", _LOAD],
        input=stored,
        cwd=tmp_path,
        env=environment,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout.strip() == expected
