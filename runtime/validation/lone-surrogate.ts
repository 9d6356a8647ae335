// Text that is not Unicode: a UTF-16 surrogate without its pair (`"\ud800"` is valid JSON). The
// storage codec (msgpackr) writes strings as UTF-8 and reads such a one back as U+FFFD characters,
// so a name or a schema holding it would change on its way to disk (a 200-character name reading
// back as 600, a schema `enum` refusing the very value it was written with): refused instead.

import { findInJson } from './json-find.ts';

/** The path (`a.b[2]`, or `a (a member name)` for a key) of the first string or key with a lone surrogate in a parsed JSON value, or undefined. */
export function loneSurrogatePath(root: unknown): string | undefined {
  const found = findInJson(root, { badKey: (key) => !isWellFormed(key), badText: (text) => !isWellFormed(text) });
  if (found === undefined) return undefined;
  if (found.key === undefined) return found.path === '' ? '(the value)' : found.path;
  return found.path === '' ? '(a member name)' : `${found.path} (a member name)`;
}

/** String.prototype.isWellFormed (Node 20; not yet in this project's ES2023 typings). */
const isWellFormed = (text: string): boolean => (text as unknown as { isWellFormed(): boolean }).isWellFormed();
