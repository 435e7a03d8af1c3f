// Server-Sent Events parser for a byte stream that arrives in arbitrary pieces.
//
// Pure: no DOM, no network. Implements the WHATWG "event stream interpretation" rules
// (https://html.spec.whatwg.org/multipage/server-sent-events.html#event-stream-interpretation):
// lines end in CRLF, LF or CR; `data` lines accumulate; a blank line dispatches. A network chunk
// may end anywhere: inside a multi-byte UTF-8 character (the streaming TextDecoder keeps the
// partial bytes), inside a line or a base64 string (the partial line is kept), or between the CR
// and LF of one line ending (remembered, so it is not read as an extra blank line).

/**
 * @typedef {object} SseEvent
 * @property {string} type   The `event` field, "message" when absent.
 * @property {string} data   The `data` lines joined with "\n".
 * @property {string} id     The last event id seen so far ("" when none).
 */

const LF = 10;
const CR = 13;

export class SseParser {
  /** @type {TextDecoder} */
  #decoder = new TextDecoder("utf-8");
  /** Pieces of the current, not yet terminated line (joined once, when it ends). @type {string[]} */
  #partialLine = [];
  /** The previous piece ended with CR: a LF at the start of the next piece belongs to it. */
  #skipLeadingLf = false;
  /** @type {string[]} */
  #data = [];
  #eventType = "";
  #lastEventId = "";
  /** Reconnection time the server asked for, in ms (null until a valid `retry` field). @type {number | null} */
  retryMs = null;

  /**
   * Feed the next piece of the response body; returns the events it completed, in order.
   * @param {Uint8Array} bytes
   * @returns {SseEvent[]}
   */
  feed(bytes) {
    return this.#feedText(this.#decoder.decode(bytes, { stream: true }));
  }

  /**
   * Signal the end of the body. Returns the events completed by bytes the decoder still held,
   * and whether an event was left unterminated (the spec discards it; callers may report it).
   * @returns {{ events: SseEvent[], truncated: boolean }}
   */
  end() {
    const events = this.#feedText(this.#decoder.decode());
    const truncated = this.#data.length > 0 || this.#partialLine.some((piece) => piece.length > 0);
    this.#partialLine = [];
    this.#data = [];
    this.#eventType = "";
    return { events, truncated };
  }

  /**
   * @param {string} text
   * @returns {SseEvent[]}
   */
  #feedText(text) {
    /** @type {SseEvent[]} */
    const events = [];
    let start = 0;
    if (this.#skipLeadingLf && text.length > 0) {
      this.#skipLeadingLf = false;
      if (text.charCodeAt(0) === LF) start = 1;
    }
    for (let i = start; i < text.length; i++) {
      const c = text.charCodeAt(i);
      if (c !== LF && c !== CR) continue;
      this.#partialLine.push(text.slice(start, i));
      const line = this.#partialLine.join("");
      this.#partialLine = [];
      this.#processLine(line, events);
      if (c === CR) {
        if (i + 1 < text.length) {
          if (text.charCodeAt(i + 1) === LF) i++;
        } else {
          this.#skipLeadingLf = true;
        }
      }
      start = i + 1;
    }
    if (start < text.length) this.#partialLine.push(text.slice(start));
    return events;
  }

  /**
   * @param {string} line
   * @param {SseEvent[]} events
   */
  #processLine(line, events) {
    if (line === "") {
      this.#dispatch(events);
      return;
    }
    if (line.charCodeAt(0) === 58 /* ":" */) return; // comment (keep-alive)
    const colon = line.indexOf(":");
    let field = line;
    let value = "";
    if (colon !== -1) {
      field = line.slice(0, colon);
      value = line.slice(colon + 1);
      if (value.charCodeAt(0) === 32 /* " " */) value = value.slice(1);
    }
    switch (field) {
      case "data":
        this.#data.push(value);
        break;
      case "event":
        this.#eventType = value;
        break;
      case "id":
        if (!value.includes("\0")) this.#lastEventId = value;
        break;
      case "retry":
        if (/^[0-9]+$/.test(value)) this.retryMs = Number(value);
        break;
      default:
        break; // unknown fields are ignored, as the spec requires
    }
  }

  /** @param {SseEvent[]} events */
  #dispatch(events) {
    if (this.#data.length === 0) {
      this.#eventType = "";
      return;
    }
    events.push({ type: this.#eventType || "message", data: this.#data.join("\n"), id: this.#lastEventId });
    this.#data = [];
    this.#eventType = "";
  }
}
