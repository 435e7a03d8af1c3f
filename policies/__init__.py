"""voicestack guardrails: a Pulumi CrossGuard policy pack (rules per area; the pack is built in `__main__`)."""
