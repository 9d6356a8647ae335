// A sandbox reset that removes a run while a transition of that run is being applied: the run stays
// removed. Its transition is written in a transaction that sees the reset, not in a batch that would
// commit after it and bring the run back.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { call, createOrg, signStandard } from '../helpers/http.ts';
import { eventually } from '../helpers/receiver.ts';
import { ADMIN_TOKEN, startRuntime, type TestRuntime } from '../helpers/runtime.ts';
import { holdReset } from '../helpers/hold-reset.ts';

const ORG = 'acct-reset-race';
let rt: TestRuntime;
let key: string;

before(async () => {
  rt = await startRuntime();
  key = await createOrg(rt.url, ADMIN_TOKEN, ORG, 'pro');
});
after(async () => rt.close());

test('a run removed by a sandbox reset while its cancel is applied is not written back', async () => {
  const created = await call(rt.url, 'POST', `/organizations/${ORG}/workflows`, {
    token: key,
    json: { name: 'waits', trigger_event: 'fixture.sent', environment: 'sandbox', steps: [{ type: 'delay', duration_ms: 3_600_000 }] },
  });
  assert.equal(created.status, 201, created.text);
  const sent = await call(rt.url, 'POST', `/organizations/${ORG}/events`, { token: key, json: { type: 'fixture.sent', environment: 'sandbox', payload: {} } });
  assert.equal(sent.status, 202, sent.text);
  const runsOf = async () => (await call(rt.url, 'GET', `/organizations/${ORG}/runs?environment=sandbox`, { token: key })).body.runs as Array<{ run_id: string; state: string }>;
  const [run] = await eventually('the run to wait on its delay', runsOf, (runs) => runs.length === 1 && runs[0]!.state === 'delaying');
  const runId = run!.run_id;

  // The cancel is sent from inside the reset's transaction: it is applied after the reset removed
  // the run but before that removal has committed.
  const { engine, context } = rt.runtime;
  const store = context.runs;
  const remove = store.remove.bind(store);
  let cancelled: Promise<void> | undefined;
  store.remove = (removed) => {
    remove(removed);
    if (removed.context.runId === runId) cancelled ??= engine.send(ORG, runId, { type: 'run.cancel', reason: 'raced' });
  };
  const reset = await call(rt.url, 'POST', `/organizations/${ORG}/sandbox/reset`, { token: key });
  assert.equal(reset.status, 200, reset.text);
  assert.equal(reset.body.deleted.runs, 1);
  assert.ok(cancelled, 'the cancel was sent during the reset');
  await cancelled;
  await rt.runtime.ledger.root.flushed;
  assert.equal(store.get(ORG, runId), undefined, 'the removed run was not written back');
  assert.deepEqual(await runsOf(), []);
  assert.deepEqual([...store.unfinished()].filter((r) => r.runId === runId), [], 'boot recovery will not find it either');
});

test('a sandbox webhook that arrives while a reset is in flight is stored after it, like an API event', async () => {
  const secret = `whsec_${Buffer.alloc(32, 5).toString('base64')}`;
  const source = await call(rt.url, 'POST', `/organizations/${ORG}/sources`, { token: key, json: { name: 'fixtures', secrets: [secret], environment: 'sandbox' } });
  assert.equal(source.status, 201, source.text);
  const reset = holdReset(rt, ORG);
  const body = JSON.stringify({ type: 'fixture.sent', id: 'fx-during-reset' });
  let answered = false;
  const webhook = call(rt.url, 'POST', `/hooks/${ORG}/fixtures`, { body, headers: signStandard(secret, 'fx-during-reset', Math.floor(Date.now() / 1000), body) }).then((answer) => {
    answered = true;
    return answer;
  });
  const apiEvent = call(rt.url, 'POST', `/organizations/${ORG}/events`, { token: key, json: { type: 'fixture.sent', environment: 'sandbox', payload: {} } });
  await reset.waitingFor(2);
  assert.equal(answered, false, 'the delivery waits for the reset');
  await reset.finish();
  assert.equal((await webhook).status, 204);
  assert.equal((await apiEvent).status, 202);
});

