// What goes on around an org's deletion while its records are still being removed: a start finds a
// deleted org's device connection left open by a crash, its sandbox reset cut short and its live
// updates under a raised retention, and starts all the same (then finishes the removal); the
// pruning of history, appended projection rows and deleted workflows goes on for the other orgs,
// also for an org deleted while a prune is under way; two DELETEs at once both answer the deletion;
// a DELETE whose mark could not be confirmed on disk lets go of the org all the same.

import assert from 'node:assert/strict';
import { rmSync } from 'node:fs';
import { describe, it, test } from 'node:test';
import type { Ledger, LedgerWrite } from '../../runtime/ledger/ledger.ts';
import { openMemoryLedger } from '../../runtime/ledger/memory-ledger.ts';
import { openLedger } from '../../runtime/ledger/open-ledger.ts';
import { createLogger } from '../../runtime/log.ts';
import { ManualClock } from '../../runtime/clock.ts';
import { EventStore } from '../../runtime/events/event-store.ts';
import { DAY_MS, pruneHistory } from '../../runtime/events/history-retention.ts';
import { Inbox } from '../../runtime/inbox/inbox.ts';
import { pruneAppendedRows } from '../../runtime/projections/appended-row-retention.ts';
import { ProjectionStore } from '../../runtime/projections/projection-store.ts';
import { RunStore } from '../../runtime/runs/run-store.ts';
import { fenceDeletedOrgs, type DeletionRecord } from '../../runtime/tenancy/deleted-orgs.ts';
import { OrgDeletions } from '../../runtime/tenancy/org-deletion.ts';
import { OrganizationStore } from '../../runtime/tenancy/organizations.ts';
import { DELETED_WORKFLOWS } from '../../runtime/workflows/deleted-workflows.ts';
import { pruneDeletedWorkflows } from '../../runtime/workflows/prune-deleted-workflows.ts';
import { WorkflowStore } from '../../runtime/workflows/workflow-store.ts';
import { connectDevice } from '../helpers/device-client.ts';
import { connectLive } from '../helpers/live-client.ts';
import { call, createOrg } from '../helpers/http.ts';
import { LEDGER_KINDS } from '../helpers/ledgers.ts';
import { queuedWritesRun } from '../helpers/held-deletion.ts';
import { gateNextCall } from '../helpers/method-gate.ts';
import { eventually } from '../helpers/receiver.ts';
import { ADMIN_TOKEN, spawnRuntime, startRuntime, tempDir } from '../helpers/runtime.ts';

const DOOMED = 'doomed-u2';
const KEEPER = 'keeper-u2';
const marked = (orgId: string): DeletionRecord => ({ organization_id: orgId, requested_at: new Date().toISOString(), state: 'removing', removed_at: null, actions_with_secrets: [], removed: {} });


test('a start with a deleted org\'s device connection left open, its sandbox reset cut short and a raised live retention starts, then finishes the removal', async () => {
  const dataDir = tempDir();
  const child = await spawnRuntime(dataDir, 'serve', ['--runner', 'off', '--live-retention', '100']);
  const key = await createOrg(child.url, ADMIN_TOKEN, DOOMED);
  const path = `/organizations/${DOOMED}`;
  assert.equal((await call(child.url, 'POST', `${path}/workflows`, { token: key, json: { name: 'w', trigger_event: 'go', steps: [{ type: 'delay', duration_ms: 1 }] } })).status, 201);
  assert.equal((await call(child.url, 'POST', `${path}/events`, { token: key, json: { type: 'go', payload: {}, id: 'e1' } })).status, 202);
  const device = await call(child.url, 'POST', `${path}/devices`, { token: key, json: { name: 'meter-1' } });
  assert.equal(device.status, 201, device.text);
  const meter = await connectDevice(child.url, DOOMED, 'meter-1', device.body.token);
  await eventually('the run done', async () => (await call(child.url, 'GET', `${path}/events/e1`, { token: key })).body.reactions as Array<{ state: string }>, (r) => r.length === 1 && r[0]!.state === 'completed');
  child.child.kill('SIGKILL');
  await child.exited;
  meter.socket.terminate();

  // As a crash right after the deletion's mark leaves the ledger, with a sandbox reset of the org cut short.
  const ledger = openLedger(dataDir);
  assert.notEqual((ledger.openDatabase('devices').get([DOOMED, 'meter-1']) as { connection: unknown }).connection, null, 'the connection is left open');
  await ledger.root.transaction(() => void ledger.openDatabase('sandbox-generations').put([DOOMED], { generation: 1, reset_since_ms: Date.now() }));
  const { deleted } = fenceDeletedOrgs(ledger);
  assert.equal(await deleted.mark(marked(DOOMED), () => true, () => void ledger.orgs.remove([DOOMED])), true);
  await ledger.close();

  const rt = await startRuntime({ dataDir, args: ['--runner', 'off', '--live-retention', '200'] });
  try {
    // The start's first pruning pass takes the deletion up again.
    await eventually('the deletion finished', () => rt.runtime.deletions.get(DOOMED)?.state, (state) => state === 'removed');
    assert.equal(rt.runtime.deviceStore.head(DOOMED, 'meter-1'), undefined);
    assert.equal(rt.runtime.updateLog.lastSeq(DOOMED), 0);
  } finally {
    await rt.close();
    rmSync(dataDir, { recursive: true, force: true });
  }
});

