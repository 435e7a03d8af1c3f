"""Time to first audio, `stream` versus `batch`, for a scripted four-sentence answer at 40 tokens/s.

The whole offline path: scripted model -> Strands agent -> WebSocket -> the real speech server
(`kokoro_server.app`) -> agent events. Prints one row per trial and the medians; no assertion.

    python -m tests.agent.agent_ttfa --engine kokoro --trials 3   # the real Kokoro-82M (random weights)
    python -m tests.agent.agent_ttfa --engine zero                # protocol cost only
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
from dataclasses import dataclass
from typing import Literal

from agent_app.models import ScriptedModel, ScriptedTurn
from agent_app.speech.websocket import WebSocketTransport
from kokoro_server.app import create_app
from kokoro_server.engine import SpeechEngine, ZeroCostEngine
from kokoro_server.settings import Settings
from local.threaded_server import serve_in_thread
from speech_protocol import WS_PATH
from tests.agent.agent_support import FOUR_SENTENCES, collect, make_invocation

TOKENS_PER_S = 40.0
Mode = Literal["stream", "batch"]


@dataclass(frozen=True)
class Trial:
    mode: Mode
    first_text_ms: float
    first_audio_ms: float
    total_ms: float


async def run_trial(url: str, mode: Mode, text: str = FOUR_SENTENCES) -> Trial:
    model = ScriptedModel([ScriptedTurn(text)], tokens_per_s=TOKENS_PER_S)
    invocation = make_invocation(model, WebSocketTransport(url), mode=mode, deadline_s=300)
    events = await collect(invocation)
    metrics = events[-2]
    if metrics["type"] != "metrics":
        raise RuntimeError(f"the {mode} trial failed: {events[-1]}")
    return Trial(mode, metrics["time_to_first_text_ms"], metrics["time_to_first_audio_ms"], metrics["total_ms"])


async def measure(engine: SpeechEngine, trials: int, *, warmup: bool = False) -> list[Trial]:
    """`trials` runs per mode, modes alternating, against one speech server serving `engine`.

    `warmup` first runs each mode once unreported: the model's first call at a new input length is
    slower, and the chunks of the two modes differ in length.
    """
    results: list[Trial] = []
    with serve_in_thread(create_app(Settings(), engine)) as server:
        url = server.ws_url(WS_PATH)
        if warmup:
            for mode in ("stream", "batch"):
                await run_trial(url, mode)
        for index in range(trials):
            order: tuple[Mode, Mode] = ("stream", "batch") if index % 2 == 0 else ("batch", "stream")
            for mode in order:
                results.append(await run_trial(url, mode))
    return results


def report(results: list[Trial], engine_name: str) -> str:
    lines = [
        f"time to first audio, {len(FOUR_SENTENCES)}-character four-sentence answer at {TOKENS_PER_S:g} tokens/s, "
        f"engine {engine_name}",
        f"{'mode':<8}{'first text ms':>15}{'first audio ms':>16}{'total ms':>10}",
    ]
    lines += [f"{t.mode:<8}{t.first_text_ms:>15.1f}{t.first_audio_ms:>16.1f}{t.total_ms:>10.1f}" for t in results]
    medians = {
        mode: statistics.median(t.first_audio_ms for t in results if t.mode == mode) for mode in ("stream", "batch")
    }
    lines.append(
        f"median first audio: stream {medians['stream']:.1f} ms, batch {medians['batch']:.1f} ms, "
        f"stream is {medians['batch'] / medians['stream']:.2f}x sooner"
    )
    return "\n".join(lines)


def _engine(name: str) -> SpeechEngine:
    if name == "zero":
        return ZeroCostEngine()
    from kokoro_server.fake_weights import ensure_random_weights
    from kokoro_server.kokoro_engine import KokoroEngine

    return KokoroEngine.load(ensure_random_weights())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--engine", choices=("kokoro", "zero"), default="kokoro")
    parser.add_argument("--trials", type=int, default=3)
    args = parser.parse_args()
    results = asyncio.run(measure(_engine(args.engine), args.trials, warmup=args.engine == "kokoro"))
    print(report(results, args.engine))


if __name__ == "__main__":
    main()
