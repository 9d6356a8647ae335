// Projection rows through the API and real runs: the projections holding rows are listed; an org's rows stop at its cap (a step that would
// add one more fails `projection_row_limit_reached`, one updating its row still passes); a developer
// deletes one row or a whole projection, which makes room, and the failed run resumes; viewers
// cannot delete, and another org's key finds nothing. Appended rows are pruned once the retention
// has passed, those a release before the count wrote too (the boot upgrade indexes them).

import assert from 'node:assert/strict';
import { rmSync } from 'node:fs';
import { after, before, test } from 'node:test';
import { ManualClock } from '../../runtime/clock.ts';
import { durably } from '../../runtime/ledger/durable-write.ts';
import { openLedger } from '../../runtime/ledger/open-ledger.ts';
import { keyWithRole, upload } from '../actions/action-fixtures.ts';
import { assembleWat, constantWat } from '../helpers/hook-runner-wat.ts';
import { call, createOrg } from '../helpers/http.ts';
import { eventually } from '../helpers/receiver.ts';
import { ADMIN_TOKEN, startRuntime, tempDir, type TestRuntime } from '../helpers/runtime.ts';

const ORG = 'acct-rows';
const CAP = 3;
let rt: TestRuntime;
let key: string;

before(async () => {
  rt = await startRuntime({ args: ['--runner', 'child'], projectionRowCap: CAP });
  key = await createOrg(rt.url, ADMIN_TOKEN, ORG, 'pro');
});
after(async () => rt.close());

/** An approved action that always answers `output`, and a workflow running it on `trigger`. */
async function actionOn(trigger: string, output: unknown): Promise<void> {
  const wasm = await assembleWat(trigger.replace('.', '-'), constantWat(JSON.stringify(output)));
  const uploaded = await upload(rt.url, `/organizations/${ORG}/custom-actions`, key, { name: trigger.replace('.', '-'), file: wasm });
  assert.equal(uploaded.status, 201, uploaded.text);
  const actionId = (uploaded.body as { custom_action: { id: string } }).custom_action.id;
  assert.equal((await call(rt.url, 'POST', `/organizations/${ORG}/custom-actions/${actionId}/review`, { token: key, json: { status: 'approved', version: 1 } })).status, 200);
  const made = await call(rt.url, 'POST', `/organizations/${ORG}/workflows`, { token: key, json: { name: trigger, trigger_event: trigger, steps: [{ id: 'act', type: 'custom_action', action_id: actionId }] } });
  assert.equal(made.status, 201, made.text);
}

/** Sends one API event and resolves with its run once that has finished. */
async function finishedRun(type: string, id: string): Promise<{ run_id: string; state: string; error: { code: string; message: string } | null }> {
  assert.equal((await call(rt.url, 'POST', `/organizations/${ORG}/events`, { token: key, json: { type, payload: {}, id } })).status, 202);
  const reactions = await eventually(
    `the run of ${id} to finish`,
    async () => (await call(rt.url, 'GET', `/organizations/${ORG}/events/${id}`, { token: key })).body.reactions as Array<{ run_id: string; state: string; error: { code: string; message: string } | null }>,
    (list) => list.length === 1 && (list[0]!.state === 'completed' || list[0]!.state === 'failed'),
  );
  return reactions[0]!;
}

