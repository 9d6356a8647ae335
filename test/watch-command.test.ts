// `sluice watch` against a real runtime: it prints each run update once as a JSON line (here from
// the retained log, with --after-seq 0), stops on its signal printing the position to resume
// from, and says why when the room refuses it.

import assert from 'node:assert/strict';
import { createServer, type AddressInfo } from 'node:net';
import { PassThrough } from 'node:stream';
import { after, before, test } from 'node:test';
import { watchCommand } from '../runtime/watch-command.ts';
import { durably } from '../runtime/ledger/durable-write.ts';
import { call, createOrg } from './helpers/http.ts';
import { eventually, startReceiver, type Receiver } from './helpers/receiver.ts';
import { capturedOutput } from './helpers/captured-output.ts';
import { startRefusingUpgradeServer } from './helpers/refusing-upgrade-server.ts';
import { ADMIN_TOKEN, startRuntime, type TestRuntime } from './helpers/runtime.ts';

const ORG = 'acct-watch-cli';
let rt: TestRuntime;
let receiver: Receiver;
let key: string;

before(async () => {
  rt = await startRuntime();
  receiver = await startReceiver();
  key = await createOrg(rt.url, ADMIN_TOKEN, ORG);
  const wf = await call(rt.url, 'POST', `/organizations/${ORG}/workflows`, { token: key, json: { name: 'notify', trigger_event: 'order.paid', steps: [{ id: 'post', type: 'webhook', url: `${receiver.url}/paid` }] } });
  assert.equal(wf.status, 201, wf.text);
});
after(async () => {
  await rt.close();
  await receiver.close();
});

/** Starts the command; `lines()` is what it printed so far. */
function start(args: string[]): { lines: () => string[]; notices: () => string[]; stop: () => void; exit: Promise<number> } {
  const output = capturedOutput();
  const controller = new AbortController();
  const exit = watchCommand(args, { stdout: output.stdout, stderr: output.stderr, signal: controller.signal });
  const linesOf = (text: string): string[] => text.split('\n').filter((line) => line !== '');
  return { lines: () => linesOf(output.out()), notices: () => linesOf(output.err()), stop: () => controller.abort(), exit };
}

test('prints each update of a run as a JSON line, then the position to resume from', async () => {
  const sent = await call(rt.url, 'POST', `/organizations/${ORG}/events`, { token: key, json: { type: 'order.paid', payload: { order: 1 } } });
  assert.equal(sent.status, 202, sent.text);
  const watch = start([rt.url, '--org', ORG, '--key', key, '--after-seq', '0']);
  const updates = await eventually('the completed update', () => watch.lines().map((line) => JSON.parse(line) as { state?: string; seq?: number; event_id?: string }), (list) => list.some((u) => u.state === 'completed'));
  assert.ok(updates.every((u) => u.event_id === sent.body.event.id));
  assert.ok(watch.lines().every((line) => !line.includes('""')), 'empty fields are left out, as in the frame');
  assert.ok(updates.every((u) => !('error' in u) && !('channel' in u)), watch.lines().join('\n'));
  const seqs = updates.map((u) => u.seq);
  assert.equal(new Set(seqs).size, seqs.length, 'each update once');
  watch.stop();
  assert.equal(await watch.exit, 0);
  const last = JSON.parse(watch.lines().at(-1)!) as { stopped: boolean; after_seq: number };
  assert.deepEqual(last, { stopped: true, after_seq: Math.max(...(seqs as number[])) });
});

test('text an action or a receiver wrote (an update\'s error) is printed with terminal controls escaped, the line still the same JSON', async () => {
  const { ledger, updateLog, rooms } = rt.runtime;
  const error = 'invalid output: member "\u009b2J\u001b]0;PWN\u0007\u202eevil\u2028" is not allowed';
  const [update] = await durably(ledger.root, ledger.root.transaction(() => [
    updateLog.append(ORG, { run_id: 'run-hostile', state: 'failed', channel: '', workflow_id: 'wf', event_id: 'evt-hostile', step_id: 's', attempt: 1, at_ms: 1, error, environment: 'production' }),
  ]));
  rooms.publish(ORG, [update!]);
  const watch = start([rt.url, '--org', ORG, '--key', key, '--run', 'run-hostile', '--after-seq', '0']);
  const line = await eventually('the hostile update', () => watch.lines()[0] ?? '', (text) => text !== '');
  watch.stop();
  assert.equal(await watch.exit, 0);
  assert.doesNotMatch(line, /[\u0000-\u001f\u007f-\u009f\u2028\u202e]/, 'nothing a terminal acts on');
  assert.equal((JSON.parse(line) as { error: string }).error, error, 'the same text once parsed');
});

