// Durable runs end to end in one process: events trigger workflows, webhook steps reach a local
// receiver signed and keyed, retries and delays follow the injected clock, live rooms see it all.

import assert from 'node:assert/strict';
import { createHmac } from 'node:crypto';
import { after, before, test } from 'node:test';
import { ManualClock } from '../../runtime/clock.ts';
import { ADMIN_TOKEN, startRuntime, type TestRuntime } from '../helpers/runtime.ts';
import { call, createOrg } from '../helpers/http.ts';
import { connectLive } from '../helpers/live-client.ts';
import { eventually, startReceiver, type Receiver } from '../helpers/receiver.ts';
import { assertRetryDue } from '../helpers/retry-due.ts';

const clock = new ManualClock(Date.UTC(2026, 10, 30, 9, 0, 0));
let rt: TestRuntime;
let key: string;
let receiver: Receiver;
const ORG = 'acct-runs';

before(async () => {
  rt = await startRuntime({ clock });
  key = await createOrg(rt.url, ADMIN_TOKEN, ORG);
  receiver = await startReceiver();
});
after(async () => {
  await rt.close();
  await receiver.close();
});

async function workflow(body: Record<string, unknown>): Promise<{ id: string; secret: string; steps: Array<{ id: string }> }> {
  const created = await call(rt.url, 'POST', `/organizations/${ORG}/workflows`, { token: key, json: body });
  assert.equal(created.status, 201, created.text);
  return { id: created.body.workflow.id, secret: created.body.signing_secret, steps: created.body.workflow.steps };
}

async function sendEvent(type: string, payload: unknown, id: string): Promise<string> {
  const sent = await call(rt.url, 'POST', `/organizations/${ORG}/events`, { token: key, json: { type, payload, id } });
  assert.equal(sent.status, 202, sent.text);
  return id;
}

async function reactions(eventId: string): Promise<Array<{ run_id: string; state: string }>> {
  const event = await call(rt.url, 'GET', `/organizations/${ORG}/events/${eventId}`, { token: key });
  return event.body.reactions;
}

async function runInState(runId: string, state: string) {
  return eventually(`run ${runId} ${state}`, async () => (await call(rt.url, 'GET', `/organizations/${ORG}/runs/${runId}`, { token: key })).body.run, (run) => run?.state === state);
}

/** Waits until the engine has armed the run's timer for `at` (it arms right after the snapshot is flushed). */
async function armed(runId: string, at: number): Promise<void> {
  await armedIn(ORG, runId, at);
}

async function armedIn(org: string, runId: string, at: number): Promise<void> {
  await eventually(`timer of ${runId}`, () => rt.runtime.engine.timerDueAt(org, runId), (due) => due === at);
}

async function onlyRun(eventId: string): Promise<string> {
  const list = await eventually('a reaction', () => reactions(eventId), (r) => r.length === 1);
  return list[0]!.run_id;
}

test('an event runs its workflow: signed, keyed webhook; completed run; live updates; reactions', async () => {
  receiver.script([{ status: 200, body: '{"ok":true}' }]);
  const wf = await workflow({ name: 'notify', trigger_event: 'payment.succeeded', channel: 'payments', steps: [{ id: 'notify', type: 'webhook', url: `${receiver.url}/hook` }] });
  const live = await connectLive(rt.url, ORG, { token: key });
  const before = receiver.received.length;
  const eventId = await sendEvent('payment.succeeded', { amount: 42 }, 'evt-happy');
  const runId = await onlyRun(eventId);
  const run = await runInState(runId, 'completed');
  assert.equal(run.workflow_id, wf.id);
  assert.equal(run.workflow_version, 1);
  assert.equal(run.steps[0].attempts.length, 1);
  assert.equal(run.steps[0].attempts[0].outcome, 'succeeded');
  assert.equal(run.steps[0].attempts[0].evidence.status, 200);
  const { claimed_at: claimedAt, started_at: startedAt, ended_at: endedAt } = run.steps[0].attempts[0];
  assert.ok(startedAt !== null && claimedAt <= startedAt && startedAt <= endedAt, `claimed ${claimedAt}, started ${startedAt}, ended ${endedAt}`);

  const request = receiver.received[before]!;
  const stepKey = `${runId}:notify`;
  assert.equal(request.headers['webhook-id'], stepKey);
  assert.equal(request.headers['idempotency-key'], stepKey);
  const payload = JSON.parse(request.body);
  assert.deepEqual(payload.event.payload, { amount: 42 });
  assert.equal(payload.run.id, runId);
  const expected = createHmac('sha256', Buffer.from(wf.secret.slice(6), 'base64')).update(`${stepKey}.${request.headers['webhook-timestamp']}.${request.body}`).digest('base64');
  assert.equal(request.headers['webhook-signature'], `v1,${expected}`);

  await live.waitFor(() => live.updates().some((u) => u.run_id === runId && u.state === 'completed'), 'completed update');
  const states = live.updates().filter((u) => u.run_id === runId).map((u) => u.state);
  assert.deepEqual(states, ['queued', 'running', 'completed']);
  assert.ok(live.updates().every((u) => u.channel === 'payments'));
  assert.equal((await reactions(eventId))[0]!.state, 'completed');
  live.close();
});

