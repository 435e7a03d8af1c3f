"""The page's pure modules, run in headless Chromium: SSE parsing under adversarial splits, PCM
decoding with odd-byte carries, the ring buffer, event validation, the answer session, and which
turn's messages the conversation socket gives a question (over a fake WebSocket)."""

from __future__ import annotations

import base64
import json
import random
from typing import Any

import pytest
from playwright.sync_api import Page

from tests.local.local_fakes import WebStacks, agent_events, paced_script, pcm_bytes, pcm_samples, sse_bytes

pytestmark = pytest.mark.browser


@pytest.fixture
def harness(page: Page, web_stacks: WebStacks) -> Page:
    """The page, loaded from the web server (modules import from the same origin)."""
    stack = web_stacks.start(paced_script(lambda _: []))
    page.goto(stack.url + "/")
    page.wait_for_function("document.getElementById('health').dataset.state === 'ok'")
    return page


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def message_events(events: list[dict[str, Any]]) -> list[dict[str, str]]:
    """What SseParser must produce for an AgentCore stream of `events`."""
    return [{"type": "message", "data": json.dumps(e, ensure_ascii=False), "id": ""} for e in events]


# Parses `bytes` cut at each list of cut points and compares with the expected events in the page,
# so that thousands of splits cost one round trip. Returns the failing cut lists (at most 5).
PARSE_WITH_CUTS = """
async ({ streamB64, expected, cutLists }) => {
  const { SseParser } = await import("/sse.js");
  const bytes = Uint8Array.fromBase64(streamB64);
  const expectedJson = JSON.stringify(expected);
  const parse = (cuts) => {
    const parser = new SseParser();
    const events = [];
    let previous = 0;
    for (const cut of [...cuts, bytes.length]) {
      events.push(...parser.feed(bytes.slice(previous, cut)));
      previous = cut;
    }
    const end = parser.end();
    events.push(...end.events);
    return { events, truncated: end.truncated };
  };
  const failures = [];
  for (const cuts of cutLists) {
    const result = parse(cuts);
    if (result.truncated || JSON.stringify(result.events) !== expectedJson) {
      if (failures.length < 5) failures.push({ cuts, result });
    }
  }
  return { checked: cutLists.length, failures, whole: parse([]) };
}
"""


def small_stream() -> tuple[bytes, list[dict[str, Any]]]:
    """A complete stream-mode answer of ~2.5 kB: every split point of it is checked."""
    events = agent_events("stream", pcm_bytes(pcm_samples(101)), chunk_sizes=[37, 64, 101])
    return sse_bytes(events), events


def run_cuts(page: Page, stream: bytes, events: list[dict[str, Any]], cut_lists: list[list[int]]) -> dict[str, Any]:
    result: dict[str, Any] = page.evaluate(
        PARSE_WITH_CUTS, {"streamB64": b64(stream), "expected": message_events(events), "cutLists": cut_lists}
    )
    assert result["whole"] == {"events": message_events(events), "truncated": False}
    return result


def test_sse_parser_gives_the_same_events_at_every_split_point(harness: Page) -> None:
    stream, events = small_stream()
    assert len(events) == 16  # agent_start, 8 text deltas, audio_start, 3 chunks, audio_end, metrics, agent_end
    result = run_cuts(harness, stream, events, [[i] for i in range(len(stream) + 1)])
    assert result["checked"] == len(stream) + 1
    assert result["failures"] == []


def test_sse_parser_one_byte_at_a_time(harness: Page) -> None:
    stream, events = small_stream()
    result = run_cuts(harness, stream, events, [list(range(1, len(stream)))])
    assert result["failures"] == []


def test_sse_parser_splits_inside_utf8_characters_and_base64(harness: Page) -> None:
    stream, events = small_stream()
    text = stream.decode("utf-8")
    inside_utf8: list[int] = []
    byte_pos = 0
    for char in text:
        width = len(char.encode("utf-8"))
        inside_utf8.extend(byte_pos + k for k in range(1, width))
        byte_pos += width
    inside_base64: list[int] = []
    for event in events:
        if event["type"] == "audio_chunk":
            start = stream.index(event["audio"].encode("ascii"))
            inside_base64.extend(range(start + 1, start + len(event["audio"])))
    # 2-, 3- and 4-byte characters contribute 1, 2 and 3 interior offsets each.
    assert len(inside_utf8) == sum(len(c.encode()) - 1 for c in "—éï日本語😀")
    assert len(inside_base64) == sum(len(e["audio"]) - 1 for e in events if e["type"] == "audio_chunk")
    cut_lists = [sorted({u, b}) for u in inside_utf8 for b in inside_base64[::7]]
    cut_lists += [[u, u + 1] for u in inside_utf8]  # two cuts inside the same character
    result = run_cuts(harness, stream, events, cut_lists)
    assert result["checked"] == len(cut_lists)
    assert result["failures"] == []


