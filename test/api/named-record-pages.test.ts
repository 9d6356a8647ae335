// Lists of sources, devices and schedules come a page at a time: by name, `limit` and `cursor` as
// the other lists, and a page ends early once its answer passes 16 MiB (a device or source can
// carry a megabyte of schemas: a thousand of them made one answer of a gigabyte, a 500).

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { ADMIN_TOKEN, startRuntime, type TestRuntime } from '../helpers/runtime.ts';
import { call, createOrg } from '../helpers/http.ts';

const ORG = 'acct-pages';
let rt: TestRuntime;
let key: string;
before(async () => {
  rt = await startRuntime();
  key = await createOrg(rt.url, ADMIN_TOKEN, ORG);
});
after(() => rt.close());

async function allPages(path: string, plural: string, limit: number): Promise<{ names: string[]; sizes: number[] }> {
  const names: string[] = [];
  const sizes: number[] = [];
  let cursor: string | null = null;
  do {
    const query: string = `limit=${limit}${cursor === null ? '' : `&cursor=${cursor}`}`;
    const page = await call(rt.url, 'GET', `${path}${path.includes('?') ? '&' : '?'}${query}`, { token: key });
    assert.equal(page.status, 200, page.text);
    const items = page.body[plural] as Array<{ name: string }>;
    names.push(...items.map((item) => item.name));
    sizes.push(items.length);
    cursor = page.body.next_cursor as string | null;
  } while (cursor !== null && sizes.length < 100);
  return { names, sizes };
}

test('schedules page by name with limit and cursor, each environment on its own; bad paging is a 400', async () => {
  const path = `/organizations/${ORG}/schedules`;
  const production = ['s-a', 's-b', 's-c', 's-d', 's-e', 's-f', 's-g'];
  // Created out of order, and sandbox ones in between: pages are by name, per environment.
  for (const name of [...production].reverse()) {
    assert.equal((await call(rt.url, 'POST', path, { token: key, json: { name, cron: '0 * * * *', event_type: 'tick.hourly' } })).status, 201);
  }
  for (const name of ['s-bb', 's-dd']) {
    assert.equal((await call(rt.url, 'POST', path, { token: key, json: { name, cron: '0 * * * *', event_type: 'tick.hourly', environment: 'sandbox' } })).status, 201);
  }
  assert.deepEqual(await allPages(path, 'schedules', 3), { names: production, sizes: [3, 3, 1] });
  assert.deepEqual(await allPages(`${path}?environment=sandbox`, 'schedules', 1), { names: ['s-bb', 's-dd'], sizes: [1, 1] });
  const whole = await call(rt.url, 'GET', path, { token: key });
  assert.deepEqual([whole.body.schedules.length, whole.body.next_cursor], [7, null], 'the default page (50) holds them all');
  for (const [query, code] of [['limit=0', 'invalid_limit'], ['limit=501', 'invalid_limit'], ['cursor=nope', 'invalid_cursor']]) {
    const refused = await call(rt.url, 'GET', `${path}?${query}`, { token: key });
    assert.deepEqual([refused.status, refused.body.error.code], [400, code], query);
  }
});

test('a page of devices ends once its answer passes 16 MiB, with a cursor to the rest', async () => {
  const path = `/organizations/${ORG}/devices`;
  // 15 schemas of ~64 KB each: ~1 MB per device, as the limits allow.
  const schema = { type: 'object', description: 'd'.repeat(63_000) };
  const eventTypes = Object.fromEntries(Array.from({ length: 15 }, (_, i) => [`reading.t${i}`, schema]));
  const names = Array.from({ length: 20 }, (_, i) => `dev-${String(i).padStart(2, '0')}`);
  for (const name of names) {
    const created = await call(rt.url, 'POST', path, { token: key, json: { name, event_types: eventTypes } });
    assert.equal(created.status, 201, created.text);
  }
  const { names: listed, sizes } = await allPages(path, 'devices', 50);
  assert.deepEqual(listed, names, 'every device once, in name order');
  assert.ok(sizes.length >= 2 && sizes[0]! < 20, `the first page is cut short by bytes: ${sizes.join(', ')}`);
  assert.ok(sizes[0]! >= 16, `it still holds 16 MiB of devices: ${sizes[0]}`);
});
