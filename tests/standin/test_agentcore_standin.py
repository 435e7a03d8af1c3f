"""The AgentCore stand-in over real sockets: boto3's own `bedrock-agentcore` client (endpoint from
AWS_ENDPOINT_URL_BEDROCK_AGENTCORE, trust from AWS_CA_BUNDLE), the WebSocket route with signed and
presigned handshakes, every refusal with the exception class botocore raises, and what reaches
the agent."""

from __future__ import annotations

import asyncio
import datetime
import json
import ssl
import subprocess
import sys
from contextlib import ExitStack
from dataclasses import fields
from pathlib import Path
from typing import Any

import httpx
import pytest
from botocore.auth import SigV4Auth  # type: ignore[import-untyped]
from botocore.awsrequest import AWSRequest  # type: ignore[import-untyped]
from botocore.exceptions import ClientError  # type: ignore[import-untyped]
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.typing import Subprotocol

from agent_app.frames import AGENTCORE_FRAME_LIMIT_BYTES, AUDIO_CHUNK_PCM_BYTES, MAX_EVENT_BYTES
from agent_app.models import DEMO_ANSWER
from kokoro_server.app import create_app as create_speech_app
from kokoro_server.engine import ZeroCostEngine
from kokoro_server.settings import Settings
from local.standin.agentcore_auth import ALLOWED, DENIED, EXPIRED, SSE_ONLY, Principal
from tests.local.local_fakes import serve_real_agent
from tests.standin.agentcore_support import ARN, REGION, WAIT_S, scripted_agent, standin_for, use_sdk_environment
from tests.standin.standin_support import REPO_ROOT
from voicestack.agentcore import (
    SdkContext,
    invocation_url,
    new_session_id,
    presign_websocket_url,
    resolve_sdk,
    sign_websocket_headers,
    websocket_url,
)
from voicestack.talk.turn import TurnRecorder

PAYLOAD = b'{"prompt": "hi"}'
EVENTS = b'data: {"n": 0}\n\ndata: {"n": 1}\n\ndata: {"n": 2}\n\n'
HOP_BY_HOP = {"host", "accept-encoding", "connection", "user-agent", "content-length"}
WS_HANDSHAKE = {"host", "upgrade", "connection", "sec-websocket-key", "sec-websocket-version", "user-agent"}


def invoke(sdk: SdkContext, **options: Any) -> tuple[str, bytes]:
    """InvokeAgentRuntime through boto3 (blocking): the session id it returns and the whole stream."""
    response = sdk.client().invoke_agent_runtime(
        agentRuntimeArn=options.pop("arn", ARN),
        payload=options.pop("payload", PAYLOAD),
        contentType="application/json",
        accept="text/event-stream",
        **options,
    )
    return response["runtimeSessionId"], b"".join(response["response"].iter_chunks())


async def refused(sdk: SdkContext, **options: Any) -> ClientError:
    with pytest.raises(ClientError) as raised:
        await asyncio.to_thread(invoke, sdk, **options)
    return raised.value


def error_of(exc: ClientError) -> tuple[int, str, str]:
    return (
        exc.response["ResponseMetadata"]["HTTPStatusCode"],
        exc.response["Error"]["Code"],
        exc.response["Error"]["Message"],
    )


def ssl_for(sdk: SdkContext) -> ssl.SSLContext:
    return sdk.ssl_context()


def frozen(principal: Principal) -> Any:
    return principal.credentials().get_frozen_credentials()


