"""Local-only tooling: the SageMaker stand-in, the local stack launcher and the browser page.

Nothing here is deployed. `local.sagemaker_standin` lets the agent's production SageMaker
client run offline against the real speech container; `local.stack` starts the whole stack.
"""
