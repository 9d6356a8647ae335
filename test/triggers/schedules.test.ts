// Schedules on the real runtime (uWS, LMDB) with an injected clock: the API refuses bad patterns,
// zones and payloads with the field named; each tick sends one event (and so one run per listening
// workflow); a restart sends only the newest tick missed while down, once; a disabled, re-enabled or
// deleted schedule owes nothing; other orgs and viewers cannot change or see it; a tick that a
// spring-forward gap ending at midnight skips is sent once, when the gap ends.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { ManualClock } from '../../runtime/clock.ts';
import { describeSchedule, type ScheduleRecord } from '../../runtime/triggers/schedule-record.ts';
import { keyWithRole } from '../actions/action-fixtures.ts';
import { call, createOrg } from '../helpers/http.ts';
import { eventually, startReceiver, type Receiver } from '../helpers/receiver.ts';
import { ADMIN_TOKEN, startRuntime, tempDir, type TestRuntime } from '../helpers/runtime.ts';

const START = Date.UTC(2026, 10, 30, 9, 0, 0);
const clock = new ManualClock(START);
const dataDir = tempDir();
let rt: TestRuntime;
let receiver: Receiver;
let key: string;
const ORG = 'acct-schedules';
/** The ticker's timer key of the schedule most tests use. */
const TIMER = `${ORG}\u0000quarter-hourly`;

before(async () => {
  rt = await startRuntime({ clock, dataDir });
  receiver = await startReceiver();
  key = await createOrg(rt.url, ADMIN_TOKEN, ORG);
  const wf = await call(rt.url, 'POST', `/organizations/${ORG}/workflows`, { token: key, json: { name: 'report', trigger_event: 'report.due', steps: [{ id: 'post', type: 'webhook', url: `${receiver.url}/report` }] } });
  assert.equal(wf.status, 201, wf.text);
});
after(async () => {
  await rt.close();
  await receiver.close();
});

const schedulesPath = `/organizations/${ORG}/schedules`;
const create = (json: unknown, token = key) => call(rt.url, 'POST', schedulesPath, { token, json });

/** Moves the clock to `at` and fires the ticker's due timers; answers how many fired. */
function tickAt(at: number): number {
  clock.set(at);
  return rt.runtime.ticker.timers.fireDue();
}

/** Events the schedule sent, oldest tick first. */
async function tickEvents(type: string): Promise<Array<{ id: string; source: string; payload: { schedule: string; scheduled_for: string; data: unknown } }>> {
  const listed = await call(rt.url, 'GET', `/organizations/${ORG}/events?type=${type}`, { token: key });
  assert.equal(listed.status, 200, listed.text);
  return [...listed.body.events].sort((a, b) => a.payload.scheduled_for.localeCompare(b.payload.scheduled_for));
}

test('bad patterns, zones, names and payloads are refused with the field named', async () => {
  const base = { name: 'bad', cron: '*/5 * * * *', event_type: 'report.due' };
  const cases: Array<[unknown, number, string, string]> = [
    [{ ...base, cron: '*/5 * * * * *' }, 400, 'invalid_cron', 'cron'],
    [{ ...base, cron: 'every day' }, 400, 'invalid_cron', 'cron'],
    [{ ...base, cron: '0 0 30 2 *' }, 400, 'invalid_cron', 'cron'],
    [{ ...base, cron: '61 * * * *' }, 400, 'invalid_cron', 'cron'],
    [{ ...base, timezone: 'Mars/Olympus' }, 400, 'invalid_timezone', 'timezone'],
    [{ ...base, name: 'Bad Name' }, 400, 'invalid_request', 'name'],
    [{ ...base, event_type: 'has space' }, 400, 'invalid_request', 'event_type'],
    [{ ...base, event_type: 'device.disconnected' }, 400, 'reserved_event_type', 'event_type'],
    [{ ...base, payload: { blob: 'x'.repeat(70_000) } }, 413, 'payload_too_large', 'payload'],
  ];
  for (const [json, status, code, field] of cases) {
    const refused = await create(json);
    assert.equal(refused.status, status, `${JSON.stringify(json).slice(0, 80)}: ${refused.text}`);
    assert.equal(refused.body.error.code, code);
    assert.equal(refused.body.error.field, field);
  }
  assert.equal((await call(rt.url, 'GET', `${schedulesPath}/bad`, { token: key })).status, 404, 'nothing was stored');
});

