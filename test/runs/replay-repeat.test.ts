// A business replay is listed under the event it replays, and an unkeyed one is not made twice by
// accident: the same choice again within 5 minutes (a double click, a retry after a timeout) is
// `409 replay_just_made`, naming the replay made (one that started no run holds nothing off), unless
// the person sends "again": true. The list
// goes with the events: retention, sandbox reset (also of a replay that waited behind another); a
// data dir from before the list gets it at boot.

import assert from 'node:assert/strict';
import { rmSync } from 'node:fs';
import { after, before, test } from 'node:test';
import { ManualClock } from '../../runtime/clock.ts';
import { DAY_MS, pruneHistory } from '../../runtime/events/history-retention.ts';
import { REPLAY_INDEX } from '../../runtime/events/replay-index.ts';
import { durably } from '../../runtime/ledger/durable-write.ts';
import { openLedger } from '../../runtime/ledger/open-ledger.ts';
import { REPEAT_GUARD_MS } from '../../runtime/api/replay-api.ts';
import { call, createOrg } from '../helpers/http.ts';
import { eventually, startReceiver, type Receiver } from '../helpers/receiver.ts';
import { ADMIN_TOKEN, startRuntime, tempDir, type TestRuntime } from '../helpers/runtime.ts';
import { holdReset } from '../helpers/hold-reset.ts';

const ORG = 'acct-replay-repeat';
const clock = new ManualClock(Date.UTC(2026, 11, 2, 9, 0, 0));
let rt: TestRuntime;
let key: string;
let receiver: Receiver;
let workflowId: string;

before(async () => {
  rt = await startRuntime({ clock });
  key = await createOrg(rt.url, ADMIN_TOKEN, ORG);
  receiver = await startReceiver();
  const created = await call(rt.url, 'POST', `/organizations/${ORG}/workflows`, { token: key, json: { name: 'charge', trigger_event: 'order.paid', steps: [{ id: 'charge', type: 'webhook', url: `${receiver.url}/charge` }] } });
  assert.equal(created.status, 201, created.text);
  workflowId = created.body.workflow.id;
});
after(async () => {
  await rt.close();
  await receiver.close();
});

const base = `/organizations/${ORG}/events`;
const replay = (eventId: string, json: Record<string, unknown>, headers: Record<string, string> = {}, environment = 'production') =>
  call(rt.url, 'POST', `${base}/${eventId}/replay?environment=${environment}`, { token: key, json, headers });
const sendEvent = async (id: string): Promise<string> => {
  const sent = await call(rt.url, 'POST', base, { token: key, json: { type: 'order.paid', payload: { order: id }, id } });
  assert.equal(sent.status, 202, sent.text);
  return sent.body.event.id;
};
const charges = (runId: string) => receiver.received.filter((r) => r.headers['idempotency-key'] === `${runId}:charge`).length;