/** A workflow deleted long ago in each org, its one version still stored. */
async function deletedWorkflowOfEach(ledger: Ledger) {
  const versions = ledger.openDatabase('workflow-versions');
  const workflows = new WorkflowStore(ledger).deleted;
  await ledger.root.transaction(() => {
    for (const org of [DOOMED, KEEPER]) {
      ledger.openDatabase(DELETED_WORKFLOWS).put([org, 'wf_1'], [1_000, 1_000]);
      versions.put([org, 'wf_1', 1], { workflow_id: 'wf_1', version: 1, steps: [] });
      ledger.openDatabase('workflow-org-bytes').put([org], 100);
    }
  });
  return { versions, workflows };
}

for (const kind of LEDGER_KINDS) {
  describe(`pruning during a deletion (${kind.name})`, () => {
    it('lets the other orgs\' appended projection rows go, and only the deleted org\'s retention entries', async () => {
      const { ledger, close } = kind.open();
      const { deleted } = fenceDeletedOrgs(ledger);
      const projections = new ProjectionStore(ledger, 1_000);
      const rows = ledger.openDatabase('projections');
      await ledger.root.transaction(() => {
        // The deleted org's rows are the oldest: they come first in every pass.
        for (const [org, at] of [[DOOMED, 1_000], [KEEPER, 2_000]] as const) {
          for (const id of ['a', 'b']) {
            const key = [org, 'production', 'log', '~step', id];
            rows.put(key, { status: null, created_at: new Date(at).toISOString(), revision: 1 });
            ledger.openDatabase('projections-meta').put(key, [null, at, 1]);
            ledger.openDatabase('projections-appended').put([at, org, 'production', 'log', id], null);
          }
          ledger.openDatabase('projection-counts').put(org, 2);
        }
      });
      assert.equal(await deleted.mark(marked(DOOMED), () => true, () => undefined), true);
      assert.equal(await pruneAppendedRows(ledger.root, projections, 10_000, 0, 1, undefined, deleted), 4);
      assert.equal(projections.rowCount(KEEPER), 0);
      assert.equal([...rows.getKeys({ start: [KEEPER], end: [KEEPER, '\uffff'] })].length, 0);
      assert.equal([...ledger.openDatabase('projections-appended').getKeys({})].length, 0);
      await close();
    });

    it('waits for a deletion whose mark is being written: when the mark fails, the org\'s rows are pruned as any other\'s (found by a review)', async () => {
      const { ledger, close } = kind.open();
      const { deleted } = fenceDeletedOrgs(ledger);
      const projections = new ProjectionStore(ledger, 1_000);
      const rows = ledger.openDatabase('projections');
      const key = [DOOMED, 'production', 'log', '~step', 'a'];
      await ledger.root.transaction(() => {
        rows.put(key, { status: null, created_at: new Date(1_000).toISOString(), revision: 1 });
        ledger.openDatabase('projections-meta').put(key, [null, 1_000, 1]);
        ledger.openDatabase('projections-appended').put([1_000, DOOMED, 'production', 'log', 'a'], null);
        ledger.openDatabase('projection-counts').put(DOOMED, 1);
      });
      // The mark's write is held, then fails (a full disk): the org stays.
      const mark = gateNextCall(ledger.root, 'transaction', new Error('MDB_DISKFULL: simulated'));
      try {
        const marking = deleted.mark(marked(DOOMED), () => true, () => undefined);
        await mark.whenReached;
        const pruning = pruneAppendedRows(ledger.root, projections, 10_000, 0, 1, undefined, deleted);
        // Once the writes queued before are over, a prune that did not wait for the mark has written.
        await queuedWritesRun(ledger.root);
        mark.release();
        await assert.rejects(marking, /MDB_DISKFULL/);
        assert.equal(await pruning, 1);
      } finally {
        mark.done();
      }
      assert.equal(deleted.has(DOOMED), false);
      assert.equal(rows.get(key), undefined, 'the row past its retention is pruned');
      assert.equal(projections.rowCount(DOOMED), 0);
      assert.equal([...ledger.openDatabase('projections-appended').getKeys({})].length, 0);
      await close();
    });

    it('lets the other orgs\' deleted workflows go when an org is deleted while its runs are walked', async () => {
      const { ledger, close } = kind.open();
      const { deleted } = fenceDeletedOrgs(ledger);
      const { versions, workflows } = await deletedWorkflowOfEach(ledger);
      const runs = new RunStore(ledger);
      const walk = runs.workflowsNamed.bind(runs);
      // The DELETE lands while the prune walks the org's runs, after it looked for deleted orgs.
      runs.workflowsNamed = async (orgId, ids, stop) => {
        const named = await walk(orgId, ids, stop);
        if (orgId === DOOMED) assert.equal(await deleted.mark(marked(DOOMED), () => true, () => undefined), true);
        return named;
      };
      const pruned = await pruneDeletedWorkflows({ deleted: workflows, runs, deletedOrgs: deleted }, 10_000_000, 0);
      assert.deepEqual(pruned, { workflows: 1, versions: 1, putOff: 0 });
      assert.equal(versions.get([KEEPER, 'wf_1', 1]), undefined);
      await close();
    });

    it('lets the other orgs\' deleted workflows go, passing over the deleted org\'s', async () => {
      const { ledger, close } = kind.open();
      const { deleted } = fenceDeletedOrgs(ledger);
      const { versions, workflows } = await deletedWorkflowOfEach(ledger);
      assert.equal(await deleted.mark(marked(DOOMED), () => true, () => undefined), true);
      const pruned = await pruneDeletedWorkflows({ deleted: workflows, runs: new RunStore(ledger), deletedOrgs: deleted }, 10_000_000, 0);
      assert.deepEqual(pruned, { workflows: 1, versions: 1, putOff: 0 });
      assert.equal(versions.get([KEEPER, 'wf_1', 1]), undefined);
      assert.notEqual(versions.get([DOOMED, 'wf_1', 1]), undefined, 'left to the removal');
      await close();
    });
  });
}

