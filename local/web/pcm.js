// Base64 and PCM16 decoding for the audio carried in `audio_chunk` events.
//
// Pure: no DOM, no audio. The agent cuts audio wherever its transport delivered it, so one chunk
// may end in the middle of a 16-bit sample; Pcm16Decoder carries that odd byte into the next chunk
// instead of dropping it (which would shift every later sample by one byte: loud noise).

const BASE64_ALPHABET = /^[A-Za-z0-9+/]*={0,2}$/;

/**
 * Decode standard (RFC 4648, padded) base64 to bytes.
 * @param {string} text
 * @returns {Uint8Array}
 * @throws {TypeError} when `text` is not valid base64.
 */
export function decodeBase64(text) {
  if (text.length % 4 !== 0 || !BASE64_ALPHABET.test(text)) {
    throw new TypeError(`invalid base64 (${text.length} characters)`);
  }
  // Uint8Array.fromBase64 is native (Chromium 140+, Firefox 133+, Safari 18.2+); atob elsewhere.
  const native = /** @type {any} */ (Uint8Array).fromBase64;
  if (typeof native === "function") return native(text);
  const binary = atob(text);
  const bytes = new Uint8Array(binary.length);
  for (let i = 0; i < binary.length; i++) bytes[i] = binary.charCodeAt(i);
  return bytes;
}

/** Turns a stream of PCM16 little-endian byte chunks of any length into whole samples. */
export class Pcm16Decoder {
  /** The first byte of a sample whose second byte has not arrived yet (-1 when none). */
  #carry = -1;

  /** Number of bytes held back for the next chunk: 0 or 1. */
  get pendingBytes() {
    return this.#carry === -1 ? 0 : 1;
  }

  /**
   * Decode the next chunk; returns every sample it completes.
   * @param {Uint8Array} bytes
   * @returns {Int16Array}
   */
  push(bytes) {
    const carried = this.#carry === -1 ? 0 : 1;
    const total = carried + bytes.length;
    // Int16Array stores values modulo 2^16, which sign-extends the unsigned little-endian pair.
    const samples = new Int16Array(total >> 1);
    let byteIndex = 0;
    let sampleIndex = 0;
    if (carried === 1 && bytes.length > 0) {
      samples[0] = this.#carry | (bytes[0] << 8);
      byteIndex = 1;
      sampleIndex = 1;
      this.#carry = -1;
    }
    for (; byteIndex + 1 < bytes.length; byteIndex += 2, sampleIndex++) {
      samples[sampleIndex] = bytes[byteIndex] | (bytes[byteIndex + 1] << 8);
    }
    if (byteIndex < bytes.length) this.#carry = bytes[byteIndex];
    return samples;
  }

  /**
   * End of the audio: returns the number of bytes that never formed a whole sample (0 or 1),
   * and forgets them.
   * @returns {number}
   */
  end() {
    const leftover = this.pendingBytes;
    this.#carry = -1;
    return leftover;
  }
}

/**
 * PCM16 samples to floats in [-1, 1) for Web Audio.
 * @param {Int16Array} samples
 * @returns {Float32Array}
 */
export function pcm16ToFloat32(samples) {
  const out = new Float32Array(samples.length);
  for (let i = 0; i < samples.length; i++) out[i] = samples[i] / 32768;
  return out;
}
