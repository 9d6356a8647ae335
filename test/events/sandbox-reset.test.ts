// Sandbox reset and re-sent event ids, on a real runtime with the real hook-runner and a real
// receiver: after a reset, a fixture sent again with its old id must make new runs (new effect keys,
// fresh fences, its own action output), while production run ids never change. Live sandbox
// sockets are closed with 4409.

import assert from 'node:assert/strict';
import { createHash, createHmac } from 'node:crypto';
import { after, before, test } from 'node:test';
import { resetSandbox } from '../../runtime/events/sandbox-reset.ts';
import { LMDB_LEDGER } from '../helpers/ledgers.ts';
import { CLOSE_SANDBOX_RESET } from '../../runtime/rooms/live-close-codes.ts';
import { UpdateLog } from '../../runtime/rooms/update-log.ts';
import { EventStore } from '../../runtime/events/event-store.ts';
import { Inbox } from '../../runtime/inbox/inbox.ts';
import { ProjectionStore } from '../../runtime/projections/projection-store.ts';
import { RunStore } from '../../runtime/runs/run-store.ts';
import { SourceStore } from '../../runtime/sources/source-store.ts';
import { assembleWat, ECHO_WAT } from '../helpers/hook-runner-wat.ts';
import { call, createOrg } from '../helpers/http.ts';
import { connectLive } from '../helpers/live-client.ts';
import { eventually, startReceiver, type Receiver } from '../helpers/receiver.ts';
import { ADMIN_TOKEN, startRuntime, type TestRuntime } from '../helpers/runtime.ts';
import { DeviceStore } from '../../runtime/triggers/device-store.ts';

const ORG = 'acct-fixtures';
let rt: TestRuntime;
let key: string;
let receiver: Receiver;

before(async () => {
  rt = await startRuntime({ args: ['--runner', 'child'] });
  key = await createOrg(rt.url, ADMIN_TOKEN, ORG, 'pro');
  receiver = await startReceiver();
});
after(async () => {
  await rt.close();
  await receiver.close();
});

/** Today's run id formula (DESIGN §4), written out so that a change to it fails here. */
const plainRunId = (eventId: string, workflowId: string): string =>
  `run_${createHash('sha256').update(`${ORG}\u0000${eventId}\u0000${workflowId}`).digest('hex').slice(0, 32)}`;

const send = (id: string, environment: 'sandbox' | 'production', payload: unknown) =>
  call(rt.url, 'POST', `/organizations/${ORG}/events`, { token: key, json: { type: 'fixture.sent', environment, id, payload } });

/** The event's one run, once it has settled. */
async function settledRun(eventId: string, environment: 'sandbox' | 'production') {
  const [reaction] = await eventually(
    `the run of ${eventId} settled`,
    async () => (await call(rt.url, 'GET', `/organizations/${ORG}/events/${eventId}?environment=${environment}`, { token: key })).body?.reactions ?? [],
    (r) => r.length === 1 && (r[0].state === 'completed' || r[0].state === 'failed'),
    20_000,
  );
  return (await call(rt.url, 'GET', `/organizations/${ORG}/runs/${reaction.run_id}?environment=${environment}`, { token: key })).body.run;
}

async function createWorkflow(environment: 'sandbox' | 'production', steps: unknown[]): Promise<string> {
  const created = await call(rt.url, 'POST', `/organizations/${ORG}/workflows`, { token: key, json: { name: `fixtures-${environment}`, trigger_event: 'fixture.sent', environment, steps } });
  assert.equal(created.status, 201, created.text);
  return created.body.workflow.id;
}

test('the supervised hook-runner shows as up in /metrics, its disk above its floor', async () => {
  const metrics = (await call(rt.url, 'GET', '/metrics')).text;
  assert.match(metrics, /^sluice_hook_runner_up 1$/m);
  assert.match(metrics, /^sluice_hook_runner_disk_low 0$/m);
  assert.match(metrics, /^sluice_hook_runner_prune_failing 0$/m);
  assert.match(metrics, /^sluice_hook_runner_restarts 0$/m);
});

