// A cap on how deeply a JSON document may nest, checked on its text before anything parses it.
// JSON.parse accepts any depth, but JSON.stringify, msgpack, ajv and every recursive walk of the
// value overflow the stack somewhere past a few thousand levels: one hostile body must not be
// able to crash the process that later reads it back.

/** Objects and arrays inside each other, at most; deeper documents are refused (serde_json's default). */
export const MAX_JSON_NESTING = 128;

const OPEN_BRACE = 0x7b;
const OPEN_BRACKET = 0x5b;
const CLOSE_BRACE = 0x7d;
const CLOSE_BRACKET = 0x5d;
const QUOTE = 0x22;
const BACKSLASH = 0x5c;

/**
 * Whether `text` nests objects and arrays deeper than `limit`. Brackets inside strings do not
 * count. It does not check that the text is JSON: call it before JSON.parse, which does.
 */
export function nestsDeeperThan(text: string, limit = MAX_JSON_NESTING): boolean {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const code = text.charCodeAt(i);
    if (inString) {
      if (code === BACKSLASH) i++;
      else if (code === QUOTE) inString = false;
    } else if (code === QUOTE) {
      inString = true;
    } else if (code === OPEN_BRACE || code === OPEN_BRACKET) {
      if (++depth > limit) return true;
    } else if (code === CLOSE_BRACE || code === CLOSE_BRACKET) {
      depth--;
    }
  }
  return false;
}
