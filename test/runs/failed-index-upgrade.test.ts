// A data dir whose failed-event index has the old layout (`runs-failed`, keyed by event id) still
// lists its failed events after an upgrade, newest first by arrival: boot moves the old entries
// once, finishes a move a crash left part done, drops entries of runs gone or no longer failed,
// and a second boot changes nothing. Also in passes smaller than the index; a dir stamped with
// the moved layout is not read for old entries.

import assert from 'node:assert/strict';
import { rmSync } from 'node:fs';
import { after, before, test } from 'node:test';
import { ManualClock } from '../../runtime/clock.ts';
import { durably } from '../../runtime/ledger/durable-write.ts';
import { openLedger } from '../../runtime/ledger/open-ledger.ts';
import { storedDataFormat } from '../../runtime/ledger/data-format.ts';
import { FAILED_INDEX_MOVED_FORMAT, LEGACY_FAILED_INDEX, upgradeFailedIndex } from '../../runtime/runs/failed-index-upgrade.ts';
import { FAILED_INDEX, RunStore } from '../../runtime/runs/run-store.ts';
import { call, createOrg } from '../helpers/http.ts';
import { eventually, startReceiver, type Receiver } from '../helpers/receiver.ts';
import { ADMIN_TOKEN, startRuntime, tempDir, type TestRuntime } from '../helpers/runtime.ts';

const START = Date.UTC(2026, 10, 30, 9, 0, 0);
const MINUTE = 60_000;
const ORG = 'acct-triage-upgrade';
const clock = new ManualClock(START);
const dataDir = tempDir();
let receiver: Receiver;
let key: string;
/** Failed events as first listed, newest first. */
let expected: string[] = [];
/** The run of the delayed event: waiting, not failed. */
let waitingRunId = '';

const boot = (): Promise<TestRuntime> => startRuntime({ clock, dataDir });

const listed = async (rt: TestRuntime): Promise<Array<{ id: string; failed_runs: number }>> => {
  const answer = await call(rt.url, 'GET', `/organizations/${ORG}/failed-events?limit=500`, { token: key });
  assert.equal(answer.status, 200, answer.text);
  return answer.body.failed_events.map((entry: { event: { id: string }; failed_runs: number }) => ({ id: entry.event.id, failed_runs: entry.failed_runs }));
};

before(async () => {
  receiver = await startReceiver([{ status: 400, body: 'no' }]);
  const rt = await boot();
  try {
    key = await createOrg(rt.url, ADMIN_TOKEN, ORG, 'pro');
    const workflows: Array<[string, string, unknown]> = [
      ['notify-a', 'order.bad', { id: 'send', type: 'webhook', url: receiver.url }],
      ['notify-b', 'order.bad', { id: 'send', type: 'webhook', url: receiver.url }],
      ['waits', 'order.slow', { id: 'wait', type: 'delay', duration: 'PT1H' }],
    ];
    for (const [name, trigger, step] of workflows) {
      const created = await call(rt.url, 'POST', `/organizations/${ORG}/workflows`, { token: key, json: { name, trigger_event: trigger, steps: [step] } });
      assert.equal(created.status, 201, created.text);
    }
    // Ids against arrival: a caller's id that sorts highest arrives first.
    const sent: string[] = [];
    for (const [minute, id] of [[1, 'zz-first'], [2, undefined], [3, 'mm-third'], [4, undefined]] as const) {
      clock.set(START + minute * MINUTE);
      const answer = await call(rt.url, 'POST', `/organizations/${ORG}/events`, { token: key, json: { type: 'order.bad', payload: {}, ...(id === undefined ? {} : { id }) } });
      assert.equal(answer.status, 202, answer.text);
      sent.unshift(answer.body.event.id);
    }
    clock.set(START + 5 * MINUTE);
    const slow = await call(rt.url, 'POST', `/organizations/${ORG}/events`, { token: key, json: { type: 'order.slow', payload: {} } });
    assert.equal(slow.status, 202, slow.text);
    const reactions = await eventually('the delayed run', async () => (await call(rt.url, 'GET', `/organizations/${ORG}/events/${slow.body.event.id}`, { token: key })).body.reactions, (r: Array<{ state: string; run_id: string }>) => r.length === 1 && r[0]!.state === 'delaying');
    waitingRunId = reactions[0]!.run_id;
    const all = await eventually('eight failed runs', () => listed(rt), (events) => events.reduce((n, e) => n + e.failed_runs, 0) === 8);
    assert.deepEqual(all.map((e) => e.id), sent, 'newest first as written today');
    expected = sent;
  } finally {
    await rt.close();
  }
});
after(async () => {
  await receiver.close();
  rmSync(dataDir, { recursive: true, force: true });
});