test('a sandbox write that waited out a reset checks the plan again: a downgrade meanwhile is a 402, and nothing is stored', async () => {
  const org = 'acct-reset-downgrade';
  const orgKey = await createOrg(rt.url, ADMIN_TOKEN, org, 'pro');
  const secret = `whsec_${Buffer.alloc(32, 6).toString('base64')}`;
  assert.equal((await call(rt.url, 'POST', `/organizations/${org}/sources`, { token: orgKey, json: { name: 'fixtures', secrets: [secret], environment: 'sandbox' } })).status, 201);
  const original = await call(rt.url, 'POST', `/organizations/${org}/events`, { token: orgKey, json: { type: 'fixture.sent', environment: 'sandbox', payload: {}, id: 'to-replay' } });
  assert.equal(original.status, 202, original.text);

  const reset = holdReset(rt, org);
  const body = JSON.stringify({ type: 'fixture.sent', id: 'fx-downgraded' });
  const writes = [
    call(rt.url, 'POST', `/hooks/${org}/fixtures`, { body, headers: signStandard(secret, 'fx-downgraded', Math.floor(Date.now() / 1000), body) }),
    call(rt.url, 'POST', `/organizations/${org}/events`, { token: orgKey, json: { type: 'fixture.sent', environment: 'sandbox', payload: {} } }),
    call(rt.url, 'POST', `/organizations/${org}/events/to-replay/replay?environment=sandbox`, { token: orgKey, json: { side_effects: 'skip' } }),
  ];
  await reset.waitingFor(3);
  const downgraded = await call(rt.url, 'PATCH', `/organizations/${org}`, { token: ADMIN_TOKEN, json: { plan: 'starter' } });
  assert.equal(downgraded.status, 200, downgraded.text);
  await reset.finish();
  for (const answer of await Promise.all(writes)) assert.deepEqual([answer.status, answer.body.error?.code], [402, 'sandbox_disabled'], answer.text);
  assert.equal(rt.runtime.context.events.get(org, 'to-replay')?.id, 'to-replay');
  assert.equal((await call(rt.url, 'PATCH', `/organizations/${org}`, { token: ADMIN_TOKEN, json: { plan: 'pro' } })).status, 200);
  const stored = (await call(rt.url, 'GET', `/organizations/${org}/events?environment=sandbox`, { token: orgKey })).body.events as Array<{ id: string }>;
  assert.deepEqual(stored.map((event) => event.id), ['to-replay'], 'only the event from before the downgrade');
});

test('a sandbox webhook that waited out a reset is judged by its source as it is then: a removed secret is 401, a source deleted and made again is 404, and nothing is stored', async () => {
  const org = 'acct-reset-source-change';
  const orgKey = await createOrg(rt.url, ADMIN_TOKEN, org, 'pro');
  const leaked = `whsec_${Buffer.alloc(32, 7).toString('base64')}`;
  const newer = `whsec_${Buffer.alloc(32, 8).toString('base64')}`;
  for (const name of ['rotating', 'remade']) {
    assert.equal((await call(rt.url, 'POST', `/organizations/${org}/sources`, { token: orgKey, json: { name, secrets: [leaked], environment: 'sandbox' } })).status, 201);
  }
  const reset = holdReset(rt, org);
  const deliver = (source: string, id: string) => {
    const body = JSON.stringify({ type: 'fixture.sent', id });
    return call(rt.url, 'POST', `/hooks/${org}/${source}`, { body, headers: signStandard(leaked, id, Math.floor(Date.now() / 1000), body) });
  };
  const deliveries = [deliver('rotating', 'fx-leaked'), deliver('remade', 'fx-old-source')];
  await reset.waitingFor(2);
  assert.equal((await call(rt.url, 'PATCH', `/organizations/${org}/sources/rotating?environment=sandbox`, { token: orgKey, json: { secrets: [newer] } })).status, 200);
  assert.equal((await call(rt.url, 'DELETE', `/organizations/${org}/sources/remade?environment=sandbox`, { token: orgKey })).status, 204);
  assert.equal((await call(rt.url, 'POST', `/organizations/${org}/sources`, { token: orgKey, json: { name: 'remade', secrets: [leaked], environment: 'sandbox' } })).status, 201);
  await reset.finish();
  const [rotated, remade] = await Promise.all(deliveries);
  assert.deepEqual([rotated!.status, rotated!.body.error?.code], [401, 'invalid_signature'], rotated!.text);
  assert.equal(remade!.status, 404, remade!.text);
  const stored = (await call(rt.url, 'GET', `/organizations/${org}/events?environment=sandbox`, { token: orgKey })).body.events as Array<{ id: string }>;
  assert.deepEqual(stored, [], 'nothing stored under a removed secret or into the source made again');
});

