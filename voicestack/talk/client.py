"""One question, asked and answered: the one implementation behind `voicestack talk` and the
latency lab's deployed target.

`run_turn` sends the question over a `Conversation`, applies the events as they arrive
(`TurnRecorder`: text to `on_text`, PCM to the player), and ends with a `TurnResult`. Setting
`stop` is a barge-in: the player drops its buffer at once, the agent is told (WebSocket `stop`,
then the client reads on until `turn_stopped`, at most `STOP_TIMEOUT_S`) or hung up on (SSE), and
nothing that arrives after the stop is shown or played.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping
from typing import Any

from voicestack.talk.audio import Player
from voicestack.talk.conversation import STOP_TIMEOUT_S, Conversation, TurnFailed
from voicestack.talk.turn import PROTOCOL_ERROR, TurnProtocolError, TurnRecorder, TurnResult


async def run_turn(
    conversation: Conversation,
    payload: Mapping[str, Any],
    *,
    number: int,
    stop: asyncio.Event | None = None,
    on_text: Callable[[str], None] | None = None,
    player: Player | None = None,
    keep_audio: bool = False,
    clock: Callable[[], float] = time.perf_counter,
) -> TurnResult:
    """Ask `payload` as turn `number`; refusals raise `CommandError`, everything else is in the result."""
    mode = payload.get("mode")
    try:
        turn, sent_at, connect_ms = await conversation.ask(payload)
    except TurnFailed as failed:
        recorder = TurnRecorder(started=clock(), clock=clock, mode=mode if isinstance(mode, str) else None)
        recorder.fail(failed.code, failed.message)
        return _finish(recorder, conversation, number, stopped=False, connect_ms=None)
    recorder = TurnRecorder(
        started=sent_at, clock=clock, keep_audio=keep_audio, mode=mode if isinstance(mode, str) else None
    )
    silenced = False

    async def consume() -> None:
        async for event, wire_bytes in turn.events():
            update = recorder.apply(event, wire_bytes)
            if not silenced:
                if update.text and on_text is not None:
                    on_text(update.text)
                if update.pcm and player is not None:
                    player.play(update.pcm)
            if update.done:
                return

    consumer = asyncio.create_task(consume(), name=f"turn-{number}")
    stopped = False
    if stop is None:
        await asyncio.wait([consumer])
    else:
        stopper = asyncio.create_task(stop.wait())
        await asyncio.wait([consumer, stopper], return_when=asyncio.FIRST_COMPLETED)
        stopper.cancel()
        if not consumer.done():
            stopped, silenced = True, True
            if player is not None:
                player.clear()
            if await turn.stop():
                await asyncio.wait([consumer], timeout=STOP_TIMEOUT_S)
            consumer.cancel()
            await asyncio.wait([consumer])
    if not consumer.cancelled() and (failure := consumer.exception()) is not None:
        if isinstance(failure, TurnFailed):
            recorder.fail(failure.code, failure.message)
        elif isinstance(failure, TurnProtocolError):
            recorder.fail(PROTOCOL_ERROR, str(failure))
        else:
            raise failure
    return _finish(recorder, conversation, number, stopped=stopped, connect_ms=connect_ms)


def _finish(
    recorder: TurnRecorder, conversation: Conversation, number: int, *, stopped: bool, connect_ms: float | None
) -> TurnResult:
    return recorder.finish(
        turn=number,
        session_id=conversation.session_id,
        transport=conversation.transport,
        target=conversation.target,
        stopped=stopped,
        connect_ms=connect_ms,
    )
