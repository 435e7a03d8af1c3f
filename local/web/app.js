// The page: wires the form to the agent stream, the session and the player, and renders timings.
//
// Barge-in: Stop, or a new question while an answer streams or plays, aborts the request (the web
// server and the agent see the connection close and cancel the model and the speech requests) and
// drops the player's buffered audio at once. Over the WebSocket the agent may stop an answer itself,
// when another connection of the same conversation asks a question (`TurnStopped`): the page then
// drops its audio too and records the answer as stopped.
//
// For automated tests the live state is mirrored on `window.voicestack`:
//   current: the running answer's stats plus player counters (samplesPlayed, underruns,
//            silentSamples: silence output during underruns, playerState, playbackStartMs,
//            drained, drainedMs: when its last sample was played) and captions (captionWords,
//            spokenWord, captionTrail: every word index highlighted, in order); runs: the
//            finished answers' rows; sessionId and turns: the conversation; lastStop: {reason,
//            silentMs, outputLatencyMs} of the last barge-in (silentMs: until the worklet confirmed
//            silence); target: the deployed runtime it speaks to (null: the local stack).

import { AgentSocket, TurnStopped } from "./agent-socket.js";
import { captionGaps } from "./captions.js";
import { Conversation } from "./conversation.js";
import { AgentStreamError } from "./events.js";
import { invokeAgent } from "./invoke.js";
import { StreamPlayer } from "./player.js";
import { AnswerSession } from "./session.js";
import { socketTargetFor } from "./socket-target.js";

const INVOKE_URL = "api/invoke";
const HEALTH_URL = "api/health";
const PROTOCOL_SAMPLE_RATE = 24000;

/** @param {string} id */
const $ = (id) => /** @type {HTMLElement} */ (document.getElementById(id));

/**
 * Set an element's text only when it changes. The page re-renders on every player progress report
 * (about 23 a second): assigning `textContent` replaces the text node even when the text is the
 * same, and each replacement costs a style, layout and paint pass. Measured in the page benchmark,
 * that was a quarter of a core in the renderer while an answer played, taken from the speech
 * model on the same machine.
 * @param {HTMLElement} element
 * @param {string} text
 */
function setText(element, text) {
  if (element.textContent !== text) element.textContent = text;
}

const state = {
  /** @type {StreamPlayer | null} */
  player: null,
  /** @type {AbortController | null} */
  controller: null,
  /** @type {Record<string, any> | null} */
  current: null,
  /** @type {Record<string, any>[]} */
  runs: [],
  conversation: new Conversation({ storage: window.sessionStorage }),
  /** @type {string} */
  sessionId: "",
  /** @type {import("./conversation.js").Turn[]} */
  turns: [],
  /** @type {Record<string, any> | null} */
  lastStop: null,
  /** @type {AgentSocket | null} */
  socket: null,
  /** @type {Record<string, any> | null} what the page speaks to (`GET api/health`'s `target`); null: the local stack */
  target: null,
};
/** Settled once the health check has said what the page speaks to. */
let targetKnown = /** @type {Promise<void>} */ (Promise.resolve());
Object.assign(window, { voicestack: state });

/** @param {number | null | undefined} ms */
function formatMs(ms) {
  return ms === null || ms === undefined ? "–" : `${Math.round(ms)} ms`;
}

/**
 * The player at `sampleRate`, created (or re-created for another rate) on demand.
 * @param {number} sampleRate
 */
async function playerAt(sampleRate) {
  if (state.player !== null && state.player.sampleRate === sampleRate) return state.player;
  if (state.player !== null) await state.player.close();
  const player = await StreamPlayer.create(sampleRate);
  player.onprogress = onPlayerProgress;
  state.player = player;
  return player;
}