async def test_boto3_invokes_through_the_endpoint_override_and_streams(monkeypatch: pytest.MonkeyPatch) -> None:
    with scripted_agent() as (agent, server):
        async with standin_for(
            server.http_url, header_allowlist=("X-Amzn-Bedrock-AgentCore-Runtime-Custom-Trace",)
        ) as info:
            use_sdk_environment(monkeypatch, info, ALLOWED)
            sdk = resolve_sdk()
            assert (sdk.endpoint_url, sdk.ca_bundle, sdk.region) == (info.url, info.ca_path, REGION)
            session = new_session_id()
            got_session, body = await asyncio.to_thread(invoke, sdk, runtimeSessionId=session, qualifier="DEFAULT")
            assert (got_session, body) == (session, EVENTS)
            assert agent.bodies == [PAYLOAD]
            seen = agent.headers[0]
            assert {k: v for k, v in seen.items() if k not in HOP_BY_HOP} == {
                "x-amzn-bedrock-agentcore-runtime-session-id": session,
                "x-amzn-bedrock-agentcore-runtime-request-id": seen["x-amzn-bedrock-agentcore-runtime-request-id"],
                "content-type": "application/json",
                "accept": "text/event-stream",
            }
            # boto3 makes up a session id when none is given (the model's idempotency token).
            generated, _ = await asyncio.to_thread(invoke, sdk)
            assert len(generated) == 36
            assert generated == agent.headers[1]["x-amzn-bedrock-agentcore-runtime-session-id"]


async def test_the_answer_streams_through_before_it_is_complete(monkeypatch: pytest.MonkeyPatch) -> None:
    with scripted_agent() as (agent, server):
        async with standin_for(server.http_url) as info:
            use_sdk_environment(monkeypatch, info, ALLOWED)
            sdk = resolve_sdk()

            def first_chunk_then_rest() -> tuple[bytes, bytes]:
                response = sdk.client().invoke_agent_runtime(
                    agentRuntimeArn=ARN, payload=b'{"hold": true}', contentType="application/json"
                )
                # iter_chunks() waits for 1,024 bytes; read1 returns what has arrived (urllib3's
                # response, which the streaming body hands out as its context manager).
                with response["response"] as raw:
                    first = raw.read1(65536)
                    agent.release.set()  # the agent holds its second event until the first was read
                    return first, raw.read()

            first, rest = await asyncio.wait_for(asyncio.to_thread(first_chunk_then_rest), WAIT_S)
            assert first + rest == EVENTS
            assert first == b'data: {"n": 0}\n\n'


async def test_a_caller_hanging_up_closes_the_agents_stream(monkeypatch: pytest.MonkeyPatch) -> None:
    with scripted_agent() as (agent, server):
        async with standin_for(server.http_url) as info:
            use_sdk_environment(monkeypatch, info, ALLOWED)
            sdk = resolve_sdk()
            session = new_session_id()

            def read_one_then_hang_up() -> None:
                response = sdk.client().invoke_agent_runtime(
                    agentRuntimeArn=ARN, payload=b'{"hold": true}', runtimeSessionId=session
                )
                with response["response"] as raw:
                    raw.read1(65536)

            await asyncio.to_thread(read_one_then_hang_up)
            for _ in range(int(WAIT_S / 0.05)):
                if agent.hangups:
                    break
                await asyncio.sleep(0.05)
            assert agent.hangups == [session]


@pytest.mark.parametrize(
    ("principal", "code", "message"),
    [
        (
            DENIED,
            "AccessDeniedException",
            "User: arn:aws:iam::000000000000:user/voicestack-no-invoke is not authorized to perform: "
            f"bedrock-agentcore:InvokeAgentRuntime on resource: {ARN} because no identity-based policy allows "
            "the bedrock-agentcore:InvokeAgentRuntime action",
        ),
        (EXPIRED, "ExpiredTokenException", "The security token included in the request is expired"),
        (
            Principal("nobody", "AKIDUNKNOWN", "x"),
            "UnrecognizedClientException",
            "The security token included in the request is invalid.",
        ),
        (
            Principal("forged", ALLOWED.access_key, "wrong-secret"),
            "InvalidSignatureException",
            "The request signature we calculated does not match the signature you provided. Check your AWS "
            "Secret Access Key and signing method. Consult the service documentation for details.",
        ),
    ],
)
async def test_credential_refusals_reach_boto3_as_aws_sends_them(
    monkeypatch: pytest.MonkeyPatch, principal: Principal, code: str, message: str
) -> None:
    with scripted_agent() as (agent, server):
        async with standin_for(server.http_url) as info:
            use_sdk_environment(monkeypatch, info, principal)
            sdk = resolve_sdk()
            exc = await refused(sdk)
            assert error_of(exc) == (403, code, message)
            if code == "AccessDeniedException":
                # Modeled: boto3 raises the service's own exception class.
                assert type(exc) is sdk.client().exceptions.AccessDeniedException
            else:
                assert type(exc) is ClientError
            assert agent.bodies == []


