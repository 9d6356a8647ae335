// `sluice explain` and `sluice replay` against a real runtime and receiver: an event is explained by
// where it came from, its runs and its replays; a run by its steps and attempts (what went out,
// what came back, the idempotency key) and what to do next; a replay run twice is refused the
// second time unless --again. Usage mistakes are usage errors, Sluice's refusals exit 1 saying why.

import assert from 'node:assert/strict';
import { PassThrough } from 'node:stream';
import { after, before, test } from 'node:test';
import { explainCommand } from '../runtime/explain-command.ts';
import { replayCommand } from '../runtime/replay-command.ts';
import { call, createOrg, newStandardSecret, signStandard } from './helpers/http.ts';
import { eventually, startReceiver, type Receiver } from './helpers/receiver.ts';
import { ADMIN_TOKEN, startRuntime, type TestRuntime } from './helpers/runtime.ts';

const ORG = 'acct-explain-cli';
let rt: TestRuntime;
let receiver: Receiver;
let key: string;
let eventId: string;
let runId: string;
let workflowId: string;

before(async () => {
  rt = await startRuntime();
  receiver = await startReceiver([{ status: 400, body: '{"error":"card declined"}' }]);
  key = await createOrg(rt.url, ADMIN_TOKEN, ORG);
  const secret = newStandardSecret();
  assert.equal((await call(rt.url, 'POST', `/organizations/${ORG}/sources`, { token: key, json: { name: 'pay', secrets: [secret] } })).status, 201);
  const wf = await call(rt.url, 'POST', `/organizations/${ORG}/workflows`, { token: key, json: { name: 'charge', trigger_event: 'order.paid', steps: [{ id: 'charge', type: 'webhook', url: `${receiver.url}/charge` }] } });
  assert.equal(wf.status, 201, wf.text);
  workflowId = wf.body.workflow.id;
  const body = '{"type":"order.paid","amount":4200}';
  const hook = await fetch(`${rt.url}/hooks/${ORG}/pay`, { method: 'POST', headers: signStandard(secret, 'msg_explain_1', Math.floor(Date.now() / 1000), body), body });
  assert.equal(hook.status, 204, await hook.text());
  eventId = hook.headers.get('sluice-event-id') ?? '';
  const reactions = await eventually('the run failed', async () => (await call(rt.url, 'GET', `/organizations/${ORG}/events/${eventId}`, { token: key })).body.reactions, (r) => r[0]?.state === 'failed');
  runId = reactions[0].run_id;
});
after(async () => {
  await rt.close();
  await receiver.close();
});

/** Runs a command with the key in SLUICE_API_KEY; answers its exit code and what it printed. */
async function run(command: typeof explainCommand, args: string[]): Promise<{ code: number; out: string; err: string }> {
  const stdout = new PassThrough();
  const stderr = new PassThrough();
  let out = '';
  let err = '';
  stdout.on('data', (chunk: Buffer) => (out += chunk.toString('utf8')));
  stderr.on('data', (chunk: Buffer) => (err += chunk.toString('utf8')));
  const code = await command([rt.url, '--org', ORG, ...args], { stdout, stderr, env: { SLUICE_API_KEY: key } });
  return { code, out, err };
}

test('explain --event says where the event came from and what its run did', async () => {
  const { code, out, err } = await run(explainCommand, ['--event', eventId]);
  assert.equal(code, 0, err);
  const lines = out.split('\n');
  assert.equal(lines[0], `event ${eventId} (order.paid, production)`);
  assert.match(out, /: a webhook to source "pay" \(delivery msg_explain_1\)/);
  assert.match(out, new RegExp(`request: POST /hooks/${ORG}/pay, 35 bytes, verified by standard-webhooks, key #0`));
  assert.ok(out.includes(`    ${runId}  workflow ${workflowId} v1  failed: webhook_http_400 at step "charge" (not retried): The receiver answered 400; not retried.\n`), out);
  assert.match(out, /next: sluice explain \.\.\. --run <run id>/);
});

