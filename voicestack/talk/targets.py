"""Where `voicestack talk` speaks: an agent at a URL (the local stack), or an AgentCore runtime.

- `LocalAgent(url)`: the agent's own contract, no AWS in between: `WS {url}/ws` and
  `POST {url}/invocations`, the session id in AgentCore's session header, nothing signed.
- `Runtime(arn, sdk, qualifier)`: AgentCore Runtime's data plane at the endpoint boto3 resolves
  (`voicestack.agentcore.resolve_sdk`): the WebSocket route with SigV4-signed upgrade headers
  (signed again for each connection), trusting the CA bundle boto3 trusts; InvokeAgentRuntime
  through boto3's own client, read as it arrives (`read1`: the body's `iter_chunks` waits for
  1,024 bytes). boto3 is synchronous: each invocation runs in its own thread, which hands chunks
  to the event loop and stops reading (and closes the response) at its next chunk after a hang-up.

Both turn every refusal into the `CommandError` of `voicestack.talk.errors`.
"""

from __future__ import annotations

import asyncio
import json
import ssl
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

import httpx

from voicestack.agentcore import (
    DEFAULT_QUALIFIER,
    SESSION_HEADER,
    SdkContext,
    parse_runtime_arn,
    sign_websocket_headers,
    websocket_url,
)
from voicestack.errors import CommandError, ExitCode
from voicestack.runtime_target import RuntimeTarget
from voicestack.talk.conversation import (
    Conflict,
    Conversation,
    Handshake,
    Invocation,
    SseConversation,
    TurnFailed,
    WebSocketConversation,
)
from voicestack.talk.errors import (
    RETRIED_CODE,
    RuntimeRef,
    agent_refused,
    agent_unreachable,
    no_credentials,
    refused,
    unreachable,
)
from voicestack.talk.turn import CONNECTION_CLOSED, Transport

READ_CHUNK_BYTES: Final = 64 * 1024
LOCAL_READ_TIMEOUT_S: Final = 300.0
"""Silence tolerated mid-answer from a local agent (it may think for a while before it speaks)."""


def _error_body(body: bytes) -> tuple[str | None, str]:
    """(code, message) of a JSON error body: AWS's `message`/`Message`, or the agent's error event."""
    try:
        parsed = json.loads(body or b"{}")
    except ValueError:
        return None, body[:300].decode("utf-8", "replace")
    if not isinstance(parsed, dict):
        return None, str(parsed)[:300]
    message = parsed.get("message", parsed.get("Message", ""))
    code = parsed.get("code")
    return (str(code) if code is not None else None), str(message)


# --- an agent at a URL -------------------------------------------------------------------------


@dataclass
class LocalAgent:
    url: str
    description: str = field(init=False)
    _http: httpx.AsyncClient | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        self.url = self.url.rstrip("/")
        self.description = self.url

    # WebSocket route
    def handshake(self, session_id: str) -> Handshake:
        secure = self.url.startswith("https://")
        return Handshake(
            url=("wss:" if secure else "ws:") + self.url.split(":", 1)[1] + "/ws",
            headers={SESSION_HEADER: session_id},
            ssl=ssl.create_default_context() if secure else None,
        )

    def refusal(self, status: int, headers: Mapping[str, str], body: bytes) -> tuple[str, CommandError]:
        code, message = _error_body(body)
        return code or f"HTTP {status}", agent_refused(self.url, status, code or "refused", message)

    def unreachable(self, exc: BaseException) -> CommandError:
        return agent_unreachable(self.url, str(exc) or type(exc).__name__)

    # POST /invocations
    async def invoke(self, payload: Mapping[str, Any], session_id: str) -> Invocation:
        if self._http is None:
            self._http = httpx.AsyncClient(timeout=httpx.Timeout(10.0, read=LOCAL_READ_TIMEOUT_S))
        request = self._http.build_request(
            "POST", f"{self.url}/invocations", json=dict(payload), headers={SESSION_HEADER: session_id}
        )
        try:
            response = await self._http.send(request, stream=True)
        except httpx.TransportError as exc:
            raise self.unreachable(exc) from None
        if response.status_code != httpx.codes.OK:
            body = await response.aread()
            await response.aclose()
            code, message = _error_body(body)
            raise agent_refused(self.url, response.status_code, code or "refused", message)
        chunks = response.aiter_raw()

        async def read() -> bytes:
            try:
                return await anext(chunks, b"")
            except httpx.TransportError as exc:
                raise TurnFailed(CONNECTION_CLOSED, f"the answer's stream broke: {exc}") from None

        return Invocation(read=read, hang_up=response.aclose)

    async def aclose(self) -> None:
        if self._http is not None:
            await self._http.aclose()


