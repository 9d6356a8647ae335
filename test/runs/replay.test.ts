// The replays: business replay needs an explicit side_effects choice and makes a new event (new run,
// new keys); "skip" records webhook steps as skipped, in the runs of the events its custom actions
// derive too (the runtime runs a real hook-runner child for them). Transport replay explains and creates nothing.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { upload } from '../actions/action-fixtures.ts';
import { assembleWat, constantWat } from '../helpers/hook-runner-wat.ts';
import { ADMIN_TOKEN, startRuntime, type TestRuntime } from '../helpers/runtime.ts';
import { call, createOrg, signStandard } from '../helpers/http.ts';
import { durably } from '../../runtime/ledger/durable-write.ts';
import { REPLAY_SOURCE } from '../../runtime/events/event-record.ts';
import { eventually, startReceiver, type Receiver } from '../helpers/receiver.ts';

const ORG = 'acct-replay';
const SECRET = `whsec_${Buffer.alloc(32, 12).toString('base64')}`;
let rt: TestRuntime;
let key: string;
let receiver: Receiver;
let originalId: string;

before(async () => {
  rt = await startRuntime({ args: ['--runner', 'child'] });
  key = await createOrg(rt.url, ADMIN_TOKEN, ORG);
  receiver = await startReceiver();
  await call(rt.url, 'POST', `/organizations/${ORG}/sources`, { token: key, json: { name: 'pay', secrets: [SECRET] } });
  await call(rt.url, 'POST', `/organizations/${ORG}/workflows`, { token: key, json: { name: 'charge', trigger_event: 'payment.succeeded', steps: [{ id: 'notify', type: 'webhook', url: `${receiver.url}/notify` }] } });
  const body = JSON.stringify({ type: 'payment.succeeded', amount: 5 });
  const sent = await call(rt.url, 'POST', `/hooks/${ORG}/pay`, { body, headers: signStandard(SECRET, 'msg-replay', Math.floor(Date.now() / 1000), body) });
  assert.equal(sent.status, 204);
  originalId = sent.headers.get('sluice-event-id')!;
  await eventually('original run completed', () => reactionsOf(originalId), (r) => r.length === 1 && r[0]!.state === 'completed');
});
after(async () => {
  await rt.close();
  await receiver.close();
});

async function reactionsOf(eventId: string): Promise<Array<{ run_id: string; state: string }>> {
  return (await call(rt.url, 'GET', `/organizations/${ORG}/events/${eventId}`, { token: key })).body.reactions;
}

test('business replay needs an explicit side_effects choice', async () => {
  const missing = await call(rt.url, 'POST', `/organizations/${ORG}/events/${originalId}/replay`, { token: key, json: {} });
  assert.equal(missing.status, 400);
  assert.equal(missing.body.error.code, 'side_effects_required');
  assert.equal(missing.body.error.field, 'side_effects');
  const unknown = await call(rt.url, 'POST', `/organizations/${ORG}/events/${originalId}/replay`, { token: key, json: { side_effects: 'skip', dry_run: true } });
  assert.deepEqual([unknown.status, unknown.body.error.code, unknown.body.error.field], [400, 'unknown_field', 'dry_run'], 'another problem keeps its own error');
  const twice = await call(rt.url, 'POST', `/organizations/${ORG}/events/${originalId}/replay`, { token: key, body: '{"side_effects":"skip","side_effects":"run"}', headers: { 'content-type': 'application/json' } });
  assert.deepEqual([twice.status, twice.body.error.code], [400, 'duplicate_json_member']);
  const other = await call(rt.url, 'POST', `/organizations/${ORG}/events/${originalId}/replay`, { token: key, json: { side_effects: 'maybe' } });
  assert.deepEqual([other.status, other.body.error.code], [400, 'side_effects_required']);
});

