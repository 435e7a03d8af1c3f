// Where the conversation's WebSocket goes and how it authenticates: one `SocketEndpoint` per connection.
//
// - Local mode: the web server's relay, `api/ws?session=<id>` (it adds AgentCore's session header).
// - A deployed runtime with IAM (SigV4): a presigned `wss://` URL of the runtime's `/ws`, asked of
//   the web server (`POST api/ws-url`) for every connection. The web server holds the credentials;
//   the URL is valid for that runtime and session only, and for a few minutes; AgentCore checks it
//   at the handshake only, so an open socket outlives it and a reconnect asks for a new one.
//
// A runtime with a JWT authorizer would be a third kind: the URL without a signature and the token
// as the subprotocol pair AgentCore reads (`base64UrlBearerAuthorization.<base64url token>`,
// `base64UrlBearerAuthorization`) in `protocols`; `AgentSocket` already passes them on.

import { AgentStreamError } from "./events.js";

/**
 * @typedef {object} SocketEndpoint
 * @property {string} url           ws:// or wss:// URL to open
 * @property {string[]} protocols   WebSocket subprotocols to offer ([]: none)
 */

/**
 * @typedef {object} SocketTarget
 * @property {(session: string) => Promise<SocketEndpoint>} endpoint  a fresh endpoint for one connection
 * @property {number} attempts        handshakes tried, each with a fresh endpoint, before giving up
 * @property {number} maxFrameBytes   largest message the far end accepts (Infinity: no limit of its own)
 */

/**
 * The web server's relay (local mode).
 * @param {string} relayUrl  the web server's `api/ws`, as an absolute http(s) URL
 * @returns {SocketTarget}
 */
export function relayTarget(relayUrl) {
  return {
    endpoint: async (session) => {
      const url = new URL(relayUrl);
      url.protocol = url.protocol === "https:" ? "wss:" : "ws:";
      url.searchParams.set("session", session);
      return { url: url.href, protocols: [] };
    },
    attempts: 1,
    maxFrameBytes: Infinity,
  };
}

/**
 * A deployed runtime's `/ws` through presigned URLs from the web server.
 * @param {string} presignUrl  the web server's `api/ws-url`
 * @param {number} maxFrameBytes  AgentCore's frame limit (it closes the connection on a larger one)
 * @returns {SocketTarget}
 */
export function presignedTarget(presignUrl, maxFrameBytes) {
  return {
    endpoint: async (session) => {
      const response = await fetch(presignUrl, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ session }),
        cache: "no-store",
      });
      const body = await response.json().catch(() => null);
      if (!response.ok || typeof body?.url !== "string") {
        const error = body?.error;
        throw typeof error?.code === "string"
          ? new AgentStreamError(error.code, String(error.message))
          : new AgentStreamError(`http_${response.status}`, `no WebSocket URL from ${presignUrl}`);
      }
      return { url: body.url, protocols: [] };
    },
    // A refused handshake is most often a URL that expired on its way (a clock behind AWS's, a
    // suspended laptop) or a session still starting (409): one more try, with a new URL.
    attempts: 2,
    maxFrameBytes,
  };
}

/**
 * The socket target for what `GET api/health` said the page speaks to (null: the local stack).
 * @param {Record<string, any> | null} target  the health answer's `target`
 * @param {string} pageUrl
 * @returns {SocketTarget}
 */
export function socketTargetFor(target, pageUrl) {
  if (target === null) return relayTarget(new URL("api/ws", pageUrl).href);
  if (target.websocket_auth === "sigv4") {
    return presignedTarget(new URL("api/ws-url", pageUrl).href, Number(target.max_frame_bytes));
  }
  throw new AgentStreamError("unsupported_auth", `no way to open a WebSocket with ${target.websocket_auth}`);
}
