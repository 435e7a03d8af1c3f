"""Speech sessions over SageMaker's bidirectional streaming API (InvokeEndpointWithBidirectionalStream).

The client is the real `aws-sdk-sagemaker-runtime-http2` 0.12 (async client, config built with
`resolve`, CRT HTTP/2 transport). One session = one HTTP/2 stream = one WebSocket inside the
container; every WebSocket frame travels as one PayloadPart:

- client messages go out as JSON with data type UTF8 (SageMaker turns them into text frames);
- responses are told apart by data type alone: UTF8 = a control event, BINARY = PCM16 audio;
  parts marked PARTIAL are joined with the parts that follow until one is COMPLETE;
- leaving the session sends an explicit `close` message (unless one was sent or the session
  already ended), then ends the input stream.

One transport serves the whole process: its SDK client (configuration, CRT transport and its
pooled HTTP/2 connection) is built at the first session on an event loop and reused by every
later session on that loop, each session being one more stream on the connection.

A stream is accepted only once the service has had something to forward, so the open timeout
counts from the session's first send, not from the call: the agent may think for a while before
its first sentence is ready.

Credentials come from botocore's default chain (one botocore session per transport) and are
read again for every signature (the request's and each event's), so rotating role credentials
keep working in a long session.
`endpoint_url` replaces SageMaker's URL and `ca_file` makes the client trust (only) that CA; the agent
reads them from `AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME_HTTP2` and `SAGEMAKER_CA_FILE`, for the local
stand-in (`local.sagemaker_standin`).
"""

from __future__ import annotations

import asyncio
import logging
import weakref
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any, Final, NoReturn

import botocore.session  # type: ignore[import-untyped]
from aws_sdk_sagemaker_runtime_http2.client import AsyncSageMakerRuntimeHTTP2Client  # type: ignore[import-untyped]
from aws_sdk_sagemaker_runtime_http2.config import AsyncSageMakerRuntimeHTTP2Config  # type: ignore[import-untyped]
from aws_sdk_sagemaker_runtime_http2.models import (  # type: ignore[import-untyped]
    InternalStreamFailure,
    InvokeEndpointWithBidirectionalStreamInput,
    ModelStreamError,
    RequestPayloadPart,
    RequestStreamEventPayloadPart,
    ResponseStreamEventPayloadPart,
)
from awscrt.aio.http import AIOHttp2ClientConnection  # type: ignore[import-untyped]
from awscrt.exceptions import AwsCrtError  # type: ignore[import-untyped]
from awscrt.http import Http2Setting, Http2SettingID  # type: ignore[import-untyped]
from awscrt.io import ClientTlsContext, TlsContextOptions  # type: ignore[import-untyped]
from botocore.credentials import Credentials, RefreshableCredentials  # type: ignore[import-untyped]
from smithy_aws_core.identity import AWSCredentialsIdentity, AWSIdentityProperties
from smithy_aws_event_stream.exceptions import EventError, UnmodeledEventError
from smithy_core.aio.types import AsyncBytesProvider
from smithy_core.exceptions import SmithyError
from smithy_core.interfaces import URI
from smithy_http.aio.crt import AWSCRTHTTPClient, AWSCRTHTTPClientConfig

from agent_app.speech.transport import SpeechConnection, SpeechErrorCode, SpeechFrame, SpeechTransportError
from speech_protocol import ClientMessage, Close, encode_client_message, parse_server_event

logger = logging.getLogger(__name__)

STREAM_WINDOW_BYTES: Final = 2 * 2**20
"""HTTP/2 receive window per session: about 20 s of 24 kHz PCM16 may be in flight."""
_HTTPS_PORT: Final = 443

_TRANSPORT_ERRORS = (SmithyError, AwsCrtError, OSError)
"""What the SDK and the CRT raise for a failed call or stream (SDK errors all derive from SmithyError)."""


class BotocoreCredentialsResolver:
    """An SDK identity resolver over botocore credentials, read afresh for every signature.

    botocore's refreshable credentials (assumed roles, container and instance roles) renew
    themselves when read close to expiry; a refresh may block on the network, so it runs in a
    thread, while a read that needs no refresh stays on the event loop.
    """

    def __init__(self, credentials: Credentials) -> None:
        self._credentials = credentials

    async def get_identity(self, *, properties: AWSIdentityProperties) -> AWSCredentialsIdentity:
        if isinstance(self._credentials, RefreshableCredentials) and self._credentials.refresh_needed():
            frozen = await asyncio.to_thread(self._credentials.get_frozen_credentials)
        else:
            frozen = self._credentials.get_frozen_credentials()
        return AWSCredentialsIdentity(
            access_key_id=frozen.access_key,
            secret_access_key=frozen.secret_key,
            session_token=frozen.token,
        )

    async def invalidate(self) -> None:
        """Nothing is cached here: botocore decides when to refresh."""


