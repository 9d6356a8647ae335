// A list's next_cursor belongs to that list: its org, its endpoint and its filters (only `limit`
// may change between pages). Used anywhere else it is a 400 invalid_cursor, where it had answered a
// silently wrong page. Through a real runtime.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { ADMIN_TOKEN, startRuntime, type TestRuntime } from '../helpers/runtime.ts';
import { call, createOrg } from '../helpers/http.ts';

const ORG_A = 'acct-cursor-a';
const ORG_B = 'acct-cursor-b';
let rt: TestRuntime;
let keyA: string;
let keyB: string;

before(async () => {
  rt = await startRuntime();
  keyA = await createOrg(rt.url, ADMIN_TOKEN, ORG_A);
  keyB = await createOrg(rt.url, ADMIN_TOKEN, ORG_B);
  for (const [org, key] of [[ORG_A, keyA], [ORG_B, keyB]] as const) {
    for (let n = 0; n < 4; n++) {
      const sent = await call(rt.url, 'POST', `/organizations/${org}/events`, { token: key, json: { type: n % 2 === 0 ? 'order.paid' : 'order.refunded', id: `evt-${n}`, payload: { n } } });
      assert.equal(sent.status, 202, sent.text);
    }
  }
});
after(() => rt.close());

async function firstCursor(path: string): Promise<string> {
  const page = await call(rt.url, 'GET', path, { token: keyA });
  assert.equal(page.status, 200, page.text);
  assert.equal(typeof page.body.next_cursor, 'string');
  return page.body.next_cursor as string;
}

test('environment=production is the list without it: a cursor of either goes on with the other; sandbox is another list', async () => {
  for (const [first, then] of [['', '&environment=production'], ['&environment=production', '']]) {
    const cursor = await firstCursor(`/organizations/${ORG_A}/events?limit=1${first}`);
    const next = await call(rt.url, 'GET', `/organizations/${ORG_A}/events?limit=1&cursor=${cursor}${then}`, { token: keyA });
    assert.equal(next.status, 200, next.text);
    assert.deepEqual(next.body.events.map((event: { id: string }) => event.id), ['evt-2']);
  }
  const cursor = await firstCursor(`/organizations/${ORG_A}/events?limit=1`);
  const sandbox = await call(rt.url, 'GET', `/organizations/${ORG_A}/events?limit=1&cursor=${cursor}&environment=sandbox`, { token: keyA });
  assert.equal(sandbox.status, 400);
  assert.equal(sandbox.body.error.code, 'invalid_cursor');
});

test('a cursor goes on with the same list, with any limit', async () => {
  const cursor = await firstCursor(`/organizations/${ORG_A}/events?type=order.paid&limit=1`);
  const next = await call(rt.url, 'GET', `/organizations/${ORG_A}/events?limit=5&cursor=${cursor}&type=order.paid`, { token: keyA });
  assert.equal(next.status, 200, next.text);
  assert.deepEqual(next.body.events.map((event: { id: string }) => event.id), ['evt-0']);
});

test('the same cursor under another filter, endpoint or org is a 400 invalid_cursor', async () => {
  const cursor = await firstCursor(`/organizations/${ORG_A}/events?type=order.paid&limit=1`);
  const misuses: Array<[string, string]> = [
    [`/organizations/${ORG_A}/events?cursor=${cursor}`, keyA],
    [`/organizations/${ORG_A}/events?type=order.refunded&cursor=${cursor}`, keyA],
    [`/organizations/${ORG_A}/events?type=order.paid&environment=sandbox&cursor=${cursor}`, keyA],
    [`/organizations/${ORG_A}/runs?cursor=${cursor}`, keyA],
    [`/organizations/${ORG_A}/failed-events?cursor=${cursor}`, keyA],
    [`/organizations/${ORG_B}/events?type=order.paid&cursor=${cursor}`, keyB],
  ];
  for (const [path, key] of misuses) {
    const answer = await call(rt.url, 'GET', path, { token: key });
    assert.equal(answer.status, 400, `${path}: ${answer.text}`);
    assert.equal(answer.body.error.code, 'invalid_cursor', path);
    assert.equal(answer.body.error.field, 'cursor');
  }
});