test('side_effects "skip": a new event and run whose webhook step is recorded skipped, never sent', async () => {
  const before = receiver.received.length;
  const replay = await call(rt.url, 'POST', `/organizations/${ORG}/events/${originalId}/replay`, { token: key, json: { side_effects: 'skip' } });
  assert.equal(replay.status, 202, replay.text);
  assert.notEqual(replay.body.event.id, originalId);
  assert.equal(replay.body.event.causation_id, originalId);
  assert.equal(replay.body.event.correlation_id, replay.body.event.id, 'a replay is a root of its own');
  assert.equal(replay.body.event.depth, 0);
  assert.equal(replay.body.event.replay_skip_side_effects, true);
  const [reaction] = await eventually('replay run completed', () => reactionsOf(replay.body.event.id), (r) => r.length === 1 && r[0]!.state === 'completed');
  const run = (await call(rt.url, 'GET', `/organizations/${ORG}/runs/${reaction!.run_id}`, { token: key })).body.run;
  assert.equal(run.steps[0].status, 'skipped');
  assert.equal(run.steps[0].attempts[0].started_at, null, 'a skipped attempt never started');
  assert.equal(receiver.received.length, before, 'nothing was sent');
});

test('side_effects "skip" is inherited by derived events: the webhook of the workflow a derived event triggers is recorded skipped, never sent', async () => {
  const derive = await upload(rt.url, `/organizations/${ORG}/custom-actions`, key, {
    name: 'refund-reviewer',
    file: await assembleWat('refund-reviewer', constantWat(JSON.stringify({ derived_event: { type: 'refund.reviewed', payload: { ok: true } } }))),
  });
  assert.equal(derive.status, 201, derive.text);
  const actionId: string = derive.body.custom_action.id;
  assert.equal((await call(rt.url, 'POST', `/organizations/${ORG}/custom-actions/${actionId}/review`, { token: key, json: { status: 'approved', version: 1 } })).status, 200);
  const workflows = [
    { name: 'review-refund', trigger_event: 'refund.requested', steps: [{ id: 'review', type: 'custom_action', action_id: actionId }] },
    { name: 'tell-refund', trigger_event: 'refund.reviewed', steps: [{ id: 'tell', type: 'webhook', url: `${receiver.url}/refund-reviewed` }] },
  ];
  for (const json of workflows) assert.equal((await call(rt.url, 'POST', `/organizations/${ORG}/workflows`, { token: key, json })).status, 201);
  const told = () => receiver.received.filter((r) => r.path === '/refund-reviewed').length;

  /** The event the custom action step of `eventId`'s run derived, once the run it triggers has completed. */
  const derivedFrom = async (eventId: string) => {
    const [run] = await eventually(`the run of ${eventId}`, () => reactionsOf(eventId), (r) => r.length === 1 && r[0]!.state === 'completed');
    const events = await eventually(
      `the event derived by ${run!.run_id}`,
      async () => (await call(rt.url, 'GET', `/organizations/${ORG}/events?type=refund.reviewed&limit=500`, { token: key })).body.events as Array<{ id: string; causation_id: string; replay_skip_side_effects: boolean }>,
      (list) => list.some((e) => e.causation_id === run!.run_id),
    );
    const derived = events.find((e) => e.causation_id === run!.run_id)!;
    const [reaction] = await eventually(`the run of derived ${derived.id}`, () => reactionsOf(derived.id), (r) => r.length === 1 && r[0]!.state === 'completed');
    return { derived, run: (await call(rt.url, 'GET', `/organizations/${ORG}/runs/${reaction!.run_id}`, { token: key })).body.run };
  };

  // The original: its derived event's webhook is sent.
  assert.equal((await call(rt.url, 'POST', `/organizations/${ORG}/events`, { token: key, json: { type: 'refund.requested', payload: { refund: 'r1' }, id: 'refund-1' } })).status, 202);
  const original = await derivedFrom('refund-1');
  assert.equal(original.derived.replay_skip_side_effects, false);
  assert.equal(original.run.steps[0].status, 'succeeded');
  assert.equal(told(), 1);

  // Its skip replay runs the custom action again; the event it derives carries the skip, and its webhook step is skipped.
  const replay = await call(rt.url, 'POST', `/organizations/${ORG}/events/refund-1/replay`, { token: key, json: { side_effects: 'skip' } });
  assert.equal(replay.status, 202, replay.text);
  const skipped = await derivedFrom(replay.body.event.id);
  assert.notEqual(skipped.derived.id, original.derived.id);
  assert.equal(skipped.derived.replay_skip_side_effects, true, 'the derived event inherits the skip');
  assert.equal(skipped.run.skip_side_effects, true);
  assert.equal(skipped.run.steps[0].status, 'skipped');
  assert.deepEqual(skipped.run.steps[0].attempts.map((a: { outcome: string; evidence: unknown }) => [a.outcome, a.evidence]), [['skipped', { reason: 'replay_skip_side_effects' }]]);
  assert.equal(told(), 1, 'nothing more was sent');

  // A replay of the derived event (depth 1) is a root: depth 0, its own correlation.
  const rooted = await call(rt.url, 'POST', `/organizations/${ORG}/events/${original.derived.id}/replay`, { token: key, json: { side_effects: 'skip' } });
  assert.equal(rooted.status, 202, rooted.text);
  assert.deepEqual([rooted.body.event.depth, rooted.body.event.correlation_id, rooted.body.event.causation_id], [0, rooted.body.event.id, original.derived.id]);
});

