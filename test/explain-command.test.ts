// Support's commands against a real runtime and receivers: `explain` gives an event by where it came
// from, its runs and its replays, a run by its steps and attempts (what went out, what came back,
// the idempotency key, an attempt still out or cancelled while out) and what to do next, never
// passing on characters that drive a terminal; `replay` run twice is refused the second time unless
// --again; `failed` lists failed runs' reasons, `resume` and `cancel` act on one run. Usage mistakes
// are usage errors, Sluice's refusals exit 1 saying why, and a key or URL that cannot be sent is
// refused before any request, naming the character and never the key.

import assert from 'node:assert/strict';
import { PassThrough } from 'node:stream';
import { after, before, test } from 'node:test';
import { explainCommand } from '../runtime/explain-command.ts';
import { explainEvent, explainRun, runLine } from '../runtime/explain-text.ts';
import { replayCommand } from '../runtime/replay-command.ts';
import { failedCommand, runActionCommand } from '../runtime/triage-command.ts';
import type { EventDetails, Run } from '../kits/client/index.ts';
import { call, createOrg, newStandardSecret, signStandard } from './helpers/http.ts';
import { eventually, startReceiver, type Receiver } from './helpers/receiver.ts';
import { capturedOutput } from './helpers/captured-output.ts';
import { ADMIN_TOKEN, startRuntime, type TestRuntime } from './helpers/runtime.ts';

const ORG = 'acct-explain-cli';
let rt: TestRuntime;
let receiver: Receiver;
let key: string;
let eventId: string;
let runId: string;
let workflowId: string;
/** A run that completed (the skip replay's), set by the replay test. */
let completedRunId: string;

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
async function run(command: typeof explainCommand, args: string[], apiKey = key): Promise<{ code: number; out: string; err: string }> {
  const output = capturedOutput();
  const code = await command([rt.url, '--org', ORG, ...args], { stdout: output.stdout, stderr: output.stderr, env: { SLUICE_API_KEY: apiKey } });
  return { code, out: output.out(), err: output.err() };
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
  assert.match(out, /sluice replay \.\.\. --event \S+ --side-effects skip\|run makes a new event from this one, with runs of the workflows listening now \(skip: webhook steps recorded, not sent\)/);
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
  assert.ok(out.includes(`next (a developer key): sluice resume ... --run ${runId} continues it from step "charge"`), out);
});

test('replay makes one replay per choice: the same command again is refused until --again, and explain lists them', async () => {
  const first = await run(replayCommand, ['--event', eventId, '--side-effects', 'skip']);
  assert.equal(first.code, 0, first.err);
  const made = /^replay (\S+) of event /.exec(first.out)?.[1];
  assert.ok(made !== undefined, first.out);
  assert.match(first.out, new RegExp(`runs \\(1\\):\n    run_\\S+  workflow ${workflowId} v1  \\w+`));
  const twice = await run(replayCommand, ['--event', eventId, '--side-effects', 'skip']);
  assert.equal(twice.code, 1);
  assert.equal(twice.err, `sluice replay: 409 replay_just_made: event ${eventId} was replayed with the same --side-effects and --workflow choice in the last 5 minutes (replay ${made}). Pass --again to make it once more; give each replay an --idempotency-key to make retries of one replay safe.\n`);
  const again = await run(replayCommand, ['--event', eventId, '--side-effects', 'skip', '--again']);
  assert.equal(again.code, 0, again.err);
  assert.doesNotMatch(again.out, /made earlier/);
  const keyed = await run(replayCommand, ['--event', eventId, '--side-effects', 'run', '--idempotency-key', 'ticket-9']);
  const keyedAgain = await run(replayCommand, ['--event', eventId, '--side-effects', 'run', '--idempotency-key', 'ticket-9']);
  assert.equal(keyedAgain.code, 0, keyedAgain.err);
  assert.equal(/^replay (\S+)/.exec(keyedAgain.out)?.[1], /^replay (\S+)/.exec(keyed.out)?.[1]);
  assert.match(keyedAgain.out, /\(made earlier with this --idempotency-key: nothing new was made\)\n/);
  const listed = await run(explainCommand, ['--event', eventId]);
  assert.match(listed.out, /replays \(3, newest first\):/);
  const newest = listed.out.indexOf(/^replay (\S+)/.exec(again.out)![1]!);
  assert.ok(newest >= 0 && newest < listed.out.indexOf(made), 'newest first');
  const replayView = await run(explainCommand, ['--event', made]);
  assert.match(replayView.out, new RegExp(`a business replay of event ${eventId} \\(side_effects skip; every workflow listening\\)`));
  const replayRun = /    (run_\S+)/.exec(replayView.out)![1]!;
  completedRunId = replayRun;
  await eventually('the skip replay run completed', async () => (await run(explainCommand, ['--run', replayRun])).out, (out) => /: completed\n/.test(out));
  const skipped = await run(explainCommand, ['--run', replayRun]);
  assert.match(skipped.out, /webhook steps are recorded as skipped, not sent/);
  assert.match(skipped.out, /attempt 1 \(fence 1\): skipped; nothing sent/);
});

