// List pages are bounded by bytes as well as by count: events of several MiB each end a page early
// (MAX_PAGE_BYTES), with a cursor that goes on to the rest, in the event list and in failed-event
// triage; before, 500 such events made one answer past V8's string limit, a 500.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { MAX_PAGE_BYTES } from '../../runtime/ledger/page-by-time.ts';
import { ADMIN_TOKEN, startRuntime, type TestRuntime } from '../helpers/runtime.ts';
import { call, createOrg, signStandard } from '../helpers/http.ts';
import { eventually, startReceiver, type Receiver } from '../helpers/receiver.ts';

const ORG = 'acct-big-pages';
const SECRET = `whsec_${Buffer.alloc(32, 9).toString('base64')}`;
/** Three of them pass MAX_PAGE_BYTES, two do not. */
const PAYLOAD_BYTES = Math.ceil(MAX_PAGE_BYTES / 2.5);
let rt: TestRuntime;
let key: string;
let receiver: Receiver;
const sent: string[] = [];

before(async () => {
  rt = await startRuntime();
  key = await createOrg(rt.url, ADMIN_TOKEN, ORG, 'pro');
  receiver = await startReceiver([{ status: 400, body: 'no' }]);
  const source = await call(rt.url, 'POST', `/organizations/${ORG}/sources`, { token: key, json: { name: 'bulk', secrets: [SECRET], body_limit_bytes: 8 * 1024 * 1024 } });
  assert.equal(source.status, 201, source.text);
  const workflow = await call(rt.url, 'POST', `/organizations/${ORG}/workflows`, { token: key, json: { name: 'refused', trigger_event: 'bulk.export', steps: [{ id: 'send', type: 'webhook', url: receiver.url }] } });
  assert.equal(workflow.status, 201, workflow.text);
  for (let i = 0; i < 4; i++) {
    const body = JSON.stringify({ type: 'bulk.export', n: i, blob: String(i).repeat(PAYLOAD_BYTES) });
    const answer = await call(rt.url, 'POST', `/hooks/${ORG}/bulk`, { body, headers: signStandard(SECRET, `big-${i}`, Math.floor(Date.now() / 1000), body) });
    assert.equal(answer.status, 204, answer.text);
    sent.unshift(answer.headers.get('sluice-event-id') ?? '');
  }
});
after(async () => {
  await rt.close();
  await receiver.close();
});

/** Every page of a list, following next_cursor; each page's ids and byte length. */
async function allPages(path: string, idsOf: (body: any) => string[]): Promise<Array<{ ids: string[]; bytes: number }>> {
  const pages: Array<{ ids: string[]; bytes: number }> = [];
  let cursor: string | null = null;
  do {
    const answer = await call(rt.url, 'GET', `${path}?limit=500${cursor === null ? '' : `&cursor=${cursor}`}`, { token: key });
    assert.equal(answer.status, 200, answer.text.slice(0, 300));
    pages.push({ ids: idsOf(answer.body), bytes: answer.text.length });
    cursor = answer.body.next_cursor;
  } while (cursor !== null && pages.length < 10);
  return pages;
}

test('the event list ends a page once its payloads pass MAX_PAGE_BYTES; the cursor brings the rest, each event once', async () => {
  const pages = await allPages(`/organizations/${ORG}/events`, (body) => body.events.map((event: { id: string }) => event.id));
  assert.deepEqual(pages.map((page) => page.ids), [sent.slice(0, 3), sent.slice(3)]);
  assert.ok(pages.every((page) => page.bytes < MAX_PAGE_BYTES + 8 * 1024 * 1024), 'a page passes the cap by one event at most');
});

test('failed-event triage pages by bytes the same way', async () => {
  await eventually('four failed runs', async () => (await call(rt.url, 'GET', `/organizations/${ORG}/runs?state=failed`, { token: key })).body.runs.length, (count) => count === 4);
  const pages = await allPages(`/organizations/${ORG}/failed-events`, (body) => body.failed_events.map((entry: { event: { id: string } }) => entry.event.id));
  assert.deepEqual(pages.map((page) => page.ids.length), [3, 1]);
  assert.deepEqual(pages.flatMap((page) => page.ids).sort(), [...sent].sort());
});