test('the history prune goes on for the other orgs when an org listed at its start is deleted', async () => {
  const dataDir = tempDir();
  const clock = new ManualClock(Date.UTC(2026, 9, 1, 12, 0, 0));
  const rt = await startRuntime({ clock, dataDir, args: ['--runner', 'off'] });
  // The deleted org sorts first: its pass comes before the other's.
  for (const org of [DOOMED, KEEPER]) {
    const key = await createOrg(rt.url, ADMIN_TOKEN, org);
    assert.equal((await call(rt.url, 'POST', `/organizations/${org}/events`, { token: key, json: { type: 'x', payload: {}, id: 'e1' } })).status, 202);
  }
  await rt.close();
  const ledger = openLedger(dataDir);
  try {
    const { deleted } = fenceDeletedOrgs(ledger);
    const events = new EventStore(ledger, new Inbox(ledger, DAY_MS));
    // Marked, its org record left: as when the DELETE lands after the prune read the org list.
    assert.equal(await deleted.mark(marked(DOOMED), () => true, () => undefined), true);
    const pruned = await pruneHistory({ ledger, events, runs: new RunStore(ledger) }, clock.now() + 31 * DAY_MS, 30 * DAY_MS, 1);
    assert.equal(pruned.events, 1);
    assert.equal(events.getRecord(KEEPER, 'e1'), undefined);
    assert.notEqual(events.getRecord(DOOMED, 'e1'), undefined, 'left to the removal');
  } finally {
    await ledger.close();
    rmSync(dataDir, { recursive: true, force: true });
  }
});

