"""A local stand-in for SageMaker's bidirectional streaming runtime API, in front of real containers.

It serves `POST /endpoints/{EndpointName}/invocations-bidirectional-stream` over HTTPS with
HTTP/2 (TLS with ALPN h2, `local.standin.http2`), speaks AWS event stream with the client, and bridges each
call to the container's WebSocket (`/invocations-bidirectional-stream`), so the agent's
production client (`aws-sdk-sagemaker-runtime-http2` over the CRT) runs unchanged on a laptop.
Wire details: `local.standin.events`; routing and header rules: `local.standin.routing`;
frame-by-frame bridging, errors and keepalive: `local.standin.bridge`.

Command line (the local stack starts it as a process):

    python -m local.sagemaker_standin --port 8443 --endpoint voicestack-speech=ws://127.0.0.1:8080 \\
        [--endpoint NAME=ws://host:port ...] [--host 127.0.0.1] [--cert-dir DIR] \\
        [--ping-interval 60] [--max-missed-pongs 5] [--connect-timeout 0.25] [--close-timeout 2] \\
        [--idle-timeout 300]

It writes a throwaway CA to `DIR/ca.pem` (a temporary directory, removed at exit, when
`--cert-dir` is not given), then prints one JSON line on stdout once it accepts connections:

    {"event": "ready", "url": "https://127.0.0.1:8443", "ca_file": "DIR/ca.pem", "endpoints": ["voicestack-speech"]}

Point the agent at it with `AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME_HTTP2=<url>` and
`SAGEMAKER_CA_FILE=<ca_file>` (any credentials will do: signatures are required, not verified).
`--port 0` picks a free port (read it from the ready line). SIGINT/SIGTERM stop it.

In tests: `async with run_standin({"name": "ws://127.0.0.1:PORT"}) as info:` gives `info.url`
and `info.ca_path`.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
import uuid
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, fields
from pathlib import Path

from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import InvalidHandshake, InvalidStatus, InvalidURI

from local.standin.bridge import Bridge
from local.standin.events import EVENTSTREAM_CONTENT_TYPE, ErrorResponse, model_error
from local.standin.http2 import Message, Receive, Send, serve_http2, server_ssl_context
from local.standin.routing import (
    INVOKED_VARIANT_HEADER,
    BridgeTarget,
    StandInConfig,
    parse_endpoint_specs,
    resolve_request,
)
from local.standin.serving import serve_until_signalled, tls_listener

logger = logging.getLogger(__name__)


class StandInApp:
    """The ASGI application: one bridged WebSocket per bidirectional-stream call."""

    def __init__(self, config: StandInConfig) -> None:
        self._config = config

    async def __call__(self, scope: Message, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            await self._handle(scope, receive, send)

    async def _handle(self, scope: Message, receive: Receive, send: Send) -> None:
        request_id = str(uuid.uuid4())
        target = resolve_request(scope["method"], scope["path"], scope["headers"], self._config)
        if isinstance(target, ErrorResponse):
            logger.warning(
                "request %s: %s %s refused: %s", request_id, target.status, target.error_type, target.message
            )
            await _send_error(send, target, request_id)
            return

        try:
            websocket = await self._open_container(target)
        except _ContainerUnavailable as exc:
            logger.warning("request %s: endpoint %s: %s", request_id, target.endpoint_name, exc.error.message)
            await _send_error(send, exc.error, request_id)
            return

        logger.info("request %s: endpoint %s bridged to %s", request_id, target.endpoint_name, target.container_url)
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [
                    (b"content-type", EVENTSTREAM_CONTENT_TYPE.encode()),
                    (INVOKED_VARIANT_HEADER.encode(), target.variant.encode()),
                    (b"x-amzn-requestid", request_id.encode()),
                ],
            }
        )
        try:
            await Bridge(websocket, receive, send, self._config, request_id).run()
        finally:
            await websocket.close()

    async def _open_container(self, target: BridgeTarget) -> ClientConnection:
        try:
            return await connect(
                target.container_url,
                open_timeout=self._config.connect_timeout_s,
                close_timeout=self._config.close_timeout_s,
                ping_interval=None,  # the bridge pings on SageMaker's schedule
                max_size=None,  # oversized frames are split into PARTIAL parts instead
                compression=None,
            )
        except InvalidStatus as exc:
            status = exc.response.status_code
            raise _ContainerUnavailable(
                model_error(
                    f"Received client error ({status}) from primary with message "
                    f'"the container refused the WebSocket at {target.container_url}".',
                    original_status_code=status,
                    original_message=exc.response.body.decode("utf-8", "replace") if exc.response.body else "",
                )
            ) from exc
        except TimeoutError as exc:
            raise _ContainerUnavailable(
                model_error(
                    f"The model container did not accept the WebSocket at {target.container_url} "
                    f"within {self._config.connect_timeout_s} s."
                )
            ) from exc
        except (OSError, InvalidHandshake, InvalidURI) as exc:
            raise _ContainerUnavailable(
                model_error(f"Could not connect to the model container at {target.container_url}: {exc}")
            ) from exc


class _ContainerUnavailable(Exception):
    def __init__(self, error: ErrorResponse) -> None:
        super().__init__(error.message)
        self.error = error


async def _send_error(send: Send, error: ErrorResponse, request_id: str) -> None:
    await send({"type": "http.response.start", "status": error.status, "headers": error.headers(request_id)})
    await send({"type": "http.response.body", "body": error.encode_body(), "more_body": False})


@dataclass(frozen=True, slots=True)
class StandInInfo:
    """Where a running stand-in listens and which CA its certificate chains to."""

    url: str
    port: int
    ca_path: Path
    endpoints: tuple[str, ...]


@asynccontextmanager
async def run_standin(
    endpoints: Mapping[str, str] | StandInConfig,
    *,
    port: int = 0,
    host: str = "127.0.0.1",
    cert_dir: Path | None = None,
) -> AsyncIterator[StandInInfo]:
    """Serve the stand-in on `host:port` (0 = a free port) until the context exits.

    `endpoints` maps endpoint names to container base URLs, or is a full StandInConfig.
    A new CA and server certificate are written to `cert_dir` (a temporary directory when None).
    """
    config = endpoints if isinstance(endpoints, StandInConfig) else StandInConfig(endpoints=dict(endpoints))
    with tls_listener(host, port, cert_dir, prefix="sagemaker-standin-") as listening:
        files = listening.files
        tls = server_ssl_context(str(files.cert_path), str(files.key_path))
        async with serve_http2(StandInApp(config), listening.socket, tls, idle_timeout_s=config.idle_timeout_s):
            yield StandInInfo(
                url=listening.url, port=listening.port, ca_path=files.ca_path, endpoints=tuple(config.endpoints)
            )


# --- command line ------------------------------------------------------------------------------


def _parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m local.sagemaker_standin",
        description="Local stand-in for SageMaker's bidirectional streaming API (HTTPS, HTTP/2).",
    )
    parser.add_argument("--port", type=int, default=8443, help="port to listen on; 0 picks a free one (default 8443)")
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    parser.add_argument(
        "--endpoint",
        action="append",
        required=True,
        metavar="NAME=URL",
        help="endpoint name and container base URL, e.g. voicestack-speech=ws://127.0.0.1:8080 (repeatable)",
    )
    parser.add_argument("--cert-dir", type=Path, default=None, help="where to write ca.pem, server.pem, server-key.pem")
    defaults = {f.name: f.default for f in fields(StandInConfig)}
    parser.add_argument(
        "--ping-interval", type=float, default=defaults["ping_interval_s"], help="seconds between container pings"
    )
    parser.add_argument(
        "--max-missed-pongs", type=int, default=defaults["max_missed_pongs"], help="unanswered pings before closing"
    )
    parser.add_argument(
        "--connect-timeout", type=float, default=defaults["connect_timeout_s"], help="seconds to open the WebSocket"
    )
    parser.add_argument(
        "--close-timeout", type=float, default=defaults["close_timeout_s"], help="seconds for a closing handshake"
    )
    parser.add_argument(
        "--idle-timeout",
        type=float,
        default=defaults["idle_timeout_s"],
        help="seconds a client connection may stay open with no call and no traffic",
    )
    parser.add_argument("--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR"])
    return parser.parse_args(argv)


def _ready(info: StandInInfo) -> dict[str, object]:
    logger.info(
        "serving %s; clients need AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME_HTTP2=%s SAGEMAKER_CA_FILE=%s",
        ", ".join(info.endpoints),
        info.url,
        info.ca_path,
    )
    return {"url": info.url, "ca_file": str(info.ca_path), "endpoints": list(info.endpoints)}


def main(argv: Sequence[str] | None = None) -> int:
    args = _parse_args(argv)
    logging.basicConfig(
        level=args.log_level, stream=sys.stderr, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    try:
        config = StandInConfig(
            endpoints=parse_endpoint_specs(args.endpoint),
            ping_interval_s=args.ping_interval,
            max_missed_pongs=args.max_missed_pongs,
            connect_timeout_s=args.connect_timeout,
            close_timeout_s=args.close_timeout,
            idle_timeout_s=args.idle_timeout,
        )
    except ValueError as exc:
        print(f"sagemaker_standin: {exc}", file=sys.stderr)
        return 2
    asyncio.run(
        serve_until_signalled(run_standin(config, port=args.port, host=args.host, cert_dir=args.cert_dir), _ready)
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
