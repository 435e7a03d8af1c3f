"""`python -m agent_app`: the agent's AgentCore Runtime server (port 8080 unless told otherwise)."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from typing import Any, Final

from agent_app.app import create_app
from agent_app.config import ConfigError, load_config
from agent_app.models import DEMO_MODEL_NAME
from agent_app.ws_route import WS_MAX_MESSAGE_BYTES

logger = logging.getLogger("agent_app")

UVICORN_OPTIONS: Final[dict[str, Any]] = {"ws_max_size": WS_MAX_MESSAGE_BYTES}
"""What the process sets on uvicorn beyond the SDK's defaults (the fuzz tests serve the app so too)."""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m agent_app", description=__doc__)
    parser.add_argument("--port", type=int, default=8080, help="port to serve on (AgentCore requires 8080)")
    parser.add_argument(
        "--host",
        default=None,
        help="address to bind; default 0.0.0.0 inside a container (DOCKER_CONTAINER=1), else 127.0.0.1",
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        config = load_config(os.environ)
    except ConfigError as exc:
        print(f"agent_app: configuration error: {exc}", file=sys.stderr)
        return 2
    if config.demo:
        logger.warning(
            "BEDROCK_MODEL_ID is not set: answering with the offline %r model (a canned answer at 40 tokens/s)",
            DEMO_MODEL_NAME,
        )
    logger.info(
        "speech: %s transport, %s mode by default; deadline %.0f s",
        config.speech_transport,
        config.speech_mode,
        config.agent_deadline_s,
    )
    if config.agentcore_memory_id is not None:
        store = f"AgentCore Memory {config.agentcore_memory_id}"
    else:
        store = f"files under {config.session_dir}"
    logger.info("conversations: %s; the model sees the last %d messages", store, config.history_messages)
    create_app(config).run(port=args.port, host=args.host, **UVICORN_OPTIONS)
    return 0


if __name__ == "__main__":
    sys.exit(main())
