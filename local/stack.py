"""`python -m local.stack`: the whole product on this machine, no AWS account needed.

Starts, each as its own process, health-checked before the stack reports ready:

1. the speech container's server (`python -m kokoro_server`, port 8081): the real Kokoro-82M
   weights when present or downloadable, otherwise a generated random-weight checkpoint (the
   audio is noise, but every latency figure is real);
2. the SageMaker stand-in (`python -m local.sagemaker_standin`, HTTPS + HTTP/2 on 8443), so the
   agent uses its production SageMaker client (skipped with `--speech-transport websocket`);
3. the agent (`python -m agent_app`, AgentCore's contract on 8080): Bedrock when AWS credentials
   and BEDROCK_MODEL_ID are configured, otherwise the offline demo model (announced);
4. the browser page and its proxy (`python -m local.webserver`, 8000; skip: `--no-browser-server`);
5. with `--agentcore`, the AgentCore Runtime stand-in in front of the agent
   (`python -m local.agentcore_standin`, HTTPS on 8444, runtime `LOCAL_RUNTIME_ARN`), so that
   `voicestack talk --runtime-arn` and the latency lab's deployed target reach the agent the way
   they reach a deployed one (SigV4, AgentCore's limits). The summary prints the environment a
   caller needs (endpoint override, CA bundle, the stand-in's test credentials).

Ctrl-C or SIGTERM stops them all. `launch(StackConfig(...))` is the same launcher as an async
context manager (the latency lab and the tests use it).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import socket
import sys
import tempfile
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Final, Literal, get_args

import httpx

from kokoro_server import model_pin
from kokoro_server.weights import missing_files
from local.launcher import (
    HttpProbe,
    JsonLineProbe,
    LaunchError,
    LogSink,
    PrefixedLog,
    ProcessGroup,
    ProcessSpec,
    describe_exit,
)
from speech_protocol import WS_PATH

REPO_ROOT: Final = Path(__file__).resolve().parent.parent
LOCAL_RUNTIME_ARN: Final = "arn:aws:bedrock-agentcore:us-east-1:000000000000:runtime/voicestack_local-localstand"
"""The runtime the AgentCore stand-in serves the local agent as."""
SPEECH_PACKAGE_ROOT: Final = REPO_ROOT / "images" / "kokoro"
DEFAULT_REGION: Final = "us-east-1"
HUB_URL: Final = "https://huggingface.co"

SpeechTransportKind = Literal["sagemaker", "websocket"]
WeightsChoice = Literal["auto", "real", "random"]
SpeechEngineChoice = Literal["kokoro", "zero"]
ChunkingChoice = Literal["sentence", "none"]

STACK_LOG: Final = "stack"


class StackError(RuntimeError):
    """The stack cannot start as configured (a busy port, missing weights); the message says what to do."""


@dataclass(frozen=True, slots=True)
class StackConfig:
    """Everything `python -m local.stack` can be told; port 0 means: pick a free one."""

    host: str = "127.0.0.1"
    speech_port: int = 8081
    standin_port: int = 8443
    agent_port: int = 8080
    web_port: int = 8000
    speech_transport: SpeechTransportKind = "sagemaker"
    browser_server: bool = True
    weights: WeightsChoice = "auto"
    """auto: real weights when present or downloadable, else random; real: fail without them; random."""
    model_dir: Path | None = None
    """A directory with the published layout (config.json, kokoro-v1_0.pth, voices/); overrides lookup."""
    speech_engine: SpeechEngineChoice = "kokoro"
    """'zero' serves instant test audio with no model (for tests of the plumbing)."""
    speech_chunking: ChunkingChoice | None = None
    """The speech server's text chunking; None keeps its default ('sentence'). 'none' synthesizes each
    request whole, like the AWS sample's container (the latency lab compares against that)."""
    endpoint_name: str = "kokoro-local"
    speech_frame_ms: int | None = None
    """The speech server's longest audio frame (its `--frame-ms`, 20 to 10,000); None keeps its default
    (1000 ms). Any value reaches a caller the same way: the agent cuts its audio events to fit
    AgentCore's frames (`agent_app.frames`), so this only sets the pieces the container sends, e.g.
    to run the deployed container's setting locally."""
    agentcore: bool = False
    """Also start the AgentCore Runtime stand-in in front of the agent."""
    agentcore_port: int = 8444
    speech_ready_timeout_s: float = 600.0
    """First start on a CPU imports torch and loads and warms up the model."""