test('a retryable failure backs off on the injected clock, then retries with the same key and a higher fence', async () => {
  receiver.script([{ status: 503 }, { status: 429, headers: { 'retry-after': '7' } }, { status: 200 }]);
  await workflow({ name: 'retry', trigger_event: 'order.retry', steps: [{ id: 'call', type: 'webhook', url: receiver.url, retry: { max_retries: 3, initial_ms: 1000, max_ms: 60000 } }] });
  const before = receiver.received.length;
  const live = await connectLive(rt.url, ORG, { token: key });
  const runId = await onlyRun(await sendEvent('order.retry', {}, 'evt-retry'));
  const first = await runInState(runId, 'backoff');
  // A watcher hears why the run backs off at once, not only once retries run out.
  await live.waitFor(() => live.updates().some((u) => u.run_id === runId && u.state === 'backoff'), 'backoff update');
  assert.deepEqual(live.updates().filter((u) => u.run_id === runId).map((u) => [u.state, u.error]), [
    ['queued', ''],
    ['running', ''],
    ['backoff', 'webhook_http_503: The receiver answered 503.'],
  ]);
  live.close();
  const due = assertRetryDue(Date.parse(first.retry_at), clock.now(), 1000);
  await armed(runId, due);
  clock.advance(due - 1 - clock.now());
  assert.equal(rt.runtime.engine.timers.fireDue(), 0, 'nothing fires before its time');
  clock.advance(1);
  assert.equal(rt.runtime.engine.timers.fireDue(), 1);
  const second = await eventually('second backoff', async () => (await call(rt.url, 'GET', `/organizations/${ORG}/runs/${runId}`, { token: key })).body.run, (r) => r.steps[0].attempts.length === 2 && r.state === 'backoff');
  assert.equal(Date.parse(second.retry_at), clock.now() + 7000, 'Retry-After wins over the schedule');
  await armed(runId, clock.now() + 7000);
  clock.advance(7000);
  rt.runtime.engine.timers.fireDue();
  const done = await runInState(runId, 'completed');
  const attempts = done.steps[0].attempts;
  assert.deepEqual(attempts.map((a: { outcome: string }) => a.outcome), ['failed', 'failed', 'succeeded']);
  assert.ok(attempts[0].fence < attempts[1].fence && attempts[1].fence < attempts[2].fence, 'fences strictly increase');
  const sent = receiver.received.slice(before);
  assert.deepEqual(sent.map((r) => r.headers['idempotency-key']), [`${runId}:call`, `${runId}:call`, `${runId}:call`]);
  assert.deepEqual(sent.map((r) => r.headers['sluice-attempt']), ['1', '2', '3'], 'the attempt rides in a header');
  // A receiver that keeps the first answer per key refuses the same key with another body (Stripe, the IETF draft): every attempt sends the same bytes.
  assert.equal(new Set(sent.map((r) => r.body)).size, 1, 'one body under one key');
});