test('rows stop at the cap; an update still passes; deleting makes room and the failed run resumes', { timeout: 60_000 }, async () => {
  await actionOn('risk.scored', { projection: { name: 'risk', entity_type: 'order', entity_id: 'o1', status: 'open', data: { score: 1 } } });
  await actionOn('audit.logged', { projection: { name: 'audit', data: { seen: true } } });
  assert.equal((await finishedRun('risk.scored', 'e1')).state, 'completed');
  assert.equal((await finishedRun('audit.logged', 'e2')).state, 'completed');
  assert.equal((await finishedRun('audit.logged', 'e3')).state, 'completed');

  const refused = await finishedRun('audit.logged', 'e4');
  assert.equal(refused.state, 'failed');
  assert.equal(refused.error?.code, 'projection_row_limit_reached');
  assert.match(refused.error?.message ?? '', /has reached its limit of 3 projection rows/);
  const audit = await call(rt.url, 'GET', `/organizations/${ORG}/projections/audit`, { token: key });
  assert.equal(audit.body.rows.length, 2, 'the refused step wrote no row');

  const update = await finishedRun('risk.scored', 'e5');
  assert.equal(update.state, 'completed', 'a step updating its row needs no room');
  assert.equal((await call(rt.url, 'GET', `/organizations/${ORG}/projections/risk/order/o1`, { token: key })).body.row.revision, 2);

  const removed = await call(rt.url, 'DELETE', `/organizations/${ORG}/projections/audit`, { token: key });
  assert.equal(removed.status, 200, removed.text);
  assert.deepEqual(removed.body, { removed: 2 });
  assert.deepEqual((await call(rt.url, 'GET', `/organizations/${ORG}/projections/audit`, { token: key })).body.rows, []);
  assert.deepEqual((await call(rt.url, 'DELETE', `/organizations/${ORG}/projections/audit`, { token: key })).body, { removed: 0 }, 'deleting it again removes nothing');

  assert.equal((await call(rt.url, 'POST', `/organizations/${ORG}/runs/${refused.run_id}/resume`, { token: key })).status, 202);
  const resumed = await eventually('the resumed run to complete', async () => (await call(rt.url, 'GET', `/organizations/${ORG}/runs/${refused.run_id}`, { token: key })).body.run, (run) => run.state === 'completed' || run.state === 'failed');
  assert.equal(resumed.state, 'completed', JSON.stringify(resumed.error));
  assert.equal((await call(rt.url, 'GET', `/organizations/${ORG}/projections/audit`, { token: key })).body.rows.length, 1);
});

test('the projections holding rows are listed by name, paged, per environment', { timeout: 30_000 }, async () => {
  const all = await call(rt.url, 'GET', `/organizations/${ORG}/projections`, { token: key });
  assert.equal(all.status, 200, all.text);
  assert.deepEqual(all.body, { projections: [{ name: 'audit' }, { name: 'risk' }], next_cursor: null });
  const first = await call(rt.url, 'GET', `/organizations/${ORG}/projections?limit=1`, { token: key });
  assert.deepEqual(first.body.projections, [{ name: 'audit' }]);
  const rest = await call(rt.url, 'GET', `/organizations/${ORG}/projections?limit=1&cursor=${first.body.next_cursor}`, { token: key });
  assert.deepEqual(rest.body, { projections: [{ name: 'risk' }], next_cursor: null });
  assert.deepEqual((await call(rt.url, 'GET', `/organizations/${ORG}/projections?environment=sandbox`, { token: key })).body.projections, []);
  assert.equal((await call(rt.url, 'GET', `/organizations/${ORG}/projections?cursor=bogus`, { token: key })).status, 400);
  const otherKey = await createOrg(rt.url, ADMIN_TOKEN, 'acct-rows-lister', 'pro');
  assert.equal((await call(rt.url, 'GET', `/organizations/${ORG}/projections`, { token: otherKey })).status, 404);
  assert.deepEqual((await call(rt.url, 'GET', '/organizations/acct-rows-lister/projections', { token: otherKey })).body.projections, []);
});

