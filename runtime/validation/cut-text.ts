// Text kept from the start of a body cut short (a recording's or a webhook answer's first bytes):
// decoded as UTF-8 without the character the cut split, which would otherwise end the text as U+FFFD.

import { TextDecoder } from 'node:util';

const decoder = (): TextDecoder => new TextDecoder('utf-8', { ignoreBOM: true });

/** The first `limit` bytes of `bytes` as text; a character the cut (or the body's own end, when `cut`) split is left out. */
export function textCutAt(bytes: Buffer, limit: number, cut = bytes.byteLength > limit): string {
  if (!cut) return bytes.toString('utf8');
  // `stream`: a sequence still incomplete at the end is held back for the next call, which never comes.
  return decoder().decode(bytes.subarray(0, limit), { stream: true });
}