test('a non-retryable failure fails the run, lists the event as failed, and resume skips completed steps', async () => {
  receiver.script([{ status: 200 }, { status: 400, body: '{"error":"bad"}' }]);
  await workflow({
    name: 'two-steps',
    trigger_event: 'order.two',
    steps: [
      { id: 'first', type: 'webhook', url: `${receiver.url}/first` },
      { id: 'second', type: 'webhook', url: `${receiver.url}/second` },
    ],
  });
  const before = receiver.received.length;
  // Watching from before the event: the failed update is published once its write is durable, which a
  // GET can see first, so a watcher that joined after the GET might or might not hear it.
  const live = await connectLive(rt.url, ORG, { token: key });
  const eventId = await sendEvent('order.two', {}, 'evt-two');
  const runId = await onlyRun(eventId);
  const failed = await runInState(runId, 'failed');
  assert.equal(failed.error.code, 'webhook_http_400');
  assert.equal(failed.error.step_id, 'second');
  const triage = await call(rt.url, 'GET', `/organizations/${ORG}/failed-events`, { token: key });
  assert.ok(triage.body.failed_events.some((f: { event: { id: string } }) => f.event.id === eventId));

  assert.deepEqual(failed.resumes, [], 'never resumed yet');
  receiver.script([{ status: 200 }]);
  const resumed = await call(rt.url, 'POST', `/organizations/${ORG}/runs/${runId}/resume`, { token: key });
  assert.equal(resumed.status, 202);
  const completed = await runInState(runId, 'completed');
  assert.equal(completed.error, null);
  await live.waitFor(() => live.updates().some((u) => u.run_id === runId && u.state === 'completed'), 'completed update');
  const heard = live.updates().filter((u) => u.run_id === runId).map((u) => [u.state, u.error]);
  const failedAt = heard.findIndex(([state]) => state === 'failed');
  assert.deepEqual(heard[failedAt], ['failed', 'webhook_http_400: The receiver answered 400; not retried.']);
  // Queued again by the resume, not backing off: the attempt that failed before it is no error of the run now.
  assert.deepEqual(heard.slice(failedAt + 1), [['queued', ''], ['running', ''], ['completed', '']]);
  live.close();
  assert.equal(completed.resumes.length, 1, 'the resume is told, with why the run had failed');
  assert.deepEqual(completed.resumes[0].error, failed.error);
  assert.ok(Date.parse(completed.resumes[0].at) >= Date.parse(failed.updated_at));
  const paths = receiver.received.slice(before).map((r) => r.path);
  assert.deepEqual(paths, ['/first', '/second', '/second'], 'the completed first step was not sent again');
  const after = await call(rt.url, 'GET', `/organizations/${ORG}/failed-events`, { token: key });
  assert.ok(!after.body.failed_events.some((f: { event: { id: string } }) => f.event.id === eventId));
  assert.equal((await call(rt.url, 'POST', `/organizations/${ORG}/runs/${runId}/resume`, { token: key })).status, 409);
});

test('of two resumes (or two cancels) sent together, one takes effect and the other is a 409, never two successes', async () => {
  receiver.script([{ status: 400 }]);
  await workflow({ name: 'racing', trigger_event: 'order.racing', steps: [{ id: 'only', type: 'webhook', url: `${receiver.url}/racing` }] });
  const runId = await onlyRun(await sendEvent('order.racing', {}, 'evt-racing'));
  await runInState(runId, 'failed');
  const resume = () => call(rt.url, 'POST', `/organizations/${ORG}/runs/${runId}/resume`, { token: key });
  const resumes = await Promise.all([resume(), resume()]);
  assert.deepEqual(resumes.map((r) => r.status).sort(), [202, 409], resumes.map((r) => r.text).join('\n'));
  assert.equal(resumes.find((r) => r.status === 409)!.body.error.code, 'run_not_failed');
  await runInState(runId, 'failed');
  const cancel = () => call(rt.url, 'POST', `/organizations/${ORG}/runs/${runId}/cancel`, { token: key });
  const cancels = await Promise.all([cancel(), cancel()]);
  assert.deepEqual(cancels.map((r) => r.status).sort(), [200, 409], cancels.map((r) => r.text).join('\n'));
  assert.match(cancels.find((r) => r.status === 409)!.body.error.message, /already cancelled/);
});