async def test_a_wrong_region_an_aged_signature_and_an_unknown_runtime(monkeypatch: pytest.MonkeyPatch) -> None:
    with scripted_agent() as (agent, server):
        async with standin_for(server.http_url) as info:
            use_sdk_environment(monkeypatch, info, ALLOWED)
            wrong_region = resolve_sdk(region="eu-west-1")
            assert error_of(await refused(wrong_region)) == (
                403,
                "InvalidSignatureException",
                "Credential should be scoped to a valid region. ",
            )
            sdk = resolve_sdk()
            unknown = ARN.replace("abcdefghij", "zzzzzzzzzz")
            exc = await refused(sdk, arn=unknown)
            assert type(exc) is sdk.client().exceptions.ResourceNotFoundException
            assert error_of(exc) == (
                404,
                "ResourceNotFoundException",
                f"No endpoint or agent found with qualifier 'DEFAULT' for agent '{unknown}'",
            )
            exc = await refused(sdk, qualifier="canary")
            assert type(exc) is sdk.client().exceptions.ResourceNotFoundException
        ahead = datetime.timedelta(minutes=6)
        async with standin_for(server.http_url, clock=lambda: datetime.datetime.now(datetime.UTC) + ahead) as info:
            use_sdk_environment(monkeypatch, info, ALLOWED)
            code, message = error_of(await refused(resolve_sdk()))[1:]
            assert code == "InvalidSignatureException"
            assert message.startswith("Signature expired: ")
            assert agent.bodies == []


async def test_a_wrong_service_and_a_short_session_id_signed_by_hand(monkeypatch: pytest.MonkeyPatch) -> None:
    """What boto3 itself never sends (it signs for bedrock-agentcore, checks lengths before sending)."""
    with scripted_agent() as (agent, server):
        async with standin_for(server.http_url) as info:
            url = invocation_url(info.url, ARN)

            async def post(service: str, headers: dict[str, str]) -> httpx.Response:
                request = AWSRequest(method="POST", url=url, data=PAYLOAD, headers=headers)
                SigV4Auth(ALLOWED.credentials(), service, REGION).add_auth(request)
                async with httpx.AsyncClient(verify=ssl.create_default_context(cafile=str(info.ca_path))) as client:
                    return await client.post(url, content=PAYLOAD, headers=dict(request.headers.items()))

            wrong = await post("bedrock", {"Content-Type": "application/json"})
            assert (wrong.status_code, wrong.headers["x-amzn-errortype"], wrong.json()) == (
                403,
                "InvalidSignatureException",
                {"message": "Credential should be scoped to correct service: 'bedrock-agentcore'. "},
            )
            short = await post("bedrock-agentcore", {"X-Amzn-Bedrock-AgentCore-Runtime-Session-Id": "short"})
            assert (short.status_code, short.headers["x-amzn-errortype"]) == (400, "ValidationException")
            assert short.json()["reason"] == "FieldValidationFailed"
            assert agent.bodies == []


async def test_retryable_conflict_while_a_session_starts(monkeypatch: pytest.MonkeyPatch) -> None:
    with scripted_agent() as (_, server):
        async with standin_for(server.http_url, conflicts_per_new_session=1) as info:
            use_sdk_environment(monkeypatch, info, ALLOWED)
            sdk = resolve_sdk()
            session = new_session_id()
            exc = await refused(sdk, runtimeSessionId=session)
            assert type(exc) is sdk.client().exceptions.RetryableConflictException
            assert error_of(exc) == (
                409,
                "RetryableConflictException",
                f"Session {session} is starting; retry the request.",
            )
            assert await asyncio.to_thread(invoke, sdk, runtimeSessionId=session) == (session, EVENTS)