test('side_effects "run": everything runs again under a new run id and new effect keys', async () => {
  const replay = await call(rt.url, 'POST', `/organizations/${ORG}/events/${originalId}/replay`, { token: key, json: { side_effects: 'run' } });
  assert.equal(replay.status, 202);
  const [reaction] = await eventually('replay run completed', () => reactionsOf(replay.body.event.id), (r) => r.length === 1 && r[0]!.state === 'completed');
  const [original] = await reactionsOf(originalId);
  const keys = receiver.received.map((r) => r.headers['idempotency-key']);
  assert.ok(keys.includes(`${original!.run_id}:notify`));
  assert.ok(keys.includes(`${reaction!.run_id}:notify`));
  assert.notEqual(reaction!.run_id, original!.run_id);
});

test('side_effects "run" on a replay of a skip replay sends what the skip replay left out; the key remembers the choice', async () => {
  // A skip replay of this event was made moments ago (above): this one is meant, so "again".
  const skip = await call(rt.url, 'POST', `/organizations/${ORG}/events/${originalId}/replay`, { token: key, json: { side_effects: 'skip', again: true } });
  assert.equal(skip.status, 202, skip.text);
  const replayOfSkip = (choice: 'skip' | 'run') =>
    call(rt.url, 'POST', `/organizations/${ORG}/events/${skip.body.event.id}/replay`, { token: key, json: { side_effects: choice }, headers: { 'idempotency-key': 'ticket-of-skip' } });
  const run = await replayOfSkip('run');
  assert.equal(run.status, 202, run.text);
  assert.equal(run.body.event.replay_skip_side_effects, false);
  const [reaction] = await eventually('the replay run completed', () => reactionsOf(run.body.event.id), (r) => r.length === 1 && r[0]!.state === 'completed');
  assert.ok(receiver.received.some((r) => r.headers['idempotency-key'] === `${reaction!.run_id}:notify`), 'its webhook was sent');
  const otherChoice = await replayOfSkip('skip');
  assert.equal(otherChoice.status, 409);
  assert.equal(otherChoice.body.error.code, 'idempotency_key_reused');
});

test('a replay counts toward the org\'s ingest quota like any other event', async () => {
  const org = 'acct-replay-quota';
  const orgKey = await createOrg(rt.url, ADMIN_TOKEN, org);
  assert.equal((await call(rt.url, 'PATCH', `/organizations/${org}`, { token: ADMIN_TOKEN, json: { ingest_rate_per_second: 1 } })).status, 200);
  const first = await call(rt.url, 'POST', `/organizations/${org}/events`, { token: orgKey, json: { type: 'a.b', payload: {} } });
  assert.equal(first.status, 202);
  const replay = await call(rt.url, 'POST', `/organizations/${org}/events/${first.body.event.id}/replay`, { token: orgKey, json: { side_effects: 'run' } });
  assert.equal(replay.status, 429, replay.text);
  assert.ok(Number(replay.headers.get('retry-after')) >= 1);
});

