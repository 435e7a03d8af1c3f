"""The peer benchmark: its clients against a Kokoro-FastAPI-shaped stub and this server, and its table."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from bench.peers import (
    EngineAlone,
    Run,
    Side,
    engine_alone,
    engine_lines,
    main,
    measure,
    ours_client,
    peer_client,
    render,
    target_ratios,
)
from kokoro_server.engine import ZeroCostEngine
from tests.speech.speech_support import live_server, make_app


def fastapi_stub(engine: ZeroCostEngine) -> Starlette:
    """Kokoro-FastAPI's two routes the benchmark uses: streaming PCM speech and /health."""

    async def speech(request: Request) -> Response:
        body = await request.json()
        assert (body["response_format"], body["stream"], body["voice"]) == ("pcm", True, "af_heart")
        pcm = engine.synthesize(body["input"], body["voice"], 1.0).pcm

        async def parts() -> AsyncIterator[bytes]:
            for start in range(0, len(pcm), 4800):
                yield pcm[start : start + 4800]
                await asyncio.sleep(0)

        return StreamingResponse(parts(), media_type="audio/pcm")

    async def health(request: Request) -> Response:
        return JSONResponse({"status": "healthy"})

    return Starlette(routes=[Route("/v1/audio/speech", speech, methods=["POST"]), Route("/health", health)])


async def test_both_clients_measure_the_same_audio() -> None:
    engine = ZeroCostEngine()
    with (
        live_server(make_app(ZeroCostEngine(), chunking="none")) as ours,
        live_server(fastapi_stub(engine)) as peer,
    ):
        mine = await measure("this server", ours.http_url, "/ping", ours_client(ours.http_url), 2)
        theirs = await measure("Kokoro-FastAPI", peer.http_url, "/health", peer_client(peer.http_url), 2)
    assert len(mine.single) == len(theirs.single) == 2
    assert len(mine.load_first_audio_s) == len(theirs.load_first_audio_s) == 4
    # The same text, synthesized whole on both: the same zero-cost audio.
    assert [r.audio_s for r in theirs.single] == [r.audio_s for r in mine.single]
    assert theirs.load_audio_s == mine.load_audio_s == 4 * mine.single[0].audio_s


def side(name: str, first: float, total: float, load_first: list[float], wall: float) -> Side:
    return Side(
        name=name,
        single=[Run(first, total, 16.0)] * 3,
        load_first_audio_s=load_first,
        load_audio_s=64.0,
        load_wall_s=wall,
        probes_ms=[1.0, 2.0, 3.0],
    )


def test_the_table_and_the_targets() -> None:
    ours = side("this server", 0.8, 12.0, [0.8, 1.0, 1.4, 1.5], 32.0)
    peer = side("Kokoro-FastAPI", 15.8, 17.2, [19.7, 23.1, 32.4, 35.4], 40.0)
    ratios = target_ratios(ours, peer)
    assert [(label, round(value, 3), ok) for label, value, _, ok in ratios] == [
        ("first audio / whole request", 0.067, True),
        ("4th of 4 sessions' first audio / single", 1.875, True),
        ("4-session throughput / one session's audio rate", 1.5, True),
        ("4-session throughput / Kokoro-FastAPI's", 1.25, True),
    ]
    table = render(ours, peer, "a CPU").splitlines()
    assert table[0] == "a CPU"
    assert table[4] == "| first audio, four sentences (median) | 0.80 s | 15.80 s |"
    assert table[6] == (
        "| 4 sessions, first audio of each      | 0.80, 1.00, 1.40, 1.50 s | 19.70, 23.10, 32.40, 35.40 s |"
    )
    assert table[8] == "| health probe under that load         | p50 2 / p99 3 ms | p50 2 / p99 3 ms |"
    assert table[-3] == "  4-session throughput / Kokoro-FastAPI's: 1.250 (target >= 1.2) met"


def test_the_engine_alone_splits_the_throughput_ratio_into_three_measured_factors() -> None:
    ours = side("this server", 0.8, 12.0, [0.8, 1.0, 1.4, 1.5], 32.0)  # 4 sessions 2.0 audio-s/s; one 16/12
    peer = side("Kokoro-FastAPI", 15.8, 17.2, [19.7, 23.1, 32.4, 35.4], 40.0)
    engine = EngineAlone("cpu", "1 x 2", (1.8, 1.4), "2 x 1", 2.5)
    assert engine.alone_rate == 1.6
    assert engine_lines(ours, engine) == [
        "",
        "engine alone on cpu, this run (audio-s per s): 1 x 2 1.80 / 1.40 (before / after), 2 x 1 2.50",
        # 1.5 = 2.0 / 2.5 x 2.5 / 1.6 x 1.6 / (16 / 12)
        "  4-session throughput / one session's audio rate 1.500"
        " = 4 sessions / engine 2 x 1 0.800 x engine 2 x 1 / 1 x 2 1.562 x engine 1 x 2 / one session 1.200",
    ]
    table = render(ours, peer, "a CPU", engine).splitlines()
    assert table[-4] == "  4-session throughput / Kokoro-FastAPI's: 1.250 (target >= 1.2) met"
    assert table[-3:] == engine_lines(ours, engine)
    assert render(ours, peer, "a CPU").splitlines()[-1] == (
        "engine alone: not measured (the server was not started here, runs no model, or --engine-seconds 0)"
    )


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--engine-seconds", "-1"], "--engine-seconds must be 0 or more, got -1.0"),
        (["--trials", "0"], "argument --trials: must be at least 1, got 0"),
    ],
)
def test_bad_arguments_are_refused_before_anything_starts(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["--peer-url", "http://127.0.0.1:9", *argv])
    assert exited.value.code == 2
    assert message in capsys.readouterr().err


def test_the_engine_alone_is_the_servers_own_and_none_for_the_zero_cost_engine() -> None:
    assert engine_alone(("--model-dir", "/nonexistent", "--engine", "zero"), 1.0) is None
