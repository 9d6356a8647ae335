// The client's types say what the server sends. At compile time (tsc --noEmit, part of the test
// command) each client type must have exactly the fields of the server's own type; at run time a
// real runtime's answers (a webhook event with its recording, a run failed non_retryable, a replay) must
// have exactly those fields, each of the kind the client type declares.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import type { StoredEvent, Recording } from '../../runtime/events/event-record.ts';
import type { RunSummary as ServerRunSummary } from '../../runtime/runs/run-summary.ts';
import { SluiceClient, type AttemptError, type EventDetails, type FailedEvent, type EventRecording, type EventReplay, type ReplayMade, type Run, type RunAttempt, type RunStep, type RunSummary, type SluiceEvent } from '../../kits/client/index.ts';
import type { AttemptView, RunView, StepView } from '../../actors/run-view.ts';
import type { ReplayEntry } from '../../runtime/events/replay-index.ts';
import { call, createOrg, newStandardSecret, signStandard } from '../helpers/http.ts';
import { eventually, startReceiver, type Receiver } from '../helpers/receiver.ts';
import { ADMIN_TOKEN, startRuntime, type TestRuntime } from '../helpers/runtime.ts';

/** true when A and B have the same keys; an index signature (every key `unknown`) never does. */
type SameKeys<A, B> = [Exclude<keyof A, keyof B>, Exclude<keyof B, keyof A>] extends [never, never] ? true : false;

/** How a field's value looks in JSON. */
type Kind = 'string' | 'number' | 'number|null' | 'boolean' | 'string|null' | 'object' | 'object|null' | 'array' | 'array|null' | 'any';

const EVENT = {
  id: 'string', org_id: 'string', type: 'string', payload: 'any', environment: 'string', source: 'string',
  provider_event_id: 'string|null', received_at: 'string', received_at_ms: 'number', correlation_id: 'string',
  causation_id: 'string|null', depth: 'number', replay_skip_side_effects: 'boolean', replay_workflow_ids: 'array|null',
} as const satisfies Record<keyof SluiceEvent, Kind>;
const RECORDING = {
  method: 'string', path: 'string', headers: 'object', body: 'string', body_bytes: 'number', body_truncated: 'boolean',
  verifier: 'object|null', received_at: 'string',
} as const satisfies Record<keyof EventRecording, Kind>;
const RUN = {
  run_id: 'string', workflow_id: 'string', workflow_version: 'number', event_id: 'string', environment: 'string',
  state: 'string', error: 'object|null', created_at: 'string', updated_at: 'string',
} as const satisfies Record<keyof RunSummary, Kind>;
const RUN_ERROR = { code: 'string', message: 'string', step_id: 'string', reason: 'string' } as const satisfies Record<keyof NonNullable<RunSummary['error']>, Kind>;
const DETAILS = { event: 'object', recording: 'object|null', reactions: 'array', replays: 'array' } as const satisfies Record<keyof EventDetails, Kind>;
const REPLAY = { event_id: 'string', received_at: 'string', received_at_ms: 'number', side_effects: 'string', workflow_ids: 'array|null' } as const satisfies Record<keyof EventReplay, Kind>;
const FULL_RUN = {
  run_id: 'string', org_id: 'string', event_id: 'string', workflow_id: 'string', workflow_version: 'number', environment: 'string', state: 'string',
  skip_side_effects: 'boolean', current_step: 'object|null', fence: 'number', retry_at: 'string|null', wake_at: 'string|null', error: 'object|null',
  cancel_reason: 'string|null', resumes: 'array', created_at: 'string', updated_at: 'string', steps: 'array',
} as const satisfies Record<keyof Run, Kind>;
const STEP = { id: 'string', index: 'number', type: 'string', status: 'string', result: 'any', attempts: 'array', earlier_attempts_dropped: 'number' } as const satisfies Record<keyof RunStep, Kind>;
const ATTEMPT = {
  attempt: 'number', fence: 'number', claimed_at: 'string', started_at: 'string|null', ended_at: 'string|null', outcome: 'string', error: 'object|null',
  evidence: 'any', after_cancel: 'object|null',
} as const satisfies Record<keyof RunAttempt, Kind>;
const ATTEMPT_ERROR = { code: 'string', message: 'string', retryable: 'boolean', retry_after_ms: 'number|null' } as const satisfies Record<keyof AttemptError, Kind>;
const FAILED = { event: 'object', runs: 'array', failed_runs: 'number' } as const satisfies Record<keyof FailedEvent, Kind>;
const REPLAY_MADE = { event: 'object', reactions: 'array' } as const satisfies Record<Exclude<keyof ReplayMade, 'idempotent_replayed'>, Kind>;
const REPLAY_MADE_BEFORE = { ...REPLAY_MADE, idempotent_replayed: 'boolean' } as const satisfies Record<keyof ReplayMade, Kind>;