test('an Idempotency-Key makes a replay once: a retry answers with the same event and sends nothing more', async () => {
  const replaysMade = async (): Promise<number> =>
    ((await call(rt.url, 'GET', `/organizations/${ORG}/events?limit=500`, { token: key })).body.events as Array<{ causation_id: string | null }>).filter((event) => event.causation_id === originalId).length;
  const replaysBefore = await replaysMade();
  const replay = (choice: 'skip' | 'run', idempotencyKey: string) =>
    call(rt.url, 'POST', `/organizations/${ORG}/events/${originalId}/replay`, { token: key, json: { side_effects: choice }, headers: { 'idempotency-key': idempotencyKey } });
  const first = await replay('run', 'support-ticket-42');
  assert.equal(first.status, 202, first.text);
  const [reaction] = await eventually('keyed replay run completed', () => reactionsOf(first.body.event.id), (r) => r.length === 1 && r[0]!.state === 'completed');
  const sent = receiver.received.filter((r) => r.headers['idempotency-key'] === `${reaction!.run_id}:notify`).length;
  assert.equal(sent, 1);
  const retried = await replay('run', 'support-ticket-42');
  assert.equal(retried.status, 202);
  assert.equal(retried.body.event.id, first.body.event.id, 'the same replay, not a new one');
  assert.equal(retried.headers.get('idempotent-replayed'), 'true');
  assert.equal((await reactionsOf(originalId)).length, 1);
  const otherChoice = await replay('skip', 'support-ticket-42');
  assert.equal(otherChoice.status, 409);
  assert.equal(otherChoice.body.error.code, 'idempotency_key_reused');
  const otherKey = await replay('skip', 'support-ticket-43');
  assert.equal(otherKey.status, 202);
  assert.notEqual(otherKey.body.event.id, first.body.event.id);
  const badKey = await replay('run', 'has spaces');
  assert.equal(badKey.status, 400);
  assert.equal(badKey.body.error.field, 'Idempotency-Key');
  assert.equal(await replaysMade(), replaysBefore + 2, 'two keys, two replays; the retry made none');
});

test('a keyed replay claimed by an earlier release (`<event>:<key>`) is still answered as made, not made again', async () => {
  const replay = () => call(rt.url, 'POST', `/organizations/${ORG}/events/${originalId}/replay`, { token: key, json: { side_effects: 'skip' }, headers: { 'idempotency-key': 'ticket-before-upgrade' } });
  const first = await replay();
  assert.equal(first.status, 202, first.text);
  // Rewrite its claim as releases before the space separator stored it.
  const { ledger } = rt.runtime;
  const current = [ORG, REPLAY_SOURCE, `${originalId} ticket-before-upgrade`];
  const claim = ledger.inbox.get(current);
  assert.ok(claim !== undefined);
  await durably(ledger.root, ledger.root.transaction(() => {
    ledger.inbox.remove(current);
    ledger.inbox.put([ORG, REPLAY_SOURCE, `${originalId}:ticket-before-upgrade`], claim);
  }));
  const retried = await replay();
  assert.equal(retried.status, 202, retried.text);
  assert.equal(retried.body.event.id, first.body.event.id, 'the replay made before, not a second one');
  assert.equal(retried.headers.get('idempotent-replayed'), 'true');
});

test('keyed replays of two events never share a claim, whatever colons their ids and keys hold', async () => {
  for (const id of ['colon:event', 'colon']) {
    assert.equal((await call(rt.url, 'POST', `/organizations/${ORG}/events`, { token: key, json: { type: 'other.thing', payload: { id }, id } })).status, 202);
  }
  const replay = (eventId: string, idempotencyKey: string) =>
    call(rt.url, 'POST', `/organizations/${ORG}/events/${eventId}/replay`, { token: key, json: { side_effects: 'skip' }, headers: { 'idempotency-key': idempotencyKey } });
  const first = await replay('colon:event', 'key');
  assert.equal(first.status, 202, first.text);
  // "colon" + ":" + "event:key" would read the same as "colon:event" + ":" + "key".
  const second = await replay('colon', 'event:key');
  assert.equal(second.status, 202, second.text);
  assert.equal(second.headers.get('idempotent-replayed'), null, 'a new replay, not the other event\'s');
  assert.notEqual(second.body.event.id, first.body.event.id);
  assert.equal(second.body.event.causation_id, 'colon');
  assert.deepEqual(second.body.event.payload, { id: 'colon' });
});

