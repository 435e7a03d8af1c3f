"""POST /invocations: one text in, its audio streamed out chunk by chunk (raw PCM16, or WAV on request).

The body is the WebSocket route's synthesis message (`{"text", "voice"?, "speed"?}`, validated by
`speech_protocol`), plus an optional `"format": "pcm" | "wav"`; without it, `Accept: audio/wav`
asks for WAV. Bad input gets a 4xx with a JSON body `{"code", "message"}` (the protocol's error
codes). Audio for chunk k+1 is computed while chunk k is being sent. A synthesis failure after
the headers went out aborts the response, so the client sees a truncated stream, never a short
but apparently complete one.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
import time
from collections.abc import AsyncGenerator, Callable
from functools import partial
from typing import Final

from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.types import Receive, Scope, Send

from kokoro_server.audio import wav_stream_header
from kokoro_server.chunking import Chunk, ChunkPolicy, audio_ahead_s
from kokoro_server.engine import ChunkAudio
from kokoro_server.metrics import SpeechMetrics
from kokoro_server.schedule import timed
from kokoro_server.scheduler import Lane
from kokoro_server.service import Readiness, SpeechService
from speech_protocol import (
    AUDIO_CHANNELS,
    AUDIO_FORMAT,
    SAMPLE_RATE,
    ErrorCode,
    ProtocolError,
    Synthesize,
    check_synthesis,
    parse_client_message,
    quote,
)

logger = logging.getLogger(__name__)

PCM_MEDIA_TYPE: Final = "application/octet-stream"
"""There is no registered type for little-endian PCM16 (audio/L16 is big-endian); headers say the format."""
WAV_MEDIA_TYPES: Final = frozenset({"audio/wav", "audio/x-wav", "audio/wave", "audio/vnd.wave"})
NOT_READY: Final = "not_ready"
"""HTTP-only error code: the model is still loading (or failed to load)."""

_request_numbers = itertools.count(1)


def error_response(status_code: int, code: str, message: str) -> JSONResponse:
    log = logger.error if status_code >= 500 else logger.warning
    log("POST /invocations -> %d %s: %s", status_code, code, message)
    return JSONResponse({"code": code, "message": message}, status_code=status_code)


def body_limit(max_text_chars: int) -> int:
    """Largest body that can hold a valid request: a JSON-escaped character takes up to 12 bytes."""
    return max_text_chars * 12 + 4096


async def read_body(request: Request, limit: int) -> bytes:
    """The request body; ProtocolError(TEXT_TOO_LONG) as soon as it grows past `limit`."""
    body = bytearray()
    async for part in request.stream():
        body += part
        if len(body) > limit:
            raise ProtocolError(ErrorCode.TEXT_TOO_LONG, f"the request body exceeds {limit} bytes")
    return bytes(body)


def wants_wav(body: bytes, accept: str | None) -> bool:
    """The body's `format` field decides; without it, an Accept header naming a WAV type does."""
    fmt = json.loads(body).get("format")
    if fmt is None:
        media_types = {part.split(";", 1)[0].strip().lower() for part in (accept or "").split(",")}
        return bool(media_types & WAV_MEDIA_TYPES)
    if fmt not in ("pcm", "wav"):
        raise ProtocolError(ErrorCode.INVALID_FIELD, f"'format' must be 'pcm' or 'wav', got {quote(fmt)}")
    return bool(fmt == "wav")


def parse_invocation(body: bytes, max_text_chars: int, voices: frozenset[str]) -> Synthesize:
    """The synthesis request in `body`; ProtocolError for anything this route refuses."""
    msg = parse_client_message(body)
    if not isinstance(msg, Synthesize):
        raise ProtocolError(
            ErrorCode.UNKNOWN_TYPE, "POST /invocations only synthesizes; cancel and close are WebSocket messages"
        )
    if msg.timestamps:
        raise ProtocolError(ErrorCode.INVALID_FIELD, "'timestamps' are only sent on the WebSocket route")
    check_synthesis(msg, max_text_chars=max_text_chars, voices=voices)
    return msg