def test_sse_parser_random_splits_of_a_long_answer(harness: Page) -> None:
    events = agent_events("stream", pcm_bytes(pcm_samples(24_000)), chunk_sizes=[4801, 7200, 9599])
    stream = sse_bytes(events)
    rng = random.Random(20261129)
    cut_lists = [sorted(rng.sample(range(1, len(stream)), rng.randint(1, 40))) for _ in range(300)]
    result = run_cuts(harness, stream, events, cut_lists)
    assert result["failures"] == []


SSE_SPEC_CASES: list[tuple[str, list[bytes], list[dict[str, str]], bool]] = [
    # A CRLF split between chunks is one line ending, not a line ending plus a blank line.
    ("crlf_split", [b"data: a\r", b"\ndata: b\r\n\r\n"], [{"type": "message", "data": "a\nb", "id": ""}], False),
    ("crlf_in_one_chunk", [b"data: a\r\ndata: b\r\n\r\n"], [{"type": "message", "data": "a\nb", "id": ""}], False),
    ("lone_cr", [b"data: a\rdata: b\r\r"], [{"type": "message", "data": "a\nb", "id": ""}], False),
    ("cr_at_chunk_end_then_blank", [b"data: a\r", b"\r"], [{"type": "message", "data": "a", "id": ""}], False),
    (
        "comments_and_fields",
        [b": keep-alive\n", b"event: speech\nid: 7\ndata:no-space\ndata\n\n", b"data: x\n\n"],
        [{"type": "speech", "data": "no-space\n", "id": "7"}, {"type": "message", "data": "x", "id": "7"}],
        False,
    ),
    ("bom_is_dropped", [b"\xef\xbb", b"\xbfdata: a\n\n"], [{"type": "message", "data": "a", "id": ""}], False),
    ("blank_lines_without_data", [b"\n\n\nevent: x\n\n"], [], False),
    ("unknown_field_ignored", [b"foo: bar\ndata: 1\n\n"], [{"type": "message", "data": "1", "id": ""}], False),
    ("truncated_event", [b"data: 1\n\ndata: 2"], [{"type": "message", "data": "1", "id": ""}], True),
    ("truncated_after_data_line", [b"data: 2\n"], [], True),
    # Half a character at the very end is flushed by the decoder as U+FFFD: the stream is cut.
    ("truncated_inside_character", [b"data: 1\n\n\xe2\x82"], [{"type": "message", "data": "1", "id": ""}], True),
]


@pytest.mark.parametrize(
    ("chunks", "expected", "truncated"),
    [case[1:] for case in SSE_SPEC_CASES],
    ids=[case[0] for case in SSE_SPEC_CASES],
)
def test_sse_parser_follows_the_event_stream_rules(
    harness: Page, chunks: list[bytes], expected: list[dict[str, str]], truncated: bool
) -> None:
    result = harness.evaluate(
        """async (chunks) => {
          const { SseParser } = await import("/sse.js");
          const parser = new SseParser();
          const events = [];
          for (const chunk of chunks) events.push(...parser.feed(Uint8Array.fromBase64(chunk)));
          const end = parser.end();
          return { events: [...events, ...end.events], truncated: end.truncated };
        }""",
        [b64(c) for c in chunks],
    )
    assert result == {"events": expected, "truncated": truncated}


def test_sse_parser_reads_retry_only_when_numeric(harness: Page) -> None:
    result = harness.evaluate(
        """async () => {
          const { SseParser } = await import("/sse.js");
          const parser = new SseParser();
          const enc = new TextEncoder();
          parser.feed(enc.encode("retry: 1500\\n"));
          const first = parser.retryMs;
          parser.feed(enc.encode("retry: 2s\\n"));
          return [first, parser.retryMs];
        }"""
    )
    assert result == [1500, 1500]


# --- PCM ----------------------------------------------------------------------------------------

DECODE_CHUNKS = """
async (chunksB64) => {
  const { decodeBase64, Pcm16Decoder } = await import("/pcm.js");
  const decoder = new Pcm16Decoder();
  const samples = [];
  const pending = [];
  for (const chunk of chunksB64) {
    samples.push(...decoder.push(decodeBase64(chunk)));
    pending.push(decoder.pendingBytes);
  }
  return { samples, pending, leftover: decoder.end(), afterEnd: decoder.pendingBytes };
}
"""