test('exhausted retries fail the run with retries_exhausted', async () => {
  receiver.script([{ status: 500 }]);
  await workflow({ name: 'exhaust', trigger_event: 'order.exhaust', steps: [{ id: 'x', type: 'webhook', url: receiver.url, retry: { max_retries: 1, initial_ms: 10, max_ms: 10 } }] });
  const runId = await onlyRun(await sendEvent('order.exhaust', {}, 'evt-exhaust'));
  const backoff = await runInState(runId, 'backoff');
  const due = assertRetryDue(Date.parse(backoff.retry_at), clock.now(), 10);
  await armed(runId, due);
  clock.advance(due - clock.now());
  rt.runtime.engine.timers.fireDue();
  const failed = await runInState(runId, 'failed');
  assert.equal(failed.error.reason, 'retries_exhausted');
  assert.equal(failed.steps[0].attempts.length, 2);
});

test('a delay step waits for the clock, not for wall time', async () => {
  receiver.script([{ status: 200 }]);
  await workflow({ name: 'later', trigger_event: 'order.later', steps: [{ id: 'wait', type: 'delay', duration: 'PT1M' }, { id: 'ping', type: 'webhook', url: `${receiver.url}/later` }] });
  const before = receiver.received.length;
  const runId = await onlyRun(await sendEvent('order.later', {}, 'evt-later'));
  const delaying = await runInState(runId, 'delaying');
  assert.equal(Date.parse(delaying.wake_at), clock.now() + 60_000);
  await armed(runId, clock.now() + 60_000);
  clock.advance(59_999);
  assert.equal(rt.runtime.engine.timers.fireDue(), 0);
  clock.advance(1);
  assert.equal(rt.runtime.engine.timers.fireDue(), 1);
  await runInState(runId, 'completed');
  assert.deepEqual(receiver.received.slice(before).map((r) => r.path), ['/later']);
});

test('cancel stops a run waiting in backoff; webhook steps may not call the runtime itself', async () => {
  receiver.script([{ status: 503 }]);
  await workflow({ name: 'cancel-me', trigger_event: 'order.cancel', steps: [{ id: 'x', type: 'webhook', url: receiver.url, retry: { max_retries: 5, initial_ms: 60000, max_ms: 60000 } }] });
  const runId = await onlyRun(await sendEvent('order.cancel', {}, 'evt-cancel'));
  await runInState(runId, 'backoff');
  const cancelled = await call(rt.url, 'POST', `/organizations/${ORG}/runs/${runId}/cancel`, { token: key });
  assert.equal(cancelled.status, 200);
  assert.equal(cancelled.body.run.state, 'cancelled');
  clock.advance(60_000);
  rt.runtime.engine.timers.fireDue();
  const afterCancel = await runInState(runId, 'cancelled');
  assert.equal(afterCancel.steps[0].attempts.length, 1);
  assert.equal(afterCancel.steps[0].status, 'cancelled', 'the step under way (waiting to retry) ends cancelled');

  await workflow({ name: 'self', trigger_event: 'order.self', steps: [{ id: 'loop', type: 'webhook', url: `${rt.url}/healthz` }] });
  const selfRun = await onlyRun(await sendEvent('order.self', {}, 'evt-self'));
  const refused = await runInState(selfRun, 'failed');
  assert.equal(refused.error.code, 'self_request_refused');
  assert.equal(refused.steps[0].attempts[0].started_at, null, 'a refused request never started');
});