@dataclass(frozen=True, slots=True)
class Weights:
    """The model directory the speech server gets, and whether it holds the published weights."""

    model_dir: Path | None
    """None with the zero-cost engine, which needs no weights."""
    real: bool
    source: str


@dataclass(frozen=True, slots=True)
class StackUrls:
    """Where the running stack answers."""

    speech_url: str
    speech_ws_url: str
    agent_url: str
    standin_url: str | None
    ca_file: Path | None
    web_url: str | None
    agentcore_url: str | None = None
    """The AgentCore stand-in (`AWS_ENDPOINT_URL_BEDROCK_AGENTCORE`), when it runs."""
    agentcore_ca_file: Path | None = None
    """The CA its certificate chains to (`AWS_CA_BUNDLE`)."""
    agentcore_credentials: Mapping[str, str] | None = None
    """`AWS_ACCESS_KEY_ID` and `AWS_SECRET_ACCESS_KEY` of the principal it lets invoke the runtime."""


@dataclass(frozen=True, slots=True)
class RunningStack:
    config: StackConfig
    urls: StackUrls
    weights: Weights
    demo_model: bool
    group: ProcessGroup


# --- pure builders ----------------------------------------------------------------------------------


def child_env(base: Mapping[str, str]) -> dict[str, str]:
    """The environment every child starts from: importable packages, unbuffered logs, no model hub."""
    env = dict(base)
    paths = [str(REPO_ROOT), str(SPEECH_PACKAGE_ROOT)]
    if env.get("PYTHONPATH"):
        paths.append(env["PYTHONPATH"])
    env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))
    env["PYTHONUNBUFFERED"] = "1"
    # The weights are resolved before the speech server starts; nothing may wait on a hub after that.
    env["HF_HUB_OFFLINE"] = "1"
    return env


def speech_spec(config: StackConfig, weights: Weights, base_env: Mapping[str, str]) -> ProcessSpec:
    argv = [sys.executable, "-m", "kokoro_server", "--host", config.host, "--port", str(config.speech_port)]
    argv += ["--engine", config.speech_engine]
    if config.speech_chunking is not None:
        argv += ["--chunking", config.speech_chunking]
    if config.speech_frame_ms is not None:
        argv += ["--frame-ms", str(config.speech_frame_ms)]
    if weights.model_dir is not None:
        argv += ["--model-dir", str(weights.model_dir)]
    return ProcessSpec(
        name="speech",
        argv=tuple(argv),
        env=child_env(base_env),
        probe=HttpProbe(f"http://{config.host}:{config.speech_port}/ping"),
        ready_timeout_s=config.speech_ready_timeout_s,
    )


def standin_spec(config: StackConfig, cert_dir: Path, base_env: Mapping[str, str]) -> ProcessSpec:
    endpoint = f"{config.endpoint_name}=ws://{config.host}:{config.speech_port}"
    argv = [sys.executable, "-m", "local.sagemaker_standin", "--host", config.host, "--port", str(config.standin_port)]
    argv += ["--endpoint", endpoint, "--cert-dir", str(cert_dir)]
    return ProcessSpec(
        name="standin",
        argv=tuple(argv),
        env=child_env(base_env),
        probe=JsonLineProbe("event", "ready"),
        ready_timeout_s=60.0,
    )


