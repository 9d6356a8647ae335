// Deleting an organization over the real API (real uWS, LMDB, hook-runner child with Wasmtime): an
// org that used every feature (webhooks, API and sandbox events, a scorer custom action with its
// secret, projections, derived events, a replay, schedules, devices, keys, live sockets, a run in
// flight and one waiting on a retry timer) is fenced off at once, its runs send nothing more, its
// sockets close with 4404, its id is never given out again, and once its removal is done not
// one byte of it is left in any table of the runtime's LMDB environment, nor a secret in the
// hook-runner's; another org goes on untouched.

import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { call, createOrg, newStandardSecret, signStandard } from '../helpers/http.ts';
import { connectDevice } from '../helpers/device-client.ts';
import { connectLive } from '../helpers/live-client.ts';
import { eventually, startReceiver, type Receiver } from '../helpers/receiver.ts';
import { scanFor } from '../helpers/ledger-scan.ts';
import { ADMIN_TOKEN, ROOT, startRuntime, type TestRuntime } from '../helpers/runtime.ts';

const DOOMED = 'doomed-q7x';
const KEEPER = 'keeper-q7x';
const SECRET = newStandardSecret();
const buildDir = mkdtempSync(join(tmpdir(), 'sluice-kit-'));
let rt: TestRuntime;
let receiver: Receiver;
let scorer: Buffer;

before(async () => {
  const built = spawnSync(process.execPath, [join(ROOT, 'kits/build.mjs'), '--out', buildDir, 'assemblyscript'], { encoding: 'utf8' });
  assert.equal(built.status, 0, `building the AssemblyScript kit failed:\n${built.stderr}`);
  scorer = readFileSync(join(buildDir, 'order-risk-scorer-assemblyscript.wasm'));
  rt = await startRuntime({ args: ['--runner', 'child'] });
  receiver = await startReceiver();
});
after(async () => {
  await rt.close();
  await receiver.close();
  rmSync(buildDir, { recursive: true, force: true });
  rmSync(rt.dataDir, { recursive: true, force: true });
});

async function upload(org: string, key: string): Promise<string> {
  const form = new FormData();
  form.set('name', 'order-risk-scorer');
  form.set('permissions', 'read_secret:RISK_THRESHOLD');
  form.set('file', new Blob([scorer]), 'action.wasm');
  const response = await fetch(`${rt.url}/organizations/${org}/custom-actions`, { method: 'POST', headers: { authorization: `Bearer ${key}` }, body: form });
  const body = (await response.json()) as { custom_action: { id: string } };
  assert.equal(response.status, 201, JSON.stringify(body));
  const actionId = body.custom_action.id;
  assert.equal((await call(rt.url, 'POST', `/organizations/${org}/custom-actions/${actionId}/secrets`, { token: key, json: { key: 'RISK_THRESHOLD', value: '50' } })).status, 204);
  assert.equal((await call(rt.url, 'POST', `/organizations/${org}/custom-actions/${actionId}/review`, { token: key, json: { status: 'approved', version: 1 } })).status, 200);
  return actionId;
}

const ORDER = { order_id: 'ord_1', amount_cents: 120000, billing: { country: 'DE' }, shipping: { country: 'US' }, items: [{ sku: 'a', quantity: 2 }], customer: { new: true } };

/** Gives `org` a bit of everything; answers its admin key and what the test checks on. */
async function populate(org: string) {
  const key = await createOrg(rt.url, ADMIN_TOKEN, org);
  const path = `/organizations/${org}`;
  const ok = async (method: string, sub: string, json: unknown, status: number, headers?: Record<string, string>) => {
    const answer = await call(rt.url, method, `${path}${sub}`, { token: key, json, ...(headers === undefined ? {} : { headers }) });
    assert.equal(answer.status, status, `${method} ${sub}: ${answer.text}`);
    return answer.body;
  };
  const viewer = (await ok('POST', '/api-keys', { role: 'viewer' }, 201)) as { key: string; id: string };
  const revoked = (await ok('POST', '/api-keys', { role: 'viewer' }, 201)) as { id: string };
  await ok('DELETE', `/api-keys/${revoked.id}`, undefined, 200);
  await ok('POST', '/sources', { name: 'shop', secrets: [SECRET] }, 201);
  const actionId = await upload(org, key);
  await ok('POST', '/workflows', { name: 'score', trigger_event: 'orders.created', steps: [{ id: 'score', type: 'custom_action', action_id: actionId }] }, 201, { 'idempotency-key': `wf-${org}` });
  await ok('POST', '/workflows', { name: 'notify', trigger_event: 'orders.risk_scored', steps: [{ id: 'tell', type: 'webhook', url: `${receiver.url}/scored` }] }, 201);
  await ok('POST', '/workflows', { name: 'sandboxed', trigger_event: 'orders.created', environment: 'sandbox', steps: [{ type: 'webhook', url: `${receiver.url}/sandbox` }] }, 201);
  await ok('POST', '/schedules', { name: 'nightly', cron: '0 3 * * *', event_type: 'nightly.tick' }, 201);
  const device = (await ok('POST', '/devices', { name: 'meter-1' }, 201)) as { token: string };

  const body = JSON.stringify({ type: 'orders.created', ...ORDER });
  const hook = await call(rt.url, 'POST', `/hooks/${org}/shop`, { body, headers: signStandard(SECRET, `msg-${org}`, Math.floor(Date.now() / 1000), body) });
  assert.equal(hook.status, 204, hook.text);
  await ok('POST', '/events', { type: 'orders.created', payload: ORDER, id: `api-${org}` }, 202);
  await ok('POST', '/events', { type: 'orders.created', payload: ORDER, environment: 'sandbox' }, 202);
  const meter = await connectDevice(rt.url, org, 'meter-1', device.token);
  meter.send({ id: 'reading-1', type: 'reading.taken', payload: { kwh: 3 } });
  assert.equal((await meter.answerTo('reading-1')).type, 'ack');
  // Both scoring runs complete, each with its projection row and derived event, whose runs complete too.
  await eventually(`${org}: runs done`, async () => (await call(rt.url, 'GET', `${path}/runs?limit=50`, { token: key })).body.runs as Array<{ state: string }>, (runs) => runs.length === 4 && runs.every((run) => run.state === 'completed'));
  await ok('POST', `/events/api-${org}/replay`, { side_effects: 'skip' }, 202);
  const live = await connectLive(rt.url, org, { token: viewer.key });
  live.subscribe({});
  return { key, viewer: viewer.key, live, meter, actionId };
}

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
    await eventually('keeper run done', async () => (await call(rt.url, 'GET', `/organizations/${KEEPER}/events/after-delete`, { token: keeper.key })).body.reactions as Array<{ state: string }>, (r) => r.length === 1 && r[0]!.state === 'completed');
    await keeper.live.waitFor(() => keeper.live.updates().some((update) => update.state === 'completed'), 'keeper live update');
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
  // The hook-runner's secrets of the org are gone (its records of past calls are pruned after 30 days as always).
  const runnerSecrets = scanFor(join(rt.dataDir, 'hook-runner', 'runner.mdb'), DOOMED, KEEPER, ['modules', 'fences', 'fences-by-time', 'invocations', 'invocations-by-time', 'data-format']);
  assert.deepEqual(runnerSecrets.found, []);
  assert.ok(runnerSecrets.othersRecords >= 2, 'the keeper\'s secret and its revision stay');
});
