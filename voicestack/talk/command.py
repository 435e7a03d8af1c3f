"""`voicestack talk`: the command line, the console, Ctrl-C.

With a prompt it asks one question and exits; without one it reads questions line by line, each a
turn of one session, until end of input or Ctrl-C at the prompt. Ctrl-C while an answer streams
or plays stops it (barge-in) and, in a conversation, goes back to the prompt; a second Ctrl-C
during the stop gives up at once. The answer's text goes to stdout as it arrives; the session, the
notices and each turn's timings go to stderr, so `voicestack talk "..." > answer.txt` keeps only
the text. `--json` prints one line per turn on stdout instead of the text.

Exit codes: 0 answered; 1 the agent answered with an error event, or stopped the answer because
another connection of the session asked a question; 2 bad usage (the flag named);
3 the runtime or agent refused the call or could not be reached (the AWS code and the fix named),
or closed the connection mid-answer; 130 the answer was stopped with Ctrl-C (one question).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Final, TextIO
from urllib.parse import urlsplit

from speech_protocol import AUDIO_CHANNELS, SAMPLE_RATE
from voicestack.agentcore import conversation_session_problem, new_session_id
from voicestack.errors import CommandError, ExitCode, UsageError
from voicestack.talk import DEFAULT_URL
from voicestack.talk.audio import Player, SilentPlayer, open_player, write_wav
from voicestack.talk.client import run_turn
from voicestack.talk.conversation import Conversation
from voicestack.talk.targets import LocalAgent, Runtime, Target, open_conversation
from voicestack.talk.turn import CONNECTION_CLOSED, Transport, TurnResult

STOPPED_EXIT: Final = 130
"""What a shell reports for a command interrupted by Ctrl-C."""
AGENT_STOPPED: Final = "the agent stopped the answer: another connection of this session asked a question"


@dataclass(frozen=True)
class TalkOptions:
    """The command line, checked."""

    target: Target
    transport: Transport
    session_id: str
    resumed: bool
    prompt: str | None
    mode: str | None
    voice: str | None
    out: Path | None
    json: bool
    play: bool


def resolve_target(args: argparse.Namespace) -> Target:
    """The agent at `--url` (the local stack by default), or the runtime of `--stack` / `--runtime-arn`
    (`voicestack.runtime_target`, the resolver the page's remote mode and the lab use too)."""
    if args.runtime_arn is not None or args.stack is not None:
        from voicestack.runtime_target import resolve_runtime

        return Runtime.for_target(
            resolve_runtime(
                stack=args.stack,
                runtime_arn=args.runtime_arn,
                region=args.region,
                profile=args.profile,
                qualifier=args.qualifier,
            )
        )
    for flag in ("region", "profile", "qualifier"):
        if getattr(args, flag) is not None:
            raise UsageError(f"--{flag} applies to a runtime: pass --runtime-arn or --stack with it")
    url = args.url or DEFAULT_URL
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname or parts.path not in ("", "/") or parts.query:
        raise UsageError(f"--url {url!r} must be http://host:port (the agent's address, no path)")
    return LocalAgent(url)


def parse_options(args: argparse.Namespace) -> TalkOptions:
    """Check the command line; `UsageError` names the flag."""
    if args.prompt is not None and not args.prompt.strip():
        raise UsageError("the prompt is empty: give a question, or none for a conversation")
    if args.out is not None:
        if args.prompt is None:
            raise UsageError("--out needs a prompt: it writes the audio of one answer")
        if not args.out.parent.is_dir():
            raise UsageError(f"--out {args.out}: the folder {args.out.parent} does not exist")
    if args.session is not None and (problem := conversation_session_problem(args.session)) is not None:
        raise UsageError(
            f"--session {args.session!r}: a conversation's session id is {problem} "
            "(what AgentCore Runtime and AgentCore Memory both accept)"
        )
    return TalkOptions(
        target=resolve_target(args),
        transport=args.transport,
        session_id=args.session or new_session_id(),
        resumed=args.session is not None,
        prompt=args.prompt,
        mode=args.mode,
        voice=args.voice,
        out=args.out,
        json=args.json,
        play=not args.no_play,
    )


def payload_for(options: TalkOptions, prompt: str) -> dict[str, Any]:
    payload: dict[str, Any] = {"prompt": prompt}
    if options.mode is not None:
        payload["mode"] = options.mode
    if options.voice is not None:
        payload["voice"] = options.voice
    return payload


def closed_error(result: TurnResult) -> CommandError:
    message = result.error_message or ""
    fix = ""
    if "closed with 1009" in message:
        # AgentCore's answer to a message over its frame limit: this agent cuts its events to fit
        # (agent_app.frames), so it is a question that long, or a runtime running another agent.
        fix = (
            ". Fix: a WebSocket message was over AgentCore's 32 KB frame limit: ask a shorter question, or check "
            "that the runtime runs this project's agent (it keeps every event under the limit); "
            "--transport sse has no frame limit"
        )
    return CommandError(ExitCode.UNREACHABLE, f"the answer was cut off: {message}{fix}")


# --- the console ------------------------------------------------------------------------------


class LineReader:
    """Lines of stdin, read without blocking the event loop (a terminal, a pipe or a file)."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self._lines: asyncio.Queue[str | None] = asyncio.Queue()
        self._pending = b""
        self._watching = False

    def start(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            loop.add_reader(self._stream.fileno(), self._readable)
            self._watching = True
        except (PermissionError, OSError, ValueError):  # a regular file cannot be watched: read it in a thread
            self._watching = False

    def _readable(self) -> None:
        data = os.read(self._stream.fileno(), 65536)
        if not data:
            asyncio.get_running_loop().remove_reader(self._stream.fileno())
            if self._pending:
                self._lines.put_nowait(self._pending.decode("utf-8", "replace"))
            self._lines.put_nowait(None)
            return
        self._pending += data
        *lines, self._pending = self._pending.split(b"\n")
        for line in lines:
            self._lines.put_nowait(line.decode("utf-8", "replace"))

    async def readline(self) -> str | None:
        """The next line without its newline; None at end of input."""
        if self._watching:
            return await self._lines.get()
        line = await asyncio.to_thread(self._stream.readline)
        return line.rstrip("\n") if line else None

    def close(self) -> None:
        if self._watching:
            asyncio.get_running_loop().remove_reader(self._stream.fileno())


class Console:
    """What Ctrl-C means right now: stop the answer (while one streams or plays), or quit."""

    def __init__(self) -> None:
        self.answer_stop: asyncio.Event | None = None
        self.quit = asyncio.Event()
        self._main: asyncio.Task[Any] | None = None

    def install(self) -> None:
        self._main = asyncio.current_task()
        asyncio.get_running_loop().add_signal_handler(signal.SIGINT, self._interrupt)

    def uninstall(self) -> None:
        asyncio.get_running_loop().remove_signal_handler(signal.SIGINT)

    def _interrupt(self) -> None:
        if self.answer_stop is None:
            self.quit.set()
        elif not self.answer_stop.is_set():
            self.answer_stop.set()
        elif self._main is not None:  # a second Ctrl-C while stopping
            self._main.cancel()


def say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


async def _answer(
    conversation: Conversation, options: TalkOptions, prompt: str, *, number: int, console: Console, player: Player
) -> TurnResult:
    console.answer_stop = asyncio.Event()
    try:
        echo = None if options.json else _echo
        result = await run_turn(
            conversation,
            payload_for(options, prompt),
            number=number,
            stop=console.answer_stop,
            on_text=echo,
            player=player,
            keep_audio=options.out is not None,
        )
        if result.outcome == "ok" and not console.answer_stop.is_set():
            drained = asyncio.create_task(player.drain())
            stopped = asyncio.create_task(console.answer_stop.wait())
            await asyncio.wait([drained, stopped], return_when=asyncio.FIRST_COMPLETED)
            for task in (drained, stopped):
                task.cancel()
            if console.answer_stop.is_set():
                player.clear()
                result = _as_stopped(result)
    finally:
        console.answer_stop = None
    _report(result, options)
    return result


def _as_stopped(result: TurnResult) -> TurnResult:
    return replace(result, outcome="stopped", stopped_by="caller")


def _echo(text: str) -> None:
    sys.stdout.write(text)
    sys.stdout.flush()


def _report(result: TurnResult, options: TalkOptions) -> None:
    if options.json:
        print(result.json_line(), flush=True)
        return
    print(flush=True)  # ends the answer's line
    if result.outcome == "stopped":
        say("(stopped)" if result.stopped_by == "caller" else f"({AGENT_STOPPED})")
    elif result.outcome == "error":
        say(f"error: {result.error_code}: {result.error_message}")
    say(result.summary())


async def talk(options: TalkOptions) -> int:
    console = Console()
    console.install()
    player: Player = SilentPlayer()
    if options.play:
        player, notice = open_player(SAMPLE_RATE, AUDIO_CHANNELS)
        if notice is not None:
            say(f"voicestack talk: {notice}")

    def reconnecting(code: int | None, reason: str) -> None:
        closed = f"{code} {reason}".strip()
        say(f"voicestack talk: reconnecting on session {options.session_id} (the connection had closed: {closed})")

    conversation = open_conversation(options.target, options.transport, options.session_id, on_reconnect=reconnecting)
    how = "resuming" if options.resumed else "session"
    say(
        f"voicestack talk: {how} {options.session_id} with {conversation.target} over {options.transport}"
        + ("" if options.resumed else f" (resume it with --session {options.session_id})")
    )
    try:
        if options.prompt is not None:
            return await _one_question(conversation, options, console, player)
        return await _conversation(conversation, options, console, player)
    except asyncio.CancelledError:
        say("voicestack talk: interrupted")
        return STOPPED_EXIT
    finally:
        console.uninstall()
        player.close()
        await conversation.aclose()
        await options.target.aclose()


async def _one_question(conversation: Conversation, options: TalkOptions, console: Console, player: Player) -> int:
    assert options.prompt is not None
    result = await _answer(conversation, options, options.prompt, number=1, console=console, player=player)
    if options.out is not None:
        write_wav(options.out, result.pcm, sample_rate=result.sample_rate, channels=result.channels)
        say(f"voicestack talk: wrote {len(result.pcm):,} bytes of audio to {options.out}")
    if result.outcome == "stopped" and result.stopped_by == "agent":
        raise CommandError(ExitCode.FAILED, f"{AGENT_STOPPED} (session {result.session_id})")
    if result.outcome == "stopped":
        return STOPPED_EXIT
    if result.outcome == "error":
        if result.error_code == CONNECTION_CLOSED:
            raise closed_error(result)
        raise CommandError(
            ExitCode.FAILED, f"the agent answered with an error: {result.error_code}: {result.error_message}"
        )
    return int(ExitCode.OK)


async def _conversation(conversation: Conversation, options: TalkOptions, console: Console, player: Player) -> int:
    reader = LineReader(sys.stdin)
    reader.start()
    interactive = sys.stdin.isatty()
    number = 0
    try:
        while True:
            if interactive:
                sys.stderr.write("you> ")
                sys.stderr.flush()
            line_task = asyncio.create_task(reader.readline())
            quit_task = asyncio.create_task(console.quit.wait())
            await asyncio.wait([line_task, quit_task], return_when=asyncio.FIRST_COMPLETED)
            quit_task.cancel()
            if console.quit.is_set():
                line_task.cancel()
                if interactive:
                    sys.stderr.write("\n")
                return int(ExitCode.OK)
            line = line_task.result()
            if line is None:
                return int(ExitCode.OK)
            if not line.strip():
                continue
            number += 1
            await _answer(conversation, options, line, number=number, console=console, player=player)
    finally:
        reader.close()


def run(args: argparse.Namespace) -> int:
    options = parse_options(args)
    return asyncio.run(talk(options))