test('workflow_ids limits a replay to the runs to redo: other listeners send nothing again; a workflow not listening is refused', async () => {
  const receipts = await call(rt.url, 'POST', `/organizations/${ORG}/workflows`, { token: key, json: { name: 'receipt', trigger_event: 'payment.succeeded', steps: [{ id: 'mail', type: 'webhook', url: `${receiver.url}/receipt` }] } });
  assert.equal(receipts.status, 201, receipts.text);
  const receiptId = receipts.body.workflow.id as string;
  const other = await call(rt.url, 'POST', `/organizations/${ORG}/workflows`, { token: key, json: { name: 'elsewhere', trigger_event: 'refund.made', steps: [{ id: 'x', type: 'webhook', url: `${receiver.url}/x` }] } });
  const notifiedBefore = receiver.received.filter((r) => r.path === '/notify').length;

  const idle = await call(rt.url, 'POST', `/organizations/${ORG}/events/${originalId}/replay`, { token: key, json: { side_effects: 'run', workflow_ids: [receiptId, other.body.workflow.id] } });
  assert.deepEqual([idle.status, idle.body.error?.code, idle.body.error?.field], [422, 'workflow_not_listening', 'workflow_ids'], idle.text);
  assert.match(idle.body.error.message, /listening for "payment.succeeded"/);
  const empty = await call(rt.url, 'POST', `/organizations/${ORG}/events/${originalId}/replay`, { token: key, json: { side_effects: 'run', workflow_ids: [] } });
  assert.deepEqual([empty.status, empty.body.error?.field], [400, 'workflow_ids']);

  const headers = { 'idempotency-key': 'redo-receipt-1' };
  const replay = await call(rt.url, 'POST', `/organizations/${ORG}/events/${originalId}/replay`, { token: key, headers, json: { side_effects: 'run', workflow_ids: [receiptId] } });
  assert.equal(replay.status, 202, replay.text);
  assert.deepEqual(replay.body.event.replay_workflow_ids, [receiptId]);
  const reactions = await eventually('the one run to complete', () => reactionsOf(replay.body.event.id), (r) => r.length === 1 && r[0]!.state === 'completed');
  assert.equal((reactions[0] as unknown as { workflow_id: string }).workflow_id, receiptId);
  assert.equal(receiver.received.filter((r) => r.path === '/notify').length, notifiedBefore, 'the charge was not sent again');
  assert.equal(receiver.received.filter((r) => r.path === '/receipt' && r.headers['idempotency-key'] === `${reactions[0]!.run_id}:mail`).length, 1);
  const otherChoice = await call(rt.url, 'POST', `/organizations/${ORG}/events/${originalId}/replay`, { token: key, headers, json: { side_effects: 'run' } });
  assert.deepEqual([otherChoice.status, otherChoice.body.error?.code], [409, 'idempotency_key_reused'], 'the key remembers the workflows chosen');
  assert.equal((await call(rt.url, 'DELETE', `/organizations/${ORG}/workflows/${receiptId}`, { token: key })).status, 204);
});

test('transport replay explains dedup, schema and routing, and creates nothing', async () => {
  const before = (await call(rt.url, 'GET', `/organizations/${ORG}/events?limit=500`, { token: key })).body.events.length;
  const report = await call(rt.url, 'POST', `/organizations/${ORG}/events/${originalId}/transport-replay`, { token: key });
  assert.equal(report.status, 200, report.text);
  assert.equal(report.body.report.parsed, true);
  assert.deepEqual(report.body.report.dedup, { provider_event_id: 'msg-replay', duplicate_of: originalId });
  assert.deepEqual(report.body.report.would_answer, { status: 409, code: 'duplicate_event' });
  assert.equal(report.body.report.environment, 'production');
  assert.deepEqual(report.body.report.schema, { ok: true });
  assert.equal(report.body.report.would_trigger.length, 1);
  assert.equal(report.body.report.would_trigger[0].name, 'charge');
  const afterCount = (await call(rt.url, 'GET', `/organizations/${ORG}/events?limit=500`, { token: key })).body.events.length;
  assert.equal(afterCount, before);
  const apiEvent = await call(rt.url, 'POST', `/organizations/${ORG}/events`, { token: key, json: { type: 'x.y', payload: {}, id: 'no-recording' } });
  assert.equal(apiEvent.status, 202);
  assert.equal((await call(rt.url, 'POST', `/organizations/${ORG}/events/no-recording/transport-replay`, { token: key })).status, 409);
});

