"""The agent's SageMaker transport (real SDK, CRT, HTTP/2) through the stand-in to scripted containers."""

from __future__ import annotations

import asyncio
import copy
import datetime
import logging
import socket
from pathlib import Path

import pytest
from aws_sdk_sagemaker_runtime_http2.config import AsyncSageMakerRuntimeHTTP2Config  # type: ignore[import-untyped]
from botocore.credentials import Credentials, RefreshableCredentials  # type: ignore[import-untyped]
from websockets.asyncio.server import ServerConnection
from websockets.frames import CloseCode

from agent_app.speech.sagemaker import (
    STREAM_WINDOW_BYTES,
    BotocoreCredentialsResolver,
    CrtHttp2Client,
    SageMakerTransport,
)
from agent_app.speech.transport import SpeechConnection, SpeechErrorCode, SpeechFrame, SpeechTransportError
from local.sagemaker_standin import StandInInfo, run_standin
from speech_protocol import (
    Cancelled,
    Close,
    SynthesisComplete,
    SynthesisStart,
    Synthesize,
    encode_client_message,
    encode_server_event,
    parse_client_message,
)
from tests.standin.standin_support import (
    REGION,
    TEST_CREDENTIALS,
    WAIT_S,
    ScriptContainer,
    script_container,
    transport,
)

CLOSE_TEXT = encode_client_message(Close())
PCM = bytes(range(256)) * 4
LOOKS_LIKE_JSON = encode_server_event(Cancelled(request_id="r1")).encode()
"""Audio bytes that happen to be valid JSON: they must still come back as audio."""


async def speech_like(container: ScriptContainer, ws: ServerConnection) -> None:
    """A tiny speech server: start, two audio frames (one JSON-looking), complete; closes after `close`."""
    while True:
        _, data = await container.recv(ws)
        message = parse_client_message(data)
        if isinstance(message, Close):
            await ws.close()
            return
        if isinstance(message, Synthesize):
            request_id = message.request_id or "r"
            await ws.send(encode_server_event(SynthesisStart(request_id=request_id)))
            await ws.send(PCM)
            await ws.send(LOOKS_LIKE_JSON)
            await ws.send(encode_server_event(SynthesisComplete(request_id, 0.5, 1.0, 2.0, 1)))


def expected_frames(request_id: str) -> list[SpeechFrame]:
    return [
        SynthesisStart(request_id=request_id),
        PCM,
        LOOKS_LIKE_JSON,
        SynthesisComplete(request_id, 0.5, 1.0, 2.0, 1),
    ]


async def receive_n(connection: SpeechConnection, n: int) -> list[SpeechFrame | None]:
    async with asyncio.timeout(WAIT_S):
        return [await connection.receive() for _ in range(n)]


async def test_session_with_several_messages_and_explicit_close() -> None:
    async with (
        script_container(speech_like) as container,
        run_standin({"speech": container.url}) as info,
        transport(info, "speech").connect() as connection,
    ):
        await connection.send(Synthesize(text="Hello.", request_id="a"))
        first = await receive_n(connection, 4)
        await connection.send(Synthesize(text="Again.", request_id="b", voice="am_michael", speed=1.25))
        second = await receive_n(connection, 4)
        await connection.send(Close())
        end = await receive_n(connection, 2)

    assert first == expected_frames("a")
    assert second == expected_frames("b")
    assert end == [None, None]  # the end is reported once and then stays the end
    # Every client message went out as a text frame (data type UTF8); exactly one close.
    assert container.received == [
        ("text", encode_client_message(Synthesize(text="Hello.", request_id="a"))),
        ("text", encode_client_message(Synthesize(text="Again.", request_id="b", voice="am_michael", speed=1.25))),
        ("text", CLOSE_TEXT),
    ]
    assert container.close_codes == [CloseCode.NORMAL_CLOSURE]


async def test_leaving_the_session_says_close_first() -> None:
    async with script_container(speech_like) as container, run_standin({"speech": container.url}) as info:
        async with transport(info, "speech").connect() as connection:
            await connection.send(Synthesize(text="Hello.", request_id="a"))
            assert await receive_n(connection, 4) == expected_frames("a")
            # Left without sending close and without waiting for the end.
        # The transport's connection stays open for the next session: the close is on its way.
        for _ in range(int(WAIT_S / 0.01)):
            if container.close_codes:
                break
            await asyncio.sleep(0.01)

    assert container.received[-1] == ("text", CLOSE_TEXT)
    assert [kind for kind, _ in container.received] == ["text", "text"]
    assert container.close_codes == [CloseCode.NORMAL_CLOSURE]


