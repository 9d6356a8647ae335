// One page of a list the API sorts in memory (custom actions: bounded per org), newest created
// first, ties by id, with an opaque cursor naming the last item of the page. (Workflows are read in
// that order from their own index, one at a time: workflow-store.ts newestFirst.)

import type { HttpRequest } from '../http/types.ts';
import { encodeCursor, parseCursorOf, parseLimit } from './query-params.ts';

interface Created {
  readonly id: string;
  readonly created_at: string;
}

/** A part of a [created_at, id] cursor as these lists write it. */
export const isCursorText = (value: unknown): value is string => typeof value === 'string' && value.length <= 200;

/** Newest created first, ties by id descending: the order every such list is shown in. */
export const newestFirst = (a: Created, b: Created): number =>
  a.created_at === b.created_at ? (a.id < b.id ? 1 : a.id > b.id ? -1 : 0) : a.created_at < b.created_at ? 1 : -1;

/** `?limit=` items after `?cursor=` (both as the other lists take them) of `items`, sorted here. */
export function sortedPage<T extends Created>(request: HttpRequest, items: readonly T[]): { readonly items: T[]; readonly nextCursor: string | null } {
  const limit = parseLimit(request);
  const after = parseCursorOf(request, [isCursorText, isCursorText]);
  const sorted = [...items].sort(newestFirst);
  const start = after === undefined ? 0 : sorted.findIndex((item) => newestFirst(item, { created_at: after[0], id: after[1] }) > 0);
  const page = start < 0 ? [] : sorted.slice(start, start + limit);
  const last = page.at(-1);
  const more = start >= 0 && start + limit < sorted.length;
  return { items: page, nextCursor: more && last !== undefined ? encodeCursor([last.created_at, last.id]) : null };
}
