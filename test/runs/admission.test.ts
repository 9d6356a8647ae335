// Admission and environments: per-org concurrency limits with FIFO order, one tenant's backlog
// never holding back another tenant, the starter plan's 402 on sandbox, and sandbox reset.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { ADMIN_TOKEN, startRuntime, type TestRuntime } from '../helpers/runtime.ts';
import { call, createOrg, signStandard } from '../helpers/http.ts';
import { connectLive } from '../helpers/live-client.ts';
import { eventually, startReceiver, type Receiver } from '../helpers/receiver.ts';
import { generateEventId, type StoredEvent } from '../../runtime/events/event-record.ts';
import { ADMITTED_PER_TURN } from '../../runtime/runs/work-driver.ts';

let rt: TestRuntime;
let receiver: Receiver;
before(async () => {
  rt = await startRuntime();
  receiver = await startReceiver();
});
after(async () => {
  await rt.close();
  await receiver.close();
});

async function setup(org: string, plan: string, path: string, limit?: number): Promise<string> {
  const key = await createOrg(rt.url, ADMIN_TOKEN, org, plan);
  if (limit !== undefined) {
    const patched = await call(rt.url, 'PATCH', `/organizations/${org}`, { token: ADMIN_TOKEN, json: { max_concurrent_runs: limit } });
    assert.equal(patched.status, 200, patched.text);
  }
  const wf = await call(rt.url, 'POST', `/organizations/${org}/workflows`, { token: key, json: { name: 'w', trigger_event: 'job.run', steps: [{ id: 's', type: 'webhook', url: `${receiver.url}${path}` }] } });
  assert.equal(wf.status, 201, wf.text);
  return key;
}

const states = async (org: string, key: string): Promise<string[]> =>
  ((await call(rt.url, 'GET', `/organizations/${org}/runs?limit=500`, { token: key })).body.runs as Array<{ state: string }>).map((r) => r.state);

test('an org runs at most max_concurrent_runs at once, admitting in FIFO order; another org is not held back', async () => {
  let release: () => void = () => undefined;
  const held = new Promise<void>((resolve) => (release = resolve));
  receiver.script([{ status: 200, after: held }]);
  const keyA = await setup('acct-busy', 'pro', '/busy', 2);
  for (let i = 0; i < 6; i++) {
    assert.equal((await call(rt.url, 'POST', '/organizations/acct-busy/events', { token: keyA, json: { type: 'job.run', payload: { i }, id: `busy-${i}` } })).status, 202);
  }
  await eventually('two running', () => states('acct-busy', keyA), (s) => s.filter((x) => x === 'running').length === 2 && s.filter((x) => x === 'queued').length === 4);
  assert.equal(receiver.received.filter((r) => r.path === '/busy').length, 2, 'only two requests are in flight');

  const keyB = await setup('acct-quiet', 'pro', '/quiet');
  assert.equal((await call(rt.url, 'POST', '/organizations/acct-quiet/events', { token: keyB, json: { type: 'job.run', payload: {}, id: 'quiet-1' } })).status, 202);
  await eventually('B reaches its receiver while A is saturated', () => receiver.received.filter((r) => r.path === '/quiet').length, (n) => n === 1);

  release();
  receiver.script([{ status: 200 }]);
  await eventually('all of A completed', () => states('acct-busy', keyA), (s) => s.length === 6 && s.every((x) => x === 'completed'));
  const order = receiver.received.filter((r) => r.path === '/busy').map((r) => JSON.parse(r.body).event.payload.i as number);
  assert.deepEqual(order.slice(0, 2).sort(), [0, 1]);
  assert.deepEqual(order.slice(2), [2, 3, 4, 5], 'queued runs are admitted first in, first out');
});

