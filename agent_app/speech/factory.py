"""Builds the configured speech transport (call it per invocation; transports hold no connection)."""

from __future__ import annotations

from agent_app.config import AgentConfig
from agent_app.speech.transport import SpeechTransport
from agent_app.speech.websocket import WebSocketTransport


def build_transport(config: AgentConfig) -> SpeechTransport:
    if config.speech_transport == "websocket":
        if config.speech_ws_url is None:
            raise ValueError("SPEECH_WS_URL is required for the websocket transport")  # load_config guarantees it
        return WebSocketTransport(config.speech_ws_url)
    if config.speech_endpoint_name is None or config.aws_region is None:
        raise ValueError("SPEECH_ENDPOINT_NAME and AWS_REGION are required for the sagemaker transport")
    # Imported here: the SageMaker client (awscrt, smithy) is only loaded when it is the one in use.
    from agent_app.speech.sagemaker import SageMakerTransport

    return SageMakerTransport(
        config.speech_endpoint_name,
        region=config.aws_region,
        endpoint_url=config.sagemaker_endpoint_url,
        ca_file=config.sagemaker_ca_file,
    )