test('usage mistakes are usage errors; what Sluice refuses exits 1 saying why', async () => {
  await assert.rejects(run(explainCommand, ['--event', eventId, '--run', runId]), /Name one event \(--event\) or one run \(--run\)/);
  await assert.rejects(run(explainCommand, []), /Name one event/);
  // A URL without its scheme, or two, says which and why, not only the usage line.
  await assert.rejects(explainCommand(['127.0.0.1:8787', '--org', ORG, '--run', runId], { stdout: new PassThrough(), stderr: new PassThrough(), env: { SLUICE_API_KEY: 'k' } }), /The Sluice URL starts with http:\/\/ or https:\/\/ \(got "127\.0\.0\.1:8787"\)\. usage: sluice explain/);
  await assert.rejects(explainCommand([rt.url, rt.url, '--org', ORG, '--run', runId], { stdout: new PassThrough(), stderr: new PassThrough(), env: { SLUICE_API_KEY: 'k' } }), /Give one Sluice URL \(got 2: /);
  await assert.rejects(explainCommand(['http://u:s3cret@127.0.0.1:1', 'extra', '--org', ORG, '--run', runId], { stdout: new PassThrough(), stderr: new PassThrough(), env: { SLUICE_API_KEY: 'k' } }), (error: Error) => /got 2: "http:\/\/u:\*\*\*@127\.0\.0\.1:1\/", "extra"/.test(error.message) && !error.message.includes('s3cret'));
  await assert.rejects(run(replayCommand, ['--event', eventId]), /Choose --side-effects skip/);
  await assert.rejects(run(replayCommand, ['--event', eventId, '--side-effects', 'maybe']), /Choose --side-effects skip/);
  await assert.rejects(run(replayCommand, ['--side-effects', 'run']), /--event names the event to replay/);
  const missing = await run(explainCommand, ['--event', 'evt_nothing_here']);
  assert.equal(missing.code, 1);
  assert.match(missing.err, /^sluice explain: 404 \w+: Event "evt_nothing_here"/);
  const elsewhere = await run(explainCommand, ['--event', eventId, '--environment', 'sandbox']);
  assert.equal(elsewhere.code, 1, 'environments never see each other');
  // A scheme in capitals is the same URL (the kit takes it too).
  const capitals = capturedOutput();
  assert.equal(await explainCommand([rt.url.replace('http://', 'HTTP://'), '--org', ORG, '--run', runId], { stdout: capitals.stdout, stderr: capitals.stderr, env: { SLUICE_API_KEY: key } }), 0, capitals.err());
  const stranger = await explainCommand([rt.url, '--org', ORG, '--run', runId], { stdout: new PassThrough(), stderr: new PassThrough(), env: { SLUICE_API_KEY: 'sk_not_a_key' } });
  assert.equal(stranger, 1);
});

test('an id that names no record, or an idempotency key a header cannot carry, exits 2 (a refused argument) saying so before any request', async () => {
  const replaysOf = async (): Promise<number> => (await call(rt.url, 'GET', `/organizations/${ORG}/events/${eventId}`, { token: key })).body.replays.length;
  const replaysBefore = await replaysOf();
  const cases: Array<[typeof explainCommand, string[], RegExp]> = [
    [explainCommand, ['--run', ''], /^sluice explain: invalid_argument: The run id is empty\.\n$/],
    [explainCommand, ['--run', '.'], /^sluice explain: invalid_argument: The run id "\." names no record\.\n$/],
    [explainCommand, ['--event', '..'], /^sluice explain: invalid_argument: The event id "\.\." names no record\.\n$/],
    [runAction('cancel'), ['--run', ''], /^sluice cancel: invalid_argument: The run id is empty\.\n$/],
    [replayCommand, ['--event', '', '--side-effects', 'skip'], /^sluice replay: invalid_argument: The event id is empty\.\n$/],
    [replayCommand, ['--event', eventId, '--side-effects', 'skip', '--idempotency-key', 'retry-caf\u00e9'], /^sluice replay: invalid_argument: The idempotency key holds U\+00E9 at position 9: it is sent in the Idempotency-Key header/],
    [replayCommand, ['--event', eventId, '--side-effects', 'skip', '--idempotency-key', 'k'.repeat(256)], /^sluice replay: invalid_argument: The idempotency key is 256 characters long; the API takes at most 255\.\n$/],
  ];
  for (const [command, args, expected] of cases) {
    const { code, out, err } = await run(command, args);
    assert.equal(code, 2, `${args.join(' ')}: ${out}`);
    assert.match(err, expected);
  }
  assert.equal(await replaysOf(), replaysBefore, 'no replay was made');
});

const runAction = (verb: 'resume' | 'cancel') => (args: readonly string[], io: Parameters<typeof explainCommand>[1]) => runActionCommand(verb, args, io);

test('an attempt still out reads as under way; cancelled while out, as possibly delivered, with what it did after the cancel', async () => {
  let release!: () => void;
  const held = new Promise<void>((resolve) => (release = resolve));
  const slow = await startReceiver([{ status: 200, after: held, body: '{"shipped":true}' }]);
  try {
    const wf = await call(rt.url, 'POST', `/organizations/${ORG}/workflows`, { token: key, json: { name: 'ship', trigger_event: 'order.shipped', steps: [{ id: 'ship', type: 'webhook', url: `${slow.url}/ship` }, { id: 'rest', type: 'delay', duration: 'PT1H' }] } });
    assert.equal(wf.status, 201, wf.text);
    const sent = await call(rt.url, 'POST', `/organizations/${ORG}/events`, { token: key, json: { type: 'order.shipped', payload: {} } });
    const shipRun: string = (await eventually('the run started', async () => (await call(rt.url, 'GET', `/organizations/${ORG}/events/${sent.body.event.id}`, { token: key })).body.reactions, (r) => r.length === 1)).at(0).run_id;
    await eventually('the request reached the receiver', () => slow.received.length, (n) => n === 1);
    const out = (await run(explainCommand, ['--run', shipRun])).out;
    assert.match(out, /attempt 1 \(fence 1\): pending; under way, not finished\n/);
    const cancelled = await run(runAction('cancel'), ['--run', shipRun]);
    assert.equal(cancelled.code, 0, cancelled.err);
    assert.match(cancelled.out, new RegExp(`^cancelled: run ${shipRun} .*: cancelled\n`));
    assert.match(cancelled.out, /cancelled; it was out when the run was cancelled: it may have reached its target/);
    assert.doesNotMatch(cancelled.out, /nothing sent/);
    release();
    const after = await eventually('the answer after the cancel is kept', async () => (await run(explainCommand, ['--run', shipRun])).out, (o) => o.includes('after the cancel'));
    assert.match(after, new RegExp(`after the cancel: succeeded at \\S+; sent \\S+; POST ${slow.url}/ship → 200 "\\{\\\\"shipped\\\\":true\\}"; \\d+ ms; key ${shipRun}:ship`));
    const again = await run(runAction('cancel'), ['--run', shipRun]);
    assert.deepEqual([again.code, /^sluice cancel: 409 run_finished/.test(again.err)], [1, true], again.err);

    // A delay sends nothing: its attempt started, and waits.
    const rest = await call(rt.url, 'POST', `/organizations/${ORG}/workflows`, { token: key, json: { name: 'rest', trigger_event: 'order.rested', steps: [{ id: 'nap', type: 'delay', duration: 'PT1H' }] } });
    assert.equal(rest.status, 201, rest.text);
    const rested = await call(rt.url, 'POST', `/organizations/${ORG}/events`, { token: key, json: { type: 'order.rested', payload: {} } });
    const restRun: string = (await eventually('the delay started', async () => (await call(rt.url, 'GET', `/organizations/${ORG}/events/${rested.body.event.id}`, { token: key })).body.reactions, (r) => r[0]?.state === 'delaying')).at(0).run_id;
    const napping = (await run(explainCommand, ['--run', restRun])).out;
    assert.match(napping, /step 1 "nap" \(delay\): active\n {6}attempt 1 \(fence 1\): pending; started \S+Z\n/);
    assert.match(napping, /waiting until \S+Z/);
    assert.equal((await run(runAction('cancel'), ['--run', restRun])).code, 0);
  } finally {
    release();
    await slow.close();
  }
});

test('what a receiver answers never drives the terminal: controls, DEL, C1 and bidi characters are escaped', async () => {
  const hostile = await startReceiver([{ status: 400, body: '\u001b]0;PWNED\u0007\u001b[2J\u009b31m\u007f\u202eevil\u2028' }]);
  try {
    const wf = await call(rt.url, 'POST', `/organizations/${ORG}/workflows`, { token: key, json: { name: 'hostile', trigger_event: 'order.hostile', steps: [{ id: 'post', type: 'webhook', url: `${hostile.url}/x` }] } });
    assert.equal(wf.status, 201, wf.text);
    const sent = await call(rt.url, 'POST', `/organizations/${ORG}/events`, { token: key, json: { type: 'order.hostile', payload: {} } });
    const [failed] = await eventually('the run failed', async () => (await call(rt.url, 'GET', `/organizations/${ORG}/events/${sent.body.event.id}`, { token: key })).body.reactions, (r) => r[0]?.state === 'failed');
    const { out } = await run(explainCommand, ['--run', failed.run_id]);
    assert.match(out, /→ 400 /);
    assert.doesNotMatch(out, /[\u0000-\u0009\u000b-\u001f\u007f-\u009f\u202e\u2028]/, JSON.stringify(out));
    assert.ok(out.includes('\\u009b31m\\u007f\\u202eevil\\u2028'), out);
  } finally {
    await hostile.close();
  }
});

test('failed lists the failed runs with their reasons; resume continues one (a sandbox one with --environment sandbox); explain names the flag', async () => {
  const listed = await run(failedCommand, []);
  assert.equal(listed.code, 0, listed.err);
  assert.match(listed.out, /events? with failed runs, newest first:\n/);
  assert.ok(listed.out.includes(`${eventId}  order.paid  `), listed.out);
  assert.ok(listed.out.includes(`  ${runId}  workflow ${workflowId} v1  failed: webhook_http_400 at step "charge" (not retried)`), listed.out);
  assert.equal((await run(failedCommand, ['--limit', '0']).catch((error: Error) => error)) instanceof Error, true, '--limit 0 is a usage error');

  const wf = await call(rt.url, 'POST', `/organizations/${ORG}/workflows`, { token: key, json: { name: 'sandboxed', trigger_event: 'order.paid', environment: 'sandbox', steps: [{ id: 'charge', type: 'webhook', url: `${receiver.url}/charge` }] } });
  assert.equal(wf.status, 201, wf.text);
  const sent = await call(rt.url, 'POST', `/organizations/${ORG}/events`, { token: key, json: { type: 'order.paid', payload: {}, environment: 'sandbox' } });
  const [sandboxRun] = await eventually('the sandbox run failed', async () => (await call(rt.url, 'GET', `/organizations/${ORG}/events/${sent.body.event.id}?environment=sandbox`, { token: key })).body.reactions, (r) => r[0]?.state === 'failed');
  // The hints of a sandbox listing name the environment too.
  const sandboxFailed = await run(failedCommand, ['--environment', 'sandbox']);
  assert.match(sandboxFailed.out, /next: sluice explain \.\.\. --environment sandbox --run <run id>/);
  const explained = await run(explainCommand, ['--run', sandboxRun.run_id, '--environment', 'sandbox']);
  assert.ok(explained.out.includes(`sluice resume ... --environment sandbox --run ${sandboxRun.run_id} continues it`), explained.out);
  assert.equal((await run(runAction('resume'), ['--run', sandboxRun.run_id])).code, 1, 'not in production');
  const resumed = await run(runAction('resume'), ['--run', sandboxRun.run_id, '--environment', 'sandbox']);
  assert.equal(resumed.code, 0, resumed.err);
  assert.match(resumed.out, new RegExp(`^resumed: run ${sandboxRun.run_id} \\(workflow \\S+ v1, sandbox\\): \\w+\n`));
  assert.match(resumed.out, /resumed 1 time, last at /);
  const eventView = await run(explainCommand, ['--event', sent.body.event.id, '--environment', 'sandbox']);
  assert.ok(eventView.out.includes(`sluice replay ... --event ${sent.body.event.id} --environment sandbox --side-effects skip|run makes a new event`), eventView.out);
  const completed = await run(runAction('resume'), ['--run', completedRunId]);
  assert.equal(completed.code, 1, 'only a failed run resumes');
  assert.match(completed.err, /^sluice resume: 409 /);

});

test('a device connection event is never offered for replay: resume its run instead', () => {
  const run = { run_id: 'run_1', workflow_id: 'wf', workflow_version: 1, event_id: 'evt_dev_1', environment: 'production', state: 'failed', error: null, created_at: '', updated_at: '' } as const;
  const event = { id: 'evt_dev_1', org_id: ORG, type: 'device.disconnected', payload: {}, environment: 'production', source: '@device:thermo-1', provider_event_id: null, received_at: '2026-12-02T00:00:00.000Z', received_at_ms: 0, correlation_id: 'evt_dev_1', causation_id: null, depth: 0, replay_skip_side_effects: false, replay_workflow_ids: null } as const;
  const text = explainEvent({ event, recording: null, reactions: [run], replays: [] } as unknown as EventDetails);
  assert.match(text, /from device "thermo-1"/);
  assert.doesNotMatch(text, /sluice replay/);
  assert.match(text, /sluice resume \.\.\. --run <run id> retries a failed one/);
});

test('a key or URL that cannot be sent is refused before any request, naming the character, never the key or password; a key\'s trailing newline is dropped', async () => {
  // Refused when the client is made, so before any request (exit 2): the message names the character, not the key.
  const at = async (url: string, apiKey: string): Promise<string> => {
    const output = capturedOutput();
    assert.equal(await explainCommand([url, '--org', ORG, '--run', runId], { stdout: output.stdout, stderr: output.stderr, env: { SLUICE_API_KEY: apiKey } }), 2);
    return output.err();
  };
  const broken = await at(rt.url, `${key.slice(0, 10)}\n${key.slice(10)}`);
  assert.match(broken, /^sluice explain: invalid_argument: .*U\+000A at position 10: it is sent in the Authorization header/);
  assert.doesNotMatch(broken, new RegExp(key.slice(10)));
  assert.match(await at(rt.url, `${key}\u201d`), /U\+201D at position/);
  const withPassword = await at(rt.url.replace('http://', 'http://admin:hunter2@'), key);
  assert.match(withPassword, /holds a user name or password/);
  assert.doesNotMatch(withPassword, /hunter2/);
  // White space around a key (a file's last newline, a stray one before it) is not part of it.
  for (const padded of [`${key}\n`, `\n${key}`, ` ${key}\r\n`]) {
    const fromFile = await run(explainCommand, ['--run', runId], padded);
    assert.equal(fromFile.code, 0, fromFile.err);
  }
});

test('each retry of a read is said on stderr before its wait (a server that never answers looked like a hang): why, which attempt, how long', async () => {
  const { createServer } = await import('node:http');
  let asked = 0;
  const busy = createServer((_req, res) => {
    asked++;
    res.writeHead(503, { 'content-type': 'text/plain' }).end('busy');
  });
  await new Promise<void>((listening) => busy.listen(0, '127.0.0.1', () => listening()));
  try {
    const output = capturedOutput();
    const url = `http://127.0.0.1:${(busy.address() as import('node:net').AddressInfo).port}`;
    assert.equal(await explainCommand([url, '--org', ORG, '--run', runId], { stdout: output.stdout, stderr: output.stderr, env: { SLUICE_API_KEY: key } }), 1);
    const lines = output.err().trimEnd().split('\n');
    assert.equal(asked, 5);
    assert.equal(lines.length, 5, output.err());
    for (const [i, line] of lines.slice(0, 4).entries()) assert.match(line, new RegExp(`^sluice explain: GET /organizations/${ORG}/runs/${runId}: answered 503 \\(attempt ${i + 1} of 5\\); trying again in \\d+\\.\\d s$`));
    assert.match(lines[4]!, /^sluice explain: 503 http_error: /, 'then the failure, as before');
  } finally {
    await new Promise((closed) => busy.close(closed));
  }
});

test('an answer that is not JSON is never printed: a success is invalid_answer, an error names its status and size', async () => {
  const { createServer } = await import('node:http');
  const pages = new Map([
    ['/ok', { status: 200, body: '<html>\u001b]0;PWNED\u0007</html>' }],
    ['/login', { status: 403, body: '<html>Proxy login required session=sess_4f9a2c</html>' }],
    ['/gateway', { status: 403, body: '{"error":{"code":403,"message":"Access denied for session sess_77e1"}}' }],
    ['/empty', { status: 200, body: '{}' }],
    ['/null', { status: 200, body: 'null' }],
    ['/object-list', { status: 200, body: '{"failed_events":{"0":{}},"next_cursor":null}' }],
    ['/shape', { status: 200, body: '{"run":{"run_id":"r"}}' }],
  ]);
  const server = createServer((req, res) => {
    const page = pages.get((req.url ?? '').split('/organizations')[0] ?? '') ?? { status: 404, body: '' };
    res.writeHead(page.status, { 'content-type': 'text/html' }).end(page.body);
  });
  await new Promise<void>((listening) => server.listen(0, '127.0.0.1', () => listening()));
  try {
    const base = `http://127.0.0.1:${(server.address() as import('node:net').AddressInfo).port}`;
    const explainAt = async (url: string): Promise<string> => {
      const output = capturedOutput();
      const code = await explainCommand([url, '--org', ORG, '--run', runId], { stdout: output.stdout, stderr: output.stderr, env: { SLUICE_API_KEY: key } });
      assert.equal(code, 1);
      return output.err();
    };
    const success = await explainAt(`${base}/ok`);
    assert.match(success, /^sluice explain: 200 invalid_answer: GET \/ok\/organizations\/acct-explain-cli\/runs\/run_\w+ answered 200 with a body that is not JSON/);
    assert.doesNotMatch(success, /PWNED/);
    const refused = await explainAt(`${base}/login`);
    assert.match(refused, /^sluice explain: 403 http_error: GET \/login\/organizations\/acct-explain-cli\/runs\/run_\w+ answered 403 with a body of 53 bytes that is not Sluice's JSON error \(not shown\)/);
    assert.doesNotMatch(refused, /sess_4f9a2c|Proxy login/);
    // JSON, but not Sluice's error shape (its code is a number): a gateway's, not quoted either.
    const gateway = await explainAt(`${base}/gateway`);
    assert.match(gateway, /^sluice explain: 403 http_error: GET \/gateway\/organizations\/\S+ answered 403 with a body of 70 bytes that is not Sluice's JSON error \(not shown\)/);
    assert.doesNotMatch(gateway, /sess_77e1|Access denied/);
    // JSON without Sluice's answer in it: said so, not a TypeError naming nothing.
    for (const page of ['/empty', '/null']) {
      const shapeless = await explainAt(`${base}${page}`);
      assert.match(shapeless, new RegExp(`^sluice explain: 200 invalid_answer: GET \\${page}/organizations/\\S+ answered 200 with JSON that is not Sluice's answer \\(no "run"\\)`), shapeless);
    }
    // Sluice's member, but not its fields: said so (a resume's may have been carried out), not a bare TypeError.
    assert.match(await explainAt(`${base}/shape`), /^sluice explain: invalid_answer: the answer is JSON but not of Sluice's shape \(.+\): is the url where Sluice listens\?\n$/);
    const resumeOutput = capturedOutput();
    assert.equal(await runActionCommand('resume', [`${base}/shape`, '--org', ORG, '--run', runId], { stdout: resumeOutput.stdout, stderr: resumeOutput.stderr, env: { SLUICE_API_KEY: key } }), 1);
    assert.match(resumeOutput.err(), /^sluice resume: invalid_answer: .+ The resume may have been carried out all the same\.\n$/);
    // A proxy's page, as an error or as a success: the write may have reached Sluice behind it.
    for (const [page, code] of [['/login', '403 http_error'], ['/ok', '200 invalid_answer']]) {
      const cancelOutput = capturedOutput();
      assert.equal(await runActionCommand('cancel', [`${base}${page}`, '--org', ORG, '--run', runId], { stdout: cancelOutput.stdout, stderr: cancelOutput.stderr, env: { SLUICE_API_KEY: key } }), 1);
      assert.match(cancelOutput.err(), new RegExp(`^sluice cancel: ${code}: .+ The cancel may have been carried out all the same: look \\(sluice explain\\) before sending it again\\.\n$`), page);
    }
    assert.doesNotMatch(refused, /carried out/, 'a read says nothing of the kind');
    const listOutput = capturedOutput();
    assert.equal(await failedCommand([`${base}/object-list`, '--org', ORG], { stdout: listOutput.stdout, stderr: listOutput.stderr, env: { SLUICE_API_KEY: key } }), 1);
    assert.match(listOutput.err(), /^sluice failed: 200 invalid_answer: GET \/failed-events answered with JSON whose "failed_events" is not a list/);
  } finally {
    await new Promise((closed) => server.close(closed));
  }
});

test('a run cancelled after it failed reads as cancelled, with the failure it had, not as failed', () => {
  const error = { code: 'webhook_http_400', message: 'The receiver answered 400; not retried.', step_id: 'second', reason: 'non_retryable' } as const;
  const summary = { run_id: 'run_1', workflow_id: 'wf_1', workflow_version: 2, event_id: 'evt_1', environment: 'production', error, created_at: '', updated_at: '' } as const;
  assert.equal(runLine({ ...summary, state: 'failed' }), 'run_1  workflow wf_1 v2  failed: webhook_http_400 at step "second" (not retried): The receiver answered 400; not retried.');
  assert.equal(runLine({ ...summary, state: 'cancelled' }), 'run_1  workflow wf_1 v2  cancelled (it had failed: webhook_http_400 at step "second" (not retried): The receiver answered 400; not retried.)');
  // Attempts cut off by crashes use no retries: the line does not say they were used up.
  const crashed = { code: 'step_interrupted_repeatedly', message: 'The runtime went down …', step_id: 'second', reason: 'retries_exhausted' } as const;
  assert.equal(runLine({ ...summary, error: crashed, state: 'failed' }), 'run_1  workflow wf_1 v2  failed: step_interrupted_repeatedly at step "second" (cut off by crashes, not sent again on its own): The runtime went down …');
  // The run's own explanation says the same: not a current failure.
  const text = explainRun({ ...cancelledWhileOut('webhook_withdrawn', 'Not sent.'), error });
  assert.match(text, /: cancelled\n.*\n  had failed \(before it was cancelled\): webhook_http_400 at step "second"/);
  assert.doesNotMatch(text, /^ {2}failed:/m);
});

/** A cancelled run whose one webhook attempt was out at the cancel and afterwards failed with `code`, `message` (nothing sent). */
function cancelledWhileOut(code: string, message: string): Run {
  const attempt = {
    attempt: 1, fence: 1, claimed_at: '2026-12-02T00:00:00.000Z', started_at: null, ended_at: '2026-12-02T00:00:01.000Z', outcome: 'cancelled', error: null,
    evidence: { reason: 'cancelled_while_out', effect_sent: 'unknown' },
    after_cancel: { outcome: 'failed', at: '2026-12-02T00:00:02.000Z', started_at: null, error: { code, message, retryable: false, retry_after_ms: null }, evidence: { url: 'https://example.test/x', idempotency_key: 'run_1:post' } },
  };
  return {
    run_id: 'run_1', org_id: ORG, event_id: 'evt_1', workflow_id: 'wf', workflow_version: 1, environment: 'production', state: 'cancelled', skip_side_effects: false,
    current_step: null, fence: 1, retry_at: null, wake_at: null, error: null, cancel_reason: 'cancelled through the API', resumes: [], created_at: '', updated_at: '',
    steps: [{ id: 'post', index: 0, type: 'webhook', status: 'cancelled', result: null, attempts: [attempt], earlier_attempts_dropped: 0 }],
  } as unknown as Run;
}

test('a step an ended run never reached reads as not run, not pending; a delay that ended says when it woke; a queued run says what it waits for', () => {
  const base = cancelledWhileOut('webhook_withdrawn', 'Not sent.');
  const never = { id: 'later', index: 1, type: 'webhook', status: 'pending', result: null, attempts: [], earlier_attempts_dropped: 0 };
  assert.match(explainRun({ ...base, steps: [...base.steps, never] } as unknown as Run), /\n {2}step 2 "later" \(webhook\): not run \(the run was cancelled\)$/m);
  const failed = { ...base, state: 'failed', cancel_reason: null, error: { code: 'webhook_http_400', message: 'The receiver answered 400; not retried.', step_id: 'post' }, steps: [...base.steps, never] };
  assert.match(explainRun(failed as unknown as Run), /step 2 "later" \(webhook\): not run \(the run failed before it\)$/m);

  const nap = (outcome: string, endedAt: string | null) => ({
    id: 'nap', index: 0, type: 'delay', status: outcome === 'succeeded' ? 'succeeded' : 'active', result: null, earlier_attempts_dropped: 0,
    attempts: [{ attempt: 1, fence: 1, claimed_at: '2026-12-02T00:00:00.000Z', started_at: '2026-12-02T00:00:00.000Z', ended_at: endedAt, outcome, error: null, evidence: {}, after_cancel: null }],
  });
  const queued = { ...base, state: 'queued', cancel_reason: null, steps: [nap('succeeded', '2026-12-02T01:00:00.000Z'), { ...never, index: 1 }] };
  const text = explainRun(queued as unknown as Run);
  assert.match(text, /attempt 1 \(fence 1\): succeeded; started 2026-12-02T00:00:00\.000Z, woke 2026-12-02T01:00:00\.000Z\n/);
  assert.match(text, /\n {2}queued: waiting for one of the org's max_concurrent_runs slots for production runs, taken at once when one is free \(it has started, so it goes ahead of the org's new runs\)\n/);
  assert.match(text, /step 2 "later" \(webhook\): pending$/m, 'a queued run still runs it');
  const fresh = explainRun({ ...queued, steps: [{ ...never, index: 0 }] } as unknown as Run);
  assert.match(fresh, /queued: waiting for one of the org's max_concurrent_runs slots for production runs, taken at once when one is free \(first in first out; runs that have started go first\)/);
  assert.doesNotMatch(explainRun({ ...base, state: 'delaying', steps: [nap('pending', null)] } as unknown as Run), /woke|queued:/);
});

test('a request withdrawn after the cancel (it waited for a connection) reads as never sent, with the reason', () => {
  const text = explainRun(cancelledWhileOut('webhook_withdrawn', 'Not sent: the run left this attempt.'));
  assert.match(text, /attempt 1 \(fence 1\): cancelled; nothing sent \(withdrawn after the cancel\)\n/);
  assert.match(text, /after the cancel: failed webhook_withdrawn at \S+; nothing sent; to https:\/\/example\.test\/x; key run_1:post\n {10}Not sent: the run left this attempt\./);
  assert.doesNotMatch(text, /may have reached/);
});

test('a request that went out as the receiver closed its kept-alive connection reads as sent, which the receiver may not have seen', () => {
  const base = cancelledWhileOut('webhook_withdrawn', 'Not sent.');
  const error = { code: 'webhook_connection_closed', message: 'The receiver closed its kept-alive connection before answering this request (socket hang up).', retryable: true, retry_after_ms: 0 };
  const crossed = { ...base.steps[0]!.attempts[0]!, started_at: '2026-12-02T00:00:00.500Z', outcome: 'failed', error, evidence: { url: 'https://example.test/x', idempotency_key: 'run_1:post' }, after_cancel: null };
  const text = explainRun({ ...base, steps: [{ ...base.steps[0]!, attempts: [crossed] }] } as unknown as Run);
  assert.match(text, /attempt 1 \(fence 1\): failed webhook_connection_closed; sent 2026-12-02T00:00:00\.500Z \(the receiver closed the connection as it went out: it may not have seen it\); POST https:\/\/example\.test\/x/);
});

test('an attempt cancelled while it was connecting, refused afterwards, reads as never reaching its target; an older Sluice\'s views still explain', () => {
  const text = explainRun(cancelledWhileOut('webhook_network_error', 'The request was not sent: getaddrinfo EAI_AGAIN example.test.'));
  assert.match(text, /cancelled; nothing sent \(it never reached its target: below\)\n/);
  assert.doesNotMatch(text, /withdrawn/);
  const event = { id: 'evt_1', org_id: ORG, type: 'order.paid', payload: {}, environment: 'production', source: '@api', provider_event_id: null, received_at: '2026-12-02T00:00:00.000Z', received_at_ms: 0, correlation_id: 'evt_1', causation_id: null, depth: 0, replay_skip_side_effects: false, replay_workflow_ids: null };
  const older = explainEvent({ event, recording: null, reactions: [] } as unknown as EventDetails);
  assert.match(older, /runs: none/);
});

test('a network failure says what to check: nothing answering at the url (is Sluice running?), or a change cut off mid-request that may have been made', async () => {
  const { createServer } = await import('node:net');
  // Reads the request, then drops the connection without an answer (a runtime killed mid-request).
  const cutter = createServer((socket) => socket.once('data', () => socket.destroy()));
  await new Promise<void>((listening) => cutter.listen(0, '127.0.0.1', () => listening()));
  const cutUrl = `http://127.0.0.1:${(cutter.address() as import('node:net').AddressInfo).port}`;
  // A port nothing listens on: a listener's, once closed.
  const closed = createServer();
  await new Promise<void>((listening) => closed.listen(0, '127.0.0.1', () => listening()));
  const closedUrl = `http://127.0.0.1:${(closed.address() as import('node:net').AddressInfo).port}`;
  await new Promise((done) => closed.close(done));
  try {
    const cancelAt = async (url: string): Promise<string> => {
      const output = capturedOutput();
      assert.equal(await runActionCommand('cancel', [url, '--org', ORG, '--run', runId], { stdout: output.stdout, stderr: output.stderr, env: { SLUICE_API_KEY: key } }), 1);
      return output.err();
    };
    assert.match(await cancelAt(cutUrl), /^sluice cancel: network_error: POST .+ The cancel may have been carried out all the same: look \(sluice explain\) before sending it again\.\n$/);
    assert.match(await cancelAt(closedUrl), new RegExp(`^sluice cancel: network_error: POST .+ECONNREFUSED.+ Nothing answered at ${closedUrl.replaceAll('.', '\\.')}: is Sluice running there\\?\\n$`));
    // A keyed replay is retried: an attempt before the last may have reached Sluice.
    const replayOutput = capturedOutput();
    assert.equal(await replayCommand([closedUrl, '--org', ORG, '--event', eventId, '--side-effects', 'skip', '--idempotency-key', 'net-1'], { stdout: replayOutput.stdout, stderr: replayOutput.stderr, env: { SLUICE_API_KEY: key } }), 1);
    assert.match(replayOutput.err(), /\(\d+ attempts\)\. Nothing answered at .+: is Sluice running there\? The replay may have been carried out all the same: look \(sluice explain\) before sending it again\.\n$/);
  } finally {
    await new Promise((done) => cutter.close(done));
  }
});

test("an answer whose body was cut off or past the 4 KiB kept says so: it read as the whole answer (found by a probe)", () => {
  const base = cancelledWhileOut('webhook_withdrawn', 'Not sent.');
  const answered = (evidence: Record<string, unknown>) => {
    const attempt = { attempt: 1, fence: 1, claimed_at: '2026-12-02T00:00:00.000Z', started_at: '2026-12-02T00:00:00.000Z', ended_at: '2026-12-02T00:00:02.000Z', outcome: 'succeeded', error: null, after_cancel: null, evidence: { url: 'https://example.test/x', status: 200, body: 'abc', duration_ms: 2001, ...evidence } };
    return explainRun({ ...base, state: 'completed', cancel_reason: null, steps: [{ ...base.steps[0]!, status: 'succeeded', attempts: [attempt] }] } as unknown as Run);
  };
  assert.match(answered({ body_truncated: true, body_cut_off: true }), /→ 200 "abc" \(its body cut off: still arriving at the timeout, or its connection broke\); 2001 ms/);
  assert.match(answered({ body_truncated: true }), /→ 200 "abc" \(its body past the first 4 KiB not kept\); 2001 ms/);
  assert.match(answered({ body_truncated: false }), /→ 200 "abc"; 2001 ms/);
});
