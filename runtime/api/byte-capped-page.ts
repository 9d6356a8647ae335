// One page of records read lazily: at most `limit` of them, ending early once MAX_PAGE_BYTES of
// their API views are on it (a source, device or workflow can be about a megabyte), and whether a
// record was left over, so the list's cursor names the last one shown.

import { MAX_PAGE_BYTES } from '../ledger/page-by-time.ts';

export interface ByteCappedPage<T, V> {
  readonly views: V[];
  /** The last record shown (the cursor's position), if any. */
  readonly last: T | undefined;
  /** A record is left over: the page has a next one. */
  readonly more: boolean;
}

/** Reads `records` only as far as the page needs; `view` is the API view of one record. */
export function byteCappedPage<T, V>(records: Iterable<T>, limit: number, view: (record: T) => V): ByteCappedPage<T, V> {
  const views: V[] = [];
  let bytes = 0;
  let last: T | undefined;
  for (const record of records) {
    if (views.length === limit || bytes >= MAX_PAGE_BYTES) return { views, last, more: true };
    const shown = view(record);
    bytes += JSON.stringify(shown).length;
    views.push(shown);
    last = record;
  }
  return { views, last, more: false };
}
