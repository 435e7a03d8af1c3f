"""`python -m bench.agent_clients`: what the agent's per-process clients save on every invocation.

Side by side in one run, through the local SageMaker stand-in (TLS, HTTP/2, the real SDK) to a
tiny WebSocket container that answers each request at once:

- per invocation (before): a new Bedrock model (its boto3 client) and a new SageMaker transport
  (botocore credential chain, SDK client, TLS connection) for every call;
- per process (now): both built once; each call opens one more stream on the pooled connection.

Prints, per call, the median and p90 of the set-up time and of the time to the first frame of a
speech session (set-up included). No network beyond 127.0.0.1; the Bedrock client is built, not
called. Figures on a shared machine are noisy: compare the two columns of one run.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import time
from collections.abc import Callable
from typing import Any

from websockets.asyncio.server import ServerConnection, serve

from agent_app.models import bedrock_model
from agent_app.speech.sagemaker import SageMakerTransport
from local.sagemaker_standin import StandInInfo, run_standin
from speech_protocol import SynthesisComplete, SynthesisStart, Synthesize, encode_server_event

ENDPOINT = "speech"
REGION = "us-east-1"


async def container(ws: ServerConnection) -> None:
    async for data in ws:
        if isinstance(data, str) and '"close"' in data:
            await ws.close()
            return
        await ws.send(encode_server_event(SynthesisStart(request_id="r")))
        await ws.send(b"\0\0" * 2400)
        await ws.send(encode_server_event(SynthesisComplete("r", 0.1, 1.0, 2.0, 1)))


def new_transport(info: StandInInfo) -> SageMakerTransport:
    return SageMakerTransport(ENDPOINT, region=REGION, endpoint_url=info.url, ca_file=info.ca_path)


async def one_call(setup: Callable[[], SageMakerTransport]) -> tuple[float, float]:
    """Set-up seconds, and seconds to the first frame of a session (set-up included)."""
    start = time.perf_counter()
    speech = setup()
    built = time.perf_counter()
    async with speech.connect() as connection:
        await connection.send(Synthesize(text="Hello.", request_id="r"))
        await connection.receive()
        first = time.perf_counter()
    return built - start, first - start


def row(name: str, values: list[float]) -> str:
    ms = sorted(v * 1000 for v in values)
    p90 = ms[min(len(ms) - 1, int(0.9 * len(ms)))]
    return f"{name:<34} median {statistics.median(ms):8.1f} ms   p90 {p90:8.1f} ms"


async def main(calls: int) -> None:
    # The stand-in does not check signatures; the credential chain still runs in full.
    os.environ.setdefault("AWS_ACCESS_KEY_ID", "AKIDBENCHAGENTCLIENTS")
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "not-a-secret")
    async with serve(container, "127.0.0.1", 0, compression=None) as server:
        url = f"ws://127.0.0.1:{server.sockets[0].getsockname()[1]}"
        async with run_standin({ENDPOINT: url}) as info:
            shared = new_transport(info)
            results: dict[str, list[tuple[float, float]]] = {"per invocation": [], "per process": []}
            model_builds: list[float] = []

            def per_invocation() -> SageMakerTransport:
                start = time.perf_counter()
                bedrock_model("us.amazon.nova-lite-v1:0", REGION)
                model_builds.append(time.perf_counter() - start)
                return new_transport(info)

            await one_call(lambda: shared)  # the per-process client is built once, at the first call
            for _ in range(calls):  # alternated, so both see the same machine load
                results["per invocation"].append(await one_call(per_invocation))
                results["per process"].append(await one_call(lambda: shared))
            await shared.aclose()

    print(f"agent clients, {calls} calls each (stand-in on 127.0.0.1)")
    print(row("Bedrock model build, per call", model_builds))
    for name, values in results.items():
        print(row(f"{name}: set-up", [setup for setup, _ in values]))
        print(row(f"{name}: first speech frame", [first for _, first in values]))
    before = statistics.median(first for _, first in results["per invocation"])
    after = statistics.median(first for _, first in results["per process"])
    print(f"median first speech frame, set-up included: before {before * 1000:.1f} ms, after {after * 1000:.1f} ms")


def cli(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.agent_clients", description=__doc__)
    parser.add_argument("--calls", type=int, default=20, help="calls measured per variant")
    args: Any = parser.parse_args(argv)
    asyncio.run(main(args.calls))


if __name__ == "__main__":
    cli()
