// One page of a list the API sorts in memory (custom actions: bounded per org), newest created
// first, ties by id, with an opaque cursor naming the last item of the page. (Workflows are read in
// that order from their own index, one at a time: workflow-store.ts newestFirst.)

import type { HttpRequest } from '../http/types.ts';
import { byteCappedPage, type ByteCappedPage } from './byte-capped-page.ts';
import { encodeCursor, parseCursorOf, parseLimit } from './query-params.ts';

interface Created {
  readonly id: string;
  readonly created_at: string;
}

/** A part of a [created_at, id] cursor as these lists write it. */
export const isCursorText = (value: unknown): value is string => typeof value === 'string' && value.length <= 200;

/** The cursor naming `item` in such a list (the one `request` asked for): its [created_at, id]. */
export const createdCursor =
  (request: HttpRequest) =>
  (item: Created): string =>
    encodeCursor(request, [item.created_at, item.id]);

/** Newest created first, ties by id descending: the order every such list is shown in. */
export const newestFirst = (a: Created, b: Created): number =>
  a.created_at === b.created_at ? (a.id < b.id ? 1 : a.id > b.id ? -1 : 0) : a.created_at < b.created_at ? 1 : -1;

/**
 * The views of `?limit=` items after `?cursor=` (both as the other lists take them) of `items`,
 * sorted here; `view` is called for the page's items only, and the page ends early past
 * MAX_PAGE_BYTES of views (byte-capped-page.ts).
 */
export function sortedPage<T extends Created, V>(request: HttpRequest, items: readonly T[], view: (item: T) => V): ByteCappedPage<V> {
  const limit = parseLimit(request);
  const after = parseCursorOf(request, [isCursorText, isCursorText]);
  const sorted = [...items].sort(newestFirst);
  const start = after === undefined ? 0 : sorted.findIndex((item) => newestFirst(item, { created_at: after[0], id: after[1] }) > 0);
  return byteCappedPage(start < 0 ? [] : sorted.slice(start), limit, view, createdCursor(request));
}
