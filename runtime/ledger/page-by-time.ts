// Newest-first paging over a time index keyed [...scope, atMs, id]: the one loop behind the event
// and run lists. Bounded scan per page, so a selective filter cannot turn one request into a full scan.

import type { LedgerKeyPart, LedgerTable } from './ledger.ts';

/** Index entries looked at per page at most; a page may come back short with a cursor to continue. */
export const MAX_SCAN_PER_PAGE = 20_000;

/**
 * Bytes of items (as `weigh` counts them) after which a page ends, short, with a cursor: 500 events
 * of 8 MiB would not fit in one answer (V8 strings stop at 512 MiB). A page always holds one item.
 */
export const MAX_PAGE_BYTES = 16 * 1024 * 1024;

/**
 * What a text weighs in an answer, which is UTF-8: its bytes, not its length (a character of CJK
 * text is one UTF-16 unit and three bytes, so pages counted by length ran to 48 MiB).
 */
export const textBytes = (text: string): number => Buffer.byteLength(text, 'utf8');

/**
 * Whether an index entry written as fields in a fixed order (a store's `[type, source]`, say) may
 * belong to an item that passes a filter: false only when a field the filter names differs.
 * `wanted` gives the filter's value per field, undefined where it names none. An entry of another
 * shape (null, from before entries held fields) cannot tell: true, and the item is read to decide.
 */
export function entryMayMatch(entry: unknown, wanted: readonly (string | undefined)[]): boolean {
  if (!Array.isArray(entry) || entry.length !== wanted.length) return true;
  return wanted.every((value, i) => value === undefined || value === entry[i]);
}

export interface TimePage<T> {
  readonly items: T[];
  /** Position after the last entry looked at, or null when no entry is left beyond the page. */
  readonly next: [number, string] | null;
}

/**
 * `load` returns the item for an id (given the index entry's value, which a store may use to filter
 * without reading the item), or undefined when it is gone or filtered out; `weigh`, when given, its
 * size in an answer, and the page ends once MAX_PAGE_BYTES are reached.
 */
export function pageByTime<T>(
  index: LedgerTable,
  scope: readonly LedgerKeyPart[],
  limit: number,
  cursor: [number, string] | undefined,
  load: (id: string, indexValue: unknown) => T | undefined,
  weigh?: (item: T) => number,
): TimePage<T> {
  const start = cursor === undefined ? [...scope, Number.MAX_SAFE_INTEGER] : [...scope, ...cursor];
  const items: T[] = [];
  let last: [number, string] | null = null;
  let scanned = 0;
  let bytes = 0;
  let full = false;
  for (const { key, value } of index.getRange({ start, end: [...scope], reverse: true })) {
    const [at, id] = (key as LedgerKeyPart[]).slice(scope.length) as [number, string];
    if (cursor !== undefined && at === cursor[0] && id === cursor[1]) continue;
    // An entry beyond a full page: there is more to read (an exactly full last page answers null).
    if (full) return { items, next: last };
    last = [at, id];
    scanned++;
    const item = load(id, value);
    if (item !== undefined) {
      items.push(item);
      bytes += weigh?.(item) ?? 0;
    }
    full = items.length >= limit || scanned >= MAX_SCAN_PER_PAGE || bytes >= MAX_PAGE_BYTES;
  }
  return { items, next: null };
}