async def stream_audio(
    lane: Lane,
    synthesize: Callable[[str], ChunkAudio],
    policy: ChunkPolicy,
    text: str,
    *,
    header: bytes,
    metrics: SpeechMetrics | None = None,
    received_at: float | None = None,
) -> AsyncGenerator[bytes]:
    """`header`, then each chunk's PCM; the next chunk is computed while the current one is sent.

    `synthesize` is the blocking engine call with voice and speed bound; it runs in `lane`.
    `metrics` gets the request's time to first audio (from `received_at`) and its real-time factor.
    """
    metrics = metrics if metrics is not None else SpeechMetrics.disabled()
    received_at = received_at if received_at is not None else time.perf_counter()
    total_compute_s = 0.0

    def start(chunk: Chunk | None) -> asyncio.Task[tuple[ChunkAudio, float]] | None:
        return None if chunk is None else asyncio.create_task(lane.run(partial(timed, partial(synthesize, chunk.text))))

    chunk = policy.next_chunk(text, first=True, buffered_audio_s=0.0)
    pending = start(chunk)
    produced_s, first_audio_at = 0.0, None
    try:
        if header:
            yield header
        while pending is not None and chunk is not None:
            audio, compute_s = await pending
            policy.observe(chunk.text, compute_s)
            total_compute_s += compute_s
            now = time.perf_counter()
            if first_audio_at is None and audio.pcm:
                metrics.time_to_first_audio((now - received_at) * 1000)
            first_audio_at = now if first_audio_at is None else first_audio_at
            produced_s += audio.duration_s
            chunk = policy.next_chunk(
                chunk.rest, first=False, buffered_audio_s=audio_ahead_s(produced_s, first_audio_at, now)
            )
            pending = start(chunk)
            if audio.pcm:
                yield audio.pcm
        metrics.synthesis_rtf(total_compute_s, produced_s)
    finally:
        policy.finish()
        if pending is not None and not pending.done():
            pending.cancel()
        elif pending is not None and not pending.cancelled() and (exc := pending.exception()) is not None:
            logger.warning("synthesis of a chunk nobody will receive failed: %r", exc)


class AudioStreamResponse(StreamingResponse):
    """Streams `source`; whatever ends the response (done, disconnect, failure) closes the lane."""

    def __init__(self, source: AsyncGenerator[bytes], lane: Lane, *, wav: bool) -> None:
        headers = {
            "X-Audio-Format": AUDIO_FORMAT,
            "X-Sample-Rate": str(SAMPLE_RATE),
            "X-Audio-Channels": str(AUDIO_CHANNELS),
        }
        super().__init__(source, media_type="audio/wav" if wav else PCM_MEDIA_TYPE, headers=headers)
        self._source = source
        self._lane = lane

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            await self._source.aclose()
            self._lane.close()


async def invocations(request: Request, service: SpeechService, metrics: SpeechMetrics | None = None) -> Response:
    received_at = time.perf_counter()
    metrics = metrics if metrics is not None else SpeechMetrics.disabled()
    if service.readiness is not Readiness.READY:
        metrics.error()
        return error_response(503, NOT_READY, f"the speech model is {service.readiness}")
    settings, engine = service.settings, service.engine
    try:
        body = await read_body(request, body_limit(settings.max_text_chars))
        msg = parse_invocation(body, settings.max_text_chars, engine.voices)
        wav = wants_wav(body, request.headers.get("accept"))
    except ProtocolError as exc:
        metrics.error()
        return error_response(413 if exc.code is ErrorCode.TEXT_TOO_LONG else 400, exc.code.value, exc.message)
    except ClientDisconnect:
        logger.info("POST /invocations: the client left before its request body ended")
        return Response(status_code=400)  # nobody reads it; returning ends the call cleanly
    voice = msg.voice if msg.voice is not None else engine.default_voice
    speed = msg.speed if msg.speed is not None else 1.0
    lane = service.scheduler.lane(f"http-{next(_request_numbers)}")

    def synthesize(text: str) -> ChunkAudio:
        return engine.synthesize(text, voice, speed)

    source = stream_audio(
        lane,
        synthesize,
        service.chunk_policy(),
        msg.text,
        header=wav_stream_header() if wav else b"",
        metrics=metrics,
        received_at=received_at,
    )
    return AudioStreamResponse(source, lane, wav=wav)