test('a hook-runner that is running but does not answer (stopped) shows as down in /metrics, and up again once it answers', async () => {
  const pid = rt.runtime.runner.child?.pid;
  assert.ok(pid !== undefined);
  process.kill(pid, 'SIGSTOP');
  try {
    assert.equal(rt.runtime.runner.child?.state, 'running', 'the process is still there');
    assert.match((await call(rt.url, 'GET', '/metrics')).text, /^sluice_hook_runner_up 0$/m);
  } finally {
    process.kill(pid, 'SIGCONT');
  }
  assert.match((await call(rt.url, 'GET', '/metrics')).text, /^sluice_hook_runner_up 1$/m);
});

test('a fixture re-sent after a sandbox reset gets a new run: new effect keys, fresh fences, its own output', async () => {
  const form = new FormData();
  form.set('name', 'echo');
  form.set('file', new Blob([await assembleWat('echo', ECHO_WAT)]), 'echo.wasm');
  const uploaded = await fetch(`${rt.url}/organizations/${ORG}/custom-actions`, { method: 'POST', headers: { authorization: `Bearer ${key}` }, body: form });
  assert.equal(uploaded.status, 201);
  const actionId = ((await uploaded.json()) as { custom_action: { id: string } }).custom_action.id;
  assert.equal((await call(rt.url, 'POST', `/organizations/${ORG}/custom-actions/${actionId}/review`, { token: key, json: { status: 'approved', version: 1 } })).status, 200);
  // Two action steps: the first run reaches fence 2 at the runner, which would refuse a reused run's fence 1.
  const sandboxWorkflow = await createWorkflow('sandbox', [
    { id: 'first', type: 'custom_action', action_id: actionId },
    { id: 'second', type: 'custom_action', action_id: actionId },
    { id: 'notify', type: 'webhook', url: `${receiver.url}/fixtures` },
  ]);
  const productionWorkflow = await createWorkflow('production', [{ id: 'notify', type: 'webhook', url: `${receiver.url}/production` }]);

  assert.equal((await send('fixture-1', 'sandbox', { n: 1 })).status, 202);
  const first = await settledRun('fixture-1', 'sandbox');
  assert.equal(first.state, 'completed', JSON.stringify(first.error));
  assert.equal(first.run_id, plainRunId('fixture-1', sandboxWorkflow), 'before any reset, sandbox run ids are what they always were');
  assert.deepEqual(first.steps.map((s: { result: { payload: unknown } }) => s.result?.payload).slice(0, 2), [{ n: 1 }, { n: 1 }]);
  assert.equal((await send('fixture-1', 'sandbox', { n: 9 })).status, 409, 'within one generation a repeated id is a duplicate');

  assert.equal((await send('prod-1', 'production', { p: 1 })).status, 202);
  const production = await settledRun('prod-1', 'production');
  assert.equal(production.run_id, plainRunId('prod-1', productionWorkflow));

  const reset = await call(rt.url, 'POST', `/organizations/${ORG}/sandbox/reset`, { token: key });
  assert.equal(reset.status, 200, reset.text);
  assert.deepEqual(reset.body.deleted, { events: 1, runs: 1, inbox_claims: 0, projection_rows: 0 });

  assert.equal((await send('fixture-1', 'sandbox', { n: 2 })).status, 202);
  const second = await settledRun('fixture-1', 'sandbox');
  assert.notEqual(second.run_id, first.run_id);
  assert.equal(second.state, 'completed', `the runner accepted the new run's fences: ${JSON.stringify(second.error)}`);
  for (const step of second.steps.slice(0, 2)) {
    assert.deepEqual(step.result.payload, { n: 2 }, `step ${step.id} ran on the new payload`);
    assert.equal(step.attempts[0].evidence.replayed, false, `step ${step.id} was not a replay of the deleted run`);
  }
  const fences = (run: { steps: Array<{ attempts: Array<{ fence: number }> }> }) => run.steps.map((s) => s.attempts.map((a) => a.fence));
  assert.equal(second.steps[0].attempts[0].fence, 1);
  assert.deepEqual(fences(second), fences(first), 'the new run starts its fences afresh, as the deleted one did');
  const deliveries = receiver.received.filter((r) => r.path === '/fixtures');
  assert.deepEqual(
    deliveries.map((r) => r.headers['idempotency-key']),
    [`${first.run_id}:notify`, `${second.run_id}:notify`],
  );
  assert.deepEqual(JSON.parse(deliveries[1]!.body).event.payload, { n: 2 });
  assert.equal((await send('fixture-1', 'sandbox', { n: 9 })).status, 409, 'within the new generation a repeated id is a duplicate again');

  // A second reset starts another generation: the fixture's third run shares no id with the other two.
  assert.equal((await call(rt.url, 'POST', `/organizations/${ORG}/sandbox/reset`, { token: key })).status, 200);
  assert.equal((await send('fixture-1', 'sandbox', { n: 3 })).status, 202);
  const third = await settledRun('fixture-1', 'sandbox');
  assert.equal(third.state, 'completed', JSON.stringify(third.error));
  assert.ok(![first.run_id, second.run_id].includes(third.run_id));

  // Production is untouched by the resets and keeps its ids.
  assert.equal((await call(rt.url, 'GET', `/organizations/${ORG}/runs/${production.run_id}`, { token: key })).status, 200);
  assert.equal((await send('prod-1', 'production', { p: 2 })).status, 409);
  assert.equal((await send('prod-2', 'production', { p: 2 })).status, 202);
  assert.equal((await settledRun('prod-2', 'production')).run_id, plainRunId('prod-2', productionWorkflow));
});