// Compile-time checks: the client's types against the server's, and against the shapes above.
true satisfies SameKeys<SluiceEvent, StoredEvent>;
true satisfies SameKeys<EventRecording, Recording>;
true satisfies SameKeys<RunSummary, ServerRunSummary>;
true satisfies SameKeys<NonNullable<RunSummary['error']>, NonNullable<ServerRunSummary['error']>>;
true satisfies SameKeys<SluiceEvent, typeof EVENT>;
true satisfies SameKeys<EventRecording, typeof RECORDING>;
true satisfies SameKeys<RunSummary, typeof RUN>;
true satisfies SameKeys<EventDetails, typeof DETAILS>;
true satisfies SameKeys<EventReplay, ReplayEntry>;
true satisfies SameKeys<EventReplay, typeof REPLAY>;
true satisfies SameKeys<ReplayMade, typeof REPLAY_MADE_BEFORE>;
true satisfies SameKeys<Run, RunView>;
true satisfies SameKeys<RunStep, StepView>;
true satisfies SameKeys<RunAttempt, AttemptView>;
true satisfies SameKeys<NonNullable<RunAttempt['after_cancel']>, NonNullable<AttemptView['after_cancel']>>;
true satisfies SameKeys<NonNullable<Run['current_step']>, NonNullable<RunView['current_step']>>;
true satisfies SameKeys<Run['resumes'][number], RunView['resumes'][number]>;
true satisfies SameKeys<Run, typeof FULL_RUN>;
true satisfies SameKeys<RunStep, typeof STEP>;
true satisfies SameKeys<RunAttempt, typeof ATTEMPT>;
true satisfies SameKeys<AttemptError, typeof ATTEMPT_ERROR>;

function kindOf(value: unknown): string {
  if (value === null) return 'null';
  return Array.isArray(value) ? 'array' : typeof value;
}

/** `value` has exactly the fields of `shape`, each of its kind. */
function assertShape(what: string, value: unknown, shape: Readonly<Record<string, Kind>>): void {
  assert.equal(kindOf(value), 'object', what);
  const record = value as Record<string, unknown>;
  assert.deepEqual(Object.keys(record).sort(), Object.keys(shape).sort(), `${what}: the fields the server sends`);
  for (const [field, kind] of Object.entries(shape)) {
    if (kind !== 'any') assert.ok(kind.split('|').includes(kindOf(record[field])), `${what}.${field} is ${kindOf(record[field])}, typed ${kind}`);
  }
}

const ORG = 'acct-client-types';
let rt: TestRuntime;
let receiver: Receiver;
let key: string;

before(async () => {
  rt = await startRuntime();
  receiver = await startReceiver([{ status: 400, body: '{"error":"no"}' }]);
  key = await createOrg(rt.url, ADMIN_TOKEN, ORG);
});
after(async () => {
  await rt.close();
  await receiver.close();
});

