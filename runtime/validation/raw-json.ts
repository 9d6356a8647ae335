// JSON text written verbatim where a value would go. Node 20 has no JSON.rawJSON (it is behind a
// V8 flag), and JSON.parse turns integers past 2^53 into nearby doubles and 1e400 into Infinity:
// serializing a parsed payload again would hand on numbers the sender never sent. Whatever hands
// a received payload on wraps its exact text in RawJson and serializes with stringifyWithRaw.

import { randomBytes } from 'node:crypto';

/** Drawn once per process and never written out, so no string in the data can pass for a marker. */
const NONCE = randomBytes(12).toString('base64url');
let instances = 0;
/** The RawJson values met by the stringifyWithRaw in progress (JSON.stringify is synchronous). */
let met: RawJson[] | undefined;

export class RawJson {
  /** What it stands in as while JSON.stringify runs. */
  readonly #standIn: string;
  /** That stand-in as JSON.stringify writes it (quoted, its NUL escaped). */
  readonly marker: string;

  /** `text` must be one complete JSON value. */
  constructor(readonly text: string) {
    instances = (instances + 1) % Number.MAX_SAFE_INTEGER;
    this.#standIn = `\u0000${NONCE}:${instances}`;
    this.marker = JSON.stringify(this.#standIn);
  }

  /** Called by JSON.stringify; a plain JSON.stringify would leave the stand-in in its output. */
  toJSON(): string {
    met?.push(this);
    return this.#standIn;
  }
}

/**
 * JSON.stringify, with each RawJson written as its text. JSON.stringify keeps its fast path (no
 * replacer function): each RawJson stands in as its marker, met in output order, and is swapped
 * for its text afterwards.
 */
export function stringifyWithRaw(value: unknown): string {
  const found: RawJson[] = [];
  met = found;
  let text: string;
  try {
    text = JSON.stringify(value);
  } finally {
    met = undefined;
  }
  if (found.length === 0) return text;
  let out = '';
  let from = 0;
  for (const raw of found) {
    const at = text.indexOf(raw.marker, from);
    out += text.slice(from, at) + raw.text;
    from = at + raw.marker.length;
  }
  return out + text.slice(from);
}