def agentcore_spec(config: StackConfig, cert_dir: Path, base_env: Mapping[str, str]) -> ProcessSpec:
    runtime = f"{LOCAL_RUNTIME_ARN}=http://{config.host}:{config.agent_port}"
    argv = [
        sys.executable,
        "-m",
        "local.agentcore_standin",
        "--host",
        config.host,
        "--port",
        str(config.agentcore_port),
    ]
    argv += ["--runtime", runtime, "--region", DEFAULT_REGION, "--cert-dir", str(cert_dir)]
    return ProcessSpec(
        name="runtime",
        argv=tuple(argv),
        env=child_env(base_env),
        probe=JsonLineProbe("event", "ready"),
        ready_timeout_s=60.0,
    )


def agentcore_environment(urls: StackUrls) -> dict[str, str]:
    """What a caller exports to reach the AgentCore stand-in with the SDK's standard settings."""
    if urls.agentcore_url is None or urls.agentcore_ca_file is None or urls.agentcore_credentials is None:
        return {}
    return {
        "AWS_ENDPOINT_URL_BEDROCK_AGENTCORE": urls.agentcore_url,
        "AWS_CA_BUNDLE": str(urls.agentcore_ca_file),
        "AWS_DEFAULT_REGION": DEFAULT_REGION,
        **urls.agentcore_credentials,
    }


def agent_env(
    config: StackConfig,
    base_env: Mapping[str, str],
    *,
    credentials: bool,
    standin_url: str | None,
    ca_file: Path | None,
) -> dict[str, str]:
    """The agent's environment: speech through the stand-in (or straight to the WebSocket), and
    Bedrock only when credentials and BEDROCK_MODEL_ID are both there."""
    env = child_env(base_env)
    env.setdefault("AWS_REGION", base_env.get("AWS_DEFAULT_REGION", DEFAULT_REGION))
    if config.speech_transport == "sagemaker":
        if standin_url is None or ca_file is None:
            raise ValueError("the sagemaker transport needs the stand-in's URL and CA file")
        env["SPEECH_TRANSPORT"] = "sagemaker"
        env["SPEECH_ENDPOINT_NAME"] = config.endpoint_name
        env["AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME_HTTP2"] = standin_url
        env["SAGEMAKER_CA_FILE"] = str(ca_file)
        env.pop("SPEECH_WS_URL", None)
    else:
        env["SPEECH_TRANSPORT"] = "websocket"
        env["SPEECH_WS_URL"] = f"ws://{config.host}:{config.speech_port}{WS_PATH}"
        for key in ("SPEECH_ENDPOINT_NAME", "AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME_HTTP2", "SAGEMAKER_CA_FILE"):
            env.pop(key, None)
    if not credentials:
        # The stand-in requires a SigV4 signature but never checks it; any key signs.
        env["AWS_ACCESS_KEY_ID"] = "AKIDLOCALSTANDIN0000"
        env["AWS_SECRET_ACCESS_KEY"] = "local-stand-in-does-not-verify-signatures"
        env.pop("AWS_SESSION_TOKEN", None)
        env.pop("AWS_PROFILE", None)
        env.pop("BEDROCK_MODEL_ID", None)
    return env


def agent_spec(config: StackConfig, env: Mapping[str, str]) -> ProcessSpec:
    return ProcessSpec(
        name="agent",
        argv=(sys.executable, "-m", "agent_app", "--host", config.host, "--port", str(config.agent_port)),
        env=env,
        probe=HttpProbe(f"http://{config.host}:{config.agent_port}/ping"),
        ready_timeout_s=180.0,
    )


def web_spec(config: StackConfig, base_env: Mapping[str, str]) -> ProcessSpec:
    agent_url = f"http://{config.host}:{config.agent_port}"
    argv = [sys.executable, "-m", "local.webserver", "--host", config.host, "--port", str(config.web_port)]
    argv += ["--agent-url", agent_url]
    return ProcessSpec(
        name="web",
        argv=tuple(argv),
        env=child_env(base_env),
        probe=HttpProbe(f"http://{config.host}:{config.web_port}/api/health"),
        ready_timeout_s=60.0,
    )


def demo_model_reason(base_env: Mapping[str, str], *, credentials: bool) -> str | None:
    """Why the agent will answer with the demo model, or None when it will use Bedrock."""
    if not base_env.get("BEDROCK_MODEL_ID", "").strip():
        return "BEDROCK_MODEL_ID is not set"
    if not credentials:
        return "BEDROCK_MODEL_ID is set but no AWS credentials were found"
    return None


