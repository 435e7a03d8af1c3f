// The conversation: its AgentCore session id (the agent keys its memory on it) and its turns.
//
// The id travels as the `X-Amzn-Bedrock-AgentCore-Runtime-Session-Id` header of every question;
// AgentCore wants at least 33 characters, a UUID has 36. It lives in the tab's sessionStorage, so
// a reload continues the conversation and another tab starts its own. No DOM here.

export const SESSION_HEADER = "X-Amzn-Bedrock-AgentCore-Runtime-Session-Id";
const STORAGE_KEY = "voicestack.session-id";
const MIN_SESSION_ID_CHARS = 33;

/**
 * @typedef {object} Turn
 * @property {string} prompt
 * @property {string} answer   the answer's text as shown (markdown kept)
 * @property {string} result   "ok", "stopped", "streaming" or an error code
 */

export class Conversation {
  /** @type {Turn[]} */
  turns = [];
  /** @type {string} */
  sessionId;
  #storage;
  #newId;

  /**
   * @param {object} [options]
   * @param {Pick<Storage, "getItem" | "setItem"> | null} [options.storage]  null: nothing kept
   * @param {() => string} [options.newId]
   */
  constructor({ storage = null, newId = () => crypto.randomUUID() } = {}) {
    this.#storage = storage;
    this.#newId = newId;
    const kept = storage?.getItem(STORAGE_KEY) ?? null;
    this.sessionId = kept !== null && kept.length >= MIN_SESSION_ID_CHARS ? kept : this.#fresh();
  }

  /** Forget the turns and start a new session (the agent's memory of the old one stays behind). */
  restart() {
    this.turns = [];
    this.sessionId = this.#fresh();
  }

  /** @returns {Record<string, string>} the headers that put a question into this conversation */
  headers() {
    return { [SESSION_HEADER]: this.sessionId };
  }

  /**
   * @param {string} prompt
   * @returns {Turn}
   */
  ask(prompt) {
    const turn = { prompt, answer: "", result: "streaming" };
    this.turns.push(turn);
    return turn;
  }

  #fresh() {
    const id = this.#newId();
    if (id.length < MIN_SESSION_ID_CHARS) throw new Error(`a session id needs ${MIN_SESSION_ID_CHARS}+ characters`);
    this.#storage?.setItem(STORAGE_KEY, id);
    return id;
  }
}
