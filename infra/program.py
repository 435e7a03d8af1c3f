"""The whole stack as one dependency graph: storage -> weights + images -> speech endpoint -> agent.

`run` is what `pulumi up` executes (via infra/__main__.py): read the configuration once, check the
local inputs (weights, torch pin, the page's files), then declare the components. The order of
creation follows from the data each component takes from the previous ones; nothing is sequenced by
hand. A stack open to people (publicAccess) adds the hosted page and sign-in before the agent (the
public runtime accepts the pool's tokens) and the page's files after it (config.json names the
public runtime).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import pulumi
import pulumi_aws as aws

from infra import naming
from infra.agent import AgentRuntime, AgentRuntimeArgs, PublicEntryArgs, invoke_command
from infra.aws_context import AwsContext
from infra.config import CONFIG_KEYS, PublicAccessConfig, StackConfig, check_memory_of_stack, parse_config
from infra.images import Images, ImagesArgs, torch_version
from infra.metrics import dashboard_url, metrics_namespace
from infra.monitoring import Alerts, AlertsArgs, Monitoring, MonitoringArgs, WatchedRuntime
from infra.page import (
    PageFile,
    PageFiles,
    PageFilesArgs,
    PageSite,
    PageSiteArgs,
    PageSourceError,
    config_json,
    content_security_policy,
    page_config,
    page_files,
)
from infra.signin import OAUTH_SCOPES, SignIn, SignInArgs, sign_in_domain_url
from infra.speech import VARIANT_NAME, SpeechEndpoint, SpeechEndpointArgs
from infra.storage import Storage, StorageArgs
from infra.weights import (
    WeightCache,
    WeightCacheArgs,
    download_pinned_snapshot,
    resolve_weights_dir,
    weight_files,
    weights_prefix,
)

REPO_ROOT: Final = Path(__file__).resolve().parent.parent
SPEECH_DOCKERFILE: Final = Path("images/kokoro/Dockerfile")
AGENT_DOCKERFILE: Final = Path("agent_app/Dockerfile")
SPEECH_REQUIREMENTS: Final = Path("images/kokoro/requirements.txt")
PAGE_DIR: Final = Path("local/web")
"""The page a stack open to people hosts: the same files the local stack serves."""


class SourceError(ValueError):
    """A file of the repository that the program reads is missing or malformed."""


@dataclass(frozen=True)
class SourceTree:
    """The repository files the program reads or hands to BuildKit."""

    root: Path
    speech_requirements: Path

    @classmethod
    def of_repository(cls) -> SourceTree:
        return cls(root=REPO_ROOT, speech_requirements=REPO_ROOT / SPEECH_REQUIREMENTS)

    def build_path(self, relative: Path, cwd: Path) -> str:
        """A repository path as BuildKit gets it: relative to the working directory, so the same on every
        machine (an absolute path would show up as a change whenever someone else runs `pulumi up`)."""
        return os.path.relpath(self.root / relative, cwd)

    @property
    def page_dir(self) -> Path:
        return self.root / PAGE_DIR

    def page_files(self) -> tuple[PageFile, ...]:
        """The browser files of the page, checked before any resource is declared."""
        try:
            return page_files(self.page_dir)
        except PageSourceError as error:
            raise SourceError(str(error)) from None

    def torch_version(self) -> str:
        """The torch pin of the speech image, read from its requirements file."""
        try:
            text = self.speech_requirements.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise SourceError(
                f"{self.speech_requirements} not found: the speech image's torch pin is read from it"
            ) from None
        try:
            return torch_version(text)
        except ValueError as error:
            raise SourceError(f"{self.speech_requirements}: {error}") from None


@dataclass(frozen=True)
class PublicOutputs:
    """What a stack open to people adds to `pulumi stack output`."""

    page_url: pulumi.Output[str]
    user_pool_id: pulumi.Output[str]
    user_pool_client_id: pulumi.Output[str]
    sign_in_domain: pulumi.Output[str]
    public_agent_runtime_arn: pulumi.Output[str]

    def exported(self) -> dict[str, pulumi.Input[str]]:
        return {
            "pageUrl": self.page_url,
            "userPoolId": self.user_pool_id,
            "userPoolClientId": self.user_pool_client_id,
            "signInDomain": self.sign_in_domain,
            "publicAgentRuntimeArn": self.public_agent_runtime_arn,
        }


@dataclass(frozen=True)
class StackOutputs:
    """What `pulumi stack output` shows, under the camelCase names of `exported`."""

    speech_endpoint_name: pulumi.Output[str]
    speech_endpoint_arn: pulumi.Output[str]
    agent_runtime_name: str
    agent_runtime_arn: pulumi.Output[str]
    image_repository_url: pulumi.Output[str]
    speech_image_uri: pulumi.Output[str]
    agent_image_uri: pulumi.Output[str]
    weights_bucket: pulumi.Output[str]
    weights_prefix: str
    weights_s3_uri: pulumi.Output[str]
    region: pulumi.Output[str]
    invoke_command: pulumi.Output[str]
    memory_id: pulumi.Output[str]
    dashboard_url: pulumi.Output[str]
    alarm_topic_arn: pulumi.Output[str]
    public: PublicOutputs | None = None

    def exported(self) -> dict[str, pulumi.Input[str]]:
        """The stack outputs by export name."""
        public = {} if self.public is None else self.public.exported()
        return {
            "speechEndpointName": self.speech_endpoint_name,
            "speechEndpointArn": self.speech_endpoint_arn,
            "agentRuntimeName": self.agent_runtime_name,
            "agentRuntimeArn": self.agent_runtime_arn,
            "imageRepositoryUrl": self.image_repository_url,
            "speechImageUri": self.speech_image_uri,
            "agentImageUri": self.agent_image_uri,
            "weightsBucket": self.weights_bucket,
            "weightsPrefix": self.weights_prefix,
            "weightsS3Uri": self.weights_s3_uri,
            "region": self.region,
            "invokeCommand": self.invoke_command,
            "memoryId": self.memory_id,
            "dashboardUrl": self.dashboard_url,
            "alarmTopicArn": self.alarm_topic_arn,
            **public,
        }

    def export(self) -> None:
        for name, value in self.exported().items():
            pulumi.export(name, value)


def default_tags(project: str, stack: str, extra: tuple[tuple[str, str], ...]) -> dict[str, str]:
    """Tags on every AWS resource of the stack: project, stack, then the `tags` config key's."""
    return {"project": project, "stack": stack, **dict(extra)}