def test_pcm_decoder_carries_the_odd_byte_at_every_split_point(harness: Page) -> None:
    samples = pcm_samples(11)  # 0, 1, -1, 255, 256, -256, -257, 32767, -32768, 12345, -12345
    data = pcm_bytes(samples)
    results = harness.evaluate(
        f"async (splits) => Promise.all(splits.map((chunks) => ({DECODE_CHUNKS})(chunks)))",
        [[b64(data[:i]), b64(data[i:])] for i in range(len(data) + 1)],
    )
    for i, result in enumerate(results):
        assert result == {"samples": samples, "pending": [i % 2, 0], "leftover": 0, "afterEnd": 0}, i


def test_pcm_decoder_odd_chunk_sizes_and_a_trailing_half_sample(harness: Page) -> None:
    samples = pcm_samples(40, offset=3)
    data = pcm_bytes(samples) + b"\x7f"  # half a sample at the end: reported, never played
    sizes = [1, 3, 5, 2, 7, 1, 1]
    chunks: list[bytes] = []
    pos = 0
    i = 0
    while pos < len(data):
        chunks.append(data[pos : pos + sizes[i % len(sizes)]])
        pos += sizes[i % len(sizes)]
        i += 1
    result = harness.evaluate(DECODE_CHUNKS, [b64(c) for c in chunks])
    expected_pending = []
    total = 0
    for chunk in chunks:
        total += len(chunk)
        expected_pending.append(total % 2)
    assert result == {"samples": samples, "pending": expected_pending, "leftover": 1, "afterEnd": 0}


def test_pcm_floats_and_invalid_base64(harness: Page) -> None:
    result = harness.evaluate(
        """async () => {
          const { decodeBase64, pcm16ToFloat32 } = await import("/pcm.js");
          const floats = Array.from(pcm16ToFloat32(new Int16Array([-32768, -16384, 0, 16384, 32767])));
          const rejects = [];
          for (const bad of ["abc", "ab$=", "a===", "YW Jj"]) {
            try { decodeBase64(bad); rejects.push("accepted"); } catch (err) { rejects.push(err.name); }
          }
          return { floats, rejects, empty: decodeBase64("").length, hi: Array.from(decodeBase64("/+8=")) };
        }"""
    )
    assert result == {
        "floats": [-1.0, -0.5, 0.0, 0.5, 32767 / 32768],
        "rejects": ["TypeError"] * 4,
        "empty": 0,
        "hi": [0xFF, 0xEF],
    }


# --- ring buffer, events, session ------------------------------------------------------------------


def test_ring_buffer_wraps_and_grows_in_order(harness: Page) -> None:
    result = harness.evaluate(
        """async () => {
          const { FloatRingBuffer } = await import("/ring-buffer.js");
          const ring = new FloatRingBuffer(4);
          const out = new Float32Array(10);
          ring.write(new Float32Array([1, 2, 3]));
          const first = ring.read(out.subarray(0, 2));
          ring.write(new Float32Array([4, 5]));          // wraps around the end
          const wrapped = ring.capacity;
          ring.write(new Float32Array([6, 7, 8, 9]));    // does not fit: grows, keeps order
          const count = ring.read(out.subarray(2));
          const empty = ring.read(new Float32Array(4));
          let error = null;
          try { new FloatRingBuffer(0); } catch (err) { error = err.name; }
          const grown = ring.capacity;
          return { first, wrapped, grown, count, out: Array.from(out), empty, length: ring.length, error };
        }"""
    )
    assert result == {
        "first": 2,
        "wrapped": 4,
        "grown": 8,
        "count": 7,
        "out": [1, 2, 3, 4, 5, 6, 7, 8, 9, 0],
        "empty": 0,
        "length": 0,
        "error": "RangeError",
    }