test('a run cancelled while its webhook is out keeps what the receiver answered afterwards; the run stays cancelled', async () => {
  let answer!: () => void;
  receiver.script([{ status: 200, body: '{"charged":true}', after: new Promise<void>((resolve) => (answer = resolve)) }]);
  await workflow({ name: 'cancel-in-flight', trigger_event: 'order.in_flight', steps: [{ id: 'charge', type: 'webhook', url: `${receiver.url}/charge` }, { id: 'email', type: 'webhook', url: `${receiver.url}/email` }] });
  const runId = await onlyRun(await sendEvent('order.in_flight', {}, 'evt-in-flight'));
  await eventually('the charge request out', () => receiver.received.filter((r) => r.path === '/charge').length, (n) => n === 1);
  const cancelled = await call(rt.url, 'POST', `/organizations/${ORG}/runs/${runId}/cancel`, { token: key });
  assert.equal(cancelled.status, 200);
  const [charge, email] = cancelled.body.run.steps;
  assert.equal(charge.status, 'cancelled');
  assert.equal(charge.attempts[0].outcome, 'cancelled');
  assert.equal(charge.attempts[0].after_cancel, null, 'nothing reported yet');
  assert.deepEqual(charge.attempts[0].evidence, { reason: 'cancelled_while_out', effect_sent: 'unknown' }, 'not "never sent": the request is out');
  assert.equal(email.status, 'pending', 'a step never reached stays pending');

  answer();
  const run = await eventually('the late answer recorded', async () => (await call(rt.url, 'GET', `/organizations/${ORG}/runs/${runId}`, { token: key })).body.run, (r) => r.steps[0].attempts[0].after_cancel !== null);
  assert.equal(run.state, 'cancelled');
  const late = run.steps[0].attempts[0].after_cancel;
  assert.equal(late.outcome, 'succeeded');
  assert.equal(late.evidence.status, 200);
  assert.match(late.evidence.body, /charged/);
  assert.notEqual(late.started_at, null, 'it says the request went out');
  assert.equal(run.steps[0].attempts[0].outcome, 'cancelled', 'the attempt itself stays as the cancel closed it');
  assert.equal(receiver.received.filter((r) => r.path === '/email').length, 0, 'the run went no further');
});

test('a retry timer whose event lands on a clock stepped back (NTP, a VM resume) is armed again, not lost', async () => {
  receiver.script([{ status: 503 }, { status: 200 }]);
  await workflow({ name: 'clock-back', trigger_event: 'order.clock_back', steps: [{ id: 's', type: 'webhook', url: `${receiver.url}/clock`, retry: { max_retries: 3, initial_ms: 1000, max_ms: 1000 } }] });
  const runId = await onlyRun(await sendEvent('order.clock_back', {}, 'evt-clock-back'));
  const backoff = await runInState(runId, 'backoff');
  const due = assertRetryDue(Date.parse(backoff.retry_at), clock.now(), 1000);
  await armed(runId, due);
  clock.advance(due - clock.now());
  assert.equal(rt.runtime.engine.timers.fireDue(), 1);
  clock.advance(-5);
  await eventually('the timer armed again', () => rt.runtime.engine.timerDueAt(ORG, runId), (at) => at === due);
  clock.advance(5);
  assert.equal(rt.runtime.engine.timers.fireDue(), 1);
  await runInState(runId, 'completed');
  assert.equal(receiver.received.filter((r) => r.path === '/clock').length, 2);
});

test('a sandbox run of an org that lost its sandbox (a downgrade to starter) sends nothing more: its next attempt fails it for good', async () => {
  const org = 'acct-runs-downgraded';
  const orgKey = await createOrg(rt.url, ADMIN_TOKEN, org);
  const path = `/organizations/${org}`;
  const flow = { name: 'sandboxed', environment: 'sandbox', trigger_event: 'sbx.retry', steps: [{ id: 'call', type: 'webhook', url: `${receiver.url}/sandbox`, retry: { max_retries: 20, initial_ms: 1000, max_ms: 1000 } }] };
  assert.equal((await call(rt.url, 'POST', `${path}/workflows`, { token: orgKey, json: flow })).status, 201);
  receiver.script([{ status: 500 }]);
  const before = receiver.received.length;
  assert.equal((await call(rt.url, 'POST', `${path}/events`, { token: orgKey, json: { type: 'sbx.retry', payload: {}, id: 'evt-sbx', environment: 'sandbox' } })).status, 202);
  const listed = await eventually('the run', async () => (await call(rt.url, 'GET', `${path}/runs?environment=sandbox`, { token: orgKey })).body.runs, (runs) => runs?.length === 1);
  const runId: string = listed[0].run_id;
  const backoff = await eventually('the run in backoff', async () => (await call(rt.url, 'GET', `${path}/runs/${runId}?environment=sandbox`, { token: orgKey })).body.run, (run) => run?.state === 'backoff');
  assert.equal(receiver.received.length - before, 1);
  assert.equal((await call(rt.url, 'PATCH', path, { token: ADMIN_TOKEN, json: { plan: 'starter' } })).status, 200);
  const due = assertRetryDue(Date.parse(backoff.retry_at), clock.now(), 1000);
  await armedIn(org, runId, due);
  clock.advance(due - clock.now());
  rt.runtime.engine.timers.fireDue();
  await eventually('the run failed', () => rt.runtime.context.runs.get(org, runId), (run) => run?.value === 'failed');
  // Read back through the API once the plan has a sandbox again.
  assert.equal((await call(rt.url, 'PATCH', path, { token: ADMIN_TOKEN, json: { plan: 'pro' } })).status, 200);
  const failed = (await call(rt.url, 'GET', `${path}/runs/${runId}?environment=sandbox`, { token: orgKey })).body.run;
  assert.equal(failed.state, 'failed');
  assert.deepEqual(failed.steps[0].attempts.map((a: { outcome: string; error: { code: string } | null }) => [a.outcome, a.error?.code]), [['failed', 'webhook_http_500'], ['failed', 'sandbox_disabled']]);
  assert.equal(receiver.received.length - before, 1, 'nothing sent after the downgrade');
});

