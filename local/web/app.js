// The page: wires the form to the agent stream, the session and the player, and renders timings.
//
// For automated tests the live state is mirrored on `window.voicestack`:
//   current: the running answer's stats plus player counters (samplesPlayed, underruns,
//            playerState, playbackStartMs, drained); runs: the finished answers' rows.

import { AgentStreamError } from "./events.js";
import { invokeAgent } from "./invoke.js";
import { StreamPlayer } from "./player.js";
import { AnswerSession } from "./session.js";

const INVOKE_URL = "api/invoke";
const HEALTH_URL = "api/health";
const PROTOCOL_SAMPLE_RATE = 24000;

/** @param {string} id */
const $ = (id) => /** @type {HTMLElement} */ (document.getElementById(id));

const state = {
  /** @type {StreamPlayer | null} */
  player: null,
  /** @type {AbortController | null} */
  controller: null,
  /** @type {Record<string, any> | null} */
  current: null,
  /** @type {Record<string, any>[]} */
  runs: [],
};
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
  current.playerState = progress.state;
  if (progress.state === "playing" && current.playbackStartMs === null) {
    current.playbackStartMs = current.session.elapsedMs();
  }
  if (progress.state === "drained") {
    current.drained = true;
    if (current.done && current.error === null) showStatus("Done.");
  }
  render();
}

function render() {
  const current = state.current;
  if (current === null) return;
  const stats = current.session.stats;
  $("answer").textContent = stats.text;
  $("first-text").textContent = formatMs(stats.firstTextMs);
  $("first-audio").textContent = formatMs(stats.firstAudioMs);
  $("playback-start").textContent = formatMs(current.playbackStartMs);
  const rate = state.player?.sampleRate ?? PROTOCOL_SAMPLE_RATE;
  $("audio-received").textContent =
    stats.audioChunks === 0 ? "–" : `${(stats.samplesReceived / rate).toFixed(2)} s in ${stats.audioChunks} chunks`;
  $("underruns").textContent = String(current.underruns);
  const m = stats.serverMetrics;
  $("server-metrics").textContent = m
    ? `text ${formatMs(m.time_to_first_text_ms)} · audio ${formatMs(m.time_to_first_audio_ms)} · total ${formatMs(m.total_ms)}`
    : "–";
  if (stats.model !== null) {
    const model = $("model");
    model.hidden = false;
    model.textContent = stats.demo
      ? `Model: ${stats.model} (offline demo model: a canned answer, streamed at a realistic rate)`
      : `Model: ${stats.model}`;
  }
  // Keep the mirror flat and serialisable for the browser tests.
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

/** @param {Record<string, any>} current */
function addRunRow(current) {
  const stats = current.session.stats;
  const row = {
    mode: current.mode,
    firstTextMs: stats.firstTextMs,
    firstAudioMs: stats.firstAudioMs,
    playbackStartMs: current.playbackStartMs,
    audioSeconds: stats.samplesReceived / (state.player?.sampleRate ?? PROTOCOL_SAMPLE_RATE),
    underruns: current.underruns,
    result: stats.error ? stats.error.code : "ok",
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
}

/**
 * @param {string} prompt
 * @param {"stream" | "batch"} mode
 */
async function ask(prompt, mode) {
  state.controller?.abort();
  const controller = new AbortController();
  state.controller = controller;
  $("speak").toggleAttribute("disabled", true); // at once: a second click must not race this one
  try {
    // Created (or resumed) inside the click handler: browsers only let audio start from a gesture.
    // Before the session starts its clock: the first time, loading the worklet takes a while.
    (await playerAt(PROTOCOL_SAMPLE_RATE)).reset();
  } catch (err) {
    showError({ code: "audio_unavailable", message: String(err) });
    $("speak").toggleAttribute("disabled", false);
    return;
  }
  const session = new AnswerSession({ mode, getPlayer: playerAt });
  const current = {
    mode,
    session,
    done: false,
    drained: false,
    samplesPlayed: 0,
    underruns: 0,
    playerState: "idle",
    playbackStartMs: null,
    error: null,
  };
  state.current = current;
  showError(null);
  showStatus(`Asking (${mode})…`);
  $("stop").toggleAttribute("disabled", false);
  render();
  try {
    for await (const event of invokeAgent(INVOKE_URL, { prompt, mode }, controller.signal)) {
      await session.handle(event);
      render();
      if (event.type === "error") break;
    }
    session.finish();
    if (session.stats.error) showStatus("The agent reported an error.");
    else showStatus(current.drained ? "Done." : "Answer complete; playing out.");
  } catch (err) {
    if (controller.signal.aborted) {
      if (state.current === current) showStatus("Stopped.");
    } else {
      session.stats.error =
        err instanceof AgentStreamError
          ? { code: err.code, message: err.message }
          : { code: "client_error", message: String(err) };
      if (state.current === current) showStatus("The answer failed.");
    }
  } finally {
    // A newer question may have replaced this one while it was being stopped: touch only our row.
    if (state.current === current) {
      render();
      showError(session.stats.error);
      $("speak").toggleAttribute("disabled", false);
      $("stop").toggleAttribute("disabled", true);
    }
    current.error = session.stats.error;
    current.done = true;
    addRunRow(current);
  }
}

function stop() {
  state.controller?.abort();
  state.player?.reset();
}

async function checkHealth() {
  const badge = $("health");
  try {
    const response = await fetch(HEALTH_URL, { cache: "no-store" });
    const body = await response.json();
    badge.dataset.state = response.ok ? "ok" : "down";
    badge.textContent = response.ok ? "agent: ready" : `agent: ${body?.error?.code ?? response.status}`;
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
  void ask(String(data.get("prompt") ?? ""), mode);
});
$("stop").addEventListener("click", stop);
void checkHealth();