async def test_client_asks_for_a_large_stream_window(caplog: pytest.LogCaptureFixture) -> None:
    """The CRT's default 64 KiB window throttles audio bursts; the transport announces a bigger one."""
    caplog.set_level(logging.DEBUG, logger="local.standin.http2")
    async with (
        script_container(speech_like) as container,
        run_standin({"speech": container.url}) as info,
        transport(info, "speech").connect() as connection,
    ):
        await connection.send(Close())
        assert await receive_n(connection, 1) == [None]

    [args] = [r.args for r in caplog.records if r.getMessage().startswith("HTTP/2 settings from")]
    assert isinstance(args, tuple)
    settings = args[1]
    assert isinstance(settings, dict)
    assert settings["INITIAL_WINDOW_SIZE"] == STREAM_WINDOW_BYTES == 2 * 2**20


async def test_fragmented_responses_are_joined() -> None:
    start = encode_server_event(SynthesisStart(request_id="f"))

    async def fragmented(container: ScriptContainer, ws: ServerConnection) -> None:
        await container.recv(ws)
        await ws.send([start[:10], start[10:]])
        await ws.send([PCM[:100], PCM[100:]])
        await ws.close()

    async with (
        script_container(fragmented) as container,
        run_standin({"speech": container.url}) as info,
        transport(info, "speech").connect() as connection,
    ):
        await connection.send(Close())
        frames = await receive_n(connection, 3)

    assert frames == [SynthesisStart(request_id="f"), PCM, None]


@pytest.mark.parametrize(
    ("script_name", "code", "message"),
    [
        (
            "crash",
            SpeechErrorCode.STREAM_ERROR,
            "endpoint speech: ModelStreamError [StreamBroken]: "
            "The model container closed the stream: close code 1011 (engine crashed)",
        ),
        ("garbage", SpeechErrorCode.PROTOCOL_ERROR, "malformed control frame: "),
        ("early_end", SpeechErrorCode.STREAM_ERROR, "endpoint speech: the stream ended before close"),
    ],
)
async def test_broken_sessions_raise_their_code(script_name: str, code: SpeechErrorCode, message: str) -> None:
    async def script(container: ScriptContainer, ws: ServerConnection) -> None:
        await container.recv(ws)
        await ws.send(PCM)
        if script_name == "crash":
            await ws.close(CloseCode.INTERNAL_ERROR, "engine crashed")
        elif script_name == "garbage":
            await ws.send("this is not JSON")
            await container.recv(ws)
        else:
            await ws.close()  # a normal close, but the client never said close

    async with (
        script_container(script) as container,
        run_standin({"speech": container.url}) as info,
        transport(info, "speech").connect() as connection,
    ):
        await connection.send(Synthesize(text="Hello.", request_id="a"))
        assert await receive_n(connection, 1) == [PCM]
        with pytest.raises(SpeechTransportError) as raised:
            await receive_n(connection, 1)
        # A broken session stays broken: later calls raise the same error, nothing is sent.
        with pytest.raises(SpeechTransportError) as again:
            await connection.send(Close())

    assert raised.value.code == code
    assert raised.value.message.startswith(message)
    assert again.value is raised.value
    assert ("text", CLOSE_TEXT) not in container.received


async def test_unknown_endpoint_is_unavailable() -> None:
    async with (
        script_container(speech_like) as container,
        run_standin({"speech": container.url}) as info,
        transport(info, "nope").connect() as connection,
    ):
        await connection.send(Synthesize(text="Hello."))
        with pytest.raises(SpeechTransportError) as raised:
            await receive_n(connection, 1)
        with pytest.raises(SpeechTransportError) as again:
            await connection.send(Synthesize(text="Again."))

    assert raised.value.code == SpeechErrorCode.UNAVAILABLE
    assert raised.value.message == (
        "endpoint nope: InputValidationError [ValidationError]: Endpoint nope of account 000000000000 not found."
    )
    assert again.value is raised.value
    assert container.connections == 0


async def test_unreachable_container_is_unavailable() -> None:
    url = f"ws://127.0.0.1:{_unused_port()}"
    async with run_standin({"speech": url}) as info, transport(info, "speech").connect() as connection:
        with pytest.raises(SpeechTransportError) as raised:
            await receive_n(connection, 1)

    assert raised.value.code == SpeechErrorCode.UNAVAILABLE
    assert raised.value.message.startswith(
        f"endpoint speech: ModelError [ModelError]: Could not connect to the model container at {url}/"
    )