test('a refused key ends it with 1 and the reason; bad arguments are usage errors', async () => {
  const refused = start([rt.url, '--org', ORG, '--key', 'sk_not_a_key']);
  assert.equal(await refused.exit, 1);
  assert.match(refused.notices().at(-1)!, /^sluice watch: ended: .*\(401\)/);
  assert.deepEqual(refused.lines(), [], 'stdout keeps to JSON lines');
  const signal = new AbortController().signal;
  await assert.rejects(watchCommand(['ws://x', '--org', ORG, '--key', key], { stdout: new PassThrough(), stderr: new PassThrough(), signal }), /usage: sluice watch/);
  // A password in a URL refused for its scheme is not printed either.
  await assert.rejects(watchCommand(['ws://bob:s3cret@127.0.0.1:1', '--org', ORG, '--key', key], { stdout: new PassThrough(), stderr: new PassThrough(), signal }), (error: Error) => /got "ws:\/\/bob:\*\*\*@127\.0\.0\.1:1\/"/.test(error.message) && !error.message.includes('s3cret'));
  await assert.rejects(watchCommand([rt.url, '--org', ORG], { stdout: new PassThrough(), stderr: new PassThrough(), signal }), /--org and an API key \(--key, or SLUICE_API_KEY\) are required/);
  // An unset shell variable (`--org "$ORG"`, `--run "$RUN"`): an empty run id would watch every run.
  await assert.rejects(watchCommand([rt.url, '--org', '', '--key', key], { stdout: new PassThrough(), stderr: new PassThrough(), signal }), /--org is empty/);
  await assert.rejects(watchCommand([rt.url, '--org', ORG, '--key', key, '--run', ''], { stdout: new PassThrough(), stderr: new PassThrough(), signal }), /--run is empty/);
  // "." and ".." are path segments a URL resolves away (to /organizations/live): refused before any connection, as the REST commands do.
  for (const org of ['.', '..']) {
    const dots = start([rt.url, '--org', org, '--key', key]);
    assert.equal(await dots.exit, 2, 'a refused argument');
    assert.deepEqual(dots.notices(), [`sluice watch: invalid_argument: The organization id "${org}" names no record.`]);
  }
  // 16 digits: the room takes at most 15, so it would refuse the socket only once connected.
  for (const afterSeq of ['1.5', '', '0x10', '1e3', '1000000000000000']) {
    await assert.rejects(watchCommand([rt.url, '--org', ORG, '--key', key, '--after-seq', afterSeq], { stdout: new PassThrough(), stderr: new PassThrough(), signal }), /--after-seq is a whole number/, afterSeq);
  }
});

test('a live room that nothing answers at first ends it with 1, saying so with the address (a wrong port, Sluice not started): not retried for ever', async () => {
  const closed = createServer();
  await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
  const { port } = closed.address() as AddressInfo;
  await new Promise<void>((resolve) => closed.close(() => resolve()));
  const watch = start([`http://127.0.0.1:${port}`, '--org', ORG, '--key', key]);
  assert.equal(await watch.exit, 1);
  assert.deepEqual(watch.notices(), [`sluice watch: the live room could not be reached (connect ECONNREFUSED 127.0.0.1:${port}). Nothing answered at http://127.0.0.1:${port}: is Sluice running there?`]);
  assert.deepEqual(watch.lines(), [], 'stdout keeps to updates');
  // A socket URL may carry a password for a proxy in front (sent as Basic auth): never printed.
  const withPassword = start([`http://ops:sk_secret_pw@127.0.0.1:${port}`, '--org', ORG, '--key', key]);
  assert.equal(await withPassword.exit, 1);
  assert.deepEqual(withPassword.notices(), [`sluice watch: the live room could not be reached (connect ECONNREFUSED 127.0.0.1:${port}). Nothing answered at http://ops:***@127.0.0.1:${port}/: is Sluice running there?`]);
});