test('explain --run shows each attempt: what went out, the answer, the key, and how to resume', async () => {
  const { code, out, err } = await run(explainCommand, ['--run', runId]);
  assert.equal(code, 0, err);
  assert.ok(out.startsWith(`run ${runId} (workflow ${workflowId} v1, production): failed\n`), out);
  assert.match(out, /  step 1 "charge" \(webhook\): failed\n/);
  const answer = `POST ${receiver.url}/charge → 400 ${JSON.stringify('{"error":"card declined"}')}`;
  assert.match(out, /attempt 1 \(fence 1\): failed webhook_http_400; sent \S+Z; /);
  assert.ok(out.includes(`; ${answer}; `), out);
  assert.match(out, new RegExp(`; \\d+ ms; key ${runId}:charge\n`));
  assert.match(out, new RegExp(`next: POST /organizations/${ORG}/runs/${runId}/resume continues it from step "charge"`));
});

test('replay makes one replay per choice: the same command again is refused until --again, and explain lists them', async () => {
  const first = await run(replayCommand, ['--event', eventId, '--side-effects', 'skip']);
  assert.equal(first.code, 0, first.err);
  const made = /^replay (\S+) of event /.exec(first.out)?.[1];
  assert.ok(made !== undefined, first.out);
  assert.match(first.out, new RegExp(`runs \\(1\\):\n    run_\\S+  workflow ${workflowId} v1  \\w+`));
  const twice = await run(replayCommand, ['--event', eventId, '--side-effects', 'skip']);
  assert.equal(twice.code, 1);
  assert.match(twice.err, new RegExp(`^sluice replay: 409 replay_just_made: .*event ${made}.*\\(pass --again to make it once more\\)\n$`));
  const again = await run(replayCommand, ['--event', eventId, '--side-effects', 'skip', '--again']);
  assert.equal(again.code, 0, again.err);
  const listed = await run(explainCommand, ['--event', eventId]);
  assert.match(listed.out, /replays \(2, newest first\):/);
  assert.ok(listed.out.indexOf(/^replay (\S+)/.exec(again.out)![1]!) < listed.out.indexOf(made), 'newest first');
  const replayView = await run(explainCommand, ['--event', made]);
  assert.match(replayView.out, new RegExp(`a business replay of event ${eventId} \\(side_effects skip; every workflow listening\\)`));
  const replayRun = /    (run_\S+)/.exec(replayView.out)![1]!;
  await eventually('the skip replay run completed', async () => (await run(explainCommand, ['--run', replayRun])).out, (out) => /: completed\n/.test(out));
  const skipped = await run(explainCommand, ['--run', replayRun]);
  assert.match(skipped.out, /webhook steps are recorded as skipped, not sent/);
  assert.match(skipped.out, /attempt 1 \(fence 1\): skipped; nothing sent/);
});

test('usage mistakes are usage errors; what Sluice refuses exits 1 saying why', async () => {
  await assert.rejects(run(explainCommand, ['--event', eventId, '--run', runId]), /Name one event \(--event\) or one run \(--run\)/);
  await assert.rejects(run(explainCommand, []), /Name one event/);
  await assert.rejects(run(replayCommand, ['--event', eventId]), /Choose --side-effects skip/);
  await assert.rejects(run(replayCommand, ['--event', eventId, '--side-effects', 'maybe']), /Choose --side-effects skip/);
  await assert.rejects(run(replayCommand, ['--side-effects', 'run']), /--event names the event to replay/);
  const missing = await run(explainCommand, ['--event', 'evt_nothing_here']);
  assert.equal(missing.code, 1);
  assert.match(missing.err, /^sluice explain: 404 \w+: Event "evt_nothing_here"/);
  const elsewhere = await run(explainCommand, ['--event', eventId, '--environment', 'sandbox']);
  assert.equal(elsewhere.code, 1, 'environments never see each other');
  const stranger = await explainCommand([rt.url, '--org', ORG, '--run', runId], { stdout: new PassThrough(), stderr: new PassThrough(), env: { SLUICE_API_KEY: 'sk_not_a_key' } });
  assert.equal(stranger, 1);
});
