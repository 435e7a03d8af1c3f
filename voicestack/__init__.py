"""`voicestack`: the command line a deployer runs against a stack (local or on AWS)."""