test('a sandbox reset is ordered with the writes around it: later transactions see the new generation', async () => {
  const opened = LMDB_LEDGER.open();
  const ledger = opened.ledger;
  const runs = new RunStore(ledger);
  const generations = runs.sandboxGenerations;
  assert.equal(generations.current('acct-a'), 0);
  const resetting = resetSandbox({ ledger, events: new EventStore(ledger, new Inbox(ledger, 60_000)), runs, sources: new SourceStore(ledger, new Inbox(ledger, 60_000)), devices: new DeviceStore(ledger, new EventStore(ledger, new Inbox(ledger, 60_000))), updateLog: new UpdateLog(ledger, 100), projections: new ProjectionStore(ledger) }, 'acct-a', 0);
  assert.equal(generations.resetting('acct-a'), true, 'the org is resetting from the call on, before its transaction runs');
  assert.equal(generations.resetting('acct-b'), false);
  const seenAfter = ledger.root.transaction(() => generations.current('acct-a'));
  assert.equal((await resetting).generation, 1);
  assert.equal(await seenAfter, 1, 'a transaction queued after the reset reads the generation it started');
  await generations.settled('acct-a');
  assert.equal(generations.resetting('acct-a'), false);
  assert.equal(generations.current('acct-a'), 1);
  assert.equal(generations.current('acct-b'), 0, 'generations are per org');
  assert.equal(new RunStore(ledger).sandboxGenerations.current('acct-a'), 1, 'the generation is stored, not only cached');
  await opened.close();
});

test('a reset forgets every inbox claim of its sandbox sources, whatever printable characters the provider id starts with', async () => {
  const secret = 'whsec_sandbox_stripe_secret';
  assert.equal((await call(rt.url, 'POST', `/organizations/${ORG}/sources`, { token: key, json: { name: 'stripe-sbx', scheme: 'stripe', environment: 'sandbox', secrets: [secret] } })).status, 201);
  const deliver = (id: string) => {
    const body = JSON.stringify({ id, type: 'charge.x' });
    const t = Math.floor(Date.now() / 1000);
    const signature = createHmac('sha256', secret).update(`${t}.${body}`).digest('hex');
    return call(rt.url, 'POST', `/hooks/${ORG}/stripe-sbx`, { body, headers: { 'content-type': 'application/json', 'stripe-signature': `t=${t},v1=${signature}` } });
  };
  // Ids are printable ASCII; "~" sorts above every other character one may hold.
  const ids = ['evt_plain', '!evt', '~evt'];
  for (const id of ids) assert.equal((await deliver(id)).status, 204, id);
  for (const id of ids) assert.equal((await deliver(id)).status, 409, `${id} is a duplicate before the reset`);
  const reset = await call(rt.url, 'POST', `/organizations/${ORG}/sandbox/reset`, { token: key });
  assert.equal(reset.status, 200, reset.text);
  for (const id of ids) assert.equal((await deliver(id)).status, 204, `${id} is new after the reset`);
});

