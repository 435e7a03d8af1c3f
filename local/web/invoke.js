// Calls the agent (through the page's same-origin proxy) and yields its events as they arrive.
//
// fetch() + ReadableStream rather than EventSource: EventSource cannot POST a JSON body, and we
// want each network chunk as soon as it lands, whatever its boundaries (SseParser copes).

import { AgentStreamError, parseAgentEvent } from "./events.js";
import { SseParser } from "./sse.js";

/**
 * @typedef {object} InvokeRequest
 * @property {string} prompt
 * @property {"stream" | "batch"} mode
 * @property {string} [voice]
 */

/**
 * POST the request and yield each agent event, validated, in arrival order.
 * @param {string} url
 * @param {InvokeRequest} request
 * @param {AbortSignal} [signal]
 * @param {Record<string, string>} [headers]  extra request headers (the conversation's session id)
 * @returns {AsyncGenerator<Record<string, any>>}
 * @throws {AgentStreamError} on an HTTP error, a malformed event or a truncated stream.
 */
export async function* invokeAgent(url, request, signal, headers = {}) {
  const response = await fetch(url, {
    method: "POST",
    headers: { ...headers, "content-type": "application/json", accept: "text/event-stream" },
    body: JSON.stringify(request),
    signal,
  });
  if (!response.ok) {
    throw await httpError(response);
  }
  const contentType = response.headers.get("content-type") ?? "";
  if (!contentType.startsWith("text/event-stream")) {
    throw new AgentStreamError("not_an_event_stream", `expected text/event-stream, got ${contentType || "nothing"}`);
  }
  if (response.body === null) {
    throw new AgentStreamError("empty_body", "the response has no body");
  }
  const parser = new SseParser();
  const reader = response.body.getReader();
  let finished = false;
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      for (const event of parser.feed(value)) yield parseAgentEvent(event.data);
    }
    finished = true;
  } finally {
    // The consumer stopped early (Stop button, an error event): close the connection so the
    // proxy and the agent see the disconnect instead of streaming into a full buffer.
    if (!finished) await reader.cancel().catch(() => undefined);
    reader.releaseLock();
  }
  const { events, truncated } = parser.end();
  for (const event of events) yield parseAgentEvent(event.data);
  if (truncated) {
    throw new AgentStreamError("truncated_stream", "the stream ended in the middle of an event");
  }
}

/**
 * @param {Response} response
 * @returns {Promise<AgentStreamError>}
 */
async function httpError(response) {
  const body = await response.text();
  try {
    const parsed = JSON.parse(body);
    // The web server's own errors: {"error": {code, message}}; the agent's: {"type": "error", code, message}.
    const error = parsed?.type === "error" ? parsed : parsed?.error;
    if (error && typeof error.code === "string" && typeof error.message === "string") {
      return new AgentStreamError(error.code, error.message);
    }
  } catch {
    // Not our JSON error shape: report the status and the start of the body below.
  }
  return new AgentStreamError(`http_${response.status}`, `HTTP ${response.status}: ${body.slice(0, 200)}`);
}
