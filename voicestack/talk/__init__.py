"""`voicestack talk`: speak with the agent, local or deployed, and hear it answer.

    voicestack talk "How does streaming speech work?"              # the local stack's agent
    voicestack talk --stack dev                                    # a conversation with a deployed stack
    voicestack talk --runtime-arn ARN [--region R] [--profile P] "question" --out answer.wav
    voicestack talk --transport sse --json "question"              # InvokeAgentRuntime, one JSON line

Targets: the local stack's agent by default (`--url` for another address: the agent's own
routes, nothing signed); `--stack NAME` reads the runtime ARN and region from `pulumi stack output`;
`--runtime-arn ARN` (its region by default) works without Pulumi. A runtime is called with the
AWS SDK's standard configuration, for the WebSocket as much as for InvokeAgentRuntime: credentials
from the environment, `--profile`, SSO or a role; the endpoint from
`AWS_ENDPOINT_URL_BEDROCK_AGENTCORE` or the profile's `services` section; trust from
`AWS_CA_BUNDLE` or the profile's `ca_bundle` (TLS-inspecting proxies).

The modules: `command` (flags, console, Ctrl-C), `client` (one turn: `run_turn`, which the latency
lab uses too), `conversation` (the two routes), `targets` (local agent, AgentCore runtime),
`turn` (events checked and timed), `sse` (the SSE parser), `audio` (playback, WAV), `errors` (what
to tell the user).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Final

DEFAULT_URL: Final = "http://127.0.0.1:8080"
"""The local stack's agent (`make local`)."""
MODES: Final = ("stream", "batch")


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Adds `talk`; what it runs (websockets, boto3, PortAudio) is imported only when it runs."""
    parser = commands.add_parser(
        "talk",
        help="speak with the agent (local stack or a deployed runtime) and hear it answer",
        description=(__doc__ or "").split("\n\n", 1)[0],
    )
    add_arguments(parser)
    parser.set_defaults(run=_run)


def _run(args: argparse.Namespace) -> int:
    from voicestack.talk.command import run

    return run(args)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("prompt", nargs="?", help="one question; without it, a conversation (one line per turn)")
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--url", help=f"an agent at this address, no AWS (default: the local stack, {DEFAULT_URL})")
    where.add_argument("--stack", metavar="NAME", help="the runtime of this Pulumi stack (`pulumi stack output`)")
    where.add_argument("--runtime-arn", metavar="ARN", help="this AgentCore runtime")
    parser.add_argument("--region", help="the runtime's region (default: the ARN's)")
    parser.add_argument("--profile", help="the AWS profile to call with (default: the SDK's usual chain)")
    parser.add_argument("--qualifier", help="the runtime endpoint (default DEFAULT)")
    parser.add_argument(
        "--transport",
        choices=("websocket", "sse"),
        default="websocket",
        help="websocket: the full-duplex route (default); sse: InvokeAgentRuntime / POST /invocations",
    )
    parser.add_argument("--mode", choices=MODES, help="stream: speak sentence by sentence; batch: after the text")
    parser.add_argument("--voice", help="one of the speech server's voices (default: the agent's)")
    parser.add_argument("--session", metavar="ID", help="resume this session (default: a new one)")
    parser.add_argument("--out", type=Path, metavar="FILE.wav", help="write the answer's audio (needs a prompt)")
    parser.add_argument("--json", action="store_true", help="one JSON line per turn on stdout instead of the text")
    parser.add_argument("--no-play", action="store_true", help="do not play the audio")