test('one row is deleted by a developer: 204, then 404; a viewer is refused and another org finds nothing', { timeout: 30_000 }, async () => {
  const path = `/organizations/${ORG}/projections/risk/order/o1`;
  const viewer = await keyWithRole(rt.url, ORG, key, 'viewer');
  assert.equal((await call(rt.url, 'DELETE', path, { token: viewer.key })).status, 403);
  const otherKey = await createOrg(rt.url, ADMIN_TOKEN, 'acct-rows-other', 'pro');
  assert.equal((await call(rt.url, 'DELETE', path, { token: otherKey })).status, 404, "another org's key");
  assert.equal((await call(rt.url, 'DELETE', `/organizations/${ORG}/projections/audit`, { token: otherKey })).status, 404);
  assert.equal((await call(rt.url, 'DELETE', `${path}?environment=sandbox`, { token: key })).status, 404, 'the row lives in production');
  assert.equal((await call(rt.url, 'GET', path, { token: key })).status, 200, 'still there');

  assert.equal((await call(rt.url, 'DELETE', path, { token: key })).status, 204);
  assert.equal((await call(rt.url, 'GET', path, { token: key })).status, 404);
  const again = await call(rt.url, 'DELETE', path, { token: key });
  assert.equal(again.status, 404);
  assert.equal(again.body.error.code, 'not_found');
  assert.equal((await call(rt.url, 'DELETE', `/organizations/${ORG}/projections/risk/Order/o1`, { token: key })).status, 404, 'a type that cannot name a row');
});

test('appended rows are pruned at start once the retention has passed, also those a release before the count wrote', { timeout: 60_000, skip: process.env['SLUICE_TEST_LEDGER'] === 'memory' && 'reopens an LMDB data dir' }, async () => {
  const clock = new ManualClock(Date.UTC(2026, 10, 30, 9, 0, 0));
  const dataDir = tempDir();
  const args = ['--runner', 'child', '--retention-days', '1', '--dedup-window-ms', '601000'];
  try {
    let second = await startRuntime({ clock, dataDir, args });
    const orgKey = await createOrg(second.url, ADMIN_TOKEN, 'acct-kept', 'pro');
    try {
      const wasm = await assembleWat('note', constantWat(JSON.stringify({ projection: { name: 'notes', data: {} } })));
      const uploaded = await upload(second.url, '/organizations/acct-kept/custom-actions', orgKey, { name: 'note', file: wasm });
      const actionId = (uploaded.body as { custom_action: { id: string } }).custom_action.id;
      assert.equal((await call(second.url, 'POST', `/organizations/acct-kept/custom-actions/${actionId}/review`, { token: orgKey, json: { status: 'approved', version: 1 } })).status, 200);
      assert.equal((await call(second.url, 'POST', '/organizations/acct-kept/workflows', { token: orgKey, json: { name: 'note', trigger_event: 'note.made', steps: [{ id: 'act', type: 'custom_action', action_id: actionId }] } })).status, 201);
      for (const id of ['n1', 'n2']) assert.equal((await call(second.url, 'POST', '/organizations/acct-kept/events', { token: orgKey, json: { type: 'note.made', payload: {}, id } })).status, 202);
      await eventually('two rows', async () => (await call(second.url, 'GET', '/organizations/acct-kept/projections/notes', { token: orgKey })).body.rows, (rows) => rows.length === 2);
    } finally {
      await second.close();
    }
    // As a release before data format 9 left it: no retention entries, no counts.
    const ledger = openLedger(dataDir);
    try {
      await durably(ledger.root, ledger.root.transaction(() => {
        for (const table of ['projections-appended', 'projection-counts']) {
          const opened = ledger.openDatabase(table);
          for (const entry of [...opened.getKeys({})]) opened.remove(entry);
        }
        ledger.openDatabase('data-format').put('version', 8);
      }));
    } finally {
      await ledger.close();
    }
    clock.advance(12 * 3_600_000);
    second = await startRuntime({ clock, dataDir, args });
    try {
      assert.equal((await call(second.url, 'GET', '/organizations/acct-kept/projections/notes', { token: orgKey })).body.rows.length, 2, 'within the retention');
    } finally {
      await second.close();
    }
    clock.advance(13 * 3_600_000);
    second = await startRuntime({ clock, dataDir, args });
    try {
      await eventually('the start-up prune', async () => (await call(second.url, 'GET', '/organizations/acct-kept/projections/notes', { token: orgKey })).body.rows, (rows) => rows.length === 0);
    } finally {
      await second.close();
    }
  } finally {
    rmSync(dataDir, { recursive: true, force: true });
  }
});
