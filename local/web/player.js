// Main-thread side of the player: owns the AudioContext and the worklet node, forwards samples,
// and mirrors the worklet's progress (samples played, underruns, state) for the page.

/**
 * @typedef {object} PlayerProgress
 * @property {"idle" | "playing" | "buffering" | "drained"} state
 * @property {number} played     samples sent to the speaker since the last reset
 * @property {number} underruns  times the buffer ran dry before the stream ended
 * @property {number} buffered   samples waiting in the ring buffer
 */

export class StreamPlayer {
  /** @type {AudioContext} */
  context;
  /** @type {AudioWorkletNode} */
  #node;
  /** Samples pushed since the last reset. */
  pushed = 0;
  /** Bumped by reset(); reports the worklet sent before it processed the reset are ignored. */
  #generation = 0;
  /** @type {PlayerProgress} */
  progress = { state: "idle", played: 0, underruns: 0, buffered: 0 };
  /** Samples output as silence while waiting for audio mid-answer, since the last reset (the worklet's count). */
  silentSamples = 0;
  /** Called on every progress report from the worklet. @type {(progress: PlayerProgress) => void} */
  onprogress = () => {};
  /**
   * Milliseconds from the last reset() until the worklet confirmed it had dropped its buffer (it
   * outputs silence from its next render quantum on); null until confirmed.
   * @type {number | null}
   */
  lastResetMs = null;
  /** @type {number | null} */
  #resetAt = null;

  /**
   * @param {AudioContext} context
   * @param {AudioWorkletNode} node
   */
  constructor(context, node) {
    this.context = context;
    this.#node = node;
    node.port.onmessage = (event) => {
      if (event.data.type !== "progress" || event.data.generation !== this.#generation) return;
      if (this.#resetAt !== null) {
        this.lastResetMs = performance.now() - this.#resetAt;
        this.#resetAt = null;
      }
      const { state, played, underruns, buffered, silent } = event.data;
      this.progress = { state, played, underruns, buffered };
      this.silentSamples = silent;
      this.onprogress(this.progress);
    };
  }

  /**
   * Create the context at the stream's sample rate (the browser resamples to the device, so the
   * worklet never has to) and load the worklet. Call from a user gesture so playback may start.
   * @param {number} sampleRate
   * @param {{resumeSeconds?: number}} [options]  buffered audio needed to resume after an underrun
   * @returns {Promise<StreamPlayer>}
   */
  static async create(sampleRate, options = {}) {
    const context = new AudioContext({ sampleRate, latencyHint: "interactive" });
    await context.audioWorklet.addModule(new URL("./player-worklet.js", import.meta.url));
    const node = new AudioWorkletNode(context, "stream-player", {
      numberOfInputs: 0,
      numberOfOutputs: 1,
      outputChannelCount: [1],
      processorOptions: { resumeSamples: Math.round((options.resumeSeconds ?? 0.1) * sampleRate) },
    });
    node.connect(context.destination);
    await context.resume();
    return new StreamPlayer(context, node);
  }

  /** Seconds between the worklet's output and the speaker (what the browser reports). */
  get outputLatencyS() {
    return (this.context.baseLatency ?? 0) + (this.context.outputLatency ?? 0);
  }

  get sampleRate() {
    return this.context.sampleRate;
  }

  /** @param {Float32Array} samples  ownership moves to the worklet (the buffer is transferred) */
  push(samples) {
    if (samples.length === 0) return;
    this.pushed += samples.length;
    this.#node.port.postMessage({ type: "samples", samples }, [samples.buffer]);
  }

  /** No more samples for this answer: play what is buffered, then report "drained". */
  end() {
    this.#node.port.postMessage({ type: "end" });
  }

  /** Stop at once and forget buffered audio (a new question, or the Stop button). */
  reset() {
    this.pushed = 0;
    this.progress = { state: "idle", played: 0, underruns: 0, buffered: 0 };
    this.silentSamples = 0;
    this.#generation += 1;
    this.lastResetMs = null;
    this.#resetAt = performance.now();
    this.#node.port.postMessage({ type: "reset", generation: this.#generation });
  }

  async close() {
    await this.context.close();
  }
}