async def test_unreachable_standin_is_unavailable(tmp_path: Path) -> None:
    ca = tmp_path / "ca.pem"
    async with run_standin({"speech": "ws://127.0.0.1:1"}, cert_dir=tmp_path):
        pass  # only for a valid CA file; the stand-in is gone again
    info = StandInInfo(url=f"https://127.0.0.1:{_unused_port()}", port=0, ca_path=ca, endpoints=("speech",))
    async with transport(info, "speech").connect() as connection:
        with pytest.raises(SpeechTransportError) as raised:
            await receive_n(connection, 1)

    assert raised.value.code == SpeechErrorCode.UNAVAILABLE
    assert "AWS_IO_SOCKET_CONNECTION_REFUSED" in raised.value.message


async def test_credentials_come_from_botocore_default_chain(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDFROMENV")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "secret-from-env")
    async with script_container(speech_like) as container, run_standin({"speech": container.url}) as info:
        chain_transport = SageMakerTransport("speech", region=REGION, endpoint_url=info.url, ca_file=info.ca_path)
        async with chain_transport.connect() as connection:
            await connection.send(Close())
            assert await receive_n(connection, 1) == [None]

    assert container.received == [("text", CLOSE_TEXT)]


async def test_missing_credentials_are_unavailable_before_any_call(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.delenv("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", raising=False)
    monkeypatch.delenv("AWS_CONTAINER_CREDENTIALS_FULL_URI", raising=False)
    async with script_container(speech_like) as container, run_standin({"speech": container.url}) as info:
        no_credentials = SageMakerTransport("speech", region=REGION, endpoint_url=info.url, ca_file=info.ca_path)
        with pytest.raises(SpeechTransportError) as raised:
            async with no_credentials.connect():
                pytest.fail("a session opened without credentials")

    assert raised.value.code == SpeechErrorCode.UNAVAILABLE
    assert raised.value.message == "no AWS credentials found in botocore's default credential chain"
    assert container.connections == 0


async def test_rotating_credentials_are_read_at_every_signature() -> None:
    issued: list[str] = []

    def refresh() -> dict[str, str]:
        issued.append(f"AKIDROTATED{len(issued)}")
        # Already inside botocore's refresh window: the next read refreshes again.
        expiry = datetime.datetime.now(datetime.UTC) + datetime.timedelta(minutes=5)
        return {"access_key": issued[-1], "secret_key": "s", "token": "t", "expiry_time": expiry.isoformat()}

    rotating = RefreshableCredentials.create_from_metadata(refresh(), refresh_using=refresh, method="test-role")
    resolver = BotocoreCredentialsResolver(rotating)
    keys = [(await resolver.get_identity(properties={})).access_key_id for _ in range(3)]
    assert keys == ["AKIDROTATED1", "AKIDROTATED2", "AKIDROTATED3"]

    static = BotocoreCredentialsResolver(Credentials("AKIDSTATIC", "s", "tok"))
    identity = await static.get_identity(properties={})
    assert (identity.access_key_id, identity.secret_access_key, identity.session_token) == ("AKIDSTATIC", "s", "tok")


async def test_ca_trust_survives_the_sdk_copying_its_config(tmp_path: Path) -> None:
    async with run_standin({"speech": "ws://127.0.0.1:1"}, cert_dir=tmp_path) as info:
        client = CrtHttp2Client(info.ca_path)
        copied = copy.deepcopy(client)
        assert type(copied) is CrtHttp2Client
        assert copied.ca_file == info.ca_path
        config = await AsyncSageMakerRuntimeHTTP2Config.resolve(region=REGION, transport=client)
        # smithy 0.12 shares the transport between copies; the subclass's own copy is the fallback.
        assert copy.deepcopy(config).transport is client


def test_transport_settings_are_checked(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="endpoint_name must be a non-empty"):
        SageMakerTransport("", region=REGION)
    with pytest.raises(ValueError, match="region must be set"):
        SageMakerTransport("speech", region="")
    with pytest.raises(ValueError, match=f"CA file {tmp_path / 'missing.pem'} does not exist"):
        SageMakerTransport("speech", region=REGION, ca_file=tmp_path / "missing.pem")


def _unused_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


async def test_broken_sdk_configuration_is_unavailable(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_PROFILE", "no-such-profile")
    with pytest.raises(SpeechTransportError) as raised:
        async with SageMakerTransport("speech", region=REGION, credentials=TEST_CREDENTIALS).connect():
            pytest.fail("a session opened with a missing profile")

    assert raised.value.code == SpeechErrorCode.UNAVAILABLE
    assert raised.value.message.startswith("SDK configuration: ProfileNotFoundError")