test('a keyed business replay of a sandbox event can be made again after a reset', async () => {
  assert.equal((await send('fixture-replayed', 'sandbox', { n: 1 })).status, 202);
  const replay = () =>
    call(rt.url, 'POST', `/organizations/${ORG}/events/fixture-replayed/replay?environment=sandbox`, { token: key, json: { side_effects: 'skip' }, headers: { 'idempotency-key': 'k1' } });
  const first = await replay();
  assert.equal(first.status, 202, first.text);
  assert.equal((await replay()).body.event.id, first.body.event.id, 'the same replay before the reset');
  const reset = await call(rt.url, 'POST', `/organizations/${ORG}/sandbox/reset`, { token: key });
  assert.ok(reset.body.deleted.inbox_claims >= 1, 'the replay claim is counted');
  assert.equal((await send('fixture-replayed', 'sandbox', { n: 2 })).status, 202);
  const again = await replay();
  assert.equal(again.status, 202, again.text);
  assert.notEqual(again.body.event.id, first.body.event.id, 'a new replay of the new event');
  assert.equal(again.headers.get('idempotent-replayed'), null);
});

test('a sandbox reset keeps the claim of a production keyed replay, also once its event is gone (pruned while the clock was set back)', async () => {
  assert.equal((await send('fixture-prod-replayed', 'production', { n: 1 })).status, 202);
  const replay = () => call(rt.url, 'POST', `/organizations/${ORG}/events/fixture-prod-replayed/replay`, { token: key, json: { side_effects: 'skip' }, headers: { 'idempotency-key': 'kp' } });
  const first = await replay();
  assert.equal(first.status, 202, first.text);
  // Retention prunes a replay event only after its claim expired, unless the wall clock was set
  // back past the retention when it was made: here it is removed as such a prune would.
  const { ledger } = rt.runtime;
  await ledger.root.transaction(() => ledger.events.remove([ORG, first.body.event.id]));
  const claimKey = ['@replay', `fixture-prod-replayed kp`] as const;
  assert.equal((rt.runtime.inbox.storedClaim(ORG, ...claimKey))?.environment, 'production');
  const reset = await call(rt.url, 'POST', `/organizations/${ORG}/sandbox/reset`, { token: key });
  assert.equal(reset.status, 200, reset.text);
  assert.equal(rt.runtime.inbox.storedClaim(ORG, ...claimKey)?.event_id, first.body.event.id, 'the production claim is kept');
  const again = await replay();
  assert.deepEqual([again.status, again.body.error?.code], [409, 'duplicate_event'], `answered ${again.status} ${again.text}: the replay is not made twice`);
});

