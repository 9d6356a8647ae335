// The one object key Sluice cannot keep: msgpackr, which encodes every stored record, reads a key
// "__proto__" back as "__proto_" (its guard against prototype pollution, on every map). Customer
// names and JSON that Sluice stores as values, not as their exact text (event types that key a
// schema map, webhook header names, a custom action's output), must not hold it: refused with a
// clear error instead of silently renamed or dropped.

import { findInJson, memberPath } from './json-find.ts';

export const PROTO_KEY = '__proto__';

/** The path (`a.b[2]`) of the first "__proto__" key in a parsed JSON value, or undefined. */
export function protoKeyPath(root: unknown): string | undefined {
  const found = findInJson(root, { badKey: (key) => key === PROTO_KEY });
  return found === undefined ? undefined : memberPath(found.path, found.key ?? '');
}