async def test_the_agents_failures_are_runtime_client_errors(monkeypatch: pytest.MonkeyPatch) -> None:
    with scripted_agent() as (_, server):
        async with standin_for(server.http_url) as info:
            use_sdk_environment(monkeypatch, info, ALLOWED)
            sdk = resolve_sdk()
            exc = await refused(sdk, payload=b'{"status": 400}')
            assert type(exc) is sdk.client().exceptions.RuntimeClientError
            assert error_of(exc) == (
                424,
                "RuntimeClientError",
                'Received error (400) from the runtime: {"type":"error","code":"bad_request","message":"scripted"}',
            )
        url = server.http_url
    async with standin_for(url) as info:  # the agent is gone now
        use_sdk_environment(monkeypatch, info, ALLOWED)
        exc = await refused(resolve_sdk())
        assert error_of(exc)[:2] == (424, "RuntimeClientError")
        assert error_of(exc)[2].startswith("The runtime's container could not be reached: ")


# --- the WebSocket route ------------------------------------------------------------------------


async def test_signed_and_presigned_handshakes_reach_the_agent_with_the_session(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with scripted_agent() as (agent, server):
        async with standin_for(server.http_url) as info:
            use_sdk_environment(monkeypatch, info, ALLOWED)
            sdk = resolve_sdk()
            session = new_session_id()
            url = websocket_url(sdk.endpoint_url, ARN, "DEFAULT")
            headers = sign_websocket_headers(url, sdk.credentials(), sdk.region, session_id=session)
            async with connect(url, additional_headers=headers, ssl=ssl_for(sdk)) as ws:
                assert ws.response is not None
                assert ws.response.headers["X-Amzn-Bedrock-AgentCore-Runtime-Session-Id"] == session
                await ws.send("hello")
                assert await ws.recv() == "echo:hello"
                await ws.send(b"\x00\x01")
                assert await ws.recv() == b"\x00\x01"
            presigned = presign_websocket_url(
                websocket_url(sdk.endpoint_url, ARN, None, session), sdk.credentials(), sdk.region, expires_s=30
            )
            async with connect(presigned, ssl=ssl_for(sdk)) as ws:
                await ws.send("again")
                assert await ws.recv() == "echo:again"
            for seen in agent.headers:
                assert {k: v for k, v in seen.items() if k not in WS_HANDSHAKE} == {
                    "x-amzn-bedrock-agentcore-runtime-session-id": session,
                    "x-amzn-bedrock-agentcore-runtime-request-id": seen["x-amzn-bedrock-agentcore-runtime-request-id"],
                }
            for _ in range(100):
                if len(agent.ws_closes) == 2:
                    break
                await asyncio.sleep(0.02)
            assert agent.ws_closes == [1000, 1000]


async def handshake_refusal(
    url: str, sdk: SdkContext, headers: dict[str, str] | None = None
) -> tuple[int, str, dict[str, Any]]:
    with pytest.raises(InvalidStatus) as raised:
        async with connect(url, additional_headers=headers or {}, ssl=ssl_for(sdk)):
            pass
    response = raised.value.response
    return response.status_code, response.headers["x-amzn-errortype"], json.loads(response.body or b"{}")


async def test_websocket_refusals_are_http_errors_with_aws_bodies(monkeypatch: pytest.MonkeyPatch) -> None:
    with scripted_agent() as (agent, server):
        ahead = datetime.timedelta(seconds=31)
        clock_offset = {"now": datetime.timedelta(0)}
        async with standin_for(
            server.http_url, clock=lambda: datetime.datetime.now(datetime.UTC) + clock_offset["now"]
        ) as info:
            use_sdk_environment(monkeypatch, info, ALLOWED)
            sdk = resolve_sdk()
            url = websocket_url(sdk.endpoint_url, ARN)
            assert await handshake_refusal(url, sdk) == (
                403,
                "MissingAuthenticationTokenException",
                {"message": "Missing Authentication Token"},
            )
            sse_only = sign_websocket_headers(url, frozen(SSE_ONLY), REGION)
            status, code, body = await handshake_refusal(url, sdk, sse_only)
            assert (status, code) == (403, "AccessDeniedException")
            assert "bedrock-agentcore:InvokeAgentRuntimeWithWebSocketStream" in body["message"]
            presigned = presign_websocket_url(url, sdk.credentials(), REGION, expires_s=30)
            clock_offset["now"] = ahead
            status, code, body = await handshake_refusal(presigned, sdk)
            assert (status, code) == (403, "InvalidSignatureException")
            assert body["message"].startswith("Signature expired: ")
            clock_offset["now"] = datetime.timedelta(0)
            short = sign_websocket_headers(url, sdk.credentials(), REGION, session_id="short")
            assert (await handshake_refusal(url, sdk, short))[:2] == (400, "ValidationException")
            bearer = [Subprotocol("base64UrlBearerAuthorization.eyJ9"), Subprotocol("base64UrlBearerAuthorization")]
            with pytest.raises(InvalidStatus) as raised:
                async with connect(url, ssl=ssl_for(sdk), subprotocols=bearer):
                    pass
            assert raised.value.response.status_code == 403
            assert raised.value.response.headers["x-amzn-errortype"] == "AccessDeniedException"
            assert agent.headers == []


async def open_signed(info_url: str, sdk: SdkContext) -> Any:
    url = websocket_url(info_url, ARN)
    return connect(url, additional_headers=sign_websocket_headers(url, sdk.credentials(), REGION), ssl=ssl_for(sdk))


async def wait_closes(agent_closes: list[int], count: int) -> list[int]:
    for _ in range(int(WAIT_S / 0.02)):
        if len(agent_closes) >= count:
            break
        await asyncio.sleep(0.02)
    return agent_closes


async def test_frames_over_32_kb_close_both_sides_with_1009(monkeypatch: pytest.MonkeyPatch) -> None:
    with scripted_agent() as (agent, server):
        async with standin_for(server.http_url) as info:
            use_sdk_environment(monkeypatch, info, ALLOWED)
            sdk = resolve_sdk()
            async with await open_signed(info.url, sdk) as ws:
                await ws.send(f"big:{AGENTCORE_FRAME_LIMIT_BYTES}")  # one frame of exactly the limit: it passes
                assert len(await ws.recv()) == AGENTCORE_FRAME_LIMIT_BYTES == 32_000
                await ws.send("big:64058")  # what the agent's audio_chunk events weighed before they were cut
                with pytest.raises(ConnectionClosed) as closed:
                    await ws.recv()
            assert closed.value.rcvd is not None
            assert (closed.value.rcvd.code, closed.value.rcvd.reason) == (
                1009,
                "frame of 64058 bytes exceeds the 32000-byte limit",
            )
            assert await wait_closes(agent.ws_closes, 1) == [1009]
            async with await open_signed(info.url, sdk) as ws:
                await ws.send("y" * (AGENTCORE_FRAME_LIMIT_BYTES + 1))
                with pytest.raises(ConnectionClosed) as closed:
                    await ws.recv()
            assert closed.value.rcvd is not None
            assert closed.value.rcvd.code == 1009
            assert await wait_closes(agent.ws_closes, 2) == [1009, 1009]


async def test_too_many_frames_in_a_second_close_with_1008(monkeypatch: pytest.MonkeyPatch) -> None:
    with scripted_agent() as (agent, server):
        async with standin_for(server.http_url) as info:
            use_sdk_environment(monkeypatch, info, ALLOWED)
            async with await open_signed(info.url, resolve_sdk()) as ws:
                await ws.send("flood:400")
                received: list[str | bytes] = []

                async def read_all() -> None:
                    while True:
                        received.append(await ws.recv())

                with pytest.raises(ConnectionClosed) as closed:
                    await read_all()
            assert closed.value.rcvd is not None
            assert (closed.value.rcvd.code, closed.value.rcvd.reason) == (1008, "more than 250 frames in one second")
            assert len(received) == 249  # the flood command itself was the first frame of the second
            assert await wait_closes(agent.ws_closes, 1) == [1008]


async def test_an_idle_session_is_closed_and_close_codes_pass_through(monkeypatch: pytest.MonkeyPatch) -> None:
    with scripted_agent() as (agent, server):
        async with standin_for(server.http_url, idle_timeout_s=0.3) as info:
            use_sdk_environment(monkeypatch, info, ALLOWED)
            sdk = resolve_sdk()
            async with await open_signed(info.url, sdk) as ws:
                await ws.send("hi")
                assert await ws.recv() == "echo:hi"
                with pytest.raises(ConnectionClosed) as closed:
                    await asyncio.wait_for(ws.recv(), WAIT_S)
            assert closed.value.rcvd is not None
            assert (closed.value.rcvd.code, closed.value.rcvd.reason) == (1001, "session idle for 0.3 s")
            assert await wait_closes(agent.ws_closes, 1) == [1001]
            async with await open_signed(info.url, sdk) as ws:
                await ws.send("close:4000")
                with pytest.raises(ConnectionClosed) as closed:
                    await ws.recv()
            assert closed.value.rcvd is not None
            assert closed.value.rcvd.code == 4000
            async with await open_signed(info.url, sdk) as ws:
                await ws.close(4001, "bye")
            assert await wait_closes(agent.ws_closes, 3) == [1001, 4000, 4001]


def test_the_command_line_prints_its_ready_line_and_refuses_a_bad_runtime() -> None:
    bad = subprocess.run(
        check=False,
        args=[
            sys.executable,
            "-m",
            "local.agentcore_standin",
            "--port",
            "0",
            "--runtime",
            "arn:aws:x=http://127.0.0.1:1",
        ],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert bad.returncode == 2
    assert bad.stderr.startswith("agentcore_standin: 'arn:aws:x' is not an AgentCore runtime ARN")
    with subprocess.Popen(
        [sys.executable, "-m", "local.agentcore_standin", "--port", "0", "--runtime", f"{ARN}=http://127.0.0.1:1"],
        cwd=REPO_ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    ) as process:
        try:
            assert process.stdout is not None
            ready = json.loads(process.stdout.readline())
            assert ready["event"] == "ready"
            assert ready["runtimes"] == [ARN]
            assert ready["region"] == "us-east-1"
            assert ready["credentials"] == {
                "AWS_ACCESS_KEY_ID": ALLOWED.access_key,
                "AWS_SECRET_ACCESS_KEY": ALLOWED.secret_key,
            }
            assert ready["url"].startswith("https://127.0.0.1:")
        finally:
            process.terminate()
            assert process.wait(timeout=30) == 0


async def test_the_real_agent_at_the_largest_frame_ms_passes_the_websocket_route_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The agent cuts its events to AgentCore's frames (`agent_app.frames`): at the speech server's
    largest frames (10 s, 480,000 bytes of PCM each) a whole answer crosses the stand-in's WebSocket
    route, which closes on any frame over the limit, every frame well under it."""
    frame_ms = next(f for f in fields(Settings) if f.name == "frame_ms").metadata["spec"]
    assert frame_ms.parse("10000") == 10_000  # the largest the speech server allows
    with pytest.raises(ValueError, match=r"^10001$"):
        frame_ms.parse("10001")
    with ExitStack() as stack:
        agent = serve_real_agent(stack, create_speech_app(Settings(frame_ms=10_000), ZeroCostEngine()), tmp_path)
        async with standin_for(agent.http_url) as info:
            use_sdk_environment(monkeypatch, info, ALLOWED)
            recorder = TurnRecorder(started=0.0)
            sizes: list[int] = []
            async with await open_signed(info.url, resolve_sdk()) as ws:
                await ws.send(json.dumps({"type": "prompt", "prompt": "How does it work?", "mode": "batch"}))
                while not recorder.ended:
                    message = await asyncio.wait_for(ws.recv(), WAIT_S)
                    assert isinstance(message, str)
                    sizes.append(len(message.encode("utf-8")))
                    event = json.loads(message)
                    assert event.pop("turn") == 1, event
                    recorder.apply(event, sizes[-1])  # a gap, a bad total or an error event fails here
    result = recorder.finish(turn=1, session_id="", transport="websocket", target=ARN, stopped=False)
    assert (result.outcome, result.text) == ("ok", DEMO_ANSWER)
    assert result.audio_bytes > 480_000  # more than one whole container frame of 10 s: it was cut
    assert max(pcm for pcm, _ in result.audio_events) == AUDIO_CHUNK_PCM_BYTES
    assert max(sizes) <= MAX_EVENT_BYTES < AGENTCORE_FRAME_LIMIT_BYTES