test('a double click makes one replay: the second unkeyed request with the same choice is 409 replay_just_made, naming the first', async () => {
  const original = await sendEvent('order-1');
  await eventually('the original charged', () => receiver.received.filter((r) => r.path === '/charge').length, (n) => n === 1);
  const clicks = await Promise.all([replay(original, { side_effects: 'run' }), replay(original, { side_effects: 'run' })]);
  const made = clicks.find((c) => c.status === 202);
  const refused = clicks.find((c) => c.status === 409);
  assert.ok(made !== undefined && refused !== undefined, `one made, one refused: ${clicks.map((c) => c.status).join(', ')}`);
  assert.equal(refused.body.error.code, 'replay_just_made');
  assert.equal(refused.body.error.replay_event_id, made.body.event.id);
  assert.match(refused.body.error.message, /"again": true/);
  assert.equal(made.body.reactions.length, 1, 'the answer lists the run the replay started');
  assert.equal(made.body.reactions[0].workflow_id, workflowId);
  const runId: string = made.body.reactions[0].run_id;
  await eventually('the replay charged', () => charges(runId), (n) => n === 1);
  assert.equal(receiver.received.filter((r) => r.path === '/charge').length, 2, 'the original\'s charge and one replay\'s, not two');

  // Still within the guard: the same choice is refused; another choice, another workflow set, a key or "again" is meant.
  clock.advance(REPEAT_GUARD_MS - 1000);
  assert.equal((await replay(original, { side_effects: 'run' })).status, 409);
  assert.equal((await replay(original, { side_effects: 'run', workflow_ids: [workflowId] })).status, 202, 'a replay limited to named workflows is another choice');
  assert.equal((await replay(original, { side_effects: 'skip' })).status, 202);
  assert.equal((await replay(original, { side_effects: 'skip' })).body.error?.code, 'replay_just_made', 'the skip just made is guarded too');
  assert.equal((await replay(original, { side_effects: 'run' }, { 'idempotency-key': 'ticket-7' })).status, 202, 'a keyed request: the key makes its retries safe');
  const again = await replay(original, { side_effects: 'run', again: true });
  assert.equal(again.status, 202, again.text);
  assert.equal((await replay(original, { side_effects: 'run', again: 'yes' })).body.error?.field, 'again');

  // Past the guard of the newest "run" (the keyed and "again" ones count too): made again.
  clock.advance(REPEAT_GUARD_MS);
  assert.equal((await replay(original, { side_effects: 'run' })).status, 202);

  // A clock set back: a replay made 2 minutes ago reads as later, and is still a repeat; one made
  // further off than the guard is not.
  clock.advance(-2 * 60_000);
  assert.equal((await replay(original, { side_effects: 'run' })).body.error?.code, 'replay_just_made');
  clock.advance(-60 * 60_000);
  assert.equal((await replay(original, { side_effects: 'run' })).status, 202);
  clock.advance(62 * 60_000 + REPEAT_GUARD_MS);
});

test('a replay that started no run (no workflow listened then) holds no replay off: once one listens, the same choice is made at once', async () => {
  const sent = await call(rt.url, 'POST', base, { token: key, json: { type: 'order.refunded', payload: {} } });
  assert.equal(sent.status, 202, sent.text);
  const original: string = sent.body.event.id;
  const idle = await replay(original, { side_effects: 'run' });
  assert.deepEqual([idle.status, idle.body.reactions], [202, []]);
  const listener = await call(rt.url, 'POST', `/organizations/${ORG}/workflows`, { token: key, json: { name: 'refund', trigger_event: 'order.refunded', steps: [{ id: 'refund', type: 'webhook', url: `${receiver.url}/refund` }] } });
  assert.equal(listener.status, 201, listener.text);
  const meant = await replay(original, { side_effects: 'run' });
  assert.equal(meant.status, 202, meant.text);
  assert.equal(meant.body.reactions.length, 1);
  assert.equal((await replay(original, { side_effects: 'run' })).body.error?.code, 'replay_just_made', 'the replay that started a run is guarded');
});

test('an event\'s view lists its replays newest first with the choice made; a replay lists its own', async () => {
  const original = await sendEvent('order-2');
  const skip = await replay(original, { side_effects: 'skip' });
  clock.advance(1000);
  const limited = await replay(original, { side_effects: 'run', workflow_ids: [workflowId] });
  clock.advance(1000);
  const ofReplay = await replay(skip.body.event.id, { side_effects: 'run' });
  const view = await call(rt.url, 'GET', `${base}/${original}`, { token: key });
  assert.deepEqual(view.body.replays, [
    { event_id: limited.body.event.id, received_at: limited.body.event.received_at, received_at_ms: limited.body.event.received_at_ms, side_effects: 'run', workflow_ids: [workflowId] },
    { event_id: skip.body.event.id, received_at: skip.body.event.received_at, received_at_ms: skip.body.event.received_at_ms, side_effects: 'skip', workflow_ids: null },
  ]);
  const skipView = await call(rt.url, 'GET', `${base}/${skip.body.event.id}`, { token: key });
  assert.deepEqual(skipView.body.replays.map((r: { event_id: string }) => r.event_id), [ofReplay.body.event.id]);
  const sandboxView = await call(rt.url, 'GET', `${base}/${original}?environment=sandbox`, { token: key });
  assert.equal(sandboxView.status, 404);
});

