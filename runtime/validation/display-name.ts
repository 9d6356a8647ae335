// Names people read: an organization's, a workflow's, a custom action's. They are listed in the API,
// the CLI and dashboards, so none may hold a character a terminal acts on (controls, C1 ones too,
// line and paragraph separators, direction embeddings, overrides and isolates), and each must show
// something: not only white space and characters that show as nothing (zero-width spaces, fillers,
// tag characters: the set terminal-text.ts escapes). Marks that shape visible text stay allowed
// (direction marks in mixed Hebrew or Arabic names, tag characters in a subdivision flag). A name
// of zero-width spaces listed as blank, and a C1 CSI could start a terminal escape (found by a
// hostile-text probe). A name stored before this rule is kept when a write sends it unchanged.

import { InputError } from '../errors.ts';
import { withoutUnprintable } from '../terminal-text.ts';
import { readString } from '../workflows/input-fields.ts';

const ACTING = /[\u0000-\u001f\u007f-\u009f\u2028\u2029\u202a-\u202e\u2066-\u2069]/u;
/** Joiners and variation selectors: they shape the characters around them (kept by printable()) but show nothing alone. */
const SHAPING = /[\u200c\u200d\ufe00-\ufe0f]/gu;

/** 400 `invalid_request` naming `field` unless `name` is a display name (above) or the name stored (`stored`). */
export function assertDisplayName(name: string, field: string, stored?: string): void {
  if (name === stored) return;
  if (ACTING.test(name)) {
    throw new InputError(400, 'invalid_request', `Field "${field}" must not contain control characters, line or paragraph separators, or direction overrides.`, { field });
  }
  if (withoutUnprintable(name).replace(SHAPING, '').trim() === '') {
    throw new InputError(400, 'invalid_request', `Field "${field}" must show something: not only white space or invisible characters.`, { field });
  }
}

/**
 * A name as written: trimmed, then 1 to `max` characters (code points) and a display name (above);
 * the name stored, sent back unchanged, is kept as it is. Organization and workflow names alike.
 */
export function readDisplayName(value: unknown, field: string, max: number, stored?: string): string {
  // Sent back as read: kept as stored (an org's name was stored untrimmed, or before a rule).
  if (value === stored && stored !== undefined) return stored;
  const name = readString(value, field, { max, trim: true, characters: true });
  assertDisplayName(name, field, stored);
  return name;
}