test('with --after-seq, a first connection that nothing answers ends it too; one that fails after Sluice answered (a 503 while it restarts, or a proxy\'s 502 or 504 meanwhile) is retried', { timeout: 60_000 }, async () => {
  const closed = createServer();
  await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
  const { port } = closed.address() as AddressInfo;
  await new Promise<void>((resolve) => closed.close(() => resolve()));
  const positioned = start([`http://127.0.0.1:${port}`, '--org', ORG, '--key', key, '--after-seq', '5']);
  assert.equal(await positioned.exit, 1);
  assert.match(positioned.notices().join('\n'), /Nothing answered at http:\/\/127\.0\.0\.1:\d+: is Sluice running there\?$/);

  for (const status of [503, 502, 504]) {
    const restarting = await startRefusingUpgradeServer(status, '');
    const watch = start([`http://127.0.0.1:${restarting.port}`, '--org', ORG, '--key', key]);
    await eventually(`the ${status} said`, () => watch.notices(), (lines) => lines.some((line) => line.includes(`(${status})`)));
    await restarting.close();
    const notices = await eventually('the unreachable retry said', () => watch.notices(), (lines) => lines.some((line) => line.includes('ECONNREFUSED')));
    assert.ok(notices.filter((line) => line.includes('ECONNREFUSED')).every((line) => line.endsWith('; reconnecting')), notices.join('\n'));
    watch.stop();
    assert.equal(await watch.exit, 0, `${status}: ${notices.join('\n')}`);
  }
});

test('once it has joined, a room that goes away is said on stderr and retried (a restart of Sluice); Ctrl-C ends it with 0 and the position', async () => {
  const own = await startRuntime();
  try {
    const ownKey = await createOrg(own.url, ADMIN_TOKEN, ORG);
    const wf = await call(own.url, 'POST', `/organizations/${ORG}/workflows`, { token: ownKey, json: { name: 'notify', trigger_event: 'order.paid', steps: [{ id: 'post', type: 'webhook', url: `${receiver.url}/paid` }] } });
    assert.equal(wf.status, 201, wf.text);
    const watch = start([own.url, '--org', ORG, '--key', ownKey]);
    await eventually('the socket open', async () => (await call(own.url, 'GET', '/metrics')).text, (text) => /\nsluice_websockets_open 1\n/.test(text));
    const sent = await call(own.url, 'POST', `/organizations/${ORG}/events`, { token: ownKey, json: { type: 'order.paid', payload: { order: 2 } } });
    assert.equal(sent.status, 202, sent.text);
    await eventually('an update printed (it has joined)', () => watch.lines(), (lines) => lines.length > 0);
    await own.close();
    const notices = await eventually('a notice', () => watch.notices(), (lines) => lines.length > 0);
    assert.match(notices[0]!, /^sluice watch: .*; reconnecting$/);
    watch.stop();
    assert.equal(await watch.exit, 0);
    assert.deepEqual(Object.keys(JSON.parse(watch.lines().at(-1)!)), ['stopped', 'after_seq'], 'the position to resume from');
  } finally {
    await own.close();
  }
});

test('what a refusing server says in Sluice\'s error shape reaches the terminal escaped: it never drives it', async () => {
  const server = await startRefusingUpgradeServer(401, JSON.stringify({ error: { code: 'unauthorized', message: '\u001b]0;PWNED\u0007\u001b[2J refused' } }));
  try {
    const watch = start([`http://127.0.0.1:${server.port}`, '--org', ORG, '--key', key]);
    assert.equal(await watch.exit, 1);
    const notice = watch.notices().join('\n');
    assert.match(notice, /^sluice watch: ended: .*\(401\)/);
    assert.match(notice, /unauthorized: .*PWNED/, 'the error is said');
    assert.doesNotMatch(notice, /[\u0000-\u0009\u000b-\u001f]/, 'escaped');
  } finally {
    await server.close();
  }
});

test('a server that answers the handshake with a success (a web page, not a WebSocket endpoint) is said to be likely not Sluice', async () => {
  const server = await startRefusingUpgradeServer(200, '');
  try {
    const watch = start([`http://127.0.0.1:${server.port}`, '--org', ORG, '--key', key]);
    assert.equal(await watch.exit, 1);
    assert.deepEqual(watch.notices(), ['sluice watch: ended: the live room refused the connection (200): no body; a WebSocket endpoint answers 101: is the url where Sluice listens?']);
  } finally {
    await server.close();
  }
});