@dataclass(frozen=True)
class FrontDoor:
    """The hosted page and its sign-in, declared before the agent (whose public runtime accepts the pool's tokens)."""

    site: PageSite
    sign_in: SignIn
    config: PublicAccessConfig


def front_door(
    cfg: PublicAccessConfig,
    *,
    project: str,
    stack: str,
    aws_context: AwsContext,
    retain: bool,
    tagged: pulumi.ResourceOptions,
) -> FrontDoor:
    """The page's bucket and distribution, then the user pool whose client sends people back to the page."""
    prefix: pulumi.Output[str] = (
        pulumi.Output.from_input(cfg.domain_prefix)
        if cfg.domain_prefix is not None
        else pulumi.Output.all(aws_context.account_id, aws_context.region).apply(
            lambda values: naming.sign_in_domain_prefix(project, stack, values[0], values[1])
        )
    )
    csp = pulumi.Output.all(aws_context.region, prefix).apply(
        lambda values: content_security_policy(
            region=values[0], sign_in_domain=sign_in_domain_url(values[1], values[0])
        )
    )
    site = PageSite(
        "page",
        PageSiteArgs(
            access_control_name=naming.page_resource_name(project, stack, "page"),
            headers_policy_name=naming.page_resource_name(project, stack, "page-headers"),
            description=f"{project} {stack}: the voice agent's page",
            content_security_policy=csp,
        ),
        tagged,
    )
    sign_in = SignIn(
        "signin",
        SignInArgs(
            client_name=f"{project}-{stack}-page",
            page_url=site.url,
            domain_prefix=prefix,
            region=aws_context.region,
            sign_up=cfg.sign_up,
            mfa=cfg.mfa,
            retain=retain,
        ),
        tagged,
    )
    return FrontDoor(site=site, sign_in=sign_in, config=cfg)


