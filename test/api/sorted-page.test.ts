// The in-memory sorted list (custom actions): newest first with a cursor, views made for the page's
// items only, and a page that ends early once its views pass MAX_PAGE_BYTES (an action with a
// hundred versions of reviews can weigh megabytes: 500 of them made one answer of 313 MB).

import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { HttpRequest } from '../../runtime/http/types.ts';
import { MAX_PAGE_BYTES } from '../../runtime/ledger/page-by-time.ts';
import { sortedPage } from '../../runtime/api/sorted-page.ts';

const request = (query: string): HttpRequest => ({ method: 'GET', path: '/', query: new URLSearchParams(query), headers: {}, params: {}, body: Buffer.alloc(0) });
const items = Array.from({ length: 10 }, (_, i) => ({ id: `act_${i}`, created_at: new Date(Date.UTC(2026, 11, 1, 0, i)).toISOString() }));

test('pages newest first by limit and cursor, making views for the page only', () => {
  const viewed: string[] = [];
  const view = (item: { id: string }) => (viewed.push(item.id), item.id);
  const first = sortedPage(request('limit=3'), items, view);
  assert.deepEqual(first.views, ['act_9', 'act_8', 'act_7']);
  assert.deepEqual(viewed, ['act_9', 'act_8', 'act_7'], 'no view made past the page');
  assert.ok(first.nextCursor !== null);
  const rest = sortedPage(request(`limit=500&cursor=${first.nextCursor}`), items, (item) => item.id);
  assert.deepEqual(rest.views, ['act_6', 'act_5', 'act_4', 'act_3', 'act_2', 'act_1', 'act_0']);
  assert.equal(rest.nextCursor, null);
});

test('a page ends once its views pass MAX_PAGE_BYTES; the cursor brings the rest, each item once', () => {
  const heavy = (item: { id: string }) => ({ id: item.id, blob: 'x'.repeat(Math.ceil(MAX_PAGE_BYTES / 4)) });
  const seen: string[] = [];
  const sizes: number[] = [];
  let cursor: string | null = null;
  do {
    const page: { views: Array<{ id: string }>; nextCursor: string | null } = sortedPage(request(`limit=500${cursor === null ? '' : `&cursor=${cursor}`}`), items, heavy);
    seen.push(...page.views.map((v) => v.id));
    sizes.push(page.views.length);
    cursor = page.nextCursor;
  } while (cursor !== null && sizes.length < 20);
  assert.deepEqual(seen, items.map((item) => item.id).reverse());
  assert.deepEqual(sizes, [4, 4, 2]);
});
