// Masking values in text: every occurrence of any of the values is replaced by one mask, with
// overlapping or touching occurrences merged first, so no part of one value survives next to the
// mask of another. The runner masks secrets in guest outputs with it, the runtime a workflow's
// credentials in what a viewer reads of a run.
//
// The work is linear in the text per value, whatever the text holds: a guest controls both its
// output and (as its org) its secrets, so "aaaa…" against the secret "aaaaaaaa" must not cost one
// search per position. Occurrences that overlap repeat the value's period, so once one is found
// the rest of such a run is found by comparing characters, and covered positions are marked in
// one byte array instead of collected as spans.
//
// A text that was cut short (a receiver's answer kept to its first 4 KiB) may end with only the
// start of a value; masking it too keeps the cut from showing all but the last characters.

/**
 * `text` with every occurrence of each of `values` (empty ones ignored) replaced by `mask`; with
 * `cutAtLeast`, also a start of a value at least that long with which the text ends.
 */
export function maskOccurrences(text: string, values: Iterable<string>, mask: string, cutAtLeast?: number): string {
  const covering = new OccurrenceCover(text);
  for (const value of values) covering.cover(value, cutAtLeast);
  return covering.masked(mask);
}

/**
 * The positions of `text` that occurrences cover, one value at a time: a caller that must not hold
 * the event loop through many values (the runner masking a guest's output) yields between them.
 */
export class OccurrenceCover {
  #covered: Uint8Array | undefined;

  constructor(readonly text: string) {}

  /** Covers every occurrence of `value` (none if empty); with `cutAtLeast`, a start of it at least that long the text ends with. */
  cover(value: string, cutAtLeast?: number): void {
    const { text } = this;
    if (cutAtLeast !== undefined && value !== '') {
      const cut = cutStartLength(text, value);
      if (cut >= cutAtLeast) (this.#covered ??= new Uint8Array(text.length)).fill(1, text.length - cut);
    }
    let at = value === '' ? -1 : text.indexOf(value);
    if (at === -1) return;
    const covered = (this.#covered ??= new Uint8Array(text.length));
    const period = smallestPeriod(value);
    while (at !== -1) {
      // While the text goes on repeating the period, an occurrence starts every `period` characters.
      let end = at + value.length;
      while (end < text.length && text.charCodeAt(end) === text.charCodeAt(end - period)) end += 1;
      const lastStart = at + Math.floor((end - at - value.length) / period) * period;
      covered.fill(1, at, lastStart + value.length);
      // Any other occurrence starting before lastStart ends inside what is covered already.
      at = text.indexOf(value, lastStart + 1);
    }
  }

  /** The text with each run of covered positions replaced by one `mask` (the text itself when nothing is covered). */
  masked(mask: string): string {
    return this.#covered === undefined ? this.text : maskCovered(this.text, this.#covered, mask);
  }
}

/** The text with each run of covered positions replaced by one mask. */
function maskCovered(text: string, covered: Uint8Array, mask: string): string {
  let masked = '';
  let done = 0;
  for (let start = covered.indexOf(1); start !== -1; start = covered.indexOf(1, done)) {
    const end = covered.indexOf(0, start);
    masked += text.slice(done, start) + mask;
    done = end === -1 ? text.length : end;
  }
  return masked + text.slice(done);
}

/** border[i]: the length of the longest proper prefix of value[0..i] that is also its suffix. */
function bordersOf(value: string): Int32Array {
  const border = new Int32Array(value.length);
  let k = 0;
  for (let i = 1; i < value.length; i += 1) {
    while (k > 0 && value.charCodeAt(i) !== value.charCodeAt(k)) k = border[k - 1] as number;
    if (value.charCodeAt(i) === value.charCodeAt(k)) k += 1;
    border[i] = k;
  }
  return border;
}

/** The smallest p with value[i] === value[i + p] throughout (the length, if the value never repeats). */
function smallestPeriod(value: string): number {
  return value.length - (bordersOf(value)[value.length - 1] as number);
}

/** How long a start of `value`, shorter than it, `text` ends with (0 for none): KMP over the text's last characters. */
function cutStartLength(text: string, value: string): number {
  const border = bordersOf(value);
  let k = 0;
  // A start shorter than the value fits in its length minus one, so only that tail is read.
  for (let i = Math.max(0, text.length - value.length + 1); i < text.length; i += 1) {
    const c = text.charCodeAt(i);
    while (k > 0 && value.charCodeAt(k) !== c) k = border[k - 1] as number;
    if (value.charCodeAt(k) === c) k += 1;
  }
  return k;
}
