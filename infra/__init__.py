"""voicestack's Pulumi program: one stack, one graph (see infra/README.md and Pulumi.yaml)."""
