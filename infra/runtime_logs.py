"""The runtime's log group: AgentCore creates it, the stack takes it over, and it goes after the runtime.

AgentCore creates `/aws/bedrock-agentcore/runtimes/<runtime id>-DEFAULT` itself when it creates a
runtime (terraform-provider-aws #47629/#47630, CloudFormation roadmap #2460): declared as a plain
`aws.cloudwatch.LogGroup`, the first `pulumi up` fails with ResourceAlreadyExistsException, and a
group deleted before its runtime can be created again by it, kept forever. Two dynamic resources,
which call CloudWatch Logs with boto3, do what the AWS provider cannot:

- `AdoptedLogGroup` (after the runtime: its name carries the runtime id) creates the group, or, when
  AgentCore was first, takes the existing one ("already exists" is not an error); then sets the
  retention and the tags. Updates change both; delete removes the group ("not found" is not an
  error).
- `LogGroupSweep` (before the runtime: the runtime depends on it) does nothing on create. Pulumi
  deletes it after the runtime, so its delete removes every group still under
  `/aws/bedrock-agentcore/runtimes/<runtime name>-`: one the runtime wrote while it was going away
  is not left behind without an expiry.

Why dynamic resources, not resource hooks (`pulumi.ResourceHook`, after_delete on the runtime): with a
delete hook in the state, `pulumi destroy` refuses to run unless given `--run-program` (pulumi#19933,
Pulumi 3.182), and a failed destroy can leave `--run-program` unable to run the program at all
(pulumi#23921). A dynamic resource keeps its provider in the stack's state and runs on a plain
`pulumi destroy`, with no program.

Why each provider is a class built inside a function: Pulumi stores the provider with dill, which
pickles a class or function of an importable module by reference. The process that runs it on
`pulumi destroy` has neither the repository on `sys.path` nor the program, so a reference to
`infra.runtime_logs` would fail to load there; a class built in a function (with its helpers beside
it) is pickled by value. tests/infra/test_infra_runtime_logs.py loads the stored provider in a bare
interpreter to prove it.

Both call AWS with boto3's default credential chain (the environment `pulumi up` runs in), in the
stack's region, and with the `aws:profile` of the stack when it sets one.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi.dynamic

Connect = Callable[[str, str | None], Any]
"""(region, profile) -> a CloudWatch Logs client (boto3's, or a stubbed one in tests)."""


def _logs_clients(connect: Connect | None) -> Callable[[Mapping[str, Any]], Any]:
    """props -> a CloudWatch Logs client for their region and profile. The function returned is built here,
    so it is pickled by value with the provider that calls it."""

    def logs_client(props: Mapping[str, Any]) -> Any:
        if connect is not None:
            return connect(props["region"], props.get("profile"))
        import boto3  # type: ignore[import-untyped]  # in the provider process: the venv's boto3

        return boto3.session.Session(profile_name=props.get("profile"), region_name=props["region"]).client("logs")

    return logs_client


def adopted_log_group_provider(connect: Connect | None = None) -> pulumi.dynamic.ResourceProvider:
    """The provider of `AdoptedLogGroup`; `connect` replaces boto3 (tests). Built here, not at module level,
    so that Pulumi stores it by value (see the module docstring)."""
    logs_client = _logs_clients(connect)

    def group_arn(logs: Any, name: str) -> str:
        # TagResource wants the group's ARN; the account is not among the inputs, so ask.
        pages = logs.get_paginator("describe_log_groups").paginate(logGroupNamePrefix=name)
        for page in pages:
            for group in page["logGroups"]:
                if group["logGroupName"] == name:
                    return str(group["logGroupArn"])
        raise LookupError(f"log group {name} not found after it was created")

    class AdoptedLogGroupProvider(pulumi.dynamic.ResourceProvider):
        # The state holds no secret; Pulumi would otherwise encrypt the whole provider in it.
        serialize_as_secret_always = False

        def create(self, props: dict[str, Any]) -> pulumi.dynamic.CreateResult:
            logs = logs_client(props)
            name, tags = props["name"], dict(props.get("tags") or {})
            try:
                logs.create_log_group(logGroupName=name, tags=tags)
            except logs.exceptions.ResourceAlreadyExistsException:
                # AgentCore created it with the runtime: take it over.
                if tags:
                    logs.tag_resource(resourceArn=group_arn(logs, name), tags=tags)
            logs.put_retention_policy(logGroupName=name, retentionInDays=int(props["retentionInDays"]))
            return pulumi.dynamic.CreateResult(id_=name, outs=dict(props))

        def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> pulumi.dynamic.DiffResult:
            replaces = [key for key in ("name", "region") if olds.get(key) != news.get(key)]
            changed = [key for key in ("retentionInDays", "tags") if olds.get(key) != news.get(key)]
            return pulumi.dynamic.DiffResult(changes=bool(replaces or changed), replaces=replaces)

        def update(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> pulumi.dynamic.UpdateResult:
            logs = logs_client(news)
            name = news["name"]
            if olds.get("retentionInDays") != news["retentionInDays"]:
                logs.put_retention_policy(logGroupName=name, retentionInDays=int(news["retentionInDays"]))
            old_tags, new_tags = dict(olds.get("tags") or {}), dict(news.get("tags") or {})
            if old_tags != new_tags:
                arn = group_arn(logs, name)
                changed = {key: value for key, value in new_tags.items() if old_tags.get(key) != value}
                removed = sorted(set(old_tags) - set(new_tags))
                if changed:
                    logs.tag_resource(resourceArn=arn, tags=changed)
                if removed:
                    logs.untag_resource(resourceArn=arn, tagKeys=removed)
            return pulumi.dynamic.UpdateResult(outs=dict(news))

        def delete(self, _id: str, props: dict[str, Any]) -> None:
            logs = logs_client(props)
            # Already gone (deleted by hand, or never written): nothing is left, which is the goal.
            with contextlib.suppress(logs.exceptions.ResourceNotFoundException):
                logs.delete_log_group(logGroupName=props["name"])

    return AdoptedLogGroupProvider()


def log_group_sweep_provider(connect: Connect | None = None) -> pulumi.dynamic.ResourceProvider:
    """The provider of `LogGroupSweep`; `connect` replaces boto3 (tests). Built here for the same reason."""
    logs_client = _logs_clients(connect)

    class LogGroupSweepProvider(pulumi.dynamic.ResourceProvider):
        serialize_as_secret_always = False

        def create(self, props: dict[str, Any]) -> pulumi.dynamic.CreateResult:
            # Nothing exists yet: the runtime that writes these groups is created after this resource.
            return pulumi.dynamic.CreateResult(id_=props["prefix"], outs=dict(props))

        def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> pulumi.dynamic.DiffResult:
            replaces = [key for key in ("prefix", "region") if olds.get(key) != news.get(key)]
            return pulumi.dynamic.DiffResult(changes=bool(replaces), replaces=replaces)

        def delete(self, _id: str, props: dict[str, Any]) -> None:
            logs = logs_client(props)
            pages = logs.get_paginator("describe_log_groups").paginate(logGroupNamePrefix=props["prefix"])
            names = [group["logGroupName"] for page in pages for group in page["logGroups"]]
            for name in names:
                # Removed meanwhile: the sweep only has to leave nothing.
                with contextlib.suppress(logs.exceptions.ResourceNotFoundException):
                    logs.delete_log_group(logGroupName=name)

    return LogGroupSweepProvider()


@dataclass(frozen=True)
class AdoptedLogGroupArgs:
    """The group AgentCore creates, the retention and tags the stack wants on it, where it lives."""

    name: pulumi.Input[str]
    retention_days: int
    tags: Mapping[str, str]
    region: pulumi.Input[str]
    profile: str | None = None
    """The stack's `aws:profile`; None: boto3's default credential chain."""


class AdoptedLogGroup(pulumi.dynamic.Resource, module="voicestack", name="AdoptedLogGroup"):
    """A log group someone else may create first: created or taken over, then retention and tags set."""

    name: pulumi.Output[str]

    def __init__(
        self, resource_name: str, args: AdoptedLogGroupArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        props: dict[str, Any] = {
            "name": args.name,
            "retentionInDays": args.retention_days,
            "tags": dict(args.tags),
            "region": args.region,
            "profile": args.profile,
        }
        super().__init__(adopted_log_group_provider(), resource_name, props, opts)


@dataclass(frozen=True)
class LogGroupSweepArgs:
    """Every log group under `prefix` goes when this resource is deleted."""

    prefix: str
    region: pulumi.Input[str]
    profile: str | None = None


class LogGroupSweep(pulumi.dynamic.Resource, module="voicestack", name="LogGroupSweep"):
    """Deletes the log groups left under a prefix when it is deleted; make their writer depend on it."""

    prefix: pulumi.Output[str]

    def __init__(self, resource_name: str, args: LogGroupSweepArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        props: dict[str, Any] = {"prefix": args.prefix, "region": args.region, "profile": args.profile}
        super().__init__(log_group_sweep_provider(), resource_name, props, opts)
