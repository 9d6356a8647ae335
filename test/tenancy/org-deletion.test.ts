// Deleting an organization over the real API (real uWS, LMDB, hook-runner child with Wasmtime): an
// org that used every feature (webhooks, API and sandbox events, a scorer custom action with its
// secret, projections, derived events, a replay, schedules, devices, keys, live sockets, a run in
// flight and one waiting on a retry timer) is fenced off at once, its runs send nothing more, its
// sockets close with 4404, its id is never given out again, and once its removal is done not
// one byte of it is left in any table of the runtime's LMDB environment, nor a secret in the
// hook-runner's; another org goes on untouched.

import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { call, newStandardSecret, signStandard } from '../helpers/http.ts';
import { ORDER, populateOrg, startPopulatingRuntime, type PopulatingRuntime } from '../helpers/populated-org.ts';
import { eventually, startReceiver, type Receiver } from '../helpers/receiver.ts';
import { scanFor } from '../helpers/ledger-scan.ts';
import { ADMIN_TOKEN, type TestRuntime } from '../helpers/runtime.ts';

const DOOMED = 'doomed-q7x';
const KEEPER = 'keeper-q7x';
const SECRET = newStandardSecret();
let world: PopulatingRuntime;
let rt: TestRuntime;
let receiver: Receiver;
let scorer: Buffer;

before(async () => {
  world = await startPopulatingRuntime();
  ({ rt, receiver, scorer } = world);
});
after(() => world.close());

const populate = (org: string) => populateOrg({ url: rt.url, receiverUrl: receiver.url, scorer, secret: SECRET }, org);