class CrtHttp2Client(AWSCRTHTTPClient):
    """The CRT transport, HTTP/2 only, optionally trusting only the CA certificates in `ca_file`.

    HTTP/2 is forced: over HTTP/1.1 the client buffers the whole input, so there is no duplex
    and the session would stall instead of failing. The SDK deep-copies its configuration, and
    the base class's `__deepcopy__` returns a plain `AWSCRTHTTPClient`, which would drop the CA.
    """

    def __init__(self, ca_file: Path | None = None, *, eventloop: Any = None) -> None:
        super().__init__(eventloop=eventloop, client_config=AWSCRTHTTPClientConfig(force_http_2=True))
        self._ca_file = ca_file
        if ca_file is not None:
            options = TlsContextOptions()
            options.override_default_trust_store_from_path(None, str(ca_file))
            # The base class keeps its TLS context in this attribute and offers no other way
            # to configure trust (smithy-http 0.6).
            self._tls_ctx = ClientTlsContext(options)

    @property
    def ca_file(self) -> Path | None:
        return self._ca_file

    def __deepcopy__(self, memo: dict[int, Any]) -> CrtHttp2Client:
        return CrtHttp2Client(self._ca_file, eventloop=self._eventloop)

    async def _build_new_connection(self, url: URI) -> Any:
        # The CRT's default stream window is 64 KiB, refilled once half of it has been read, and
        # a burst of audio then crawls (measured through the stand-in: 5.7 MB of PCM in 3.6 s,
        # 0.24 s with a 1 MiB window). The base class offers no way to set it (smithy-http 0.6).
        if url.scheme != "https":
            return await super()._build_new_connection(url)  # fails validation: no HTTP/2 without TLS
        tls = self._tls_ctx.new_connection_options()
        tls.set_server_name(url.host)
        tls.set_alpn_list(["h2"])
        return await AIOHttp2ClientConnection.new(
            host_name=url.host,
            port=url.port or _HTTPS_PORT,
            bootstrap=self._client_bootstrap,
            socket_options=self._socket_options,
            tls_connection_options=tls,
            initial_settings=[Http2Setting(Http2SettingID.INITIAL_WINDOW_SIZE, STREAM_WINDOW_BYTES)],
        )

    async def _await_response(self, stream: Any) -> Any:
        # awscrt 0.32 feeds the request body from a task nobody awaits. Once the response has
        # ended, the CRT completes the stream and that task's last write fails; without this its
        # exception would be logged as "never retrieved" at the end of every session.
        writer = getattr(stream, "_writer", None)
        if isinstance(writer, asyncio.Task):
            writer.add_done_callback(_note_request_body_end)
        return await super()._await_response(stream)


def _note_request_body_end(task: asyncio.Task[Any]) -> None:
    if not task.cancelled() and (exc := task.exception()) is not None:
        logger.debug("request body ended after the response: %s", exc)


