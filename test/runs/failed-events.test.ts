// Failed-event triage over many failures: pages of events (newest first), each with
// its failed runs (at most FAILED_RUNS_SHOWN listed, all counted), a cursor that visits every event once, and a clear 400 for a bad cursor.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { FAILED_RUNS_SHOWN } from '../../runtime/runs/run-store.ts';
import { ADMIN_TOKEN, startRuntime, type TestRuntime } from '../helpers/runtime.ts';
import { call, createOrg } from '../helpers/http.ts';
import { eventually, startReceiver, type Receiver } from '../helpers/receiver.ts';

const ORG = 'acct-triage';
let rt: TestRuntime;
let key: string;
let receiver: Receiver;

before(async () => {
  rt = await startRuntime();
  key = await createOrg(rt.url, ADMIN_TOKEN, ORG, 'pro');
  receiver = await startReceiver([{ status: 400, body: 'no' }]);
  for (const name of ['notify-a', 'notify-b']) {
    const created = await call(rt.url, 'POST', `/organizations/${ORG}/workflows`, { token: key, json: { name, trigger_event: 'order.bad', steps: [{ id: 'send', type: 'webhook', url: receiver.url }] } });
    assert.equal(created.status, 201, created.text);
  }
});
after(async () => {
  await rt.close();
  await receiver.close();
});

interface FailedPage {
  failed_events: Array<{ event: { id: string }; runs: Array<{ state: string }> }>;
  next_cursor: string | null;
}

test('failed events come in pages: every event once, each with all its failed runs, then no cursor', async () => {
  const ids = ['evt_00000000001a', 'evt_00000000002b', 'evt_00000000003c', 'evt_00000000004d', 'evt_00000000005e'];
  for (const id of ids) assert.equal((await call(rt.url, 'POST', `/organizations/${ORG}/events`, { token: key, json: { type: 'order.bad', payload: {}, id } })).status, 202);
  const list = (cursor?: string): Promise<FailedPage> =>
    call(rt.url, 'GET', `/organizations/${ORG}/failed-events?limit=2${cursor === undefined ? '' : `&cursor=${cursor}`}`, { token: key }).then((answer) => answer.body as FailedPage);
  await eventually('ten failed runs', () => list(), (page) => page.failed_events.length === 2 && page.failed_events.every((entry) => entry.runs.length === 2));
  await eventually('all failed', async () => (await call(rt.url, 'GET', `/organizations/${ORG}/runs?state=failed&limit=500`, { token: key })).body.runs.length, (count) => count === 10);
  const pages: FailedPage[] = [];
  let cursor: string | undefined;
  do {
    const page = await list(cursor);
    pages.push(page);
    cursor = page.next_cursor ?? undefined;
  } while (cursor !== undefined && pages.length < 10);
  assert.deepEqual(pages.map((page) => page.failed_events.map((entry) => entry.event.id)), [[ids[4], ids[3]], [ids[2], ids[1]], [ids[0]]]);
  for (const entry of pages.flatMap((page) => page.failed_events)) assert.deepEqual(entry.runs.map((run) => run.state), ['failed', 'failed']);
  assert.equal(pages.at(-1)!.next_cursor, null);
  const bad = await call(rt.url, 'GET', `/organizations/${ORG}/failed-events?cursor=${Buffer.from('[1,2]').toString('base64url')}`, { token: key });
  assert.equal(bad.status, 400);
  assert.equal(bad.body.error.code, 'invalid_cursor');
});

test(`an event with more than ${FAILED_RUNS_SHOWN} failed runs lists ${FAILED_RUNS_SHOWN} of them and counts them all`, async () => {
  const many = FAILED_RUNS_SHOWN + 3;
  for (let i = 0; i < many; i++) {
    const created = await call(rt.url, 'POST', `/organizations/${ORG}/workflows`, { token: key, json: { name: `fan-${i}`, trigger_event: 'order.fan', steps: [{ id: 'send', type: 'webhook', url: receiver.url }] } });
    assert.equal(created.status, 201, created.text);
  }
  assert.equal((await call(rt.url, 'POST', `/organizations/${ORG}/events`, { token: key, json: { type: 'order.fan', payload: {}, id: 'evt_00000000009z' } })).status, 202);
  const entry = await eventually('every run failed', async () => {
    const page = (await call(rt.url, 'GET', `/organizations/${ORG}/failed-events?limit=1`, { token: key })).body as FailedPage & { failed_events: Array<{ failed_runs: number }> };
    return page.failed_events[0];
  }, (first) => first?.event.id === 'evt_00000000009z' && first.failed_runs === many);
  assert.equal(entry!.runs.length, FAILED_RUNS_SHOWN);
});
