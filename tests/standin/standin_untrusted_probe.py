"""Run as a process by test_standin_untrusted: one session against a stand-in whose CA is not trusted.

A process of its own because the CRT reports the failed handshake 10-30 s later, from its own
thread, into a future already cancelled; that report must not land in another test.
Prints one JSON line: the error code and message the transport raised.
"""

from __future__ import annotations

import asyncio
import json
import tempfile
from pathlib import Path

from agent_app.speech.sagemaker import SageMakerTransport
from agent_app.speech.transport import SpeechTransportError
from local.sagemaker_standin import run_standin
from local.tls import generate_tls_material, write_tls_files
from speech_protocol import Synthesize
from tests.standin.standin_support import REGION, TEST_CREDENTIALS


async def probe(other_ca: Path) -> dict[str, str]:
    async with run_standin({"speech": "ws://127.0.0.1:9"}) as info:
        untrusting = SageMakerTransport(
            "speech",
            region=REGION,
            endpoint_url=info.url,
            ca_file=other_ca,
            credentials=TEST_CREDENTIALS,
            open_timeout_s=1.0,
        )
        try:
            async with untrusting.connect() as connection:
                await connection.send(Synthesize(text="Hello."))
                await connection.receive()
        except SpeechTransportError as exc:
            return {"code": exc.code.value, "message": exc.message}
    return {"code": "none", "message": "the session worked with an untrusted certificate"}


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        other = write_tls_files(generate_tls_material(), Path(tmp))
        print(json.dumps(asyncio.run(probe(other.ca_path))), flush=True)


if __name__ == "__main__":
    main()