# --- ports, credentials, weights ------------------------------------------------------------------


def free_port(host: str) -> int:
    with socket.socket() as sock:
        sock.bind((host, 0))
        port: int = sock.getsockname()[1]
    return port


def port_in_use(host: str, port: int) -> bool:
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return True
    return False


def with_ports(config: StackConfig) -> StackConfig:
    """Port 0 becomes a free port; a busy port is an error naming its flag (before anything starts)."""
    taken: set[int] = set()

    def resolve(name: str, port: int, used: bool) -> int:
        if not used:
            return port
        flag = "--" + name.replace("_", "-")
        if port == 0:
            port = free_port(config.host)
        elif port_in_use(config.host, port):
            raise StackError(f"port {port} ({flag}) is in use: is another stack running? Choose another with {flag}")
        if port in taken:
            raise StackError(f"port {port} ({flag}) is given to two services")
        taken.add(port)
        return port

    return replace(
        config,
        speech_port=resolve("speech_port", config.speech_port, True),
        standin_port=resolve("standin_port", config.standin_port, config.speech_transport == "sagemaker"),
        agent_port=resolve("agent_port", config.agent_port, True),
        web_port=resolve("web_port", config.web_port, config.browser_server),
        agentcore_port=resolve("agentcore_port", config.agentcore_port, config.agentcore),
    )


def aws_credentials_present() -> bool:
    """Whether botocore finds credentials (env, profile, SSO...), without waiting long on IMDS."""
    # Imported here: ~0.5 s, and only this check needs it.
    import botocore.session  # type: ignore[import-untyped]

    session = botocore.session.Session()
    session.set_config_variable("metadata_service_timeout", 1)
    session.set_config_variable("metadata_service_num_attempts", 1)
    return session.get_credentials() is not None


def model_files() -> list[str]:
    return [model_pin.CONFIG_FILE, model_pin.CHECKPOINT_FILE] + [
        f"{model_pin.VOICES_DIR}/{voice}.pt" for voice in model_pin.DEFAULT_VOICES
    ]


def cached_real_weights(cache_dir: Path | None = None) -> Path | None:
    """The pinned release in the Hugging Face cache (`cache_dir`, default HF_HUB_CACHE), when every
    file the server needs is there."""
    from huggingface_hub import try_to_load_from_cache  # imported here: only the weight lookup needs it

    found: list[Path] = []
    for name in model_files():
        path = try_to_load_from_cache(model_pin.REPO_ID, name, cache_dir=cache_dir, revision=model_pin.REVISION)
        if not isinstance(path, str):
            return None
        found.append(Path(path))
    # Files of one snapshot share a directory: the snapshot root is the config file's parent.
    return found[0].parent


async def hub_reachable(timeout_s: float = 3.0) -> bool:
    try:
        async with httpx.AsyncClient(timeout=timeout_s) as client:
            await client.head(HUB_URL)
    except httpx.HTTPError:
        return False
    return True


async def _run_helper(group: ProcessGroup, name: str, argv: Sequence[str], env: Mapping[str, str]) -> str:
    """Run a one-shot helper with prefixed logs; its last stdout line is the answer."""
    process = await asyncio.create_subprocess_exec(
        *argv, env=dict(env), stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT
    )
    assert process.stdout is not None
    last = ""
    async for raw in process.stdout:
        last = raw.decode("utf-8", errors="replace").rstrip("\r\n")
        group.sink(name, last)
    if await process.wait() != 0:
        raise StackError(f"{' '.join(argv[1:])} failed with status {process.returncode} (see the '{name}' lines)")
    return last


async def download_real_weights(group: ProcessGroup, base_env: Mapping[str, str]) -> Path:
    """Download the pinned release (a few hundred MB) into the Hugging Face cache."""
    env = child_env(base_env)
    env["HF_HUB_OFFLINE"] = "0"  # the one place the stack talks to the hub, on purpose
    argv = [sys.executable, "-m", "local.stack", "download-weights"]
    return Path(await _run_helper(group, "weights", argv, env))