def build(
    cfg: StackConfig,
    *,
    weights_dir: Path,
    torch: str,
    sources: SourceTree,
    cwd: Path,
    page: tuple[PageFile, ...] = (),
) -> StackOutputs:
    """Declares every component of the stack; returns its outputs. Inputs are already validated (`page`: the
    page's files, for a stack open to people)."""
    project, stack = pulumi.get_project(), pulumi.get_stack()
    # One explicit provider carries the default tags; every component (and so every child) uses it. An explicit
    # provider reads no `aws:` stack config by itself: region and profile are passed on.
    tags = default_tags(project, stack, cfg.tags)
    provider = aws.Provider("aws", region=aws.config.region, profile=aws.config.profile, default_tags={"tags": tags})
    tagged = pulumi.ResourceOptions(providers=[provider])
    aws_context = AwsContext.lookup(provider)
    namespace = metrics_namespace(project, stack)

    storage = Storage("storage", StorageArgs(retain=cfg.retain_storage), tagged)
    alerts = Alerts("alerts", AlertsArgs(email=cfg.alarm_email), tagged)
    weights = WeightCache(
        "weights",
        WeightCacheArgs(
            bucket=storage.bucket.bucket,
            source_dir=weights_dir,
            prefix=weights_prefix(),
            files=weight_files(),
            retain=cfg.retain_storage,
        ),
        tagged,
    )
    images = Images(
        "images",
        ImagesArgs(
            repository_url=storage.repository.repository_url,
            registry_id=storage.repository.registry_id,
            context=sources.build_path(Path(), cwd),
            speech_dockerfile=sources.build_path(SPEECH_DOCKERFILE, cwd),
            agent_dockerfile=sources.build_path(AGENT_DOCKERFILE, cwd),
            torch_version=torch,
            retain=cfg.retain_storage,
        ),
        tagged,
    )
    speech = SpeechEndpoint(
        "speech",
        SpeechEndpointArgs(
            endpoint_name=naming.endpoint_name(project, stack, cfg.instance_type),
            image_uri=images.speech_uri,
            repository_arn=storage.repository.arn,
            bucket_name=storage.bucket.bucket,
            weights_prefix=weights.prefix,
            weights_s3_uri=weights.s3_uri,
            instance_type=cfg.instance_type,
            instance_count=cfg.instance_count,
            health_check_timeout_s=cfg.health_check_timeout_s,
            model_download_timeout_s=cfg.model_download_timeout_s,
            autoscaling=cfg.autoscaling,
            aws=aws_context,
            metrics_namespace=namespace,
            log_retention_days=cfg.log_retention_days,
            alarm_topic_arn=alerts.topic_arn,
        ),
        tagged,
    )
    door = (
        None
        if cfg.public is None
        else front_door(
            cfg.public, project=project, stack=stack, aws_context=aws_context, retain=cfg.retain_storage, tagged=tagged
        )
    )
    runtime_name = naming.runtime_name(project, stack)
    agent = AgentRuntime(
        "agent",
        AgentRuntimeArgs(
            runtime_name=runtime_name,
            image_uri=images.agent_uri,
            repository_arn=storage.repository.arn,
            endpoint_name=speech.endpoint_name,
            endpoint_arn=speech.endpoint_arn,
            model_id=cfg.bedrock_model_id,
            speech_mode=cfg.speech_mode,
            speech_voice=cfg.speech_voice,
            aws=aws_context,
            memory_name=naming.memory_name(project, stack),
            memory_event_expiry_days=cfg.memory_event_expiry_days,
            memory_id=cfg.memory_id,
            retain_memory=cfg.retain_storage,
            metrics_namespace=namespace,
            log_retention_days=cfg.log_retention_days,
            tags=tags,
            aws_profile=aws.config.profile,
            public=None
            if door is None
            else PublicEntryArgs(
                runtime_name=naming.public_runtime_name(project, stack),
                issuer=door.sign_in.issuer,
                client_id=door.sign_in.client_id,
                max_sessions_per_user=door.config.max_sessions_per_user,
            ),
        ),
        tagged,
    )
    dashboard = naming.dashboard_name(project, stack)
    Monitoring(
        "monitoring",
        MonitoringArgs(
            dashboard_name=dashboard,
            metrics_namespace=namespace,
            region=aws_context.region,
            topic_arn=alerts.topic_arn,
            endpoint_name=speech.endpoint_name,
            variant_name=VARIANT_NAME,
            endpoint_log_group=speech.log_group.name,
            runtime_arn=agent.runtime_arn,
            runtime_name=runtime_name,
            runtime_log_group=agent.log_group_name,
            public_runtime=None
            if agent.public is None
            else WatchedRuntime(
                arn=agent.public.arn,
                name=naming.public_runtime_name(project, stack),
                log_group=agent.public.log_group.name,
            ),
        ),
        tagged,
    )
    public = None
    if door is not None and agent.public is not None:
        public = publish_page(
            door, agent.public.arn, page, sources, stack=stack, region=aws_context.region, tagged=tagged
        )
    return StackOutputs(
        speech_endpoint_name=speech.endpoint_name,
        speech_endpoint_arn=speech.endpoint_arn,
        agent_runtime_name=runtime_name,
        agent_runtime_arn=agent.runtime_arn,
        image_repository_url=storage.repository.repository_url,
        speech_image_uri=images.speech_uri,
        agent_image_uri=images.agent_uri,
        weights_bucket=storage.bucket.bucket,
        weights_prefix=weights.prefix,
        weights_s3_uri=weights.s3_uri,
        region=aws_context.region,
        invoke_command=pulumi.Output.all(agent.runtime_arn, aws_context.region).apply(
            lambda values: invoke_command(values[0], values[1])
        ),
        memory_id=agent.memory.id,
        dashboard_url=aws_context.region.apply(lambda region: dashboard_url(region, dashboard)),
        alarm_topic_arn=alerts.topic_arn,
        public=public,
    )


