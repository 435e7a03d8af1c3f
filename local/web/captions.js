// Live captions: the words of an answer placed on its audio timeline, and the word being spoken.
//
// Pure: no DOM. The agent times every word from the first sample of the answer's audio, across all of
// its speech requests (agent_app/events.py, `words`), which is the timeline the player counts samples
// played on (both restart per answer).

/**
 * @typedef {object} TimedWord
 * @property {string} word
 * @property {number} startSample  first sample of the word on the answer's timeline
 * @property {number} endSample    one past its last sample
 */

export class CaptionTrack {
  /** @type {TimedWord[]} */
  words = [];

  /**
   * Place a `words` event's words on the answer's timeline.
   * @param {{word: string, start_s: number, end_s: number}[]} words  seconds from the answer's first sample
   * @param {number} sampleRate  of the answer's audio
   */
  add(words, sampleRate) {
    for (const w of words) {
      this.words.push({
        word: w.word,
        startSample: Math.round(w.start_s * sampleRate),
        endSample: Math.round(w.end_s * sampleRate),
      });
    }
  }

  /**
   * Index of the word being spoken once `played` samples have been played, or -1 (before the
   * first word, after the last). In a pause between two words the earlier one stays marked, so
   * the highlight does not flicker. Words come in audio order: a scan from the end.
   * @param {number} played
   */
  spokenAt(played) {
    for (let i = this.words.length - 1; i >= 0; i -= 1) {
      if (this.words[i].startSample <= played) {
        const last = i === this.words.length - 1;
        return last && played >= this.words[i].endSample ? -1 : i;
      }
    }
    return -1;
  }
}

// Punctuation that hugs the word before it (no space before), the word after it (no space after),
// and straight quotes, which open and close in turn.
const CLOSING = /^[.,;:!?…%)\]}”’»]+$/u;
const OPENING = /^[([{“‘«¿¡]+$/u;
const STRAIGHT_QUOTES = new Set(['"', "'"]);

/**
 * What goes before each caption word ("" or " "): the speech model's tokens split punctuation from
 * the words ("speaking", ",", "because") and carry no spacing (the `words` event has none), so it
 * is put back from the punctuation itself: no space before closing punctuation or after opening
 * punctuation; a lone straight quote opens, the next one of its kind closes.
 * @param {string[]} words
 * @returns {string[]}
 */
export function captionGaps(words) {
  /** @type {Set<string>} straight quotes open so far */
  const open = new Set();
  let glued = true; // the first word has nothing before it
  return words.map((word) => {
    let gap = glued ? "" : " ";
    glued = OPENING.test(word);
    if (STRAIGHT_QUOTES.has(word)) {
      if (open.delete(word)) gap = "";
      else {
        open.add(word);
        glued = true;
      }
    } else if (CLOSING.test(word)) {
      gap = "";
    }
    return gap;
  });
}
