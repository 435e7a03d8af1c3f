// The conversation over one WebSocket (the web server relays it to the agent's `WS /ws`).
//
// Up: {"type": "prompt", prompt, mode} and {"type": "stop"}. Down: the agent's events, each with
// its `turn` (1, 2, ... per connection), and {"type": "turn_stopped", turn} once a stopped turn's
// work has ended. Questions are answered one at a time: a new one (or Stop) ends the previous
// one at the agent, so events of an older turn that were already on their way are skipped here.

import { AgentStreamError, parseAgentEvent } from "./events.js";

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
  /** The conversation's session id this socket was opened for. */
  session;

  /**
   * @param {WebSocket} ws
   * @param {string} session
   */
  constructor(ws, session) {
    this.#ws = ws;
    this.session = session;
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
   * @param {string} url  ws:// URL of the relay
   * @param {string} session  the conversation's session id (sent as the `session` query parameter)
   * @returns {Promise<AgentSocket>}
   */
  static open(url, session) {
    return new Promise((resolve, reject) => {
      const full = new URL(url);
      full.searchParams.set("session", session);
      const ws = new WebSocket(full.href);
      ws.onopen = () => resolve(new AgentSocket(ws, session));
      ws.onerror = () => reject(new AgentStreamError("socket_unavailable", `cannot open ${url}`));
    });
  }

  get open() {
    return !this.#closed && this.#ws.readyState === WebSocket.OPEN;
  }

  close() {
    this.#ws.close();
  }

  /**
   * Ask a question and yield its events, validated, until its last one. Aborting `signal` sends
   * `stop` and ends the iteration with an AbortError, like an aborted fetch.
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
      this.#ws.send(JSON.stringify({ type: "prompt", ...request }));
      let turn = 0;
      for (;;) {
        const data = await this.#next(signal);
        const raw = JSON.parse(data);
        if (raw?.type === "turn_stopped") continue;
        const event = parseAgentEvent(data);
        if (typeof raw.turn !== "number") {
          yield event; // an error answering the prompt itself (no turn was started)
          return;
        }
        if (turn === 0) {
          if (raw.turn <= this.#lastTurn || event.type !== "agent_start") continue; // an older turn's
          turn = raw.turn;
          this.#lastTurn = turn;
        } else if (raw.turn !== turn) {
          continue;
        }
        yield event;
        // A turn ends with agent_end or an error, except speech_unavailable: the answer goes on as text.
        if (event.type === "agent_end" || (event.type === "error" && event.code !== "speech_unavailable")) return;
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