test('retention removes a replay from its event\'s list with the replay; a sandbox reset removes the sandbox ones', async () => {
  const table = rt.runtime.ledger.openDatabase(REPLAY_INDEX);
  const entries = (environment: string) => table.getKeysCount({ start: [ORG, environment], end: [ORG, environment, '\uffff'] });
  const original = await sendEvent('order-3');
  const made = await replay(original, { side_effects: 'skip' });
  assert.equal(made.status, 202);
  const runId: string = made.body.reactions[0].run_id;
  await eventually('the skip replay run completed', async () => (await call(rt.url, 'GET', `/organizations/${ORG}/runs/${runId}`, { token: key })).body.run?.state, (s) => s === 'completed');
  const before = entries('production');
  assert.ok(before > 0);
  // An original pruned before its replay takes the replays listed under it along.
  const older = await sendEvent('order-4');
  clock.advance(2 * DAY_MS);
  const younger = await replay(older, { side_effects: 'skip' });
  assert.equal(younger.status, 202);
  const listedUnder = (eventId: string) => table.getKeysCount({ start: [ORG, 'production', eventId], end: [ORG, 'production', eventId, '\uffff'] });
  assert.equal(listedUnder(older), 1);
  const { context } = rt.runtime;
  // The originals are now 31 days old, the younger replay 29.
  clock.advance(29 * DAY_MS);
  // Only events whose runs have all finished are pruned.
  await eventually('every run completed', async () => (await call(rt.url, 'GET', `/organizations/${ORG}/runs?limit=500`, { token: key })).body.runs as Array<{ state: string }>, (runs) => runs.every((r) => r.state === 'completed'));
  const pruned = await pruneHistory({ ledger: rt.runtime.ledger, events: context.events, runs: context.runs }, clock.now(), 30 * DAY_MS);
  assert.ok(pruned.events > 0);
  assert.equal(listedUnder(older), 0, 'the pruned original\'s list went with it');
  assert.equal((await call(rt.url, 'GET', `${base}/${younger.body.event.id}`, { token: key })).status, 200, 'the younger replay itself is kept');
  clock.advance(2 * DAY_MS);
  await pruneHistory({ ledger: rt.runtime.ledger, events: context.events, runs: context.runs }, clock.now(), 30 * DAY_MS);
  assert.equal(entries('production'), 0, `every replay went with its event (${before} listed before)`);

  const sandboxed = await call(rt.url, 'POST', base, { token: key, json: { type: 'order.paid', payload: {}, environment: 'sandbox' } });
  assert.equal(sandboxed.status, 202, sandboxed.text);
  assert.equal((await replay(sandboxed.body.event.id, { side_effects: 'skip' }, {}, 'sandbox')).status, 202);
  assert.equal(entries('sandbox'), 1);
  assert.equal((await call(rt.url, 'POST', `/organizations/${ORG}/sandbox/reset`, { token: key })).status, 200);
  assert.equal(entries('sandbox'), 0);
});

// On the memory ledger the replays are usually all stored before the reset begins: the race is met on LMDB.
test('a replay waiting behind another one of the same sandbox event is not stored once a sandbox reset removed the event', { skip: process.env['SLUICE_TEST_LEDGER'] === 'memory' && 'the race needs LMDB\'s slower commits' }, async () => {
  const table = rt.runtime.ledger.openDatabase(REPLAY_INDEX);
  for (let round = 0; round < 3; round++) {
    const sent = await call(rt.url, 'POST', base, { token: key, json: { type: 'order.paid', payload: { round }, environment: 'sandbox' } });
    assert.equal(sent.status, 202, sent.text);
    const original: string = sent.body.event.id;
    const replays = Array.from({ length: 6 }, () => replay(original, { side_effects: 'skip', again: true }, {}, 'sandbox'));
    await new Promise((resolve) => setImmediate(resolve));
    const reset = await call(rt.url, 'POST', `/organizations/${ORG}/sandbox/reset`, { token: key });
    assert.equal(reset.status, 200, reset.text);
    const answers = await Promise.all(replays);
    assert.ok(answers.every((a) => a.status === 202 || a.status === 404), answers.map((a) => a.text).join('\n'));
    const left = await call(rt.url, 'GET', `${base}?environment=sandbox&source=@replay&limit=500`, { token: key });
    const orphans = (left.body.events as Array<{ id: string; causation_id: string }>).filter((e) => e.causation_id === original);
    assert.deepEqual(orphans.map((e) => e.id), [], `round ${round}: no replay of the removed event outlives the reset`);
    assert.equal(table.getKeysCount({ start: [ORG, 'sandbox'], end: [ORG, 'sandbox', '\uffff'] }), 0);
  }
});

