// AudioWorklet processor: plays PCM pushed from the main thread, gaplessly, from a ring buffer.
//
// States: "idle" (nothing yet) -> "playing" as soon as the first samples arrive -> "buffering"
// when the buffer runs dry before the stream has ended (an underrun: output silence, count it,
// resume once `resumeSamples` are buffered or the stream ends) -> "drained" when the stream has
// ended and every sample was played. New samples always restart playback: an underrun pauses,
// it never stops the player for good.
//
// `silent` counts the samples output as silence while waiting for audio mid-answer (from each
// underrun until playback resumes): how long the listener heard a gap, not just how often.

import { FloatRingBuffer } from "./ring-buffer.js";

const PROGRESS_EVERY_QUANTA = 8; // ~43 ms at 24 kHz with 128-sample render quanta

class StreamPlayerProcessor extends AudioWorkletProcessor {
  /** @param {{processorOptions?: {resumeSamples?: number, capacity?: number}}} options */
  constructor(options) {
    super();
    const opts = options.processorOptions ?? {};
    this.resumeSamples = opts.resumeSamples ?? 2400;
    this.ring = new FloatRingBuffer(opts.capacity ?? 24000 * 8);
    this.state = "idle";
    this.ended = false;
    this.played = 0;
    this.underruns = 0;
    this.silent = 0;
    this.quanta = 0;
    this.generation = 0;
    this.port.onmessage = (event) => this.onMessage(event.data);
  }

  /** @param {{type: string, samples?: Float32Array, generation?: number}} message */
  onMessage(message) {
    switch (message.type) {
      case "samples":
        this.ring.write(/** @type {Float32Array} */ (message.samples));
        if (this.state === "idle" || this.state === "drained") {
          this.setState("playing");
        } else if (this.state === "buffering" && this.ring.length >= this.resumeSamples) {
          this.setState("playing");
        }
        break;
      case "end":
        this.ended = true;
        if (this.state === "buffering") this.setState(this.ring.length > 0 ? "playing" : "drained");
        else if (this.state === "idle") this.setState("drained");
        break;
      case "reset":
        this.ring.clear();
        this.ended = false;
        this.played = 0;
        this.underruns = 0;
        this.silent = 0;
        this.generation = message.generation ?? 0;
        this.setState("idle");
        break;
      default:
        break;
    }
  }

  /** @param {string} state */
  setState(state) {
    this.state = state;
    this.report();
  }

  report() {
    this.port.postMessage({
      type: "progress",
      generation: this.generation,
      state: this.state,
      played: this.played,
      underruns: this.underruns,
      silent: this.silent,
      buffered: this.ring.length,
    });
  }

  /**
   * @param {Float32Array[][]} _inputs
   * @param {Float32Array[][]} outputs
   */
  process(_inputs, outputs) {
    const out = outputs[0][0];
    if (this.state !== "playing") {
      out.fill(0);
      if (this.state === "buffering") this.silent += out.length;
      return true;
    }
    const count = this.ring.read(out);
    this.played += count;
    if (count < out.length) {
      out.fill(0, count);
      if (this.ended) {
        this.setState("drained");
      } else {
        this.underruns += 1;
        this.silent += out.length - count;
        this.setState("buffering");
      }
      return true;
    }
    if (++this.quanta % PROGRESS_EVERY_QUANTA === 0) this.report();
    return true;
  }
}

registerProcessor("stream-player", StreamPlayerProcessor);
