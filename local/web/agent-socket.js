// The conversation over one WebSocket: the web server's relay to the local agent's `WS /ws`, or a
// deployed runtime's `/ws` itself (`socket-target.js` says where and how to authenticate).
//
// Up: {"type": "prompt", prompt, mode} and {"type": "stop"}. Down: the agent's events, each with
// its `turn` (1, 2, ... per connection), {"type": "turn_stopped", turn} once a stopped turn's work
// has ended, and an `error` without `turn` for a question it refused. Questions are answered one at
// a time: a new one (or Stop) ends the previous one at the agent, so events of an older turn that
// were already on their way are skipped here.
//
// Whose is a message: the agent answers each prompt, in the order sent, with a new turn number or
// a refusal without one, so the n-th new turn number (or refusal) on this socket answers its n-th
// prompt, even one whose ask() ended before its first event arrived. A turn can also be stopped by
// the agent itself: another connection of the same conversation asked a question (AgentCore routes
// both to one session; the agent stops the turn nobody may be reading). Then `turn_stopped` names
// a turn this page did not stop, and ask() ends with `TurnStopped`.

import { AgentStreamError, parseAgentEvent } from "./events.js";

/** The agent stopped this answer for a question asked on another connection of the conversation. */
export class TurnStopped extends Error {
  /** @param {number} turn */
  constructor(turn) {
    super(`turn ${turn} was stopped: another connection of this conversation asked a question`);
    this.name = "TurnStopped";
    this.turn = turn;
  }
}

export class AgentSocket {
  /** @type {WebSocket} */
  #ws;
  /** @type {string[]} */
  #inbox = [];
  /** @type {(() => void) | null} */
  #wake = null;
  #closed = false;
  /** Highest turn number seen; a new question's events come with a higher one. */
  #lastTurn = 0;
  /** Prompts sent on this socket. */
  #asked = 0;
  /** Prompts the agent has answered for so far (a new turn number, or a refusal without one). */
  #answered = 0;
  /** The conversation's session id this socket was opened for. */
  session;
  /** Largest message the far end takes (AgentCore closes the connection on a larger one). */
  #maxFrameBytes;

  /**
   * @param {WebSocket} ws  an open socket
   * @param {string} session
   * @param {number} maxFrameBytes
   */
  constructor(ws, session, maxFrameBytes) {
    this.#ws = ws;
    this.session = session;
    this.#maxFrameBytes = maxFrameBytes;
    ws.onmessage = (event) => {
      this.#inbox.push(String(event.data));
      this.#wake?.();
    };
    ws.onclose = () => {
      this.#closed = true;
      this.#wake?.();
    };
  }

  /**
   * Open a socket for `session`: each try with a fresh endpoint from `target` (a presigned URL is
   * good for one handshake's worth of time), up to `target.attempts` tries.
   * @param {import("./socket-target.js").SocketTarget} target
   * @param {string} session  the conversation's session id
   * @returns {Promise<AgentSocket>}
   */
  static async open(target, session) {
    let failure = null;
    for (let attempt = 0; attempt < target.attempts; attempt += 1) {
      const endpoint = await target.endpoint(session);
      try {
        const ws = await handshake(endpoint);
        return new AgentSocket(ws, session, target.maxFrameBytes);
      } catch (err) {
        failure = err;
      }
    }
    throw failure;
  }

  get open() {
    return !this.#closed && this.#ws.readyState === WebSocket.OPEN;
  }

  close() {
    this.#ws.close();
  }

  /**
   * Ask a question and yield its events, validated, until its last one. Aborting `signal` sends
   * `stop` and ends the iteration with an AbortError, like an aborted fetch; a stop the agent made
   * for another connection of the conversation ends it with `TurnStopped`.
   * @param {{prompt: string, mode: "stream" | "batch"}} request
   * @param {AbortSignal} signal
   * @returns {AsyncGenerator<Record<string, any>>}
   */
  async *ask(request, signal) {
    const onAbort = () => {
      if (this.open) this.#ws.send(JSON.stringify({ type: "stop" }));
      this.#wake?.();
    };
    signal.addEventListener("abort", onAbort, { once: true });
    try {
      const prompt = JSON.stringify({ type: "prompt", ...request });
      const size = new TextEncoder().encode(prompt).length;
      if (size > this.#maxFrameBytes) {
        throw new AgentStreamError(
          "prompt_too_large",
          `the question is ${size} bytes as a WebSocket message; the runtime takes at most ${this.#maxFrameBytes}`,
        );
      }
      this.#ws.send(prompt);
      this.#asked += 1;
      const mine = this.#asked;
      let turn = 0;
      for (;;) {
        const data = await this.#next(signal);
        const stopped = turnStopped(data);
        const event = stopped === null ? parseAgentEvent(data) : null;
        const number = stopped ?? event?.turn;
        if (typeof number !== "number") {
          // A refused question: the answer to the oldest prompt not answered yet.
          this.#answered += 1;
          if (this.#answered === mine) {
            yield /** @type {Record<string, any>} */ (event);
            return;
          }
          continue;
        }
        if (number > this.#lastTurn) {
          this.#lastTurn = number;
          this.#answered += 1;
          if (this.#answered === mine) turn = number;
        }
        if (number !== turn) continue; // an older turn's
        if (stopped !== null) throw new TurnStopped(turn); // we sent no stop: the agent stopped it for another
        const ours = /** @type {Record<string, any>} */ (event);
        yield ours;
        // A turn ends with agent_end or an error, except speech_unavailable: the answer goes on as text.
        if (ours.type === "agent_end" || (ours.type === "error" && ours.code !== "speech_unavailable")) return;
      }
    } finally {
      signal.removeEventListener("abort", onAbort);
    }
  }

  /** @param {AbortSignal} signal */
  async #next(signal) {
    for (;;) {
      if (signal.aborted) throw new DOMException("the answer was stopped", "AbortError");
      const data = this.#inbox.shift();
      if (data !== undefined) return data;
      if (this.#closed) throw new AgentStreamError("socket_closed", "the conversation socket closed mid-answer");
      await new Promise((resolve) => {
        this.#wake = () => resolve(undefined);
      });
      this.#wake = null;
    }
  }
}

/**
 * The turn a `turn_stopped` message names, or null for any other message.
 * @param {string} data
 * @returns {number | null}
 */
function turnStopped(data) {
  let message;
  try {
    message = JSON.parse(data);
  } catch {
    return null; // parseAgentEvent says what is wrong with it
  }
  return message?.type === "turn_stopped" && Number.isInteger(message.turn) ? message.turn : null;
}

/**
 * Open one WebSocket; rejects when the handshake fails (the browser does not say why).
 * @param {import("./socket-target.js").SocketEndpoint} endpoint
 * @returns {Promise<WebSocket>}
 */
function handshake({ url, protocols }) {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url, protocols);
    ws.onopen = () => resolve(ws);
    ws.onerror = () => {
      // Only the origin and path: a presigned URL's query is a signature, of no use in a message.
      const where = new URL(url);
      reject(new AgentStreamError("socket_unavailable", `cannot open ${where.origin}${where.pathname}`));
    };
  });
}