test('replays of one event waiting for their turn are capped: past 100, 429 too_many_replays with Retry-After', async () => {
  // A replay that starts no run guards nothing: a sandbox workflow listens.
  const listener = await call(rt.url, 'POST', `/organizations/${ORG}/workflows`, { token: key, json: { name: 'sandbox-charge', environment: 'sandbox', trigger_event: 'order.paid', steps: [{ id: 'charge', type: 'webhook', url: `${receiver.url}/sandbox-charge` }] } });
  assert.equal(listener.status, 201, listener.text);
  const sent = await call(rt.url, 'POST', base, { token: key, json: { type: 'order.paid', payload: {}, environment: 'sandbox' } });
  assert.equal(sent.status, 202, sent.text);
  // A sandbox reset held open keeps the first replay waiting (for the reset) in its turn, and the others behind it.
  const reset = holdReset(rt, ORG);
  const answered: Array<Awaited<ReturnType<typeof replay>>> = [];
  const requests = Array.from({ length: 101 }, () => replay(sent.body.event.id, { side_effects: 'skip' }, {}, 'sandbox').then((answer) => void answered.push(answer)));
  // The one past the cap answers at once; the hundred wait for the reset.
  await eventually('the request past the cap answered', () => answered.length, (n) => n === 1);
  assert.deepEqual([answered[0]?.status, answered[0]?.body.error?.code, answered[0]?.headers.get('retry-after')], [429, 'too_many_replays', '1']);
  await reset.waitingFor(1);
  await reset.finish();
  await Promise.all(requests);
  const statuses = answered.slice(1).map((a) => a.status);
  assert.deepEqual([statuses.length, statuses.filter((s) => s === 202).length, statuses.filter((s) => s === 409).length], [100, 1, 99], 'one made, the rest repeats of it');
});

test('a replay waiting its turn while its event id came to name another event (a reset freed it) answers 404, replaying nothing', async () => {
  const sent = await call(rt.url, 'POST', base, { token: key, json: { type: 'order.paid', payload: { first: true }, environment: 'sandbox', id: 'taken-1' } });
  assert.equal(sent.status, 202, sent.text);
  const reset = holdReset(rt, ORG);
  try {
    const replaying = replay('taken-1', { side_effects: 'run' }, {}, 'sandbox');
    await reset.waitingFor(1);
    // What a reset and a new event of the same id leave: another event under that id.
    const { ledger } = rt.runtime;
    const record = ledger.events.get([ORG, 'taken-1']) as Record<string, unknown>;
    await durably(ledger.root, ledger.root.transaction(() => ledger.events.put([ORG, 'taken-1'], { ...record, received_at_ms: Number(record['received_at_ms']) + 1000, payload_json: '{"second":true}' })));
    await reset.finish();
    const answer = await replaying;
    assert.deepEqual([answer.status, answer.body.error?.code], [404, 'not_found'], answer.text);
    assert.deepEqual((await call(rt.url, 'GET', `${base}/taken-1?environment=sandbox`, { token: key })).body.replays, [], 'nothing was replayed');
  } finally {
    await reset.finish();
  }
});