test('transport replay of a delivery over the recording cap checks the whole stored payload against today\'s schema', async () => {
  const created = await call(rt.url, 'POST', `/organizations/${ORG}/sources`, { token: key, json: { name: 'big', secrets: [SECRET], event_types: { 'big.thing': { type: 'object', properties: { amount: { type: 'number' } } } } } });
  assert.equal(created.status, 201, created.text);
  const body = JSON.stringify({ type: 'big.thing', amount: 5, filler: 'x'.repeat(70 * 1024) });
  const sent = await call(rt.url, 'POST', `/hooks/${ORG}/big`, { body, headers: signStandard(SECRET, 'msg-big', Math.floor(Date.now() / 1000), body) });
  assert.equal(sent.status, 204, sent.text);
  const id = sent.headers.get('sluice-event-id')!;
  const patched = await call(rt.url, 'PATCH', `/organizations/${ORG}/sources/big`, { token: key, json: { event_types: { 'big.thing': { type: 'object', properties: { amount: { type: 'string' } } } } } });
  assert.equal(patched.status, 200, patched.text);
  const { report } = (await call(rt.url, 'POST', `/organizations/${ORG}/events/${id}/transport-replay`, { token: key })).body;
  assert.equal(report.parsed, true);
  assert.equal(report.schema.ok, false);
  assert.equal(report.schema.field, 'payload.amount');
  assert.deepEqual(report.would_answer, { status: 422, code: 'schema_validation_failed' });
});

test('transport replay checks the body as ingest read it, whole or past the recording cap: a number JSON cannot hold (1e400) is checked as sent, not as null; a byte-order mark is dropped', async () => {
  const schema = { type: 'object', properties: { amount: { type: 'number' } } };
  const created = await call(rt.url, 'POST', `/organizations/${ORG}/sources`, { token: key, json: { name: 'huge', secrets: [SECRET], event_types: { 'huge.amount': schema } } });
  assert.equal(created.status, 201, created.text);
  for (const [messageId, filler, bom] of [['msg-huge', '', ''], ['msg-huge-long', 'x'.repeat(70 * 1024), ''], ['msg-huge-bom', '', '\uFEFF']] as const) {
    // A byte-order mark is dropped as ingest drops it.
    const body = `${bom}{"type":"huge.amount","amount":1e400,"filler":"${filler}"}`;
    const sent = await call(rt.url, 'POST', `/hooks/${ORG}/huge`, { body, headers: signStandard(SECRET, messageId, Math.floor(Date.now() / 1000), body) });
    assert.equal(sent.status, 204, sent.text);
    const report = await transportReport(sent.headers.get('sluice-event-id')!);
    assert.deepEqual([report.schema, report.would_answer], [{ ok: true }, { status: 409, code: 'duplicate_event' }], messageId);
  }
});

/** Creates a source and delivers one signed webhook to it; the stored event's id. */
async function deliverOnce(source: string, body: string, messageId: string): Promise<string> {
  assert.equal((await call(rt.url, 'POST', `/organizations/${ORG}/sources`, { token: key, json: { name: source, secrets: [SECRET] } })).status, 201);
  const sent = await call(rt.url, 'POST', `/hooks/${ORG}/${source}`, { body, headers: signStandard(SECRET, messageId, Math.floor(Date.now() / 1000), body) });
  assert.equal(sent.status, 204, sent.text);
  return sent.headers.get('sluice-event-id')!;
}

/** The transport replay report of an event. */
async function transportReport(eventId: string): Promise<Record<string, any>> {
  return (await call(rt.url, 'POST', `/organizations/${ORG}/events/${eventId}/transport-replay`, { token: key })).body.report;
}

test('transport replay after the source was deleted: ingest would answer 404, no schema check, nothing triggered', async () => {
  const eventId = await deliverOnce('gone', JSON.stringify({ type: 'payment.succeeded', amount: 5 }), 'msg-gone');
  assert.equal((await call(rt.url, 'DELETE', `/organizations/${ORG}/sources/gone`, { token: key })).status, 204);
  const report = await transportReport(eventId);
  assert.deepEqual(report.would_answer, { status: 404, code: 'not_found' });
  assert.deepEqual(report.schema, { ok: null, reason: 'source_deleted' });
  assert.deepEqual(report.would_trigger, []);
});

