// One page of records read lazily: at most `limit` of them, ending early once MAX_PAGE_BYTES of
// their API views are on it (a source, device or workflow can be about a megabyte), and, when a
// record was left over, the cursor naming the last one shown.

import { MAX_PAGE_BYTES, textBytes } from '../ledger/page-by-time.ts';

export interface ByteCappedPage<V> {
  readonly views: V[];
  /** `cursorOf` the last record shown when a record is left over (the page has a next one), else null. */
  readonly nextCursor: string | null;
}

/** Reads `records` only as far as the page needs; `view` is the API view of one record. */
export function byteCappedPage<T, V>(records: Iterable<T>, limit: number, view: (record: T) => V, cursorOf: (last: T) => string): ByteCappedPage<V> {
  const views: V[] = [];
  let bytes = 0;
  let last: T | undefined;
  for (const record of records) {
    if (views.length === limit || bytes >= MAX_PAGE_BYTES) return { views, nextCursor: last === undefined ? null : cursorOf(last) };
    const shown = view(record);
    bytes += textBytes(JSON.stringify(shown));
    views.push(shown);
    last = record;
  }
  return { views, nextCursor: null };
}