test('boot lists the replays a data dir holds from before the list existed', { skip: process.env['SLUICE_TEST_LEDGER'] === 'memory' && 'reopens an LMDB data dir' }, async () => {
  const dataDir = tempDir();
  try {
    let older = await startRuntime({ clock, dataDir });
    let orgKey: string;
    let original: string;
    let made: string;
    let legacy: Record<string, unknown> & { id: string };
    try {
      orgKey = await createOrg(older.url, ADMIN_TOKEN, ORG);
      const listener = await call(older.url, 'POST', `/organizations/${ORG}/workflows`, { token: orgKey, json: { name: 'charge', trigger_event: 'order.paid', steps: [{ id: 'charge', type: 'webhook', url: `${receiver.url}/charge` }] } });
      assert.equal(listener.status, 201, listener.text);
      const sent = await call(older.url, 'POST', base, { token: orgKey, json: { type: 'order.paid', payload: {} } });
      original = sent.body.event.id;
      made = (await call(older.url, 'POST', `${base}/${original}/replay`, { token: orgKey, json: { side_effects: 'skip' } })).body.event.id;
    } finally {
      await older.close();
    }
    // As a release before the list left it: no entries, stamped 3.
    const ledger = openLedger(dataDir);
    try {
      const table = ledger.openDatabase(REPLAY_INDEX);
      // And one replay as the oldest layout stored it: the payload itself, no replay_workflow_ids.
      const receivedAtMs = clock.now() - 60_000;
      legacy = { id: 'evt_legacy_replay', org_id: ORG, type: 'order.paid', payload: { old: true }, environment: 'production', source: '@replay', provider_event_id: null, received_at: new Date(receivedAtMs).toISOString(), received_at_ms: receivedAtMs, correlation_id: 'evt_legacy_replay', causation_id: original, depth: 0, replay_skip_side_effects: false };
      await durably(ledger.root, ledger.root.transaction(() => {
        for (const entry of [...table.getKeys({})]) table.remove(entry);
        ledger.events.put([ORG, legacy.id], legacy);
        ledger.eventsByTime.put([ORG, 'production', receivedAtMs, legacy.id], null);
        ledger.openDatabase('data-format').put('version', 3);
      }));
    } finally {
      await ledger.close();
    }
    older = await startRuntime({ clock, dataDir });
    try {
      const view = await call(older.url, 'GET', `${base}/${original}`, { token: orgKey });
      assert.deepEqual(view.body.replays.map((r: { event_id: string; side_effects: string; workflow_ids: unknown }) => [r.event_id, r.side_effects, r.workflow_ids]), [[made, 'skip', null], ['evt_legacy_replay', 'run', null]]);
      assert.equal((await call(older.url, 'POST', `${base}/${original}/replay`, { token: orgKey, json: { side_effects: 'skip' } })).body.error?.code, 'replay_just_made', 'and guarded');
    } finally {
      await older.close();
    }
  } finally {
    rmSync(dataDir, { recursive: true, force: true });
  }
});

test('a keyed retry of a replay limited to a workflow answers with the replay it made, even once that workflow is disabled', async () => {
  const created = await call(rt.url, 'POST', `/organizations/${ORG}/workflows`, { token: key, json: { name: 'notify', trigger_event: 'order.paid', steps: [{ id: 'notify', type: 'webhook', url: `${receiver.url}/notify` }] } });
  assert.equal(created.status, 201, created.text);
  const notifyId: string = created.body.workflow.id;
  const original = await sendEvent('order-keyed-limited');
  const first = await replay(original, { side_effects: 'skip', workflow_ids: [notifyId] }, { 'idempotency-key': 'ticket-limited' });
  assert.equal(first.status, 202, first.text);
  assert.equal((await call(rt.url, 'POST', `/organizations/${ORG}/workflows/${notifyId}/toggle`, { token: key, json: { action: 'disable' } })).status, 200);
  const retry = await replay(original, { side_effects: 'skip', workflow_ids: [notifyId] }, { 'idempotency-key': 'ticket-limited' });
  assert.equal(retry.status, 202, retry.text);
  assert.deepEqual([retry.body.event.id, retry.body.idempotent_replayed], [first.body.event.id, true]);
  const unkeyed = await replay(original, { side_effects: 'skip', workflow_ids: [notifyId], again: true });
  assert.equal(unkeyed.body.error?.code, 'workflow_not_listening', 'a new replay limited to it is still refused');
});
