// Failed-event triage is newest first by arrival (received_at_ms), whatever named the event: before,
// it was by event id, so a caller's id, a schedule tick (evt_sch_<hash>) or a device's connection
// (evt_dev_<hash>) sorted above every generated id (evt_0...), a tick of an hour ago above a failure
// of a second ago. Also: cursors neither skip nor repeat while failures come in, old cursors are a
// 400, and a sandbox reset leaves no entry of its runs in the index.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { ManualClock } from '../../runtime/clock.ts';
import { encodeCursor } from '../../runtime/api/query-params.ts';
import type { HttpRequest } from '../../runtime/http/types.ts';
import { FAILED_INDEX } from '../../runtime/runs/run-store.ts';
import { connectDevice, type DeviceClient } from '../helpers/device-client.ts';
import { call, createOrg } from '../helpers/http.ts';
import { eventually, startReceiver, type Receiver } from '../helpers/receiver.ts';
import { ADMIN_TOKEN, startRuntime, type TestRuntime } from '../helpers/runtime.ts';

const START = Date.UTC(2026, 10, 30, 9, 0, 0);
const MINUTE = 60_000;
const clock = new ManualClock(START);
const ORG = 'acct-triage-order';
let rt: TestRuntime;
let key: string;
let receiver: Receiver;
let device: DeviceClient | undefined;

before(async () => {
  rt = await startRuntime({ clock });
  key = await createOrg(rt.url, ADMIN_TOKEN, ORG, 'pro');
  receiver = await startReceiver([{ status: 400, body: 'no' }]);
  for (const [name, trigger] of [['orders', 'order.bad'], ['reports', 'report.due'], ['kiosks', 'device.connected']] as const) {
    const created = await call(rt.url, 'POST', `/organizations/${ORG}/workflows`, { token: key, json: { name, trigger_event: trigger, steps: [{ id: 'send', type: 'webhook', url: receiver.url }] } });
    assert.equal(created.status, 201, created.text);
  }
});
after(async () => {
  device?.close();
  await rt.close();
  await receiver.close();
});

interface FailedPage {
  failed_events: Array<{ event: { id: string; received_at_ms: number }; runs: Array<{ state: string }>; failed_runs: number }>;
  next_cursor: string | null;
}

const list = async (limit: number, cursor?: string | null): Promise<FailedPage> => {
  const answer = await call(rt.url, 'GET', `/organizations/${ORG}/failed-events?limit=${limit}${cursor == null ? '' : `&cursor=${cursor}`}`, { token: key });
  assert.equal(answer.status, 200, answer.text);
  return answer.body as FailedPage;
};

/** Every page of the list, following next_cursor; `between` runs after each page but the last. */
async function allPages(limit: number, between: (page: number) => Promise<void> = async () => undefined): Promise<string[][]> {
  const pages: string[][] = [];
  let cursor: string | null = null;
  do {
    const page = await list(limit, cursor);
    pages.push(page.failed_events.map((entry) => entry.event.id));
    cursor = page.next_cursor;
    if (cursor !== null) await between(pages.length);
  } while (cursor !== null && pages.length < 20);
  return pages;
}

const failedRuns = async (): Promise<number> => (await call(rt.url, 'GET', `/organizations/${ORG}/runs?state=failed&limit=500`, { token: key })).body.runs.length;

/** Sends an API event at `at` (with the caller's `id`, if given); answers its id once its run failed. */
async function failingEventAt(at: number, id?: string): Promise<string> {
  clock.set(at);
  const failedBefore = await failedRuns();
  const sent = await call(rt.url, 'POST', `/organizations/${ORG}/events`, { token: key, json: { type: 'order.bad', payload: {}, ...(id === undefined ? {} : { id }) } });
  assert.equal(sent.status, 202, sent.text);
  await eventually('its run to fail', failedRuns, (count) => count === failedBefore + 1);
  return sent.body.event.id;
}