test('a starter org gets 402 sandbox_disabled for every sandbox request', async () => {
  const key = await createOrg(rt.url, ADMIN_TOKEN, 'acct-starter', 'starter');
  const secret = `whsec_${Buffer.alloc(32, 8).toString('base64')}`;
  const attempts = [
    await call(rt.url, 'POST', '/organizations/acct-starter/events', { token: key, json: { type: 'a.b', payload: {}, environment: 'sandbox' } }),
    await call(rt.url, 'GET', '/organizations/acct-starter/events?environment=sandbox', { token: key }),
    await call(rt.url, 'GET', '/organizations/acct-starter/runs?environment=sandbox', { token: key }),
    await call(rt.url, 'GET', '/organizations/acct-starter/failed-events?environment=sandbox', { token: key }),
    await call(rt.url, 'POST', '/organizations/acct-starter/sources', { token: key, json: { name: 's', secrets: [secret], environment: 'sandbox' } }),
    await call(rt.url, 'POST', '/organizations/acct-starter/workflows', { token: key, json: { name: 'w', trigger_event: 'a.b', environment: 'sandbox', steps: [{ type: 'delay', duration_ms: 10 }] } }),
    await call(rt.url, 'POST', '/organizations/acct-starter/sandbox/reset', { token: key }),
  ];
  for (const answer of attempts) {
    assert.equal(answer.status, 402, answer.text);
    assert.equal(answer.body.error.code, 'sandbox_disabled');
  }
  await assert.rejects(connectLive(rt.url, 'acct-starter', { token: key, query: `?token=${key}&environment=sandbox` }), /402/);
  const live = await connectLive(rt.url, 'acct-starter', { token: key });
  live.subscribe({ environment: 'sandbox' });
  assert.equal((await live.closed).code, 4402);
  assert.equal((await call(rt.url, 'GET', '/organizations/acct-starter/events', { token: key })).status, 200, 'production still works');
});

test('sandbox reset deletes sandbox events, runs, claims and updates, and nothing else', async () => {
  receiver.script([{ status: 200 }]);
  const key = await createOrg(rt.url, ADMIN_TOKEN, 'acct-sbx', 'pro');
  const secret = `whsec_${Buffer.alloc(32, 6).toString('base64')}`;
  for (const environment of ['production', 'sandbox']) {
    await call(rt.url, 'POST', '/organizations/acct-sbx/workflows', { token: key, json: { name: environment, trigger_event: 'job.run', environment, steps: [{ type: 'webhook', url: `${receiver.url}/sbx` }] } });
    await call(rt.url, 'POST', '/organizations/acct-sbx/sources', { token: key, json: { name: `in-${environment}`, secrets: [secret], environment } });
    const body = JSON.stringify({ type: 'job.run' });
    const hook = await call(rt.url, 'POST', `/hooks/acct-sbx/in-${environment}`, { body, headers: signStandard(secret, `msg-${environment}`, Math.floor(Date.now() / 1000), body) });
    assert.equal(hook.status, 204, hook.text);
  }
  const runsIn = async (environment: string) => (await call(rt.url, 'GET', `/organizations/acct-sbx/runs?environment=${environment}`, { token: key })).body.runs as Array<{ state: string }>;
  await eventually('both runs completed', async () => [...(await runsIn('production')), ...(await runsIn('sandbox'))], (r) => r.length === 2 && r.every((x) => x.state === 'completed'));

  const reset = await call(rt.url, 'POST', '/organizations/acct-sbx/sandbox/reset', { token: key });
  assert.equal(reset.status, 200, reset.text);
  assert.deepEqual(reset.body.deleted, { events: 1, runs: 1, inbox_claims: 1, projection_rows: 0 });
  assert.equal((await runsIn('sandbox')).length, 0);
  assert.equal((await runsIn('production')).length, 1);
  assert.equal((await call(rt.url, 'GET', '/organizations/acct-sbx/events?environment=sandbox', { token: key })).body.events.length, 0);
  assert.equal((await call(rt.url, 'GET', '/organizations/acct-sbx/events', { token: key })).body.events.length, 1);
  assert.equal((await call(rt.url, 'GET', '/organizations/acct-sbx/workflows?environment=sandbox', { token: key })).body.workflows.length, 1, 'workflows stay');
  const live = await connectLive(rt.url, 'acct-sbx', { token: key });
  live.subscribe({ environment: 'sandbox', after_seq: 0 });
  live.subscribe({ environment: 'production', after_seq: 0 });
  await live.waitFor(() => live.updates().some((u) => u.state === 'completed'), 'production updates replay');
  assert.ok(live.updates().every((u) => u.environment === 'production'), 'no sandbox update is retained');
  live.close();
  const body = JSON.stringify({ type: 'job.run' });
  const again = await call(rt.url, 'POST', '/hooks/acct-sbx/in-sandbox', { body, headers: signStandard(secret, 'msg-sandbox', Math.floor(Date.now() / 1000), body) });
  assert.equal(again.status, 204, 'the sandbox inbox claim is gone');
});