def publish_page(
    door: FrontDoor,
    runtime_arn: pulumi.Output[str],
    files: tuple[PageFile, ...],
    sources: SourceTree,
    *,
    stack: str,
    region: pulumi.Output[str],
    tagged: pulumi.ResourceOptions,
) -> PublicOutputs:
    """The page's files and the stack's config.json in the page's bucket; the public outputs."""
    sign_in = door.sign_in
    config = pulumi.Output.all(
        region, runtime_arn, sign_in.issuer, sign_in.client_id, door.site.url, sign_in.domain_url
    )
    PageFiles(
        "page-files",
        PageFilesArgs(
            bucket=door.site.bucket.bucket,
            source_dir=sources.page_dir,
            files=files,
            config=config.apply(
                lambda values: config_json(
                    page_config(
                        stack=stack,
                        region=values[0],
                        runtime_arn=values[1],
                        issuer=values[2],
                        client_id=values[3],
                        page_url=values[4],
                        sign_in_domain=values[5],
                        scopes=OAUTH_SCOPES,
                    )
                )
            ),
        ),
        tagged,
    )
    return PublicOutputs(
        page_url=door.site.url,
        user_pool_id=sign_in.user_pool_id,
        user_pool_client_id=sign_in.client_id,
        sign_in_domain=sign_in.domain_url,
        public_agent_runtime_arn=runtime_arn,
    )


def load_config() -> StackConfig:
    """Reads the running program's configuration (the CLI has applied Pulumi.yaml's defaults)."""
    project = pulumi.get_project()
    config = pulumi.Config(project)
    return parse_config({key: config.get(key) for key in CONFIG_KEYS}, namespace=project)


def run(
    sources: SourceTree | None = None,
    *,
    download: Callable[[], Path] = download_pinned_snapshot,
) -> StackOutputs:
    """The program: configuration and local inputs first (fail before any resource), then the graph."""
    cfg = load_config()
    project = pulumi.get_project()
    check_memory_of_stack(cfg.memory_id, naming.memory_name(project, pulumi.get_stack()), namespace=project)
    tree = sources if sources is not None else SourceTree.of_repository()
    weights_dir = resolve_weights_dir(cfg.weights_dir, download=download, config_key=f"{project}:weightsDir")
    torch = tree.torch_version()
    page = tree.page_files() if cfg.public is not None else ()
    outputs = build(cfg, weights_dir=weights_dir, torch=torch, sources=tree, cwd=Path.cwd(), page=page)
    outputs.export()
    return outputs