/**
 * Rewrites the data dir's index into the old layout, as an older Sluice left it, but for the
 * entries of `alreadyMoved` (a move a crash stopped part way); adds entries of a run that is gone
 * and of one that is not failed; removes the data-format stamp (older releases wrote none).
 * Answers how many old entries there are.
 */
async function toOldLayout(alreadyMoved: string | undefined): Promise<number> {
  const ledger = openLedger(dataDir);
  try {
    const index = ledger.openDatabase(FAILED_INDEX);
    const legacy = ledger.openDatabase(LEGACY_FAILED_INDEX);
    const entries = [...index.getRange({})];
    await durably(ledger.root, ledger.root.transaction(() => {
      for (const { key: indexKey, value } of entries) {
        const [orgId, environment, , eventId, runId] = indexKey as [string, string, number, string, string];
        if (eventId === alreadyMoved) continue;
        index.remove(indexKey);
        legacy.put([orgId, environment, eventId, runId], value);
      }
      legacy.put([ORG, 'production', 'evt-gone', 'run_00000000000000000000000000000000'], START);
      legacy.put([ORG, 'production', 'order-slow', waitingRunId], START);
      ledger.openDatabase('data-format').remove('version');
    }));
    return legacy.getKeysCount({});
  } finally {
    await ledger.close();
  }
}

test('boot moves an old failed-event index, finishing a move left part done; then the list is by arrival and a second boot changes nothing', async () => {
  assert.equal(await toOldLayout(expected[1]), 2 * (expected.length - 1) + 2);
  let rt = await boot();
  try {
    assert.deepEqual(await listed(rt), expected.map((id) => ({ id, failed_runs: 2 })));
    assert.equal(rt.runtime.ledger.openDatabase(LEGACY_FAILED_INDEX).getKeysCount({}), 0, 'the old index is empty');
    assert.equal(rt.runtime.ledger.openDatabase(FAILED_INDEX).getKeysCount({}), 2 * expected.length, 'only failed runs were moved');
  } finally {
    await rt.close();
  }
  rt = await boot();
  try {
    assert.deepEqual(await listed(rt), expected.map((id) => ({ id, failed_runs: 2 })));
  } finally {
    await rt.close();
  }
});

test('a data dir stamped with the moved layout is not read for old entries at boot', async () => {
  const ledger = openLedger(dataDir);
  try {
    // Nothing writes the old table any more; an entry planted there shows whether boot looked.
    await durably(ledger.root, ledger.root.transaction(() => ledger.openDatabase(LEGACY_FAILED_INDEX).put([ORG, 'production', 'planted', waitingRunId], START)));
    assert.ok(storedDataFormat(ledger) >= FAILED_INDEX_MOVED_FORMAT);
  } finally {
    await ledger.close();
  }
  const rt = await boot();
  try {
    assert.equal(rt.runtime.ledger.openDatabase(LEGACY_FAILED_INDEX).getKeysCount({}), 1, 'the old table was left unread');
    assert.deepEqual(await listed(rt), expected.map((id) => ({ id, failed_runs: 2 })));
  } finally {
    await rt.close();
  }
});

test('the move also goes in passes smaller than the index', async () => {
  const old = await toOldLayout(undefined);
  const ledger = openLedger(dataDir);
  try {
    assert.equal(await upgradeFailedIndex(ledger, new RunStore(ledger), 3), old);
    assert.equal(ledger.openDatabase(LEGACY_FAILED_INDEX).getKeysCount({}), 0);
  } finally {
    await ledger.close();
  }
  const rt = await boot();
  try {
    assert.deepEqual(await listed(rt), expected.map((id) => ({ id, failed_runs: 2 })));
  } finally {
    await rt.close();
  }
});