/** @param {import("./player.js").PlayerProgress} progress */
function onPlayerProgress(progress) {
  const current = state.current;
  if (current === null) return;
  current.samplesPlayed = progress.played;
  current.underruns = progress.underruns;
  current.silentSamples = state.player?.silentSamples ?? 0;
  current.playerState = progress.state;
  if (progress.state === "playing" && current.playbackStartMs === null) {
    current.playbackStartMs = current.session.elapsedMs();
  }
  if (progress.state === "drained") {
    current.drained = true;
    current.drainedMs ??= current.session.elapsedMs();
    if (current.done && current.error === null) showStatus("Done.");
    if (current.done) $("stop").toggleAttribute("disabled", true);
  }
  const spoken = progress.state === "drained" ? -1 : current.session.captions.spokenAt(progress.played);
  if (spoken !== current.spokenWord) {
    current.spokenWord = spoken;
    if (spoken >= 0) current.captionTrail.push(spoken);
  }
  if (progress.state === "drained") render(); // the answer's last state: shown at once
  else renderSoon();
}

/**
 * Drop the audio still buffered, at once, and time how long the worklet took to confirm.
 * @param {string} reason  "stop", "new_question", or "turn_stopped" (the agent stopped the answer)
 */
function silence(reason) {
  const current = state.current;
  // An answer whose stream had ended well (its row says "ok") is stopped while its audio plays out.
  if (current?.done && !current.drained && current.turn.result === "ok" && current.session.stats.samplesReceived > 0) {
    markStopped(current);
  }
  const player = state.player;
  if (player === null) return;
  player.reset();
  const stop = { reason, silentMs: /** @type {number | null} */ (null), outputLatencyMs: player.outputLatencyS * 1000 };
  state.lastStop = stop;
  const confirm = () => {
    if (player.lastResetMs !== null) stop.silentMs = player.lastResetMs;
    else setTimeout(confirm, 1);
  };
  confirm();
}

function renderConversation() {
  const conversation = state.conversation;
  state.sessionId = conversation.sessionId;
  state.turns = conversation.turns;
  setText($("session-id"), `(session ${conversation.sessionId.slice(0, 8)}…)`);
  const list = $("turns");
  while (list.children.length > conversation.turns.length) list.lastElementChild?.remove();
  conversation.turns.forEach((turn, i) => {
    let item = list.children[i];
    if (item === undefined) {
      item = document.createElement("li");
      item.className = "turn";
      const user = document.createElement("p");
      user.className = "user";
      const assistant = document.createElement("p");
      assistant.className = "assistant";
      item.append(user, assistant);
      list.append(item);
    }
    const [user, assistant] = /** @type {HTMLElement[]} */ ([...item.children]);
    setText(user, turn.prompt);
    setText(assistant, turn.answer);
    if (assistant.dataset.result !== turn.result) assistant.dataset.result = turn.result;
  });
}

/** @param {Record<string, any>} current */
function renderCaptions(current) {
  const box = $("captions");
  const words = current.session.captions.words;
  if (box.children.length !== words.length) {
    box.replaceChildren(
      ...words.map((/** @type {{word: string}} */ w) => {
        const span = document.createElement("span");
        span.textContent = w.word;
        return span;
      }),
    );
    // Spaces between the words, outside the spans, so only the word itself is highlighted; none
    // where punctuation hugs a word (`captionGaps`).
    const gaps = captionGaps(words.map((/** @type {{word: string}} */ w) => w.word));
    [...box.children].forEach((span, i) => {
      if (gaps[i] !== "") span.before(gaps[i]);
    });
    box.dataset.spoken = "-1";
  }
  // Only the two spans whose highlight changes are touched (see `setText`).
  const previous = Number(box.dataset.spoken ?? "-1");
  if (previous !== current.spokenWord) {
    box.children[previous]?.classList.remove("spoken");
    box.children[current.spokenWord]?.classList.add("spoken");
    box.dataset.spoken = String(current.spokenWord);
  }
}

const RENDER_EVERY_MS = 100;
/** @type {ReturnType<typeof setTimeout> | null} */
let renderTimer = null;