test('each tick sends one event with the payload, and its run; the next tick waits for its time', async () => {
  // Sent as text: a number past 2^53 must come back as written, not rounded by a JSON round trip.
  const body = '{"name":"quarter-hourly","cron":"*/15 * * * *","event_type":"report.due","payload":{"region":"eu","big":12345678901234567890}}';
  const created = await call(rt.url, 'POST', schedulesPath, { token: key, body, headers: { 'content-type': 'application/json' } });
  assert.equal(created.status, 201, created.text);
  assert.equal(created.body.schedule.next_tick_at, '2026-11-30T09:15:00.000Z');
  assert.equal(created.body.schedule.timezone, 'UTC');
  assert.equal(created.body.schedule.last_sent_tick_at, null);
  assert.match(created.text, /"big":12345678901234567890/, 'the payload is kept as sent');

  assert.equal(tickAt(START + 14 * 60_000), 0, 'not before its time');
  assert.equal(tickAt(START + 15 * 60_000 + 500), 1);
  const [sent] = await eventually('the tick event', () => tickEvents('report.due'), (events) => events.length === 1);
  assert.equal(sent!.source, '@schedule');
  assert.deepEqual({ ...sent!.payload, data: undefined }, { schedule: 'quarter-hourly', scheduled_for: '2026-11-30T09:15:00.000Z', data: undefined });
  assert.equal((sent!.payload.data as { region: string }).region, 'eu');
  await eventually('the run to post its step', () => receiver.received.filter((r) => r.path === '/report').length, (n) => n === 1);
  assert.equal((await tickEvents('report.due')).length, 1, 'one event for the tick');
  assert.equal((await call(rt.url, 'GET', `${schedulesPath}/quarter-hourly?environment=sandbox`, { token: key })).status, 404, 'not a sandbox schedule');

  assert.equal(tickAt(START + 29 * 60_000), 0);
  const shown = await call(rt.url, 'GET', `${schedulesPath}/quarter-hourly`, { token: key });
  assert.equal(shown.body.schedule.last_sent_tick_at, '2026-11-30T09:15:00.000Z');
  assert.equal(shown.body.schedule.next_tick_at, '2026-11-30T09:30:00.000Z');
});

test('a restart sends only the newest tick missed while down, once', async () => {
  await rt.close();
  clock.set(START + 110 * 60_000); // 10:50: 09:30 to 10:45 were missed
  rt = await startRuntime({ clock, dataDir });
  assert.equal(rt.runtime.ticker.timers.dueAt(TIMER), clock.now(), 'the owed tick is due at start');
  rt.runtime.ticker.timers.fireDue();
  const events = await eventually('the owed tick event', () => tickEvents('report.due'), (list) => list.length === 2);
  assert.deepEqual(events.map((e) => e.payload.scheduled_for), ['2026-11-30T09:15:00.000Z', '2026-11-30T10:45:00.000Z']);
  // The event is readable once committed; the timer is armed again once it is flushed.
  await eventually('the next tick to be armed', () => rt.runtime.ticker.timers.dueAt(TIMER), (at) => at === START + 120 * 60_000);
  assert.equal(rt.runtime.ticker.timers.fireDue(), 0, 'nothing more is owed');
  assert.equal(tickAt(START + 120 * 60_000), 1, 'then 11:00 as usual');
  await eventually('the 11:00 tick', () => tickEvents('report.due'), (list) => list.length === 3);
});

test('a disabled schedule sends nothing, and enabling it again owes none of the ticks it missed', async () => {
  const forged = await call(rt.url, 'PATCH', `${schedulesPath}/quarter-hourly`, { token: key, json: { event_type: 'device.connected' } });
  assert.deepEqual([forged.status, forged.body.error?.code, forged.body.error?.field], [400, 'reserved_event_type', 'event_type']);
  const disabled = await call(rt.url, 'PATCH', `${schedulesPath}/quarter-hourly`, { token: key, json: { enabled: false } });
  assert.equal(disabled.status, 200, disabled.text);
  assert.equal(disabled.body.schedule.next_tick_at, null);
  assert.equal(tickAt(START + 200 * 60_000), 0);
  const enabled = await call(rt.url, 'PATCH', `${schedulesPath}/quarter-hourly`, { token: key, json: { enabled: true, cron: '0 * * * *', timezone: 'Europe/Berlin' } });
  assert.equal(enabled.status, 200, enabled.text);
  assert.equal(enabled.body.schedule.next_tick_at, '2026-11-30T13:00:00.000Z');
  assert.equal(rt.runtime.ticker.timers.dueAt(TIMER), Date.UTC(2026, 10, 30, 13), 'armed for 14:00 Berlin time, not now: no backlog');
  assert.equal((await tickEvents('report.due')).length, 3);
});

