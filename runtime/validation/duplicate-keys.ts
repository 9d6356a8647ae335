// A JSON object may name each member once. JSON.parse keeps the last of two, other parsers keep the
// first or refuse the document; payloads are handed on as the text received (raw-json.ts), so a
// receiver could act on a value that schema validation never saw. Checked on text JSON.parse accepted.

import { endOfString } from './json-member-text.ts';

const QUOTE = 0x22;
const OPEN_BRACE = 0x7b;
const CLOSE_BRACE = 0x7d;
const OPEN_BRACKET = 0x5b;
const CLOSE_BRACKET = 0x5d;
const COMMA = 0x2c;

/** The index where a member name repeats within its object, or -1. `text` must be valid JSON. */
export function duplicateKeyAt(text: string): number {
  // One entry per open object (its names so far) or array (null).
  const open: (Set<string> | null)[] = [];
  let expectingName = false;
  for (let i = 0; i < text.length; i++) {
    const code = text.charCodeAt(i);
    if (code === QUOTE) {
      const start = i;
      i = endOfString(text, start) - 1;
      if (!expectingName) continue;
      expectingName = false;
      const names = open[open.length - 1] as Set<string>;
      const raw = text.slice(start + 1, i);
      const name = raw.includes('\\') ? (JSON.parse(text.slice(start, i + 1)) as string) : raw;
      if (names.has(name)) return start;
      names.add(name);
    } else if (code === OPEN_BRACE) {
      open.push(new Set());
      expectingName = true;
    } else if (code === OPEN_BRACKET) {
      open.push(null);
    } else if (code === CLOSE_BRACE || code === CLOSE_BRACKET) {
      open.pop();
    } else if (code === COMMA) {
      const inside = open[open.length - 1];
      expectingName = inside !== undefined && inside !== null;
    }
  }
  return -1;
}