class SageMakerTransport:
    """Opens speech sessions on one SageMaker endpoint; one SDK client per event loop, reused."""

    def __init__(
        self,
        endpoint_name: str,
        *,
        region: str,
        endpoint_url: str | None = None,
        ca_file: Path | None = None,
        target_variant: str | None = None,
        credentials: Credentials | None = None,
        open_timeout_s: float = 10.0,
    ) -> None:
        """`credentials` None = botocore's default chain, resolved at the first session."""
        if not endpoint_name:
            raise ValueError("endpoint_name must be a non-empty SageMaker endpoint name")
        if not region:
            raise ValueError("region must be set (e.g. us-east-1)")
        if ca_file is not None and not ca_file.is_file():
            raise ValueError(f"CA file {ca_file} does not exist")
        if open_timeout_s <= 0:
            raise ValueError(f"open_timeout_s must be > 0, got {open_timeout_s}")
        self.endpoint_name = endpoint_name
        self.region = region
        self.endpoint_url = endpoint_url
        self.ca_file = ca_file
        self.target_variant = target_variant
        self.open_timeout_s = open_timeout_s
        self._credentials = credentials
        # The CRT client and its connection belong to the loop they were made on (the AgentCore
        # SDK runs every invocation on one worker loop; tests run one loop each).
        self._clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Any] = weakref.WeakKeyDictionary()
        self.clients_built = 0

    def connect(self) -> AbstractAsyncContextManager[SpeechConnection]:
        return self._session()

    async def aclose(self) -> None:
        """Close the SDK client of the running loop (and its connection); the next session builds another."""
        client = self._clients.pop(asyncio.get_running_loop(), None)
        if client is not None:
            await client.close()

    async def _client(self, resolver: BotocoreCredentialsResolver) -> Any:
        loop = asyncio.get_running_loop()
        if (client := self._clients.get(loop)) is not None:
            return client
        overrides: dict[str, Any] = {
            "region": self.region,
            "transport": CrtHttp2Client(self.ca_file),
            "aws_credentials_identity_resolver": resolver,
        }
        if self.endpoint_url is not None:
            overrides["endpoint_uri"] = self.endpoint_url
        try:
            config = await AsyncSageMakerRuntimeHTTP2Config.resolve(**overrides)
        except _TRANSPORT_ERRORS as exc:  # a bad AWS_PROFILE or ~/.aws/config, read at resolve time
            raise SpeechTransportError(SpeechErrorCode.UNAVAILABLE, f"SDK configuration: {_describe(exc)}") from exc
        if (client := self._clients.get(loop)) is not None:
            return client  # another session built one meanwhile
        client = self._clients[loop] = AsyncSageMakerRuntimeHTTP2Client(config=config)
        self.clients_built += 1
        return client

    @asynccontextmanager
    async def _session(self) -> AsyncIterator[SpeechConnection]:
        resolver = BotocoreCredentialsResolver(await self._resolve_credentials())
        # Checked before the call: when the SDK fails to sign, it never hands back the stream
        # and the call hangs (smithy-core 0.9), so a missing identity must fail here.
        try:
            await resolver.get_identity(properties={})
        except _TRANSPORT_ERRORS as exc:
            raise SpeechTransportError(SpeechErrorCode.UNAVAILABLE, f"AWS credentials unusable: {exc}") from exc

        client = await self._client(resolver)
        request = InvokeEndpointWithBidirectionalStreamInput(
            endpoint_name=self.endpoint_name, target_variant=self.target_variant
        )
        try:
            async with asyncio.timeout(self.open_timeout_s):
                stream = await client.invoke_endpoint_with_bidirectional_stream(request)
        except TimeoutError as exc:
            raise SpeechTransportError(
                SpeechErrorCode.UNAVAILABLE,
                f"endpoint {self.endpoint_name}: no stream within {self.open_timeout_s} s",
            ) from exc
        except _TRANSPORT_ERRORS as exc:
            raise SpeechTransportError(
                SpeechErrorCode.UNAVAILABLE, f"endpoint {self.endpoint_name}: {_describe(exc)}"
            ) from exc
        connection = SageMakerConnection(stream, endpoint_name=self.endpoint_name, open_timeout_s=self.open_timeout_s)
        try:
            yield connection
        finally:
            await connection.aclose()

    async def _resolve_credentials(self) -> Credentials:
        if self._credentials is None:
            # The chain may read files or query a metadata endpoint: off the event loop.
            session = botocore.session.get_session()
            self._credentials = await asyncio.to_thread(session.get_credentials)
        if self._credentials is None:
            raise SpeechTransportError(
                SpeechErrorCode.UNAVAILABLE, "no AWS credentials found in botocore's default credential chain"
            )
        return self._credentials