async def resolve_weights(config: StackConfig, group: ProcessGroup, base_env: Mapping[str, str]) -> Weights:
    say = group.sink
    if config.speech_engine == "zero":
        return Weights(None, real=False, source="none: the zero-cost engine")
    if config.model_dir is not None:
        missing = missing_files(config.model_dir)
        if missing:
            raise StackError(f"--model-dir {config.model_dir} is missing {', '.join(missing)}")
        return Weights(config.model_dir, real=True, source=f"--model-dir {config.model_dir}")
    if config.weights != "random":
        cached = cached_real_weights()
        if cached is not None:
            return Weights(cached, real=True, source="the Hugging Face cache")
        if await hub_reachable():
            say(STACK_LOG, "downloading the pinned Kokoro-82M weights (first run only)")
            return Weights(await download_real_weights(group, base_env), real=True, source="downloaded")
        if config.weights == "real":
            raise StackError("--weights real: the weights are not cached and the model hub is unreachable")
        say(STACK_LOG, "the real weights are not cached and the model hub is unreachable")
    say(STACK_LOG, "using the random-weight checkpoint (generated on first use, about 30 s)")
    path = await _run_helper(
        group, "weights", [sys.executable, "-m", "kokoro_server.fake_weights"], child_env(base_env)
    )
    return Weights(Path(path), real=False, source="random weights")


RANDOM_WEIGHTS_WARNING: Final = (
    "WARNING: the speech server runs Kokoro-82M with RANDOM WEIGHTS: the audio is noise, "
    "but the model does the real amount of work, so every latency figure is real."
)


# --- launch ------------------------------------------------------------------------------------------


SpeechSpecBuilder = Callable[[StackConfig, Weights, Mapping[str, str]], ProcessSpec]


@contextlib.asynccontextmanager
async def launch(
    config: StackConfig,
    *,
    sink: LogSink | None = None,
    base_env: Mapping[str, str] | None = None,
    speech: SpeechSpecBuilder = speech_spec,
) -> AsyncIterator[RunningStack]:
    """Start the stack, wait until every service is ready, stop it all on exit (or on failure).

    `speech` describes the speech server's process (a benchmark substitutes one with a simulated cost).
    """
    env = dict(os.environ if base_env is None else base_env)
    config = with_ports(config)
    group = ProcessGroup(sink)
    say = group.sink
    with tempfile.TemporaryDirectory(prefix="voicestack-stack-") as scratch:
        try:
            weights = await resolve_weights(config, group, env)
            say(STACK_LOG, f"weights: {weights.source}" + (f" ({weights.model_dir})" if weights.model_dir else ""))
            if weights.model_dir is not None and not weights.real:
                say(STACK_LOG, RANDOM_WEIGHTS_WARNING)
            credentials = await asyncio.to_thread(aws_credentials_present)
            reason = demo_model_reason(env, credentials=credentials)
            if reason is None:
                say(STACK_LOG, f"agent model: Bedrock {env['BEDROCK_MODEL_ID']}")
            else:
                say(STACK_LOG, f"agent model: the offline demo model ({reason}): a canned answer at 40 tokens/s")

            standin_url: str | None = None
            ca_file: Path | None = None
            agentcore_line: Mapping[str, object] = {}

            async def front() -> None:
                # Stand-in, agent and page need nothing from the speech server at start-up (they
                # connect per request), so they start while it loads its model: the slow part.
                nonlocal standin_url, ca_file, agentcore_line
                if config.speech_transport == "sagemaker":
                    standin = await group.start(standin_spec(config, Path(scratch), env))
                    line = standin.ready_line or {}
                    standin_url, ca_file = str(line["url"]), Path(str(line["ca_file"]))
                agent = agent_env(config, env, credentials=credentials, standin_url=standin_url, ca_file=ca_file)
                await group.start(agent_spec(config, agent))
                if config.agentcore:
                    front_door = await group.start(agentcore_spec(config, Path(scratch) / "agentcore", env))
                    agentcore_line = front_door.ready_line or {}
                if config.browser_server:
                    await group.start(web_spec(config, env))

            speech_server = await group.spawn(speech(config, weights, env))
            try:
                async with asyncio.TaskGroup() as tasks:
                    tasks.create_task(group.wait_ready(speech_server))
                    tasks.create_task(front())
            except* LaunchError as failures:
                raise failures.exceptions[0] from None
            urls = StackUrls(
                speech_url=f"http://{config.host}:{config.speech_port}",
                speech_ws_url=f"ws://{config.host}:{config.speech_port}{WS_PATH}",
                agent_url=f"http://{config.host}:{config.agent_port}",
                standin_url=standin_url,
                ca_file=ca_file,
                web_url=f"http://{config.host}:{config.web_port}" if config.browser_server else None,
                agentcore_url=str(agentcore_line["url"]) if agentcore_line else None,
                agentcore_ca_file=Path(str(agentcore_line["ca_file"])) if agentcore_line else None,
                agentcore_credentials=_credentials(agentcore_line.get("credentials")) if agentcore_line else None,
            )
            yield RunningStack(config, urls, weights, demo_model=reason is not None, group=group)
        finally:
            await group.aclose()