test('a deleted org is fenced off at once, removed whole in the background, and its id is retired', async () => {
  const doomed = await populate(DOOMED);
  const keeper = await populate(KEEPER);
  let release = (): void => undefined;
  const holding = await startReceiver([{ status: 200, after: new Promise<void>((resolve) => (release = resolve)) }]);
  // A run in flight (its webhook held by the receiver) and a run waiting on its retry timer.
  const flaky = await startReceiver([{ status: 503 }]);
  try {
    const workflow = (name: string, url: string) => call(rt.url, 'POST', `/organizations/${DOOMED}/workflows`, { token: doomed.key, json: { name, trigger_event: `${name}.go`, steps: [{ id: 'one', type: 'webhook', url, retry: { max_retries: 5, initial_ms: 600_000, max_ms: 600_000 } }, { id: 'two', type: 'webhook', url }] } });
    assert.equal((await workflow('held', holding.url)).status, 201);
    assert.equal((await workflow('flaky', flaky.url)).status, 201);
    assert.equal((await call(rt.url, 'POST', `/organizations/${DOOMED}/events`, { token: doomed.key, json: { type: 'held.go', payload: {}, id: 'held-1' } })).status, 202);
    assert.equal((await call(rt.url, 'POST', `/organizations/${DOOMED}/events`, { token: doomed.key, json: { type: 'flaky.go', payload: {}, id: 'flaky-1' } })).status, 202);
    await eventually('held step sent', () => holding.received.length, (n) => n === 1);
    const reactions = await eventually('flaky run', async () => (await call(rt.url, 'GET', `/organizations/${DOOMED}/events/flaky-1`, { token: doomed.key })).body.reactions as Array<{ run_id: string }>, (r) => r.length === 1);
    const flakyRun = reactions[0]!.run_id;
    await eventually('flaky run waiting on its retry timer', () => rt.runtime.engine.timerDueAt(DOOMED, flakyRun), (due) => due !== undefined);
    assert.equal(flaky.received.length, 1);
    assert.ok(rt.runtime.rooms.emittedSeq(DOOMED) > 0, 'its runs sent live updates');
    assert.notEqual(rt.runtime.ticker.dueAt(DOOMED, 'nightly'), undefined, 'its schedule is armed');

    // Only the platform admin deletes an org.
    assert.equal((await call(rt.url, 'DELETE', `/organizations/${DOOMED}`, { token: doomed.key })).status, 403);
    const deleted = await call(rt.url, 'DELETE', `/organizations/${DOOMED}`, { token: ADMIN_TOKEN });
    assert.equal(deleted.status, 202, deleted.text);
    assert.equal(deleted.body.deletion.organization_id, DOOMED);
    assert.equal(deleted.body.deletion.state, 'removing');

    // At once: the timer is gone, sockets close, requests are 404s. The request in flight stays out
    // (as a cancelled run's does) and its answer, let in now, carries the run no further.
    release();
    assert.equal(rt.runtime.engine.timerDueAt(DOOMED, flakyRun), undefined);
    // Its schedule's timer too (it sent nothing, but stayed armed until its next tick).
    assert.equal(rt.runtime.ticker.dueAt(DOOMED, 'nightly'), undefined);
    assert.notEqual(rt.runtime.ticker.dueAt(KEEPER, 'nightly'), undefined, "the other org's schedule stays armed");
    assert.deepEqual(await doomed.live.closed, { code: 4404, reason: 'organization_deleted: the organization was deleted' });
    assert.equal((await doomed.meter.closed).code, 4404);
    assert.equal((await call(rt.url, 'GET', `/organizations/${DOOMED}`, { token: ADMIN_TOKEN })).status, 404);
    // 404 while its keys are still stored, 401 once the removal took them.
    assert.ok([401, 404].includes((await call(rt.url, 'GET', `/organizations/${DOOMED}/runs`, { token: doomed.viewer })).status));
    const body = JSON.stringify({ type: 'orders.created', ...ORDER });
    assert.equal((await call(rt.url, 'POST', `/hooks/${DOOMED}/shop`, { body, headers: signStandard(SECRET, 'msg-after', Math.floor(Date.now() / 1000), body) })).status, 404);
    const listed = (await call(rt.url, 'GET', '/organizations', { token: ADMIN_TOKEN })).body.organizations as Array<{ id: string }>;
    assert.deepEqual(listed.map((org) => org.id), [KEEPER]);
    const again = await call(rt.url, 'POST', '/organizations', { token: ADMIN_TOKEN, json: { id: DOOMED, name: 'again' } });
    assert.equal(again.status, 409);
    assert.equal(again.body.error.code, 'organization_id_retired');

    await rt.runtime.deletions.idle();
    const done = await call(rt.url, 'GET', `/organizations/${DOOMED}/deletion`, { token: ADMIN_TOKEN });
    assert.equal(done.status, 200, done.text);
    assert.equal(done.body.deletion.state, 'removed');
    assert.deepEqual(await rt.runtime.deletions.recordsLeft(DOOMED), {});
    assert.equal(rt.runtime.rooms.emittedSeq(DOOMED), 0, 'once removed, the process keeps nothing of its live seqs');
    assert.equal(done.body.deletion.hook_runner_secrets_pending, false);
    assert.ok(done.body.deletion.records_removed > 100, `records removed: ${done.body.deletion.records_removed}`);
    assert.match((await call(rt.url, 'GET', '/metrics')).text, /^sluice_organization_deletions_unfinished 0$/m);
    // Deleting it again answers the same record.
    const repeated = await call(rt.url, 'DELETE', `/organizations/${DOOMED}`, { token: ADMIN_TOKEN });
    assert.equal(repeated.status, 200);
    assert.deepEqual(repeated.body, done.body);
    assert.equal((await call(rt.url, 'DELETE', '/organizations/never-was', { token: ADMIN_TOKEN })).status, 404);
    assert.equal((await call(rt.url, 'GET', `/organizations/${KEEPER}/deletion`, { token: ADMIN_TOKEN })).status, 404);

    assert.equal(holding.received.length, 1, 'the held run sent no second step');
    assert.equal(flaky.received.length, 1);
    assert.equal(rt.runtime.engine.stalled.size, 0, 'no run of the deleted org waits to write again');

    // The other org goes on: its key, its live socket, its webhooks and runs.
    assert.equal((await call(rt.url, 'GET', `/organizations/${KEEPER}/custom-actions/${keeper.actionId}/secrets`, { token: keeper.key })).body.keys.length, 1);
    const more = await call(rt.url, 'POST', `/organizations/${KEEPER}/events`, { token: keeper.key, json: { type: 'orders.created', payload: { ...ORDER, order_id: 'ord_2' }, id: 'after-delete' } });
    assert.equal(more.status, 202);
    const [afterDelete] = await eventually('keeper run done', async () => (await call(rt.url, 'GET', `/organizations/${KEEPER}/events/after-delete`, { token: keeper.key })).body.reactions as Array<{ state: string; run_id: string }>, (r) => r.length === 1 && r[0]!.state === 'completed');
    // Its own update: the socket joined after earlier runs were seen done, whose updates may still have come after.
    await keeper.live.waitFor(() => keeper.live.updates().some((update) => update.run_id === afterDelete!.run_id && update.state === 'completed'), 'keeper live update');
    keeper.live.close();
    keeper.meter.close();
  } finally {
    await holding.close();
    await flaky.close();
  }

  await rt.runtime.close();
  // The deletion record keeps the id (that is what retires it); nothing else names the org.
  // On LMDB, byte for byte too (the memory ledger keeps nothing once closed).
  if (existsSync(join(rt.dataDir, 'runtime'))) {
    const runtimeLeft = scanFor(join(rt.dataDir, 'runtime'), DOOMED, KEEPER, ['deleted-orgs']);
    assert.deepEqual(runtimeLeft.found, []);
    assert.ok(runtimeLeft.othersRecords > 100, 'the scan reads the records of the org that stayed');
  }
  // The hook-runner forgot the org: its secrets, records of calls and fences are gone; only its mark names it.
  const runnerLeft = scanFor(join(rt.dataDir, 'hook-runner', 'runner.mdb'), DOOMED, KEEPER, ['forgotten-orgs', 'data-format']);
  assert.deepEqual(runnerLeft.found, []);
  assert.ok(runnerLeft.othersRecords >= 6, 'the keeper\'s secret, its revision, its records of calls and fences stay');
});