test('a sandbox reset removes the sandbox projection rows and keeps production ones', async () => {
  const opened = LMDB_LEDGER.open();
  const ledger = opened.ledger;
  const runs = new RunStore(ledger);
  const projections = new ProjectionStore(ledger);
  const row = (environment: string, id: string | null) => projections.write(
    { name: 'orders', entity: id === null ? null : { type: 'order', id }, title: null, status: null, data: { id } },
    { orgId: 'acct-p', environment, runId: `run_${environment}_${id}`, stepId: 's', eventId: 'evt', at: 1 },
  );
  await ledger.root.transaction(() => {
    row('sandbox', 'o1');
    row('sandbox', null);
    row('production', 'o1');
  });
  const result = await resetSandbox({ ledger, events: new EventStore(ledger, new Inbox(ledger, 60_000)), runs, sources: new SourceStore(ledger, new Inbox(ledger, 60_000)), devices: new DeviceStore(ledger, new EventStore(ledger, new Inbox(ledger, 60_000))), updateLog: new UpdateLog(ledger, 100), projections }, 'acct-p', 0);
  assert.equal(result.projection_rows, 2);
  assert.equal(projections.list('acct-p', 'sandbox', 'orders', { limit: 10 }).rows.length, 0);
  assert.equal(projections.get('acct-p', 'production', 'orders', 'order', 'o1')?.revision, 1, 'production keeps its row');
  await opened.close();
});

test('a sandbox reset closes the org sandbox live sockets with 4409 and leaves production sockets streaming', async () => {
  const sandbox = await connectLive(rt.url, ORG, { query: `?token=${key}&environment=sandbox` });
  const production = await connectLive(rt.url, ORG, { token: key });
  let closedWith: number | undefined;
  void sandbox.closed.then((closed) => (closedWith = closed.code));
  assert.equal((await call(rt.url, 'POST', `/organizations/${ORG}/sandbox/reset`, { token: key })).status, 200);
  await sandbox.waitFor(() => closedWith !== undefined, 'the sandbox socket to close');
  assert.equal(closedWith, CLOSE_SANDBOX_RESET);

  assert.equal((await send('after-reset-production', 'production', { n: 1 })).status, 202);
  await production.waitFor(() => production.updates().some((update) => update.event_id === 'after-reset-production'), 'the production socket still streams');
  production.close();

  // A client away during the reset comes back with its old position: it is told too.
  const resetSeq = rt.runtime.updateLog.resetSeq(ORG, 'sandbox');
  assert.ok(resetSeq > 0);
  const late = await connectLive(rt.url, ORG, { query: `?token=${key}&environment=sandbox&after_seq=${resetSeq}` });
  let lateClosedWith: number | undefined;
  void late.closed.then((closed) => (lateClosedWith = closed.code));
  await late.waitFor(() => lateClosedWith !== undefined, 'the late sandbox socket to close');
  assert.equal(lateClosedWith, CLOSE_SANDBOX_RESET);
  // From after the reset, or from whatever is retained, it streams; so does production from any position.
  for (const query of [`environment=sandbox&after_seq=${resetSeq + 1}`, 'environment=sandbox&after_seq=0', `after_seq=${resetSeq}`]) {
    const client = await connectLive(rt.url, ORG, { query: `?token=${key}&${query}` });
    let closedCode: number | undefined;
    void client.closed.then((closed) => (closedCode = closed.code));
    await client.waitFor(() => client.messages.some((message) => 'heartbeat' in message), `a heartbeat on ${query}`);
    assert.equal(closedCode, undefined, query);
    client.close();
  }

  // A client that joined after the reset and heard nothing since resumes from the position its
  // heartbeat gave (the reset's mark, past resetSeq): that is not a position before the reset.
  const fresh = await connectLive(rt.url, ORG, { query: `?token=${key}&environment=sandbox` });
  await fresh.waitFor(() => fresh.messages.some((message) => 'heartbeat' in message), 'the joining heartbeat');
  const heard = fresh.messages.flatMap((message) => ('heartbeat' in message ? [message.heartbeat.last_seq] : []))[0]!;
  assert.ok(heard > resetSeq, `the heartbeat's position ${heard} is past the reset's ${resetSeq}`);
  fresh.close();
  const resumed = await connectLive(rt.url, ORG, { query: `?token=${key}&environment=sandbox&after_seq=${heard}` });
  let resumedClosed: number | undefined;
  void resumed.closed.then((closed) => (resumedClosed = closed.code));
  await resumed.waitFor(() => resumed.messages.some((message) => 'heartbeat' in message), 'a heartbeat after resuming');
  assert.equal(resumedClosed, undefined, 'not refused with 4409');
  resumed.close();
});