test('two DELETEs of one org at once both answer its deletion', async () => {
  const dataDir = tempDir();
  const ledger = openLedger(dataDir);
  const { tables, deleted } = fenceDeletedOrgs(ledger);
  const orgs = new OrganizationStore(ledger, (orgId) => deleted.has(orgId));
  await orgs.create({ id: DOOMED, name: DOOMED, plan: 'pro', max_concurrent_runs: 4, created_at: new Date().toISOString(), updated_at: new Date().toISOString() }, () => undefined);
  const stop = new AbortController();
  const deletions = new OrgDeletions({
    ledger, orgs, deleted, tables, actionIds: () => [], runner: undefined, secretWritesSettled: async () => undefined,
    onFenced: () => undefined, onRemoved: () => undefined, logger: createLogger('silent'), now: () => Date.now(), stop: stop.signal,
  });
  const [first, second] = await Promise.all([deletions.delete(DOOMED), deletions.delete(DOOMED)]);
  assert.equal(first?.organization_id, DOOMED);
  assert.deepEqual(second, first);
  await deletions.idle();
  assert.equal(deletions.get(DOOMED)?.state, 'removed');
  await ledger.close();
  rmSync(dataDir, { recursive: true, force: true });
});

test('a DELETE whose mark was committed but not confirmed on disk answers 5xx, and the org is let go of all the same', async () => {
  const ledger = openMemoryLedger();
  // The next transaction commits and its flush fails, as a failing disk's fdatasync would.
  let failNextFlush = false;
  const { transaction } = ledger.root;
  Object.assign(ledger.root, {
    transaction: <T>(body: () => T): LedgerWrite<T> => {
      const write = transaction.call(ledger.root, body) as LedgerWrite<T>;
      if (!failNextFlush) return write;
      failNextFlush = false;
      const flushed = write.then(() => Promise.reject(new Error('EIO: flush failed')));
      flushed.catch(() => undefined);
      return Object.assign(write.then((value) => value), { flushed });
    },
  });
  const rt = await startRuntime({ ledger, args: ['--runner', 'off'] });
  try {
    const key = await createOrg(rt.url, ADMIN_TOKEN, DOOMED);
    const device = await call(rt.url, 'POST', `/organizations/${DOOMED}/devices`, { token: key, json: { name: 'meter-1' } });
    const meter = await connectDevice(rt.url, DOOMED, 'meter-1', device.body.token);
    const live = await connectLive(rt.url, DOOMED, { token: key });
    live.subscribe({});
    await live.waitFor(() => live.messages.length > 0, 'the subscription answered');
    failNextFlush = true;
    const first = await call(rt.url, 'DELETE', `/organizations/${DOOMED}`, { token: ADMIN_TOKEN });
    assert.ok(first.status >= 500, first.text);
    // Bounded waits: without the fix the sockets stay open, and the test fails instead of hanging.
    const closes: number[] = [];
    for (const socket of [live, meter]) void socket.closed.then(({ code }) => closes.push(code));
    assert.deepEqual(await eventually('both sockets closed', () => closes, (codes) => codes.length === 2), [4404, 4404]);
    const again = await call(rt.url, 'DELETE', `/organizations/${DOOMED}`, { token: ADMIN_TOKEN });
    assert.ok([200, 202].includes(again.status), again.text);
    await rt.runtime.deletions.idle();
    assert.equal(rt.runtime.deletions.get(DOOMED)?.state, 'removed');
  } finally {
    await rt.close();
  }
});