test('failed events are listed newest first by arrival, whatever their ids; pages of one skip and repeat nothing', async () => {
  // Oldest first: a caller's id that sorts above every other, a schedule's tick, a device's
  // connection, a generated id, then two of one millisecond.
  const custom = await failingEventAt(START + 10 * MINUTE, 'zz-caller-chosen');

  const schedule = await call(rt.url, 'POST', `/organizations/${ORG}/schedules`, { token: key, json: { name: 'quarterly', cron: '*/15 * * * *', event_type: 'report.due' } });
  assert.equal(schedule.status, 201, schedule.text);
  clock.set(START + 15 * MINUTE);
  assert.equal(rt.runtime.ticker.timers.fireDue(), 1);
  await eventually('the tick run to fail', failedRuns, (count) => count === 2);
  const [tick] = (await call(rt.url, 'GET', `/organizations/${ORG}/events?type=report.due`, { token: key })).body.events as Array<{ id: string }>;
  assert.match(tick!.id, /^evt_sch_/);

  const registered = await call(rt.url, 'POST', `/organizations/${ORG}/devices`, { token: key, json: { name: 'kiosk' } });
  assert.equal(registered.status, 201, registered.text);
  clock.set(START + 20 * MINUTE);
  device = await connectDevice(rt.url, ORG, 'kiosk', registered.body.token);
  await eventually('the connection run to fail', failedRuns, (count) => count === 3);
  const [connected] = (await call(rt.url, 'GET', `/organizations/${ORG}/events?type=device.connected`, { token: key })).body.events as Array<{ id: string }>;
  assert.match(connected!.id, /^evt_dev_/);

  const generated = await failingEventAt(START + 25 * MINUTE);
  assert.match(generated, /^evt_0/);
  const tieLow = await failingEventAt(START + 30 * MINUTE, 'tie-a');
  const tieHigh = await failingEventAt(START + 30 * MINUTE, 'tie-b');

  const newestFirst = [tieHigh, tieLow, generated, connected!.id, tick!.id, custom];
  const whole = await list(500);
  assert.deepEqual(whole.failed_events.map((entry) => entry.event.id), newestFirst);
  assert.deepEqual(whole.failed_events.map((entry) => entry.event.received_at_ms), [30, 30, 25, 20, 15, 10].map((m) => START + m * MINUTE));
  assert.equal(whole.next_cursor, null);
  for (const entry of whole.failed_events) assert.deepEqual([entry.failed_runs, entry.runs.map((run) => run.state)], [1, ['failed']]);
  assert.deepEqual(await allPages(1), newestFirst.map((id) => [id]), 'pages of one: each event once, in order');
});

test('failures that come in while a listing is paged neither shift its pages nor show twice; they lead the next listing', async () => {
  const listed = (await list(500)).failed_events.map((entry) => entry.event.id);
  assert.ok(listed.length >= 2, 'the first test left failed events to page through');
  const late: string[] = [];
  const pages = await allPages(2, async (page) => {
    // A newer event with a caller's id that sorts below all others, and one with a generated id.
    late.push(await failingEventAt(START + (40 + page) * MINUTE, `aa-late-${page}`));
    late.push(await failingEventAt(START + (40 + page) * MINUTE + 1));
  });
  assert.deepEqual(pages.flat(), listed, 'the listing begun before they came in, unchanged');
  assert.deepEqual((await list(500)).failed_events.map((entry) => entry.event.id), [...late.reverse(), ...listed]);
});

test('a cursor of the old id-ordered list, or of another shape, is a 400 invalid_cursor', async () => {
  for (const position of [['evt_00000000001a'], ['zz-caller-chosen'], [START, 42], ['evt_00000000001a', START]]) {
    // Made for this list (its path, no filters), so only the position's shape is wrong.
    const forThisList = { path: `/organizations/${ORG}/failed-events`, query: new URLSearchParams() } as HttpRequest;
    const answer = await call(rt.url, 'GET', `/organizations/${ORG}/failed-events?cursor=${encodeCursor(forThisList, position)}`, { token: key });
    assert.equal(answer.status, 400, `${JSON.stringify(position)}: ${answer.text}`);
    assert.equal(answer.body.error.code, 'invalid_cursor');
    assert.equal(answer.body.error.field, 'cursor');
  }
});

test('a sandbox reset takes its failed events out of the index with their runs', async () => {
  const created = await call(rt.url, 'POST', `/organizations/${ORG}/workflows`, { token: key, json: { name: 'orders-sandbox', trigger_event: 'order.bad', environment: 'sandbox', steps: [{ id: 'send', type: 'webhook', url: receiver.url }] } });
  assert.equal(created.status, 201, created.text);
  clock.set(START + 50 * MINUTE);
  assert.equal((await call(rt.url, 'POST', `/organizations/${ORG}/events`, { token: key, json: { type: 'order.bad', payload: {}, environment: 'sandbox', id: 'sandbox-refused' } })).status, 202);
  const sandboxList = async () => (await call(rt.url, 'GET', `/organizations/${ORG}/failed-events?environment=sandbox`, { token: key })).body as FailedPage;
  await eventually('the sandbox run to fail', sandboxList, (page) => page.failed_events.length === 1);
  const index = rt.runtime.ledger.openDatabase(FAILED_INDEX);
  const production = index.getKeysCount({ start: [ORG, 'production'], end: [ORG, 'production', Number.MAX_SAFE_INTEGER] });
  assert.equal(index.getKeysCount({ start: [ORG, 'sandbox'], end: [ORG, 'sandbox', Number.MAX_SAFE_INTEGER] }), 1);

  assert.equal((await call(rt.url, 'POST', `/organizations/${ORG}/sandbox/reset`, { token: key })).status, 200);
  assert.deepEqual((await sandboxList()).failed_events, []);
  assert.equal(index.getKeysCount({ start: [ORG, 'sandbox'], end: [ORG, 'sandbox', Number.MAX_SAFE_INTEGER] }), 0);
  assert.equal(index.getKeysCount({ start: [ORG, 'production'], end: [ORG, 'production', Number.MAX_SAFE_INTEGER] }), production, 'production stays');
});
