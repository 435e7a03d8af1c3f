"""Operating the stack: the alarm topic, log metric filters, alarms and one CloudWatch dashboard.

`Alerts` comes first (the speech endpoint's 5XX alarm, which also rolls back a failed blue/green
deployment, notifies its topic); `Monitoring` comes last, once the endpoint's and the runtime's log
groups exist. What is measured and why through log metric filters: infra/metrics.py.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Final

import pulumi
import pulumi_aws as aws

from infra.metrics import (
    AGENT_METRICS,
    SPEECH_METRICS,
    AlarmSpec,
    LogMetric,
    dashboard_body,
    endpoint_alarms,
    experience_alarms,
    filter_namespace,
    runtime_alarms,
)

EMAIL_PROTOCOL: Final = "email"


def metric_alarm(
    name: str, spec: AlarmSpec, topic_arn: pulumi.Input[str], opts: pulumi.ResourceOptions
) -> aws.cloudwatch.MetricAlarm:
    """One alarm that notifies the topic when it fires and when it recovers."""
    return aws.cloudwatch.MetricAlarm(
        f"{name}-{spec.key}",
        alarm_description=spec.description,
        namespace=spec.namespace,
        metric_name=spec.metric_name,
        dimensions=spec.dimensions,
        statistic=spec.statistic,
        extended_statistic=spec.extended_statistic,
        threshold=spec.threshold,
        comparison_operator=spec.comparison,
        period=spec.period_s,
        evaluation_periods=spec.evaluation_periods,
        datapoints_to_alarm=spec.datapoints_to_alarm,
        treat_missing_data=spec.treat_missing_data,
        alarm_actions=[topic_arn],
        ok_actions=[topic_arn],
        opts=opts,
    )


@dataclass(frozen=True)
class AlertsArgs:
    """email: subscribed to the topic when set (AWS mails a confirmation link first)."""

    email: str | None


class Alerts(pulumi.ComponentResource):
    """The SNS topic every alarm notifies, and the optional e-mail subscription."""

    topic: aws.sns.Topic
    subscription: aws.sns.TopicSubscription | None
    topic_arn: pulumi.Output[str]

    def __init__(self, name: str, args: AlertsArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("voicestack:index:Alerts", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        # The topic always exists, so other subscribers (chat, paging) can be added without a redeploy.
        self.topic = aws.sns.Topic(f"{name}-topic", opts=child)
        self.subscription = None
        if args.email is not None:
            self.subscription = aws.sns.TopicSubscription(
                f"{name}-email", topic=self.topic.arn, protocol=EMAIL_PROTOCOL, endpoint=args.email, opts=child
            )
        self.topic_arn = self.topic.arn
        self.register_outputs({"topic_arn": self.topic_arn})


@dataclass(frozen=True)
class MonitoringArgs:
    """Names of what is watched; log groups must exist (metric filters attach to them)."""

    dashboard_name: str
    metrics_namespace: str
    region: pulumi.Input[str]
    topic_arn: pulumi.Input[str]
    endpoint_name: pulumi.Input[str]
    variant_name: str
    endpoint_log_group: pulumi.Input[str]
    runtime_arn: pulumi.Input[str]
    runtime_name: str
    runtime_log_group: pulumi.Input[str]
    public_runtime: WatchedRuntime | None = None
    """The runtime people reach (publicAccess): its agent metrics and AgentCore's alarms, like the first one's."""


@dataclass(frozen=True)
class WatchedRuntime:
    """One more AgentCore runtime of the agent's image to watch."""

    arn: pulumi.Input[str]
    name: str
    log_group: pulumi.Input[str]


class Monitoring(pulumi.ComponentResource):
    """Log metric filters for both containers, the alarms, and the dashboard."""

    metric_filters: list[aws.cloudwatch.LogMetricFilter]
    alarms: list[aws.cloudwatch.MetricAlarm]
    dashboard: aws.cloudwatch.Dashboard

    def __init__(self, name: str, args: MonitoringArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("voicestack:index:Monitoring", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        namespace = filter_namespace(args.metrics_namespace)

        def log_filter(
            metric: LogMetric, log_group: pulumi.Input[str], prefix: str = ""
        ) -> aws.cloudwatch.LogMetricFilter:
            return aws.cloudwatch.LogMetricFilter(
                f"{name}-{prefix}{metric.service}-{metric.name}",
                log_group_name=log_group,
                pattern=metric.filter_pattern(),
                metric_transformation=metric.transformation(namespace),
                opts=child,
            )

        public = args.public_runtime
        # The public runtime's lines become the same series (Service=agent): the experience alarm and the dashboard
        # read every caller, signed in or IAM-signed.
        self.metric_filters = [
            *(log_filter(metric, args.endpoint_log_group) for metric in SPEECH_METRICS),
            *(log_filter(metric, args.runtime_log_group) for metric in AGENT_METRICS),
            *(log_filter(metric, public.log_group, "public-") for metric in AGENT_METRICS if public is not None),
        ]

        specs = [
            *endpoint_alarms(args.endpoint_name, args.variant_name),
            *runtime_alarms(args.runtime_arn, args.runtime_name),
            *(runtime_alarms(public.arn, public.name, "public-agent") if public is not None else []),
            *experience_alarms(namespace),
        ]
        self.alarms = [metric_alarm(name, spec, args.topic_arn, child) for spec in specs]

        public_arn = public.arn if public is not None else ""
        body = pulumi.Output.all(args.region, args.endpoint_name, args.runtime_arn, public_arn).apply(
            lambda values: json.dumps(
                dashboard_body(
                    region=values[0],
                    endpoint_name=values[1],
                    variant_name=args.variant_name,
                    runtime_arn=values[2],
                    runtime_name=args.runtime_name,
                    namespace=namespace,
                    other_runtimes=[(values[3], public.name)] if public is not None else [],
                )
            )
        )
        # A fixed name (the console link is an output); replacing it must free the name first.
        self.dashboard = aws.cloudwatch.Dashboard(
            f"{name}-dashboard",
            dashboard_name=args.dashboard_name,
            dashboard_body=body,
            opts=pulumi.ResourceOptions(parent=self, delete_before_replace=True),
        )
        self.register_outputs({"dashboard_name": self.dashboard.dashboard_name})