/**
 * Update the mirror now and the page within `RENDER_EVERY_MS`. While an answer streams, text events
 * arrive at the model's pace (40 a second for the demo model) and each render is a style, layout and
 * paint pass: measured in the page benchmark, rendering every one took 0.2-0.3 of a core from the
 * speech model during its first piece (on a laptop, the same cores). Ten renders a second read the
 * same; `render()` itself still runs at once where a state ends (start, end, stop).
 */
function renderSoon() {
  const current = state.current;
  if (current === null) return;
  mirror(current);
  if (renderTimer !== null) return;
  renderTimer = setTimeout(() => {
    renderTimer = null;
    render();
  }, RENDER_EVERY_MS);
}

function render() {
  const current = state.current;
  if (current === null) return;
  if (renderTimer !== null) {
    clearTimeout(renderTimer);
    renderTimer = null;
  }
  const stats = current.session.stats;
  setText($("answer"), stats.text);
  renderConversation();
  renderCaptions(current);
  setText($("first-text"), formatMs(stats.firstTextMs));
  setText($("first-audio"), formatMs(stats.firstAudioMs));
  setText($("playback-start"), formatMs(current.playbackStartMs));
  const rate = state.player?.sampleRate ?? PROTOCOL_SAMPLE_RATE;
  setText(
    $("audio-received"),
    stats.audioChunks === 0 ? "–" : `${(stats.samplesReceived / rate).toFixed(2)} s in ${stats.audioChunks} chunks`,
  );
  setText($("underruns"), String(current.underruns));
  const m = stats.serverMetrics;
  setText(
    $("server-metrics"),
    m
      ? `text ${formatMs(m.time_to_first_text_ms)} · audio ${formatMs(m.time_to_first_audio_ms)} · total ${formatMs(m.total_ms)}`
      : "–",
  );
  if (stats.model !== null) {
    const model = $("model");
    model.hidden = false;
    setText(
      model,
      stats.demo
        ? `Model: ${stats.model} (offline demo model: a canned answer, streamed at a realistic rate)`
        : `Model: ${stats.model}`,
    );
  }
  mirror(current);
}

/**
 * Keep the mirror (`window.voicestack.current`) flat and serialisable for the browser tests.
 * @param {Record<string, any>} current
 */
function mirror(current) {
  const stats = current.session.stats;
  current.turn.answer = stats.text;
  current.captionWords = current.session.captions.words.map((/** @type {{word: string}} */ w) => w.word);
  Object.assign(current, {
    text: stats.text,
    firstTextMs: stats.firstTextMs,
    firstAudioMs: stats.firstAudioMs,
    audioChunks: stats.audioChunks,
    samplesReceived: stats.samplesReceived,
    model: stats.model,
    demo: stats.demo,
    serverMetrics: stats.serverMetrics,
    error: stats.error,
  });
}

/** @param {string} message */
function showStatus(message) {
  $("status").textContent = message;
}

/** @param {{code: string, message: string} | null} error */
function showError(error) {
  const box = $("error");
  box.hidden = error === null;
  box.textContent = error === null ? "" : `${error.code}: ${error.message}`;
}

/**
 * The answer was stopped after its stream had ended, while its audio played out: its turn and its
 * row in the answers table (written when the stream ended) now say so.
 * @param {Record<string, any>} current
 */
function markStopped(current) {
  current.turn.result = "stopped";
  if (current.runIndex !== null) {
    state.runs[current.runIndex].result = "stopped";
    const cell = $("runs").querySelector("tbody")?.children[current.runIndex]?.lastElementChild;
    if (cell) cell.textContent = "stopped";
  }
  renderConversation();
  if (state.current === current) {
    showStatus("Stopped.");
    $("stop").toggleAttribute("disabled", true);
  }
}

/**
 * Add the answer's row to the answers table; its result is the turn's ("ok", "stopped" or an error
 * code). Its index is kept on `current.runIndex`, so that a stop during the play-out can still
 * change it.
 * @param {Record<string, any>} current
 */
