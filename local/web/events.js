// The agent's SSE event schema: validation of each `data:` payload, and the audio sequence check.
//
// Pure: no DOM, no network. Event types (in order): agent_start, text_delta*, audio_start,
// audio_chunk* (seq 0, 1, 2, ... no gaps; interleaved with text_delta in stream mode), audio_end,
// metrics, agent_end; or `error`, after which the stream ends. `words` events (word timings for live
// captions) may come anywhere before audio_end: each times the words of the audio that follows it. AgentCore itself reports an
// exception raised mid-stream as `{"error": "..."}` with no type: that becomes an `error` event.

/** An error in the stream itself (as opposed to an `error` event the agent sent on purpose). */
export class AgentStreamError extends Error {
  /**
   * @param {string} code     Stable code the page branches on.
   * @param {string} message  Human-readable detail.
   */
  constructor(code, message) {
    super(message);
    this.name = "AgentStreamError";
    this.code = code;
  }
}

export const EVENT_TYPES = Object.freeze([
  "agent_start",
  "text_delta",
  "audio_start",
  "audio_chunk",
  "audio_end",
  "metrics",
  "agent_end",
  "error",
  "words",
]);

/**
 * @param {Record<string, unknown>} obj
 * @param {string} key
 * @param {string} kind
 */
function requireField(obj, key, kind) {
  const value = obj[key];
  const ok =
    kind === "integer" ? Number.isInteger(value) && /** @type {number} */ (value) >= 0 : typeof value === kind;
  if (!ok) throw new AgentStreamError("invalid_event", `'${obj.type}' event needs '${key}' as ${kind}`);
}

/**
 * Parse and validate the data of one SSE event.
 * @param {string} data
 * @returns {Record<string, any>} the event object, always with a known `type`.
 * @throws {AgentStreamError} `invalid_json`, `not_an_object`, `unknown_type` or `invalid_event`.
 */
export function parseAgentEvent(data) {
  let obj;
  try {
    obj = JSON.parse(data);
  } catch (err) {
    throw new AgentStreamError("invalid_json", `event data is not JSON: ${/** @type {Error} */ (err).message}`);
  }
  if (obj === null || typeof obj !== "object" || Array.isArray(obj)) {
    throw new AgentStreamError("not_an_object", "event data must be a JSON object");
  }
  if (!("type" in obj) && "error" in obj) {
    return { type: "error", code: "agent_exception", message: String(obj.error) };
  }
  if (!EVENT_TYPES.includes(obj.type)) {
    throw new AgentStreamError("unknown_type", `unknown event type ${JSON.stringify(obj.type)}`);
  }
  switch (obj.type) {
    case "text_delta":
      requireField(obj, "text", "string");
      break;
    case "audio_start":
      requireField(obj, "format", "string");
      requireField(obj, "sample_rate", "integer");
      requireField(obj, "channels", "integer");
      if (obj.format !== "pcm_s16le" || obj.channels !== 1 || obj.sample_rate === 0) {
        throw new AgentStreamError(
          "unsupported_audio",
          `audio must be mono pcm_s16le, got ${obj.format} x${obj.channels} at ${obj.sample_rate} Hz`,
        );
      }
      break;
    case "audio_chunk":
      requireField(obj, "seq", "integer");
      requireField(obj, "audio", "string");
      break;
    case "audio_end":
      requireField(obj, "chunks", "integer");
      requireField(obj, "bytes", "integer");
      break;
    case "error":
      requireField(obj, "code", "string");
      requireField(obj, "message", "string");
      break;
    case "words":
      checkWords(obj.words);
      break;
    default:
      break;
  }
  return obj;
}

/**
 * A `words` event's list: `{word: string, start_s: number, end_s: number}`, times in seconds from
 * the first sample of the audio that follows the event, 0 <= start_s <= end_s.
 * @param {unknown} words
 */
function checkWords(words) {
  if (!Array.isArray(words)) throw new AgentStreamError("invalid_event", "'words' event needs 'words' as array");
  for (const [i, w] of words.entries()) {
    const ok =
      w !== null &&
      typeof w === "object" &&
      typeof w.word === "string" &&
      Number.isFinite(w.start_s) &&
      Number.isFinite(w.end_s) &&
      w.start_s >= 0 &&
      w.end_s >= w.start_s;
    if (!ok) {
      throw new AgentStreamError("invalid_event", `'words' entry ${i} needs word, start_s <= end_s (seconds >= 0)`);
    }
  }
}

/** Checks that audio chunks arrive as 0, 1, 2, ... and that audio_end's totals match. */
export class AudioSequence {
  /** Number of chunks seen. */
  chunks = 0;
  /** Number of decoded audio bytes seen. */
  bytes = 0;

  /**
   * @param {number} seq
   * @param {number} byteLength  decoded length of the chunk's audio
   * @throws {AgentStreamError} `audio_gap` when `seq` is not the next number.
   */
  accept(seq, byteLength) {
    if (seq !== this.chunks) {
      throw new AgentStreamError("audio_gap", `audio chunk ${seq} arrived, expected ${this.chunks}`);
    }
    this.chunks += 1;
    this.bytes += byteLength;
  }

  /**
   * @param {{chunks: number, bytes: number}} end  the audio_end event
   * @throws {AgentStreamError} `audio_mismatch` when the totals differ from what arrived.
   */
  finish(end) {
    if (end.chunks !== this.chunks || end.bytes !== this.bytes) {
      throw new AgentStreamError(
        "audio_mismatch",
        `audio_end announces ${end.chunks} chunks / ${end.bytes} bytes, received ${this.chunks} / ${this.bytes}`,
      );
    }
  }
}