test('a duplicate delivery that loses the race gives back the slot it took on the spot', async () => {
  receiver.script([{ status: 200 }]);
  const key = await setup('acct-race', 'pro', '/race', 2);
  const received = () => receiver.received.filter((r) => r.path === '/race').length;
  const delivery = (): StoredEvent => {
    const at = Date.now();
    const id = generateEventId(at);
    return {
      id, org_id: 'acct-race', type: 'job.run', payload: {}, environment: 'production', source: 'shop', provider_event_id: 'dup-1',
      received_at: new Date(at).toISOString(), received_at_ms: at, correlation_id: id, causation_id: null, depth: 0, replay_skip_side_effects: false, replay_workflow_ids: null,
    };
  };
  // Both pass the duplicate check before either commits, and both runs are admitted on the spot
  // (the org has two free slots); the conditional write keeps one.
  const claim = { source: 'shop', providerEventId: 'dup-1' };
  const outcomes = await Promise.allSettled([delivery(), delivery()].map((event) => rt.runtime.context.events.store({ event, recording: null, claim })));
  assert.deepEqual(outcomes.map((o) => o.status).sort(), ['fulfilled', 'rejected']);
  await eventually('the kept run completed', () => states('acct-race', key), (s) => s.length === 1 && s[0] === 'completed');

  // Both slots must be free again: two held steps run at the same time.
  let release: () => void = () => undefined;
  receiver.script([{ status: 200, after: new Promise<void>((resolve) => (release = resolve)) }]);
  const before = received();
  for (const id of ['race-a', 'race-b']) {
    assert.equal((await call(rt.url, 'POST', '/organizations/acct-race/events', { token: key, json: { type: 'job.run', payload: {}, id } })).status, 202);
  }
  await eventually('two steps in flight at once', received, (n) => n === before + 2);
  release();
  receiver.script([{ status: 200 }]);
  await eventually('all completed', () => states('acct-race', key), (s) => s.length === 3 && s.every((x) => x === 'completed'));
});

type ListedRun = { run_id: string; event_id: string; state: string };
const runsOf = async (org: string, key: string): Promise<ListedRun[]> => (await call(rt.url, 'GET', `/organizations/${org}/runs?limit=500`, { token: key })).body.runs;
const stateOf = async (org: string, key: string, eventId: string): Promise<string | undefined> => (await runsOf(org, key)).find((r) => r.event_id === eventId)?.state;

test('cancelling a queued run does not stall the runs queued behind it', async () => {
  let release: () => void = () => undefined;
  receiver.script([{ status: 200, after: new Promise<void>((resolve) => (release = resolve)) }, { status: 200 }]);
  const key = await setup('acct-cancel-queued', 'pro', '/cancel-queued', 1);
  for (const id of ['cq-0', 'cq-1', 'cq-2']) {
    assert.equal((await call(rt.url, 'POST', '/organizations/acct-cancel-queued/events', { token: key, json: { type: 'job.run', payload: { id }, id } })).status, 202);
  }
  const waiting = await eventually('one running, two queued', () => runsOf('acct-cancel-queued', key), (r) => r.length === 3 && r.filter((x) => x.state === 'queued').length === 2);
  const cancelled = await call(rt.url, 'POST', `/organizations/acct-cancel-queued/runs/${waiting.find((r) => r.event_id === 'cq-1')?.run_id}/cancel`, { token: key });
  assert.equal(cancelled.status, 200, cancelled.text);
  assert.equal(cancelled.body.run.state, 'cancelled');

  release();
  // Nothing else happens in the runtime: only the slot cq-0 frees can admit cq-2.
  await eventually('cq-2 completed once cq-0 did', () => stateOf('acct-cancel-queued', key, 'cq-2'), (s) => s === 'completed');
  const sent = receiver.received.filter((r) => r.path === '/cancel-queued').map((r) => JSON.parse(r.body).event.payload.id as string);
  assert.deepEqual(sent, ['cq-0', 'cq-2'], 'the cancelled run sent nothing');
});