def test_agent_event_validation(harness: Page) -> None:
    result = harness.evaluate(
        """async () => {
          const { parseAgentEvent, AudioSequence } = await import("/events.js");
          const code = (fn) => { try { fn(); return "ok"; } catch (err) { return err.code; } };
          const seq = new AudioSequence();
          seq.accept(0, 10);
          return {
            agentcore: parseAgentEvent('{"error": "boom"}'),
            text: parseAgentEvent('{"type": "text_delta", "text": "hi"}'),
            invalidJson: code(() => parseAgentEvent("{")),
            array: code(() => parseAgentEvent("[1]")),
            unknown: code(() => parseAgentEvent('{"type": "bogus"}')),
            negativeSeq: code(() => parseAgentEvent('{"type": "audio_chunk", "seq": -1, "audio": ""}')),
            textMissing: code(() => parseAgentEvent('{"type": "text_delta"}')),
            stereo: code(() => parseAgentEvent(
              '{"type": "audio_start", "format": "pcm_s16le", "sample_rate": 24000, "channels": 2}',
            )),
            gap: code(() => seq.accept(2, 10)),
            next: code(() => seq.accept(1, 4)),
            mismatch: code(() => seq.finish({ chunks: 2, bytes: 15 })),
            matches: code(() => seq.finish({ chunks: 2, bytes: 14 })),
          };
        }"""
    )
    assert result == {
        "agentcore": {"type": "error", "code": "agent_exception", "message": "boom"},
        "text": {"type": "text_delta", "text": "hi"},
        "invalidJson": "invalid_json",
        "array": "not_an_object",
        "unknown": "unknown_type",
        "negativeSeq": "invalid_event",
        "textMissing": "invalid_event",
        "stereo": "unsupported_audio",
        "gap": "audio_gap",
        "next": "ok",
        "mismatch": "audio_mismatch",
        "matches": "ok",
    }


SESSION_RUN = """
async ({ events, clock }) => {
  const { AnswerSession } = await import("/session.js");
  const pushed = [];
  let ends = 0;
  const rates = [];
  const player = {
    push: (s) => pushed.push(...Array.from(s, (x) => Math.round(x * 32768))),
    end: () => { ends += 1; },
  };
  let t = 0;
  const session = new AnswerSession({
    mode: "stream",
    getPlayer: async (rate) => { rates.push(rate); return player; },
    now: () => (t += clock),
  });
  let error = null;
  try {
    for (const event of events) await session.handle(event);
    session.finish();
  } catch (err) {
    error = err.code;
  }
  return { stats: session.stats, pushed, ends, rates, error };
}
"""


def test_answer_session_plays_every_sample_and_times_the_first_text_and_audio(harness: Page) -> None:
    samples = pcm_samples(101)
    events = agent_events("stream", pcm_bytes(samples), chunk_sizes=[37, 64, 101])
    result = harness.evaluate(SESSION_RUN, {"events": events, "clock": 10})
    assert result["error"] is None
    assert result["pushed"] == samples
    assert result["rates"] == [24000]
    assert result["ends"] == 2  # audio_end, then finish(): ending twice is harmless
    stats = result["stats"]
    # The clock ticks 10 ms per reading: construction, then one reading per first text / first audio.
    assert (stats["firstTextMs"], stats["firstAudioMs"]) == (10, 20)
    assert stats["text"] == "".join(e["text"] for e in events if e["type"] == "text_delta")
    assert (stats["audioChunks"], stats["samplesReceived"], stats["ended"], stats["error"]) == (3, 101, True, None)
    assert stats["serverMetrics"] == events[-2]
    assert (stats["model"], stats["demo"]) == ("demo", True)


def test_answer_session_rejects_broken_audio(harness: Page) -> None:
    good = agent_events("batch", pcm_bytes(pcm_samples(10)), chunk_sizes=[7])
    odd = [dict(e) for e in good]
    for e in odd:
        if e["type"] == "audio_chunk" and e["seq"] == 2:
            e["audio"] = b64(pcm_bytes(pcm_samples(10))[14:19])  # 5 bytes instead of 6
        if e["type"] == "audio_end":
            e["bytes"] = 19
    gap = [e for e in good if not (e["type"] == "audio_chunk" and e["seq"] == 1)]
    no_end = [e for e in good if e["type"] != "agent_end"]
    errored = [*good[:3], {"type": "error", "code": "synthesis_failed", "message": "engine crashed"}]
    results = [harness.evaluate(SESSION_RUN, {"events": ev, "clock": 1}) for ev in (odd, gap, no_end, errored)]
    assert [r["error"] for r in results] == ["odd_audio_length", "audio_gap", "incomplete_stream", None]
    assert results[3]["stats"]["error"] == {"code": "synthesis_failed", "message": "engine crashed"}