def _credentials(raw: object) -> dict[str, str]:
    if not isinstance(raw, dict):
        raise StackError("the AgentCore stand-in's ready line has no credentials")
    return {str(key): str(value) for key, value in raw.items()}


# --- command line ------------------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    defaults = StackConfig()
    parser = argparse.ArgumentParser(
        prog="python -m local.stack",
        description="Run the whole voicestack on this machine: speech server, SageMaker stand-in, agent, page.",
    )
    parser.add_argument("command", nargs="?", choices=["run", "download-weights"], default="run")
    parser.add_argument("--host", default=defaults.host, help="address every service binds (default %(default)s)")
    parser.add_argument("--speech-port", type=int, default=defaults.speech_port, help="speech server (%(default)s)")
    parser.add_argument(
        "--standin-port", type=int, default=defaults.standin_port, help="SageMaker stand-in (%(default)s)"
    )
    parser.add_argument("--agent-port", type=int, default=defaults.agent_port, help="agent (%(default)s)")
    parser.add_argument("--web-port", type=int, default=defaults.web_port, help="browser page (%(default)s)")
    parser.add_argument(
        "--speech-transport",
        choices=get_args(SpeechTransportKind),
        default=defaults.speech_transport,
        help="sagemaker: through the stand-in (as deployed); websocket: straight to the container",
    )
    parser.add_argument("--no-browser-server", action="store_true", help="do not serve the browser page")
    parser.add_argument(
        "--weights",
        choices=get_args(WeightsChoice),
        default=defaults.weights,
        help="auto: real weights when cached or downloadable, else random; real: require them; random",
    )
    parser.add_argument("--model-dir", type=Path, default=None, help="use the weights in this directory")
    parser.add_argument(
        "--speech-engine",
        choices=get_args(SpeechEngineChoice),
        default=defaults.speech_engine,
        help="zero: instant test audio and no model (checks the plumbing only)",
    )
    parser.add_argument("--endpoint-name", default=defaults.endpoint_name, help="the stand-in's endpoint name")
    parser.add_argument(
        "--speech-frame-ms",
        type=int,
        default=None,
        help="the speech server's longest audio frame in ms, 20 to 10000 (its default: 1000); the agent cuts "
        "its events to AgentCore's frame limit whatever it is",
    )
    parser.add_argument(
        "--agentcore",
        action="store_true",
        help="also run the AgentCore Runtime stand-in in front of the agent (for voicestack talk --runtime-arn)",
    )
    parser.add_argument(
        "--agentcore-port", type=int, default=defaults.agentcore_port, help="AgentCore stand-in (%(default)s)"
    )
    return parser


