// Parses the permissions of a custom action: only `read_secret:<KEY>`, at most 25, duplicates dropped.
// Accepts a JSON array, or (from a multipart form field) a comma- or newline-separated list.

import { InputError } from '../errors.ts';

/** DESIGN 6.6; the hook-runner refuses more, so the runtime never stores more. */
export const MAX_PERMISSIONS = 25;
export const SECRET_KEY_PATTERN = /^[A-Z0-9_]{1,64}$/;
const READ_SECRET = /^read_secret:([A-Z0-9_]{1,64})$/;
/** Entries are echoed in errors (they are names, never values), shortened so an error stays small. */
const ECHO_LIMIT = 80;

export type Permission = string & { readonly __brand: 'Permission' };

const echo = (entry: string): string => JSON.stringify(entry.length > ECHO_LIMIT ? `${entry.slice(0, ECHO_LIMIT)}…` : entry);

/**
 * Checks every entry (`field` of an error is `permissions[i]`, the entry's position as given),
 * removes duplicates keeping the first occurrence's order, then enforces MAX_PERMISSIONS.
 */
export function parsePermissionList(entries: readonly unknown[], field = 'permissions'): Permission[] {
  const seen = new Set<string>();
  entries.forEach((entry, index) => {
    const at = `${field}[${index}]`;
    if (typeof entry !== 'string' || !READ_SECRET.test(entry)) {
      const got = typeof entry === 'string' ? `got ${echo(entry)}` : `got a ${entry === null ? 'null' : typeof entry}`;
      throw new InputError(400, 'invalid_permission', `${at} must be "read_secret:<KEY>" with KEY of [A-Z0-9_]{1,64}; ${got}.`, { field: at });
    }
    seen.add(entry);
  });
  if (seen.size > MAX_PERMISSIONS) {
    throw new InputError(400, 'too_many_permissions', `An action may hold at most ${MAX_PERMISSIONS} permissions; got ${seen.size}.`, { field });
  }
  return [...seen] as Permission[];
}

/**
 * The text of a form field: a JSON array (when it starts with `[`), otherwise entries separated by
 * commas and/or newlines, each trimmed; empty entries (a trailing comma, blank lines) are ignored.
 */
export function parsePermissionText(text: string, field = 'permissions'): Permission[] {
  const trimmed = text.trim();
  if (trimmed.startsWith('[')) {
    let parsed: unknown;
    try {
      parsed = JSON.parse(trimmed);
    } catch {
      throw new InputError(400, 'invalid_permission', `${field} starts with "[" but is not a valid JSON array.`, { field });
    }
    if (!Array.isArray(parsed)) throw new InputError(400, 'invalid_permission', `${field} must be a JSON array of strings.`, { field });
    return parsePermissionList(parsed, field);
  }
  const entries = trimmed.split(/[,\r\n]/).map((entry) => entry.trim()).filter((entry) => entry !== '');
  return parsePermissionList(entries, field);
}

/** The secret keys a list of permissions lets a guest read (each `read_secret:<KEY>`'s KEY). */
export function secretKeysOf(permissions: readonly string[]): string[] {
  return permissions.flatMap((permission) => READ_SECRET.exec(permission)?.[1] ?? []);
}

/** Same set of permissions, whatever the order. */
export function samePermissions(a: readonly string[], b: readonly string[]): boolean {
  if (a.length !== b.length) return false;
  const set = new Set(a);
  return b.every((entry) => set.has(entry));
}