# Drives one AgentSocket over a fake WebSocket: each step queues the agent's messages, then asks (or
# aborts the question while it waits). Returns, per step, the events yielded and how the ask ended.
SOCKET_RUN = """
async ({ steps }) => {
  const { AgentSocket, TurnStopped } = await import("/agent-socket.js");
  const sent = [];
  const ws = { readyState: WebSocket.OPEN, send: (data) => sent.push(JSON.parse(data).type), close() {} };
  const socket = new AgentSocket(ws, "s".repeat(36), Infinity);
  const deliver = (messages) => messages.forEach((m) => ws.onmessage({ data: JSON.stringify(m) }));
  const results = [];
  for (const { before, abortAfter, after } of steps) {
    deliver(before);
    const controller = new AbortController();
    const types = [];
    let end = "done";
    try {
      for await (const event of socket.ask({ prompt: "q", mode: "stream" }, controller.signal)) {
        types.push(`${event.type}:${event.turn ?? "-"}`);
        if (types.length === abortAfter) controller.abort();
      }
    } catch (err) {
      end = err instanceof TurnStopped ? `TurnStopped ${err.turn}: ${err.message}` : err.name;
    }
    deliver(after ?? []);
    results.push({ types, end });
  }
  return { results, sent };
}
"""

ABORT_WHILE_WAITING = """
async () => {
  const { AgentSocket } = await import("/agent-socket.js");
  const ws = { readyState: WebSocket.OPEN, send() {}, close() {} };
  const socket = new AgentSocket(ws, "s".repeat(36), Infinity);
  const deliver = (messages) => messages.forEach((m) => ws.onmessage({ data: JSON.stringify(m) }));
  const controller = new AbortController();
  const first = socket.ask({ prompt: "q", mode: "stream" }, controller.signal).next();
  setTimeout(() => controller.abort(), 10);
  const ended = await first.then(() => "yielded", (err) => err.name);
  // The aborted question's turn began (and was stopped) after it had stopped listening.
  deliver([{ type: "agent_start", turn: 1 }, { type: "turn_stopped", turn: 1 }]);
  deliver([{ type: "agent_start", turn: 2 }, { type: "agent_end", turn: 2 }]);
  const types = [];
  for await (const event of socket.ask({ prompt: "q2", mode: "stream" }, new AbortController().signal)) {
    types.push(`${event.type}:${event.turn}`);
  }
  return { ended, types };
}
"""


def start(turn: int) -> dict[str, Any]:
    return {"type": "agent_start", "turn": turn}


def end(turn: int) -> dict[str, Any]:
    return {"type": "agent_end", "turn": turn}


def stopped(turn: int) -> dict[str, Any]:
    return {"type": "turn_stopped", "turn": turn}


def test_agent_socket_ends_an_answer_the_agent_stopped_for_another_connection(harness: Page) -> None:
    text = {"type": "text_delta", "turn": 1, "text": "Hel"}
    refusal = {"type": "error", "code": "bad_request", "message": "no"}
    steps = [
        # 1. Its turn stopped by the agent mid-answer (we sent no stop): TurnStopped, after what came.
        {"before": [start(1), text, stopped(1)]},
        # 2. Stopped before it began (another connection asked while it was set up): no event at all.
        {"before": [stopped(2)]},
        # 3. Stopped by us (abort after its first event): AbortError; our stop's confirmation comes later.
        {"before": [start(3)], "abortAfter": 1, "after": [stopped(3)]},
        # 4. The next question skips turn 3's confirmation and gets its own turn.
        {"before": [start(4), end(4)]},
        # 5. Refused (an error without turn): it ends there, and the refusal takes no turn number...
        {"before": [refusal]},
        # 6. ...so the next question's turn is 5.
        {"before": [start(5), end(5)]},
    ]
    result = harness.evaluate(SOCKET_RUN, {"steps": steps})
    message = "another connection of this conversation asked a question"
    assert result["results"] == [
        {"types": ["agent_start:1", "text_delta:1"], "end": f"TurnStopped 1: turn 1 was stopped: {message}"},
        {"types": [], "end": f"TurnStopped 2: turn 2 was stopped: {message}"},
        {"types": ["agent_start:3"], "end": "AbortError"},
        {"types": ["agent_start:4", "agent_end:4"], "end": "done"},
        {"types": ["error:-"], "end": "done"},
        {"types": ["agent_start:5", "agent_end:5"], "end": "done"},
    ]
    assert result["sent"] == ["prompt", "prompt", "prompt", "stop", "prompt", "prompt", "prompt"]


def test_agent_socket_never_takes_an_aborted_questions_turn_for_the_next_one(harness: Page) -> None:
    """A question aborted before its first event: its turn's events, arriving later, belong to it,
    not to the next question (the n-th new turn number answers the n-th prompt)."""
    assert harness.evaluate(ABORT_WHILE_WAITING) == {"ended": "AbortError", "types": ["agent_start:2", "agent_end:2"]}
