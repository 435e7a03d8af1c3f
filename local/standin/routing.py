"""Which container a bidirectional-stream request goes to, or why it is refused (pure, no sockets).

The stand-in's configuration maps endpoint names to container base URLs; a request then picks
the WebSocket URL the way SageMaker does: `<container>/<ModelInvocationPath>?<ModelQueryString>`,
the path defaulting to the container route `/invocations-bidirectional-stream`. Header patterns
and limits are those of the service contract, so a request the stand-in accepts is one that
SageMaker would accept too.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Final
from urllib.parse import urlsplit

from local.standin.events import (
    EVENTSTREAM_CONTENT_TYPE,
    ErrorResponse,
    auth_error,
    not_found_error,
    validation_error,
)
from speech_protocol import WS_PATH

DEFAULT_VARIANT: Final = "AllTraffic"
ACCOUNT_ID: Final = "000000000000"
"""The account the stand-in pretends to be (it appears in error messages, like SageMaker's)."""

TARGET_VARIANT_HEADER: Final = "x-amzn-sagemaker-target-variant"
INVOCATION_PATH_HEADER: Final = "x-amzn-sagemaker-model-invocation-path"
QUERY_STRING_HEADER: Final = "x-amzn-sagemaker-model-query-string"
INVOKED_VARIANT_HEADER: Final = "x-amzn-invoked-production-variant"

_ROUTE = re.compile(r"^/endpoints/(?P<name>[^/]+)/invocations-bidirectional-stream$")
_ENDPOINT_NAME = re.compile(r"^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}$")
_VARIANT = re.compile(r"^[a-zA-Z0-9](-*[a-zA-Z0-9])*$")
_INVOCATION_PATH = re.compile(r"^[A-Za-z0-9\-._]+(?:/[A-Za-z0-9\-._]+)*$")
_QUERY_STRING = re.compile(
    r"^[a-zA-Z0-9][A-Za-z0-9_-]*=(?:[A-Za-z0-9._~\-]|%[0-9A-Fa-f]{2})+"
    r"(?:&[a-zA-Z0-9][A-Za-z0-9_-]*=(?:[A-Za-z0-9._~\-]|%[0-9A-Fa-f]{2})+)*$"
)
_MAX_VARIANT = 63
_MAX_INVOCATION_PATH = 100
_MAX_QUERY_STRING = 2048
_SIGV4_PARTS = ("Credential=", "SignedHeaders=", "Signature=")


@dataclass(frozen=True, slots=True)
class StandInConfig:
    """What the stand-in serves and how it treats containers; read once at start-up."""

    endpoints: Mapping[str, str]
    """Endpoint name -> container base URL (`ws://host:port`)."""
    variant_name: str = DEFAULT_VARIANT
    ping_interval_s: float = 60.0
    """How often the container is pinged (SageMaker: every 60 s)."""
    max_missed_pongs: int = 5
    """Consecutive unanswered pings after which the container connection is closed (SageMaker: 5)."""
    connect_timeout_s: float = 0.25
    """How long the container may take to accept the WebSocket (SageMaker: 250 ms)."""
    close_timeout_s: float = 2.0
    """How long a closing handshake with the container may take before the connection is dropped."""
    idle_timeout_s: float = 300.0
    """A client connection with no call open and no traffic for this long is closed (GOAWAY)."""

    def __post_init__(self) -> None:
        if not self.endpoints:
            raise ValueError("endpoints: at least one NAME=URL mapping is required")
        for name, url in self.endpoints.items():
            check_endpoint(name, url)
        if not _VARIANT.fullmatch(self.variant_name) or len(self.variant_name) > _MAX_VARIANT:
            raise ValueError(f"variant_name: {self.variant_name!r} is not a valid production variant name")
        if self.ping_interval_s <= 0:
            raise ValueError(f"ping_interval_s must be > 0, got {self.ping_interval_s}")
        if self.max_missed_pongs < 1:
            raise ValueError(f"max_missed_pongs must be >= 1, got {self.max_missed_pongs}")
        if self.connect_timeout_s <= 0:
            raise ValueError(f"connect_timeout_s must be > 0, got {self.connect_timeout_s}")
        if self.close_timeout_s <= 0:
            raise ValueError(f"close_timeout_s must be > 0, got {self.close_timeout_s}")
        if not self.idle_timeout_s > 0:
            raise ValueError(f"idle_timeout_s must be > 0, got {self.idle_timeout_s}")


def check_endpoint(name: str, url: str) -> None:
    """Raise ValueError unless `name` is a valid endpoint name and `url` a container base URL."""
    if not _ENDPOINT_NAME.fullmatch(name):
        raise ValueError(f"endpoint name {name!r} must match {_ENDPOINT_NAME.pattern} (SageMaker's rule)")
    parts = urlsplit(url)
    if parts.scheme not in ("ws", "wss") or not parts.hostname:
        raise ValueError(f"endpoint {name!r}: container URL {url!r} must be ws://host:port or wss://host:port")
    if parts.path not in ("", "/") or parts.query or parts.fragment:
        raise ValueError(
            f"endpoint {name!r}: container URL {url!r} must have no path or query; "
            f"the path comes from the request ({WS_PATH} by default)"
        )


def parse_endpoint_specs(specs: Iterable[str]) -> dict[str, str]:
    """`NAME=URL` strings (the `--endpoint` flag) to a mapping; raises ValueError naming the bad one."""
    endpoints: dict[str, str] = {}
    for spec in specs:
        name, sep, url = spec.partition("=")
        if not sep:
            raise ValueError(f"--endpoint {spec!r}: expected NAME=ws://host:port")
        if name in endpoints:
            raise ValueError(f"--endpoint {spec!r}: endpoint {name!r} is given twice")
        check_endpoint(name, url)
        endpoints[name] = url.rstrip("/")
    return endpoints


@dataclass(frozen=True, slots=True)
class BridgeTarget:
    """Where an accepted request is bridged to."""

    endpoint_name: str
    variant: str
    container_url: str
    """The full WebSocket URL: container base, invocation path, query string."""


def header_map(headers: Iterable[tuple[bytes, bytes]]) -> dict[str, str]:
    """ASGI headers by lower-case name (both stand-ins); a repeated header keeps its first value."""
    # HTTP/2 header names are lower-case on the wire; HTTP/1.1 ones need not be.
    result: dict[str, str] = {}
    for raw_name, raw_value in headers:
        result.setdefault(raw_name.decode("latin-1").lower(), raw_value.decode("latin-1"))
    return result


def resolve_request(
    method: str, path: str, raw_headers: Iterable[tuple[bytes, bytes]], config: StandInConfig
) -> BridgeTarget | ErrorResponse:
    """Accept the request (and say where it goes) or refuse it with the error SageMaker would send."""
    route = _ROUTE.fullmatch(path)
    if route is None or method != "POST":
        return not_found_error(f"{method} {path} is not an operation of the SageMaker runtime HTTP/2 API")
    headers = header_map(raw_headers)

    authorization = headers.get("authorization", "")
    if not authorization.startswith("AWS4-HMAC-SHA256 ") or not all(p in authorization for p in _SIGV4_PARTS):
        return auth_error("Missing Authentication Token: the request must be signed with AWS Signature Version 4")
    if "x-amz-date" not in headers:
        return auth_error("Authorization header requires existence of either a 'X-Amz-Date' or a 'Date' header")

    content_type = headers.get("content-type", "")
    if content_type.split(";", 1)[0].strip() != EVENTSTREAM_CONTENT_TYPE:
        return validation_error(f"Content-Type must be {EVENTSTREAM_CONTENT_TYPE}, got {content_type!r}")

    name = route.group("name")
    base_url = config.endpoints.get(name)
    if base_url is None:
        return validation_error(f"Endpoint {name} of account {ACCOUNT_ID} not found.")

    variant = headers.get(TARGET_VARIANT_HEADER)
    if variant is not None:
        if not _VARIANT.fullmatch(variant) or len(variant) > _MAX_VARIANT:
            return validation_error(
                f"TargetVariant {variant!r} must match {_VARIANT.pattern}, at most {_MAX_VARIANT} characters"
            )
        if variant != config.variant_name:
            return validation_error(f"Variant {variant} not found for Endpoint {name} of account {ACCOUNT_ID}.")

    invocation_path = headers.get(INVOCATION_PATH_HEADER)
    if invocation_path is None:
        ws_path = WS_PATH
    elif len(invocation_path) > _MAX_INVOCATION_PATH or not _INVOCATION_PATH.fullmatch(invocation_path):
        return validation_error(
            f"ModelInvocationPath {invocation_path!r} must match {_INVOCATION_PATH.pattern}, "
            f"at most {_MAX_INVOCATION_PATH} characters"
        )
    else:
        ws_path = "/" + invocation_path

    query = headers.get(QUERY_STRING_HEADER)
    if query is not None and (len(query) > _MAX_QUERY_STRING or not _QUERY_STRING.fullmatch(query)):
        return validation_error(
            f"ModelQueryString {query!r} is not a valid query string of at most {_MAX_QUERY_STRING} characters"
        )

    container_url = base_url.rstrip("/") + ws_path + (f"?{query}" if query else "")
    return BridgeTarget(endpoint_name=name, variant=config.variant_name, container_url=container_url)