function addRunRow(current) {
  const stats = current.session.stats;
  const row = {
    mode: current.mode,
    firstTextMs: stats.firstTextMs,
    firstAudioMs: stats.firstAudioMs,
    playbackStartMs: current.playbackStartMs,
    audioSeconds: stats.samplesReceived / (state.player?.sampleRate ?? PROTOCOL_SAMPLE_RATE),
    underruns: current.underruns,
    result: current.turn.result,
  };
  state.runs.push(row);
  const tr = document.createElement("tr");
  const cells = [
    String(state.runs.length),
    row.mode,
    formatMs(row.firstTextMs),
    formatMs(row.firstAudioMs),
    formatMs(row.playbackStartMs),
    `${row.audioSeconds.toFixed(2)} s`,
    String(row.underruns),
    row.result,
  ];
  for (const text of cells) {
    const td = document.createElement("td");
    td.textContent = text;
    tr.append(td);
  }
  $("runs").querySelector("tbody")?.append(tr);
  current.runIndex = state.runs.length - 1;
}

/**
 * The conversation's socket, (re)opened for the current session id: after a new conversation, or
 * once the far end has closed it (AgentCore ends a session idle for 15 minutes).
 */
async function conversationSocket() {
  await targetKnown;
  const session = state.conversation.sessionId;
  if (state.socket !== null && state.socket.open && state.socket.session === session) return state.socket;
  state.socket?.close();
  const socket = await AgentSocket.open(socketTargetFor(state.target, window.location.href), session);
  state.socket = socket;
  return socket;
}

/**
 * The question's events, over the chosen connection.
 * @param {string} prompt
 * @param {"stream" | "batch"} mode
 * @param {"sse" | "websocket"} transport
 * @param {AbortSignal} signal
 * @returns {AsyncGenerator<Record<string, any>>}
 */
async function* answerEvents(prompt, mode, transport, signal) {
  if (transport === "websocket") {
    yield* (await conversationSocket()).ask({ prompt, mode }, signal);
  } else {
    yield* invokeAgent(INVOKE_URL, { prompt, mode }, signal, state.conversation.headers());
  }
}

/**
 * @param {string} prompt
 * @param {"stream" | "batch"} mode
 * @param {"sse" | "websocket"} [transport]
 */