def config_from_args(args: argparse.Namespace) -> StackConfig:
    return StackConfig(
        host=args.host,
        speech_port=args.speech_port,
        standin_port=args.standin_port,
        agent_port=args.agent_port,
        web_port=args.web_port,
        speech_transport=args.speech_transport,
        browser_server=not args.no_browser_server,
        weights=args.weights,
        model_dir=args.model_dir,
        speech_engine=args.speech_engine,
        endpoint_name=args.endpoint_name,
        speech_frame_ms=args.speech_frame_ms,
        agentcore=args.agentcore,
        agentcore_port=args.agentcore_port,
    )


def summary_lines(stack: RunningStack) -> list[str]:
    """What is running where, for the console."""
    urls, weights = stack.urls, stack.weights
    if stack.config.speech_engine == "zero":
        speech = "zero-cost test engine: a test pattern, not speech"
    else:
        speech = "Kokoro-82M, " + ("published weights" if weights.real else "RANDOM weights: noise, real timings")
    lines = [f"  speech   {urls.speech_url}  ({speech})"]
    if urls.standin_url is not None:
        lines.append(f"  standin  {urls.standin_url}  (SageMaker endpoint {stack.config.endpoint_name!r})")
    model = "offline demo model" if stack.demo_model else "Bedrock"
    lines.append(f"  agent    {urls.agent_url}/invocations  ({model}, speech via {stack.config.speech_transport})")
    if urls.web_url is not None:
        lines.append(f"  page     {urls.web_url}")
    environment = agentcore_environment(urls)
    if environment:
        lines.append(f"  runtime  {urls.agentcore_url}  (AgentCore Runtime stand-in: {LOCAL_RUNTIME_ARN})")
        exports = " ".join(f"{key}={value}" for key, value in environment.items())
        lines.append(f"  talk     env {exports} voicestack talk --runtime-arn {LOCAL_RUNTIME_ARN}")
    return lines


async def serve(config: StackConfig) -> int:
    """Run until Ctrl-C/SIGTERM (0) or until a service dies (1)."""
    say = PrefixedLog()
    main_task = asyncio.current_task()
    assert main_task is not None
    loop = asyncio.get_running_loop()
    stopping = False

    def on_signal(sig: signal.Signals) -> None:
        nonlocal stopping
        if stopping:
            say(STACK_LOG, f"{sig.name} again: already stopping")
            return
        stopping = True
        say(STACK_LOG, f"{sig.name}: stopping")
        main_task.cancel()

    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, on_signal, sig)
    started = loop.time()
    try:
        async with launch(config, sink=say) as stack:
            say(STACK_LOG, f"ready in {loop.time() - started:.1f} s")
            for line in summary_lines(stack):
                say(STACK_LOG, line)
            if stack.weights.model_dir is not None and not stack.weights.real:
                say(STACK_LOG, RANDOM_WEIGHTS_WARNING)
            say(STACK_LOG, "Ctrl-C stops everything")
            target = stack.urls.web_url or f"{stack.urls.agent_url}/invocations (POST)"
            print(f"open {target}", flush=True)
            died = await stack.group.wait_for_exit()
            say(STACK_LOG, f"{died.spec.name} ended ({describe_exit(died.returncode or 0)}): stopping the stack")
            return 1
    except asyncio.CancelledError:
        if not stopping:
            raise
        say(STACK_LOG, "stopped")
        return 0
    except LaunchError as exc:
        say(STACK_LOG, f"{exc.name} did not start: {exc.reason}")
        return 1
    except StackError as exc:
        say(STACK_LOG, str(exc))
        return 2


def download_weights() -> Path:
    """Fetch the pinned release into the Hugging Face cache; returns the snapshot directory."""
    from huggingface_hub import hf_hub_download  # imported here: only this subcommand needs it

    paths = [hf_hub_download(model_pin.REPO_ID, name, revision=model_pin.REVISION) for name in model_files()]
    return Path(paths[0]).parent


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "download-weights":
        print(download_weights(), flush=True)
        return 0
    return asyncio.run(serve(config_from_args(args)))


if __name__ == "__main__":
    sys.exit(main())
