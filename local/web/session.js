// One answer: applies the agent's events in order to the text, the player and the timings.
//
// No DOM: the page renders `AnswerSession.stats`; tests drive it with a fake player.

import { CaptionTrack } from "./captions.js";
import { AgentStreamError, AudioSequence } from "./events.js";
import { decodeBase64, Pcm16Decoder, pcm16ToFloat32 } from "./pcm.js";

/**
 * @typedef {object} PlayerSink
 * @property {(samples: Float32Array) => void} push
 * @property {() => void} end
 */

/**
 * @typedef {object} AnswerStats
 * @property {"stream" | "batch"} mode
 * @property {string | null} model
 * @property {boolean | null} demo
 * @property {string} text
 * @property {number | null} firstTextMs      first text_delta, from the request
 * @property {number | null} firstAudioMs     first audio_chunk, from the request
 * @property {number} audioChunks
 * @property {number} samplesReceived
 * @property {Record<string, unknown> | null} serverMetrics  the agent's `metrics` event
 * @property {boolean} ended                  agent_end arrived
 * @property {{code: string, message: string} | null} error
 */

export class AnswerSession {
  /** @type {AnswerStats} */
  stats;
  /** Word timings of this answer on its audio timeline (from `words` events). */
  captions = new CaptionTrack();
  #sampleRate = 24000;
  #sequence = new AudioSequence();
  #pcm = new Pcm16Decoder();
  #startedAt;
  #now;
  #getPlayer;
  /** @type {PlayerSink | null} */
  #player = null;

  /**
   * @param {object} options
   * @param {"stream" | "batch"} options.mode
   * @param {(sampleRate: number) => Promise<PlayerSink>} options.getPlayer  a player at that rate
   * @param {() => number} [options.now]  clock in ms (performance.now by default)
   */
  constructor({ mode, getPlayer, now = () => performance.now() }) {
    this.#now = now;
    this.#getPlayer = getPlayer;
    this.#startedAt = now();
    this.stats = {
      mode,
      model: null,
      demo: null,
      text: "",
      firstTextMs: null,
      firstAudioMs: null,
      audioChunks: 0,
      samplesReceived: 0,
      serverMetrics: null,
      ended: false,
      error: null,
    };
  }

  /** Milliseconds since the session (the request) started. */
  elapsedMs() {
    return this.#now() - this.#startedAt;
  }

  /**
   * Apply one validated agent event.
   * @param {Record<string, any>} event
   * @returns {Promise<void>}
   * @throws {AgentStreamError} when the audio breaks the stream's contract.
   */
  async handle(event) {
    const stats = this.stats;
    switch (event.type) {
      case "agent_start":
        stats.model = String(event.model);
        stats.demo = Boolean(event.demo);
        break;
      case "text_delta":
        if (stats.firstTextMs === null) stats.firstTextMs = this.elapsedMs();
        stats.text += event.text;
        break;
      case "audio_start":
        this.#sampleRate = event.sample_rate;
        this.#player = await this.#getPlayer(event.sample_rate);
        break;
      case "audio_chunk": {
        if (this.#player === null) throw new AgentStreamError("audio_before_start", "audio_chunk before audio_start");
        const bytes = decodeBase64(event.audio);
        this.#sequence.accept(event.seq, bytes.length);
        if (stats.firstAudioMs === null) stats.firstAudioMs = this.elapsedMs();
        stats.audioChunks += 1;
        const samples = this.#pcm.push(bytes);
        stats.samplesReceived += samples.length;
        this.#player.push(pcm16ToFloat32(samples));
        break;
      }
      case "audio_end":
        this.#sequence.finish({ chunks: event.chunks, bytes: event.bytes });
        if (this.#pcm.end() !== 0) {
          throw new AgentStreamError("odd_audio_length", `the audio ended with half a sample (${event.bytes} bytes)`);
        }
        this.#player?.end();
        break;
      case "words":
        this.captions.add(event.words, this.#sampleRate);
        break;
      case "metrics":
        stats.serverMetrics = event;
        break;
      case "agent_end":
        stats.ended = true;
        break;
      case "error":
        stats.error = { code: event.code, message: event.message };
        this.#player?.end();
        break;
      default:
        break;
    }
  }

  /**
   * The stream is over (normally or not): let the player drain and check the answer is whole.
   * @throws {AgentStreamError} `incomplete_stream` when it ended without agent_end or an error.
   */
  finish() {
    this.#player?.end();
    if (!this.stats.ended && this.stats.error === null) {
      throw new AgentStreamError("incomplete_stream", "the stream ended before agent_end");
    }
  }
}