test('a second resume of a failed run does not give back the slot its admission took', async () => {
  receiver.script([{ status: 400 }]);
  const key = await setup('acct-resume-twice', 'pro', '/resume-twice', 1);
  assert.equal((await call(rt.url, 'POST', '/organizations/acct-resume-twice/events', { token: key, json: { type: 'job.run', payload: {}, id: 'rt-0' } })).status, 202);
  const [failed] = await eventually('rt-0 failed', () => runsOf('acct-resume-twice', key), (r) => r.length === 1 && r[0]?.state === 'failed');
  let release: () => void = () => undefined;
  receiver.script([{ status: 200, after: new Promise<void>((resolve) => (release = resolve)) }, { status: 200 }]);
  const received = () => receiver.received.filter((r) => r.path === '/resume-twice').length;
  // Two resumes that both saw `failed` (as two racing API calls do): the second reaches the run
  // after the first queued it and the scheduler admitted it, before `run.admitted` is applied.
  const { engine } = rt.runtime;
  await Promise.all([engine.send('acct-resume-twice', failed!.run_id, { type: 'run.resume' }), engine.send('acct-resume-twice', failed!.run_id, { type: 'run.resume' })]);
  await eventually('the resumed step is in flight', received, (n) => n === 2);

  assert.equal((await call(rt.url, 'POST', '/organizations/acct-resume-twice/events', { token: key, json: { type: 'job.run', payload: {}, id: 'rt-1' } })).status, 202);
  assert.equal(await stateOf('acct-resume-twice', key, 'rt-1'), 'queued', 'the only slot is still taken by the resumed run');
  release();
  await eventually('both completed', () => runsOf('acct-resume-twice', key), (r) => r.length === 2 && r.every((x) => x.state === 'completed'));
});

test('raising an org\'s limit over a deep queue admits ADMITTED_PER_TURN runs per event-loop turn, the rest in the turns after', { timeout: 60_000 }, async () => {
  let release: () => void = () => undefined;
  receiver.script([{ status: 200, after: new Promise<void>((resolve) => (release = resolve)) }]);
  const org = 'acct-raise';
  const key = await setup(org, 'pro', '/raise', 1);
  const count = 3 * ADMITTED_PER_TURN;
  for (let i = 0; i < count; i++) assert.equal((await call(rt.url, 'POST', `/organizations/${org}/events`, { token: key, json: { type: 'job.run', payload: { i } } })).status, 202);
  const { engine, context } = rt.runtime;
  await eventually('all but one queued', () => engine.queuedRuns(org, 'production'), (n) => n === count - 1);
  // The record changed without the API's refresh, so this one is the only pump it makes.
  await context.orgs.update(org, (current) => ({ ...current, max_concurrent_runs: 1000 }));
  engine.refreshLimit(org);
  assert.equal(engine.queuedRuns(org, 'production'), count - 1 - ADMITTED_PER_TURN, 'one turn\'s worth admitted at once');
  await eventually('the rest admitted in the next turns', () => engine.queuedRuns(org, 'production'), (n) => n === 0);
  release();
  receiver.script([{ status: 200 }]);
  await eventually('all completed', () => states(org, key), (s) => s.length === count && s.every((x) => x === 'completed'));
});

test('an org\'s sandbox runs queue apart from its production runs: a sandbox backlog holding every slot delays no production run', { timeout: 60_000 }, async () => {
  let release: () => void = () => undefined;
  receiver.script([{ status: 200, after: new Promise<void>((resolve) => (release = resolve)) }]);
  const org = 'acct-envs';
  const key = await setup(org, 'pro', '/envs-production', 1);
  const sandboxWorkflow = await call(rt.url, 'POST', `/organizations/${org}/workflows`, { token: key, json: { name: 'w', trigger_event: 'job.run', environment: 'sandbox', steps: [{ id: 's', type: 'webhook', url: `${receiver.url}/envs-sandbox` }] } });
  assert.equal(sandboxWorkflow.status, 201, sandboxWorkflow.text);
  const event = (environment: string, i: number) => call(rt.url, 'POST', `/organizations/${org}/events`, { token: key, json: { type: 'job.run', payload: { i }, environment } });
  for (let i = 0; i < 5; i++) assert.equal((await event('sandbox', i)).status, 202);
  const { engine } = rt.runtime;
  await eventually('one sandbox run out, four queued', () => [receiver.received.filter((r) => r.path === '/envs-sandbox').length, engine.queuedRuns(org, 'sandbox')], ([out, queued]) => out === 1 && queued === 4);
  assert.equal((await event('production', 0)).status, 202);
  await eventually('the production run goes out at once, its environment\'s slot free', () => receiver.received.filter((r) => r.path === '/envs-production').length, (n) => n === 1);
  assert.equal(engine.queuedRuns(org, 'production'), 0);
  release();
  receiver.script([{ status: 200 }]);
  await eventually('all completed', () => states(org, key), (s) => s.length === 1 && s.every((x) => x === 'completed'));
  const sandboxStates = async () => ((await call(rt.url, 'GET', `/organizations/${org}/runs?environment=sandbox`, { token: key })).body.runs as Array<{ state: string }>).map((r) => r.state);
  await eventually('the sandbox runs completed', sandboxStates, (s) => s.length === 5 && s.every((x) => x === 'completed'));
});
