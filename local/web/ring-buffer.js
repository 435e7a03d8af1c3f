// A growable ring buffer of audio samples: the jitter buffer between the network and the speaker.
//
// Pure: used inside the AudioWorklet and testable on any page. Audio arrives faster than real
// time (a sentence of speech in well under its duration), so the buffer may have to hold most of
// an answer; rather than drop samples when full it doubles its storage, keeping the order.

export class FloatRingBuffer {
  /** @type {Float32Array} */
  #data;
  #readIndex = 0;
  #length = 0;

  /** @param {number} capacity  initial capacity in samples (grows on demand) */
  constructor(capacity) {
    if (!Number.isInteger(capacity) || capacity < 1) throw new RangeError(`capacity must be a positive integer, got ${capacity}`);
    this.#data = new Float32Array(capacity);
  }

  /** Samples buffered and not yet read. */
  get length() {
    return this.#length;
  }

  /** Current storage size in samples. */
  get capacity() {
    return this.#data.length;
  }

  /**
   * Append samples, growing the storage when they do not fit.
   * @param {Float32Array} samples
   */
  write(samples) {
    if (this.#length + samples.length > this.#data.length) this.#grow(this.#length + samples.length);
    const capacity = this.#data.length;
    const writeIndex = (this.#readIndex + this.#length) % capacity;
    const first = Math.min(samples.length, capacity - writeIndex);
    this.#data.set(samples.subarray(0, first), writeIndex);
    if (first < samples.length) this.#data.set(samples.subarray(first), 0);
    this.#length += samples.length;
  }

  /**
   * Move up to `out.length` samples into `out`; returns how many were read. The rest of `out` is
   * left untouched (the caller decides what silence means).
   * @param {Float32Array} out
   * @returns {number}
   */
  read(out) {
    const count = Math.min(out.length, this.#length);
    const capacity = this.#data.length;
    const first = Math.min(count, capacity - this.#readIndex);
    out.set(this.#data.subarray(this.#readIndex, this.#readIndex + first), 0);
    if (first < count) out.set(this.#data.subarray(0, count - first), first);
    this.#readIndex = (this.#readIndex + count) % capacity;
    this.#length -= count;
    return count;
  }

  /** Drop everything buffered. */
  clear() {
    this.#readIndex = 0;
    this.#length = 0;
  }

  /** @param {number} needed */
  #grow(needed) {
    let capacity = this.#data.length * 2;
    while (capacity < needed) capacity *= 2;
    const data = new Float32Array(capacity);
    const count = this.#length;
    const old = this.#data;
    const first = Math.min(count, old.length - this.#readIndex);
    data.set(old.subarray(this.#readIndex, this.#readIndex + first), 0);
    if (first < count) data.set(old.subarray(0, count - first), first);
    this.#data = data;
    this.#readIndex = 0;
  }
}
