"""`python -m bench.pinger URL [INTERVAL_S]`: GET URL/ping every interval until stdin closes.

A separate, light process (httpx only), so that a benchmark's own clients cannot delay the probe:
what it measures is the server's health-check latency. Prints `ready` once the first ping is
answered, then, after stdin closes, one JSON line with every latency in milliseconds.
"""

from __future__ import annotations

import json
import select
import sys
import time

import httpx


def stdin_closed() -> bool:
    readable, _, _ = select.select([sys.stdin], [], [], 0)
    return bool(readable) and not sys.stdin.readline()


def main(argv: list[str]) -> int:
    url, interval_s = argv[0], float(argv[1]) if len(argv) > 1 else 0.02
    latencies: list[float] = []
    with httpx.Client(timeout=30) as client:
        client.get(f"{url}/ping")
        print("ready", flush=True)
        while not stdin_closed():
            started = time.perf_counter()
            client.get(f"{url}/ping")
            latencies.append((time.perf_counter() - started) * 1000)
            time.sleep(interval_s)
    print(json.dumps(latencies), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