test('transport replay answers 413 when the source\'s body limit has since dropped below the recorded body', async () => {
  const eventId = await deliverOnce('shrunk', JSON.stringify({ type: 'payment.succeeded', filler: 'x'.repeat(3000) }), 'msg-shrunk');
  assert.equal((await call(rt.url, 'PATCH', `/organizations/${ORG}/sources/shrunk`, { token: key, json: { body_limit_bytes: 1024 } })).status, 200);
  const report = await transportReport(eventId);
  assert.deepEqual(report.would_answer, { status: 413, code: 'payload_too_large' });
});

test('transport replay of a delivery whose source now lives in the other environment explains it there: its schema, its workflows', async () => {
  const eventId = await deliverOnce('moved', JSON.stringify({ type: 'payment.succeeded', amount: 5 }), 'msg-moved');
  assert.equal((await call(rt.url, 'DELETE', `/organizations/${ORG}/sources/moved`, { token: key })).status, 204);
  const sandboxSource = { name: 'moved', environment: 'sandbox', secrets: [SECRET], event_types: { 'payment.succeeded': { type: 'object', required: ['zzz'] } } };
  assert.equal((await call(rt.url, 'POST', `/organizations/${ORG}/sources`, { token: key, json: sandboxSource })).status, 201);
  const sandboxFlow = { name: 'charge-sandbox', environment: 'sandbox', trigger_event: 'payment.succeeded', steps: [{ id: 'notify', type: 'webhook', url: `${receiver.url}/sandbox` }] };
  assert.equal((await call(rt.url, 'POST', `/organizations/${ORG}/workflows`, { token: key, json: sandboxFlow })).status, 201);
  const report = await transportReport(eventId);
  assert.equal(report.environment, 'sandbox');
  assert.deepEqual(report.would_answer, { status: 422, code: 'schema_validation_failed' });
  assert.deepEqual(report.would_trigger.map((w: { name: string }) => w.name), ['charge-sandbox'], 'the sandbox workflow, not the production one');
});

test('transport replay of a delivery whose source is now a sandbox one, in an org whose plan has no sandbox: 402, or 413 first when over its limit, as ingest answers', async () => {
  const org = 'acct-replay-downgraded';
  const orgKey = await createOrg(rt.url, ADMIN_TOKEN, org, 'pro');
  const asOrg = { token: orgKey };
  const body = JSON.stringify({ type: 'payment.succeeded', amount: 5, note: 'x'.repeat(2000) });
  const send = (source: string, id: string) => call(rt.url, 'POST', `/hooks/${org}/${source}`, { body, headers: signStandard(SECRET, id, Math.floor(Date.now() / 1000), body) });
  const delivered = new Map<string, string>();
  for (const [source, sandboxLimit] of [['pay', 1024 * 1024], ['pay-small', 1024]] as const) {
    assert.equal((await call(rt.url, 'POST', `/organizations/${org}/sources`, { ...asOrg, json: { name: source, secrets: [SECRET] } })).status, 201);
    const sent = await send(source, `msg-${source}`);
    assert.equal(sent.status, 204, sent.text);
    delivered.set(source, sent.headers.get('sluice-event-id')!);
    assert.equal((await call(rt.url, 'DELETE', `/organizations/${org}/sources/${source}`, asOrg)).status, 204);
    const recreated = { name: source, environment: 'sandbox', secrets: [SECRET], body_limit_bytes: sandboxLimit };
    assert.equal((await call(rt.url, 'POST', `/organizations/${org}/sources`, { ...asOrg, json: recreated })).status, 201);
  }
  assert.equal((await call(rt.url, 'PATCH', `/organizations/${org}`, { token: ADMIN_TOKEN, json: { plan: 'starter' } })).status, 200);

  for (const [source, status, code] of [['pay', 402, 'sandbox_disabled'], ['pay-small', 413, 'payload_too_large']] as const) {
    assert.equal((await send(source, `msg-${source}-again`)).status, status, `what ingest answers today (${source})`);
    const report = await call(rt.url, 'POST', `/organizations/${org}/events/${delivered.get(source)}/transport-replay`, asOrg);
    assert.equal(report.status, 200, report.text);
    assert.deepEqual(report.body.report.would_answer, { status, code });
  }
});
