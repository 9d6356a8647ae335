// A small system file read through its parse (the hosts file, resolv.conf), read again when it
// changes: whether it did is checked at most every few seconds, by its modification time. A file
// that cannot be read gives the parse of nothing.

import { readFileSync, statSync } from 'node:fs';

/** How often a read may check whether the file changed. */
const RECHECK_MS = 5000;

export class WatchedFile<T> {
  readonly #path: string;
  readonly #parse: (text: string) => T;
  #value: T;
  #mtimeMs = Number.NaN;
  #checkedAt = Number.NEGATIVE_INFINITY;

  constructor(path: string, parse: (text: string) => T) {
    this.#path = path;
    this.#parse = parse;
    this.#value = parse('');
  }

  get value(): T {
    const now = performance.now();
    if (now - this.#checkedAt >= RECHECK_MS) {
      this.#checkedAt = now;
      this.#refresh();
    }
    return this.#value;
  }

  #refresh(): void {
    try {
      const mtimeMs = statSync(this.#path).mtimeMs;
      if (mtimeMs === this.#mtimeMs) return;
      this.#value = this.#parse(readFileSync(this.#path, 'utf8'));
      this.#mtimeMs = mtimeMs;
    } catch {
      this.#value = this.#parse('');
      this.#mtimeMs = Number.NaN;
    }
  }
}
