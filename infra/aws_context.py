"""The partition, region and account the stack deploys into, looked up once from the AWS provider."""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_aws as aws

from infra.iam import AwsScope


@dataclass(frozen=True)
class AwsContext:
    """Provider facts as outputs; `scope` combines them for the pure IAM builders."""

    partition: pulumi.Output[str]
    region: pulumi.Output[str]
    account_id: pulumi.Output[str]

    @classmethod
    def lookup(cls, provider: aws.Provider) -> AwsContext:
        """Asks the provider (three invokes; no resource is created)."""
        opts = pulumi.InvokeOutputOptions(provider=provider)
        return cls(
            partition=aws.get_partition_output(opts=opts).partition,
            region=aws.get_region_output(opts=opts).region,
            account_id=aws.get_caller_identity_output(opts=opts).account_id,
        )

    def scope(self) -> pulumi.Output[AwsScope]:
        return pulumi.Output.all(self.partition, self.region, self.account_id).apply(
            lambda values: AwsScope(partition=values[0], region=values[1], account_id=values[2])
        )