class SageMakerConnection:
    """One open bidirectional stream, speaking the speech protocol's frames."""

    _CLEANUP_TIMEOUT_S: Final = 5.0

    def __init__(self, stream: Any, *, endpoint_name: str, open_timeout_s: float) -> None:
        self._stream = stream
        self._endpoint_name = endpoint_name
        self._open_timeout_s = open_timeout_s
        # Awaited lazily: the service may answer the request only once events flow.
        self._output: asyncio.Future[Any] = asyncio.ensure_future(stream.await_output())
        self._receiver: Any = None
        self._pending_read: asyncio.Future[Any] | None = None
        """A read of the response whose caller was cancelled; the next receive() or aclose() takes it."""
        self._failure: SpeechTransportError | None = None
        self._close_sent = False
        self._ended = False
        self._first_sent = asyncio.Event()
        self._first_sent_at = 0.0

    async def send(self, message: ClientMessage) -> None:
        """Send one client message as a UTF8 PayloadPart."""
        if self._failure is not None:
            raise self._failure
        if self._output.done() and not self._output.cancelled() and self._output.exception() is not None:
            self._fail_open(self._output.exception())
        part = RequestPayloadPart(bytes_=encode_client_message(message).encode("utf-8"), data_type="UTF8")
        try:
            await self._stream.input_stream.send(RequestStreamEventPayloadPart(value=part))
        except _TRANSPORT_ERRORS as exc:
            self._fail(
                SpeechErrorCode.STREAM_ERROR, f"could not send to endpoint {self._endpoint_name}: {_describe(exc)}", exc
            )
        if not self._first_sent.is_set():
            self._first_sent_at = asyncio.get_running_loop().time()
            self._first_sent.set()
        if isinstance(message, Close):
            self._close_sent = True

    async def receive(self) -> SpeechFrame | None:
        """Next control event or audio chunk; None once the session ended after our `close`."""
        if self._failure is not None:
            raise self._failure
        if self._ended:
            return None
        receiver = await self._output_stream()
        fragments: list[bytes] = []
        fragment_type: str | None = None
        while True:
            event = await self._next_event(receiver)
            if event is None:
                self._end_of_stream(partial=bool(fragments))
                return None
            if not isinstance(event, ResponseStreamEventPayloadPart):
                self._fail(SpeechErrorCode.PROTOCOL_ERROR, f"unexpected response event {type(event).__name__}")
            part = event.value
            data_type = part.data_type or "BINARY"  # SageMaker's default when the header is absent
            if data_type not in ("UTF8", "BINARY") or (fragment_type is not None and data_type != fragment_type):
                self._fail(SpeechErrorCode.PROTOCOL_ERROR, f"unexpected PayloadPart data type {data_type!r}")
            fragments.append(part.bytes_ or b"")  # an empty payload deserializes as None
            if part.completion_state == "PARTIAL":
                fragment_type = data_type
                continue
            if part.completion_state not in (None, "COMPLETE"):
                self._fail(SpeechErrorCode.PROTOCOL_ERROR, f"unknown completion state {part.completion_state!r}")
            payload = b"".join(fragments)
            if data_type == "BINARY":
                return payload
            try:
                return parse_server_event(payload.decode("utf-8"))
            except ValueError as exc:  # UnicodeDecodeError and JSONDecodeError are ValueErrors
                self._fail(SpeechErrorCode.PROTOCOL_ERROR, f"malformed control frame: {exc}", exc)

    async def _wait_first_send(self) -> None:
        """Until something was sent (the service has nothing to accept before) or the call failed."""
        sent = asyncio.ensure_future(self._first_sent.wait())
        try:
            await asyncio.wait([sent, self._output], return_when=asyncio.FIRST_COMPLETED)
        finally:
            sent.cancel()

    async def _output_stream(self) -> Any:
        if self._receiver is None:
            await self._wait_first_send()
            waited = asyncio.get_running_loop().time() - self._first_sent_at if self._first_sent.is_set() else 0.0
            try:
                async with asyncio.timeout(max(0.0, self._open_timeout_s - waited)):
                    _, self._receiver = await asyncio.shield(self._output)
            except TimeoutError as exc:
                self._fail(
                    SpeechErrorCode.UNAVAILABLE,
                    f"endpoint {self._endpoint_name}: no response within {self._open_timeout_s} s "
                    "(an untrusted TLS certificate looks like this: the CRT reports it only after 10-30 s)",
                    exc,
                )
            except _TRANSPORT_ERRORS as exc:
                self._fail_open(exc)
        return self._receiver

    async def _next_event(self, receiver: Any) -> Any:
        # A read in flight is never cancelled: awscrt 0.32 leaves a cancelled chunk future queued,
        # and when the next chunk arrives for it the whole stream fails ("InvalidStateError"), so
        # nothing could be sent any more, not even the `cancel` of a barge-in. A cancelled caller
        # leaves the read running (shielded); the next receive() or aclose() takes it over.
        if self._pending_read is None:
            self._pending_read = asyncio.ensure_future(receiver.receive())
        read = self._pending_read
        try:
            return await asyncio.shield(read)
        except (ModelStreamError, InternalStreamFailure, UnmodeledEventError) as exc:
            self._fail(SpeechErrorCode.STREAM_ERROR, f"endpoint {self._endpoint_name}: {_describe(exc)}", exc)
        except EventError as exc:
            self._fail(SpeechErrorCode.PROTOCOL_ERROR, f"malformed event-stream frame: {exc}", exc)
        except _TRANSPORT_ERRORS as exc:
            self._fail(SpeechErrorCode.STREAM_ERROR, f"endpoint {self._endpoint_name}: {_describe(exc)}", exc)
        finally:
            if read.done():
                self._pending_read = None

    def _end_of_stream(self, *, partial: bool) -> None:
        if partial:
            self._fail(SpeechErrorCode.PROTOCOL_ERROR, "the stream ended inside a fragmented message")
        if not self._close_sent:
            # The CRT reports a reset or dropped HTTP/2 stream as a plain end of body, so an end
            # we did not ask for is a broken session, not a normal one.
            self._fail(SpeechErrorCode.STREAM_ERROR, f"endpoint {self._endpoint_name}: the stream ended before close")
        self._ended = True

    def _fail_open(self, exc: BaseException | None) -> NoReturn:
        self._fail(SpeechErrorCode.UNAVAILABLE, f"endpoint {self._endpoint_name}: {_describe(exc)}", exc)

    def _fail(self, code: SpeechErrorCode, message: str, cause: BaseException | None = None) -> NoReturn:
        self._failure = SpeechTransportError(code, message)
        self._failure.__cause__ = cause
        raise self._failure

    async def aclose(self) -> None:
        """End the session: `close` and end of input while it is healthy, then release the stream.

        Only a live, accepted stream gets the graceful ending. Once the response has ended or
        failed, the CRT has completed the HTTP/2 stream and stops reading the request body, so
        waiting for buffered input to drain would never return: the input is dropped instead.
        """
        try:
            if self._is_live():
                async with asyncio.timeout(self._CLEANUP_TIMEOUT_S):
                    await self._close_input()
        except TimeoutError:
            logger.warning("endpoint %s: ending the input took over %s s", self._endpoint_name, self._CLEANUP_TIMEOUT_S)
        finally:
            await self._settle_pending_read()
            await _drop_request_body(self._stream.input_stream)
            if not self._output.done():
                self._output.cancel()
            elif not self._output.cancelled():
                self._output.exception()  # a refused call is reported by receive() or not at all
            if self._receiver is not None:
                await self._receiver.close()

    async def _settle_pending_read(self) -> None:
        """Let a read left by a cancelled receive() finish (the response ends once `close` is
        handled); cancel it only when it does not (see `_next_event` for why not at once)."""
        read, self._pending_read = self._pending_read, None
        if read is None:
            return
        done, _ = await asyncio.wait([read], timeout=self._CLEANUP_TIMEOUT_S)
        if not done:
            logger.warning("endpoint %s: the response did not end after close; dropping it", self._endpoint_name)
            read.cancel()
        elif not read.cancelled():
            read.exception()  # the session is being left: what the read found no longer matters

    def _is_live(self) -> bool:
        accepted = self._output.done() and not self._output.cancelled() and self._output.exception() is None
        return accepted and self._failure is None and not self._ended

    async def _close_input(self) -> None:
        if not self._close_sent:
            try:
                await self.send(Close())
            except SpeechTransportError as exc:
                logger.debug("endpoint %s: close message not sent: %s", self._endpoint_name, exc.message)
                return
        try:
            await self._stream.input_stream.close()
        except _TRANSPORT_ERRORS as exc:
            logger.debug("endpoint %s: input stream already closed: %s", self._endpoint_name, exc)


async def _drop_request_body(publisher: Any) -> None:
    """Close the SDK's request-body buffer without waiting for it to drain.

    The event publisher only offers a close that signs an end frame and waits until the CRT has
    sent it; when the stream is already over (or never started) that wait has no end, and the
    CRT task feeding the body would stay pending forever. The buffer is the publisher's `_writer`
    (smithy-aws-event-stream 0.3); closing it without flushing lets that task finish.
    """
    body = getattr(publisher, "_writer", None)
    if isinstance(body, AsyncBytesProvider):
        await body.close(flush=False)


def _describe(exc: BaseException | None) -> str:
    if exc is None:
        return "unknown error"
    code = getattr(exc, "error_code", None)
    text = str(exc) or type(exc).__name__
    return f"{type(exc).__name__}{f' [{code}]' if code else ''}: {text}"