test('a resume or cancel whose run a sandbox reset removed meanwhile is 404, never the state read before it', async () => {
  const org = 'acct-runs-reset-race';
  const orgKey = await createOrg(rt.url, ADMIN_TOKEN, org);
  const path = `/organizations/${org}`;
  const flow = { name: 'sandboxed', environment: 'sandbox', trigger_event: 'sbx.bad', steps: [{ id: 'call', type: 'webhook', url: `${receiver.url}/bad` }] };
  assert.equal((await call(rt.url, 'POST', `${path}/workflows`, { token: orgKey, json: flow })).status, 201);
  const { engine } = rt.runtime;
  for (const command of ['resume', 'cancel'] as const) {
    receiver.script([{ status: 400 }]);
    const eventId = `evt-reset-race-${command}`;
    assert.equal((await call(rt.url, 'POST', `${path}/events`, { token: orgKey, json: { type: 'sbx.bad', payload: {}, id: eventId, environment: 'sandbox' } })).status, 202);
    const runs = await eventually('the run', async () => (await call(rt.url, 'GET', `${path}/runs?environment=sandbox`, { token: orgKey })).body.runs, (list) => list?.length === 1);
    const runId: string = runs[0].run_id;
    await eventually('the run failed', () => rt.runtime.context.runs.get(org, runId), (run) => run?.value === 'failed');
    if (command === 'cancel') {
      // A failed run cannot be cancelled: resume it into a backoff the receiver keeps failing.
      receiver.script([{ status: 503 }, { status: 503 }]);
      assert.equal((await call(rt.url, 'POST', `${path}/runs/${runId}/resume?environment=sandbox`, { token: orgKey })).status, 202);
    }
    // The reset lands right after the command, before the API reads the run back.
    const original = engine.command;
    engine.command = async (...args: Parameters<typeof original>) => {
      const done = await original.apply(engine, args);
      assert.equal((await call(rt.url, 'POST', `${path}/sandbox/reset`, { token: orgKey })).status, 200);
      return done;
    };
    try {
      const answered = await call(rt.url, 'POST', `${path}/runs/${runId}/${command}?environment=sandbox`, { token: orgKey });
      assert.equal(answered.status, 404, `${command}: ${answered.text}`);
      assert.equal(answered.body.error.code, 'not_found');
    } finally {
      engine.command = original;
    }
  }
});

test('runs list filters by state and workflow; unknown runs are 404 and other orgs see nothing', async () => {
  const completed = await call(rt.url, 'GET', `/organizations/${ORG}/runs?state=completed`, { token: key });
  assert.ok(completed.body.runs.length >= 3);
  assert.ok(completed.body.runs.every((r: { state: string }) => r.state === 'completed'));
  assert.equal((await call(rt.url, 'GET', `/organizations/${ORG}/runs?state=bogus`, { token: key })).status, 400);
  assert.equal((await call(rt.url, 'GET', `/organizations/${ORG}/runs/run_nope`, { token: key })).status, 404);
  const otherKey = await createOrg(rt.url, ADMIN_TOKEN, 'acct-runs-other');
  const runId = completed.body.runs[0].run_id;
  assert.equal((await call(rt.url, 'GET', `/organizations/${ORG}/runs/${runId}`, { token: otherKey })).status, 404);
  assert.equal((await call(rt.url, 'GET', `/organizations/acct-runs-other/runs/${runId}`, { token: otherKey })).status, 404);
});