test('getEvent, getRun, failedEvents and replayEvent answer the fields their client types declare (a failed run\'s error has its reason)', async () => {
  const secret = newStandardSecret();
  assert.equal((await call(rt.url, 'POST', `/organizations/${ORG}/sources`, { token: key, json: { name: 'pay', secrets: [secret] } })).status, 201);
  const wf = await call(rt.url, 'POST', `/organizations/${ORG}/workflows`, { token: key, json: { name: 'notify', trigger_event: 'payment.succeeded', steps: [{ id: 'post', type: 'webhook', url: `${receiver.url}/paid` }] } });
  assert.equal(wf.status, 201, wf.text);
  const body = '{"type":"payment.succeeded","data":{"amount":4200}}';
  const hook = await fetch(`${rt.url}/hooks/${ORG}/pay`, { method: 'POST', headers: signStandard(secret, 'msg_1', Math.floor(Date.now() / 1000), body), body });
  assert.equal(hook.status, 204, await hook.text());
  const eventId = hook.headers.get('sluice-event-id') ?? '';

  const client = new SluiceClient({ url: rt.url, apiKey: key, org: ORG });
  const details = await eventually('the run failed', () => client.getEvent(eventId), (d) => d.reactions[0]?.state === 'failed');
  assertShape('getEvent', details, DETAILS);
  assertShape('event', details.event, EVENT);
  assertShape('recording', details.recording, RECORDING);
  const run = details.reactions[0];
  assertShape('run', run, RUN);
  assertShape('run.error', run?.error, RUN_ERROR);
  assert.equal(run?.error?.reason, 'non_retryable');
  let listedFailed = 0;
  for await (const failed of client.failedEvents()) {
    listedFailed++;
    assertShape('failedEvents()', failed, FAILED);
    assertShape('failedEvents().event', failed.event, EVENT);
    assertShape('failedEvents().runs[0]', failed.runs[0], RUN);
    assert.equal(failed.failed_runs, 1);
  }
  assert.equal(listedFailed, 1, 'the one event with a failed run');
  const { run: full } = await client.getRun(run!.run_id);
  assertShape('getRun', full, FULL_RUN);
  assertShape('getRun().error', full.error, RUN_ERROR);
  assertShape('getRun().steps[0]', full.steps[0], STEP);
  assertShape('getRun().steps[0].attempts[0]', full.steps[0]?.attempts[0], ATTEMPT);
  assertShape('getRun().steps[0].attempts[0].error', full.steps[0]?.attempts[0]?.error, ATTEMPT_ERROR);

  for await (const listed of client.runs({ pageSize: 1 })) assertShape('runs()', listed, RUN);
  const sent = await client.sendEvent({ type: 'note.added', id: 'note-1', payload: {} });
  const viaApi = await client.getEvent(sent.event_id);
  assertShape('an API event', viaApi.event, EVENT);
  assert.equal(viaApi.recording, null);
  assert.equal(viaApi.event.provider_event_id, 'note-1');

  const replay = await client.replayEvent(eventId, { sideEffects: 'skip' });
  assertShape('replayEvent', replay, REPLAY_MADE);
  assertShape('replayEvent().event', replay.event, EVENT);
  assert.equal(replay.reactions.length, 1, 'the replay started the one run listening');
  assertShape('replayEvent().reactions[0]', replay.reactions[0], RUN);
  const replayed = await client.getEvent(eventId);
  assert.equal(replayed.replays.length, 1);
  assertShape('getEvent().replays[0]', replayed.replays[0], REPLAY);
  assert.equal(replayed.replays[0]?.event_id, replay.event.id);
  const keyed = await client.replayEvent(eventId, { sideEffects: 'skip', idempotencyKey: 'types-1' });
  assertShape('replayEvent (keyed)', keyed, REPLAY_MADE);
  const again = await client.replayEvent(eventId, { sideEffects: 'skip', idempotencyKey: 'types-1' });
  assertShape('replayEvent (keyed, again)', again, REPLAY_MADE_BEFORE);
  assert.deepEqual([again.event.id, again.idempotent_replayed], [keyed.event.id, true]);
});