test('a deleted schedule sends nothing more; viewers and other orgs cannot change or see it', async () => {
  const viewer = await keyWithRole(rt.url, ORG, key, 'viewer');
  assert.equal((await create({ name: 'by-viewer', cron: '@hourly', event_type: 'report.due' }, viewer.key)).status, 403);
  assert.equal((await call(rt.url, 'GET', schedulesPath, { token: viewer.key })).body.schedules.length, 1, 'a viewer may list');
  const otherKey = await createOrg(rt.url, ADMIN_TOKEN, 'acct-schedules-other');
  assert.equal((await call(rt.url, 'GET', `${schedulesPath}/quarter-hourly`, { token: otherKey })).status, 404);
  assert.equal((await call(rt.url, 'DELETE', `${schedulesPath}/quarter-hourly`, { token: otherKey })).status, 404);
  assert.deepEqual((await call(rt.url, 'GET', '/organizations/acct-schedules-other/schedules', { token: otherKey })).body.schedules, []);
  assert.equal((await create({ name: 'quarter-hourly', cron: '@hourly', event_type: 'report.due' })).status, 409, 'names are unique in an org');

  assert.equal((await call(rt.url, 'DELETE', `${schedulesPath}/quarter-hourly`, { token: key })).status, 204);
  assert.equal(tickAt(START + 300 * 60_000), 0);
  assert.equal((await tickEvents('report.due')).length, 3);
  assert.equal((await call(rt.url, 'GET', `${schedulesPath}/quarter-hourly`, { token: key })).status, 404);
});

test('a stored schedule that croner cannot read (an older zone name, say) is left disarmed; the runtime goes on', () => {
  const unreadable: ScheduleRecord = {
    id: 'sch_unreadable', org_id: ORG, name: 'unreadable', cron: '* * * * *', timezone: '+01:00', event_type: 'report.due', environment: 'production',
    payload_json: 'null', enabled: true, created_at: '', updated_at: '', last_tick_ms: 0, last_sent_tick_ms: null,
  };
  rt.runtime.ticker.arm(unreadable);
  assert.equal(rt.runtime.ticker.timers.dueAt(`${ORG}\u0000unreadable`), undefined);
  assert.equal(describeSchedule(unreadable, clock.now()).next_tick_at, null);
});

test('a tick in a skipped hour that ends at midnight (America/Nuuk) is sent once, at 00:00, and the schedule goes on', async () => {
  clock.set(Date.UTC(2027, 2, 27, 12)); // 10:00 -02 on the 27th; that night 23:00 goes to 00:00 -01
  const created = await create({ name: 'nuuk-nightly', cron: '30 23 * * *', timezone: 'America/Nuuk', event_type: 'nuuk.night' });
  assert.equal(created.status, 201, created.text);
  assert.equal(created.body.schedule.next_tick_at, '2027-03-28T01:00:00.000Z', '23:30 does not exist that night: 00:00');
  const timer = `${ORG}\u0000nuuk-nightly`;
  assert.equal(rt.runtime.ticker.timers.dueAt(timer), Date.UTC(2027, 2, 28, 1));
  assert.equal(tickAt(Date.UTC(2027, 2, 28, 1) - 1), 0, 'not before');
  assert.equal(tickAt(Date.UTC(2027, 2, 28, 1)), 1);
  const [sent, ...more] = await eventually('the tick event', () => tickEvents('nuuk.night'), (events) => events.length === 1);
  assert.deepEqual([sent!.payload.scheduled_for, more.length], ['2027-03-28T01:00:00.000Z', 0]);
  await eventually('the next tick to be armed', () => rt.runtime.ticker.timers.dueAt(timer), (at) => at === Date.UTC(2027, 2, 29, 0, 30));
  assert.equal(rt.runtime.ticker.timers.fireDue(), 0, 'sent once');
});