async function ask(prompt, mode, transport = "sse") {
  // A new question while one streams or plays is a barge-in: the old one stops here and now.
  const previous = state.current;
  if (previous !== null && (!previous.done || !previous.drained)) silence("new_question");
  state.controller?.abort();
  const controller = new AbortController();
  state.controller = controller;
  try {
    // Created (or resumed) inside the click handler: browsers only let audio start from a gesture.
    // Before the session starts its clock: the first time, loading the worklet takes a while.
    (await playerAt(PROTOCOL_SAMPLE_RATE)).reset();
  } catch (err) {
    showError({ code: "audio_unavailable", message: String(err) });
    return;
  }
  if (state.controller !== controller) return; // an even newer question took over meanwhile
  const session = new AnswerSession({ mode, getPlayer: playerAt });
  const turn = state.conversation.ask(prompt);
  const current = {
    mode,
    transport,
    session,
    turn,
    spokenWord: -1,
    /** @type {number[]} */
    captionTrail: [],
    /** @type {string[]} */
    captionWords: [],
    done: false,
    drained: false,
    samplesPlayed: 0,
    underruns: 0,
    silentSamples: 0,
    playerState: "idle",
    playbackStartMs: null,
    /** @type {number | null} */
    drainedMs: null,
    error: null,
    /** @type {number | null} its row in the answers table (`state.runs`) */
    runIndex: null,
  };
  state.current = current;
  showError(null);
  showStatus(`Asking (${mode})…`);
  $("stop").toggleAttribute("disabled", false);
  render();
  try {
    for await (const event of answerEvents(prompt, mode, transport, controller.signal)) {
      await session.handle(event);
      renderSoon();
      // Every error ends the answer but one: speech_unavailable, after which the answer goes on as text.
      if (event.type === "error" && event.code !== "speech_unavailable") break;
    }
    session.finish();
    if (session.stats.error) showStatus("The agent reported an error.");
    else showStatus(current.drained ? "Done." : "Answer complete; playing out.");
  } catch (err) {
    if (controller.signal.aborted) {
      turn.result = "stopped";
      if (state.current === current) showStatus("Stopped.");
    } else if (err instanceof TurnStopped) {
      // Another connection of this conversation (another tab, `voicestack talk --session`) asked a
      // question: the agent stopped this answer, so its audio stops here too.
      turn.result = "stopped";
      if (state.current === current) {
        silence("turn_stopped");
        showStatus("Stopped: another connection of this conversation asked a question.");
        $("stop").toggleAttribute("disabled", true);
      }
    } else {
      session.stats.error =
        err instanceof AgentStreamError
          ? { code: err.code, message: err.message }
          : { code: "client_error", message: String(err) };
      if (state.current === current) showStatus("The answer failed.");
    }
  } finally {
    // A newer question may have replaced this one while it was being stopped: touch only our row.
    if (turn.result === "streaming") turn.result = session.stats.error ? session.stats.error.code : "ok";
    if (state.current === current) {
      render();
      showError(session.stats.error);
      // Stop stays available while the rest of the answer plays out.
      if (current.drained || controller.signal.aborted || session.stats.samplesReceived === 0) {
        $("stop").toggleAttribute("disabled", true);
      }
    }
    current.error = session.stats.error;
    current.done = true;
    addRunRow(current);
  }
}

function stop() {
  silence("stop");
  state.controller?.abort();
}

function newConversation() {
  stop();
  state.conversation.restart();
  state.current = null;
  $("answer").textContent = "";
  $("captions").replaceChildren();
  renderConversation();
  showStatus("New conversation.");
}

/**
 * Say what the page speaks to: the local stack, or a deployed runtime (stack and region).
 * @param {Record<string, any> | null} target
 */
function showTarget(target) {
  const label = $("target");
  if (target === null) {
    setText(label, "local");
    return;
  }
  const where = target.stack !== null ? `stack ${target.stack}` : target.runtime_arn.split("/").pop();
  setText(label, `${where} · ${target.region}`);
  label.title = target.qualifier !== null ? `${target.runtime_arn} (${target.qualifier})` : target.runtime_arn;
  document.title = `voicestack · ${where} (${target.region})`;
}

async function checkHealth() {
  const badge = $("health");
  try {
    const response = await fetch(HEALTH_URL, { cache: "no-store" });
    const body = await response.json();
    state.target = body?.target ?? null;
    showTarget(state.target);
    // Remote: "ready" means the web server can sign; the runtime itself answers the first question.
    const name = state.target === null ? "agent" : "AgentCore";
    badge.dataset.state = response.ok ? "ok" : "down";
    badge.textContent = response.ok ? `${name}: ready` : `${name}: ${body?.error?.code ?? response.status}`;
    badge.title = response.ok ? "" : String(body?.error?.message ?? "");
  } catch {
    badge.dataset.state = "down";
    badge.textContent = "agent: unreachable";
  }
}

$("ask").addEventListener("submit", (event) => {
  event.preventDefault();
  const form = /** @type {HTMLFormElement} */ (event.target);
  const data = new FormData(form);
  const mode = data.get("mode") === "batch" ? "batch" : "stream";
  const transport = data.get("transport") === "websocket" ? "websocket" : "sse";
  void ask(String(data.get("prompt") ?? ""), mode, transport);
});
$("stop").addEventListener("click", stop);
$("new-conversation").addEventListener("click", newConversation);
renderConversation();
targetKnown = checkHealth();