test('a sandbox webhook whose secret was removed and whose org lost the sandbox while it waited is 401: the plan is told only to a delivery still signed', async () => {
  const org = 'acct-reset-leak-downgrade';
  const orgKey = await createOrg(rt.url, ADMIN_TOKEN, org, 'pro');
  const [leaked, newer] = [12, 13].map((fill) => `whsec_${Buffer.alloc(32, fill).toString('base64')}`);
  assert.equal((await call(rt.url, 'POST', `/organizations/${org}/sources`, { token: orgKey, json: { name: 'rotating', secrets: [leaked, newer], environment: 'sandbox' } })).status, 201);
  const reset = holdReset(rt, org);
  const deliver = (secret: string, id: string) => {
    const body = JSON.stringify({ type: 'fixture.sent', id });
    return call(rt.url, 'POST', `/hooks/${org}/rotating`, { body, headers: signStandard(secret, id, Math.floor(Date.now() / 1000), body) });
  };
  const deliveries = [deliver(leaked!, 'fx-leaked'), deliver(newer!, 'fx-newer')];
  await reset.waitingFor(2);
  assert.equal((await call(rt.url, 'PATCH', `/organizations/${org}/sources/rotating?environment=sandbox`, { token: orgKey, json: { secrets: [newer] } })).status, 200);
  assert.equal((await call(rt.url, 'PATCH', `/organizations/${org}`, { token: ADMIN_TOKEN, json: { plan: 'starter' } })).status, 200);
  await reset.finish();
  const [unsigned, signed] = await Promise.all(deliveries);
  assert.deepEqual([unsigned!.status, unsigned!.body.error?.code], [401, 'invalid_signature'], unsigned!.text);
  assert.deepEqual([signed!.status, signed!.body.error?.code], [402, 'sandbox_disabled'], signed!.text);
  assert.equal((await call(rt.url, 'PATCH', `/organizations/${org}`, { token: ADMIN_TOKEN, json: { plan: 'pro' } })).status, 200);
  assert.deepEqual((await call(rt.url, 'GET', `/organizations/${org}/events?environment=sandbox`, { token: orgKey })).body.events, [], 'nothing stored');
});

test('a sandbox webhook verified again after its source\'s secrets changed during a reset records the key that signed it in the new list', async () => {
  const org = 'acct-reset-key-index';
  const orgKey = await createOrg(rt.url, ADMIN_TOKEN, org, 'pro');
  const [a, b, c] = [9, 10, 11].map((fill) => `whsec_${Buffer.alloc(32, fill).toString('base64')}`);
  assert.equal((await call(rt.url, 'POST', `/organizations/${org}/sources`, { token: orgKey, json: { name: 'keys', secrets: [a, b], environment: 'sandbox' } })).status, 201);
  const reset = holdReset(rt, org);
  const body = JSON.stringify({ type: 'fixture.sent', id: 'fx-key-index' });
  const delivery = call(rt.url, 'POST', `/hooks/${org}/keys`, { body, headers: signStandard(a!, 'fx-key-index', Math.floor(Date.now() / 1000), body) });
  await reset.waitingFor(1);
  // The key that signed it moves from #0 to #1.
  assert.equal((await call(rt.url, 'PATCH', `/organizations/${org}/sources/keys?environment=sandbox`, { token: orgKey, json: { secrets: [c, a] } })).status, 200);
  await reset.finish();
  const answer = await delivery;
  assert.equal(answer.status, 204, answer.text);
  const stored = await call(rt.url, 'GET', `/organizations/${org}/events/${answer.headers.get('sluice-event-id')}?environment=sandbox`, { token: orgKey });
  assert.equal(stored.body.recording.verifier.key_index, 1);
});