# --- an AgentCore runtime ----------------------------------------------------------------------


def credential_error(exc: BaseException, profile: str | None) -> CommandError | None:
    """The error to show when botocore could not produce credentials (None: not such a problem)."""
    from botocore import exceptions  # type: ignore[import-untyped]

    if isinstance(exc, exceptions.NoCredentialsError):
        return no_credentials(profile)
    sso = (exceptions.SSOTokenLoadError, exceptions.UnauthorizedSSOTokenError, exceptions.TokenRetrievalError)
    if isinstance(exc, sso):
        login = f"aws sso login --profile {profile}" if profile else "aws sso login"
        return CommandError(
            ExitCode.UNREACHABLE,
            f"your AWS SSO session has expired or was never started ({type(exc).__name__}: {exc}). Fix: run `{login}`",
        )
    return None


@dataclass
class Runtime:
    arn: str
    sdk: SdkContext
    qualifier: str
    profile: str | None = None
    description: str = field(init=False)
    ref: RuntimeRef = field(init=False)
    _ssl: ssl.SSLContext | None = field(default=None, init=False, repr=False)
    _client: Any = field(default=None, init=False, repr=False)

    @classmethod
    def for_target(cls, target: RuntimeTarget) -> Runtime:
        """The runtime `voicestack.runtime_target.resolve_runtime` resolved (its qualifier or DEFAULT)."""
        return cls(target.runtime_arn, target.sdk, target.qualifier or DEFAULT_QUALIFIER, profile=target.profile)

    def __post_init__(self) -> None:
        parsed = parse_runtime_arn(self.arn)
        self.description = self.arn
        self.ref = RuntimeRef(
            arn=self.arn,
            runtime_id=parsed.runtime_id,
            region=self.sdk.region,
            qualifier=self.qualifier,
            endpoint=self.sdk.endpoint_url,
            profile=self.profile,
        )

    def _credentials(self) -> Any:
        from botocore.exceptions import BotoCoreError  # type: ignore[import-untyped]

        try:
            return self.sdk.credentials()
        except BotoCoreError as exc:
            error = credential_error(exc, self.profile)
            if error is None:
                raise
            raise error from None

    # WebSocket route
    def handshake(self, session_id: str) -> Handshake:
        url = websocket_url(self.sdk.endpoint_url, self.arn, self.qualifier)
        headers = sign_websocket_headers(url, self._credentials(), self.sdk.region, session_id=session_id)
        if self._ssl is None and url.startswith("wss://"):
            self._ssl = self.sdk.ssl_context()
        return Handshake(url=url, headers=headers, ssl=self._ssl)

    def refusal(self, status: int, headers: Mapping[str, str], body: bytes) -> tuple[str, CommandError]:
        code = headers.get("x-amzn-errortype", "").split(":", 1)[0] or f"HTTP{status}"
        _, message = _error_body(body)
        return code, refused(code, message, status, self.ref, "websocket")

    def unreachable(self, exc: BaseException) -> CommandError:
        return unreachable(self.sdk.endpoint_url, str(exc) or type(exc).__name__, certificate=_is_certificate(exc))

    # InvokeAgentRuntime
    async def invoke(self, payload: Mapping[str, Any], session_id: str) -> Invocation:
        if self._client is None:
            self._client = await asyncio.to_thread(self.sdk.client)
        loop = asyncio.get_running_loop()
        started: asyncio.Future[None] = loop.create_future()
        chunks: asyncio.Queue[bytes | TurnFailed] = asyncio.Queue()
        hung_up = threading.Event()
        body = json.dumps(dict(payload), ensure_ascii=False).encode()

        def settle(outcome: BaseException | None) -> None:
            if started.done():  # the caller gave up (Ctrl-C) while the call was starting
                return
            if outcome is None:
                started.set_result(None)
            else:
                started.set_exception(outcome)

        def work() -> None:
            from botocore.exceptions import BotoCoreError, ClientError

            try:
                response = self._client.invoke_agent_runtime(
                    agentRuntimeArn=self.arn,
                    qualifier=self.qualifier,
                    runtimeSessionId=session_id,
                    contentType="application/json",
                    accept="text/event-stream",
                    payload=body,
                )
            except ClientError as exc:
                loop.call_soon_threadsafe(settle, self._refusal(exc))
                return
            except BotoCoreError as exc:
                loop.call_soon_threadsafe(settle, self._botocore_error(exc))
                return
            loop.call_soon_threadsafe(settle, None)
            self._pump(response["response"], chunks, loop, hung_up)

        threading.Thread(target=work, name="invoke-agent-runtime", daemon=True).start()
        await started

        async def read() -> bytes:
            item = await chunks.get()
            if isinstance(item, TurnFailed):
                raise item
            return item

        async def hang_up() -> None:
            hung_up.set()

        return Invocation(read=read, hang_up=hang_up)

    @staticmethod
    def _pump(
        body: Any, chunks: asyncio.Queue[bytes | TurnFailed], loop: asyncio.AbstractEventLoop, hung_up: threading.Event
    ) -> None:
        """In the worker thread: read the response as it arrives until its end or a hang-up."""
        from botocore.exceptions import BotoCoreError
        from urllib3.exceptions import HTTPError

        # The streaming body hands out urllib3's response as its context manager, and closes it at exit.
        with body as raw:
            while not hung_up.is_set():
                try:
                    chunk = raw.read1(READ_CHUNK_BYTES)
                except (HTTPError, BotoCoreError, OSError) as exc:
                    loop.call_soon_threadsafe(
                        chunks.put_nowait, TurnFailed(CONNECTION_CLOSED, f"the answer's stream broke: {exc}")
                    )
                    return
                loop.call_soon_threadsafe(chunks.put_nowait, chunk)
                if not chunk:
                    return

    def _refusal(self, exc: Any) -> BaseException:
        error = exc.response.get("Error", {})
        code = str(error.get("Code", "Unknown"))
        status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
        failure = refused(code, str(error.get("Message", "")), status, self.ref, "sse")
        return Conflict(failure) if code == RETRIED_CODE else failure

    def _botocore_error(self, exc: Any) -> CommandError:
        from botocore import exceptions

        credentials = credential_error(exc, self.profile)
        if credentials is not None:
            return credentials
        return unreachable(self.sdk.endpoint_url, str(exc), certificate=isinstance(exc, exceptions.SSLError))

    async def aclose(self) -> None:
        if self._client is not None:
            self._client.close()


def _is_certificate(exc: BaseException) -> bool:
    return isinstance(exc, ssl.SSLCertVerificationError) or isinstance(exc.__cause__, ssl.SSLCertVerificationError)


Target = LocalAgent | Runtime


def open_conversation(
    target: Target,
    transport: Transport,
    session_id: str,
    *,
    on_reconnect: Callable[[int | None, str], None] | None = None,
) -> Conversation:
    """A conversation with `target` over `transport` (nothing is opened until the first question);
    `on_reconnect` hears of a WebSocket that had closed (its code and reason) when it is opened again."""
    if transport == "websocket":
        return WebSocketConversation(target, session_id, on_reconnect=on_reconnect)
    return SseConversation(target, session_id)
