// One org's sockets to its receivers, busy or idle, are capped over all of them: requests still out
// (a cancelled run's stay out until answered or timed out) to many receivers held ever more file
// descriptors, until every org's connections failed. Past its share an org's next connection waits
// for one of its own to close (one falling idle closes for it); another org's goes ahead. Against
// a real local receiver that holds some requests unanswered.

import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { OrgIdleSockets } from '../../runtime/runs/idle-sockets.ts';
import { defaultOutboundSocketTotal, OrgSocketShare, OUTBOUND_SOCKETS_FALLBACK } from '../../runtime/runs/org-socket-share.ts';
import { OutboundConnections } from '../../runtime/runs/outbound-connections.ts';
import { ReceiverResolver } from '../../runtime/runs/receiver-lookup.ts';
import { sendWebhook } from '../../runtime/runs/webhook-step.ts';
import { eventually } from '../helpers/receiver.ts';

const NAMES = Array.from({ length: 6 }, (_, i) => `receiver-${i}.test`);
let server: Server;
let port: number;
let opened = 0;
const held: ServerResponse[] = [];
let dir: string;
let pools: OutboundConnections;

before(async () => {
  server = createServer((req, res) => {
    req.resume();
    req.on('end', () => (req.url === '/hold' ? held.push(res) : res.end('{"ok":true}')));
  });
  server.on('connection', () => (opened += 1));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  port = (server.address() as AddressInfo).port;
  dir = mkdtempSync(join(tmpdir(), 'sluice-hosts-'));
  writeFileSync(join(dir, 'hosts'), `127.0.0.1 ${NAMES.join(' ')}\n`);
  pools = new OutboundConnections(4, 'any', { resolver: new ReceiverResolver({ hostsPath: join(dir, 'hosts') }), socketsPerOrg: 3 });
});
after(async () => {
  pools.close();
  for (const res of held) res.end();
  await new Promise((resolve) => server.close(resolve));
  rmSync(dir, { recursive: true, force: true });
});

const send = (orgId: string, name: string, path: string) =>
  sendWebhook(
    { orgId, url: `http://${name}:${port}${path}`, headers: {}, timeoutMs: 10_000, body: '{}', idempotencyKey: `run_${orgId}_${name}:s`, fence: 1, attempt: 1, signingSecrets: () => [], nowMs: Date.now() },
    { selfPort: 1, connections: pools },
  );

test("an org holding its share of sockets (requests unanswered at three receivers) waits for one of them to close before a fourth connection; another org's goes ahead", async () => {
  const out = [0, 1, 2].map((i) => send('acct-hoarder', NAMES[i]!, '/hold'));
  await eventually('three requests held by the receiver', () => held.length, (n) => n === 3);
  let fourthDone = false;
  const fourth = send('acct-hoarder', NAMES[3]!, '/ok').then((outcome) => ((fourthDone = true), outcome));
  await eventually('the fourth request waiting for room', () => pools.stats().waiting, (n) => n === 1);
  assert.equal(opened, 3, 'no fourth connection was opened');
  const other = await send('acct-other', NAMES[4]!, '/ok');
  assert.equal(other.ok, true, JSON.stringify(other));
  assert.equal(fourthDone, false, 'the org still holds its share');
  // One held request is answered: its socket, falling idle, closes for the waiting one.
  held.shift()!.end('{"ok":true}');
  assert.equal((await out[0])!.ok, true);
  const outcome = await fourth;
  assert.equal(outcome.ok, true, JSON.stringify(outcome));
  assert.equal(pools.stats().waiting, 0);
  for (const res of held.splice(0)) res.end('{"ok":true}');
  for (const result of await Promise.all(out.slice(1))) assert.equal(result.ok, true);
});

test('a request waiting for room whose run no longer wants it (cancelled) is withdrawn when its turn comes, without opening a connection', async () => {
  const out = [0, 1, 2].map((i) => send('acct-canceller', NAMES[i]!, '/hold'));
  await eventually('three requests held by the receiver', () => held.length, (n) => n === 3);
  let wanted = true;
  const waiting = sendWebhook(
    // An address, not a name: a connection opened for it would reach the receiver at once (a name is looked up first).
    { orgId: 'acct-canceller', url: `http://127.0.0.1:${port}/ok`, headers: {}, timeoutMs: 10_000, body: '{}', idempotencyKey: 'run_cancelled:s', fence: 1, attempt: 1, signingSecrets: () => [], nowMs: Date.now(), stillWanted: () => wanted },
    { selfPort: 1, connections: pools },
  );
  await eventually('the fourth request waiting for room', () => pools.stats().waiting, (n) => n === 1);
  wanted = false;
  const openedBefore = opened;
  held.shift()!.end('{"ok":true}');
  const outcome = await waiting;
  assert.equal(outcome.ok, false);
  assert.equal(!outcome.ok && outcome.error.code, 'webhook_withdrawn');
  // A connection opened for it would be accepted before a later one (the listen backlog is FIFO).
  assert.equal((await send('acct-probe', NAMES[5]!, '/ok')).ok, true);
  assert.equal(opened, openedBefore + 1, 'only the later request\'s connection was opened, none for the withdrawn one');
  for (const res of held.splice(0)) res.end('{"ok":true}');
  for (const result of await Promise.all(out)) assert.equal(result.ok, true);
});

test('a request waiting for room whose attempt is withdrawn (its signal aborts) leaves the queue at once, before any room frees', async () => {
  const out = [0, 1, 2].map((i) => send('acct-aborter', NAMES[i]!, '/hold'));
  await eventually('three requests held by the receiver', () => held.length, (n) => n === 3);
  let wanted = true;
  const withdraw = new AbortController();
  const waiting = sendWebhook(
    { orgId: 'acct-aborter', url: `http://127.0.0.1:${port}/ok`, headers: {}, timeoutMs: 10_000, body: '{}', idempotencyKey: 'run_aborted:s', fence: 1, attempt: 1, signingSecrets: () => [], nowMs: Date.now(), stillWanted: () => wanted, withdrawn: () => withdraw.signal },
    { selfPort: 1, connections: pools },
  );
  await eventually('the fourth request waiting for room', () => pools.stats().waiting, (n) => n === 1);
  wanted = false;
  withdraw.abort();
  const outcome = await waiting;
  assert.equal(!outcome.ok && outcome.error.code, 'webhook_withdrawn');
  assert.equal(pools.stats().waiting, 0, 'out of the queue while the org still holds its share');
  assert.equal(held.length, 3);
  for (const res of held.splice(0)) res.end('{"ok":true}');
  for (const result of await Promise.all(out)) assert.equal(result.ok, true);
});

test('each request waiting for room closes one idle socket of its org, not the same one again; waiting requests are told apart', () => {
  const idle = new OrgIdleSockets();
  const socket = () => ({ destroyed: false, destroy(this: { destroyed: boolean }) { this.destroyed = true; }, on: () => undefined, off: () => undefined });
  const sockets = [socket(), socket(), socket()];
  for (const s of sockets) idle.kept(s, 'acct-a');
  idle.kept(socket(), 'acct-b');
  idle.closeOne('acct-a');
  idle.closeOne('acct-a');
  assert.deepEqual(sockets.map((s) => s.destroyed), [true, true, false], 'two calls close two sockets (their close comes later)');
  assert.equal(idle.hasRoom('acct-a'), true);

  const share = new OrgSocketShare(1);
  share.opened('acct-a');
  const connected: string[] = [];
  const [first, second, other] = [{}, {}, {}];
  // Connecting opens a socket at once, as the agent's createConnection does.
  const connect = (name: string) => () => {
    connected.push(name);
    share.opened('acct-a');
  };
  share.wait('acct-a', first, () => true, connect('first'));
  share.wait('acct-a', second, () => true, connect('second'));
  assert.deepEqual([share.isWaiting(first), share.isWaiting(other), share.waiting, share.hasWaiting('acct-b')], [true, false, 2, false]);
  share.closed('acct-a');
  assert.deepEqual(connected, ['first'], 'one socket closed: one request connects');
  assert.deepEqual([share.isWaiting(first), share.waiting], [false, 1]);
});

/**
 * A share of `total` sockets (10 per org) whose waiting requests, once let connect, are named in
 * `connected`. Its clock stands still and no socket's life is told: turns fall to the sockets each
 * org holds, then to order (org-socket-fairness.test.ts runs turns on a moving clock).
 */
function sharing(total: number) {
  const share = new OrgSocketShare(10, total, () => 0);
  const connected: string[] = [];
  const connect = (org: string, name: string) => () => {
    connected.push(name);
    share.opened(org);
  };
  return { share, connected, connect };
}

test('past the process-wide total a new connection of any org waits; the room each closed socket frees goes to the waiting orgs in turn', () => {
  const { share, connected, connect } = sharing(2);
  share.opened('acct-a');
  share.opened('acct-b');
  assert.equal(share.hasRoom('acct-c'), false, 'the process holds its total');
  share.wait('acct-c', {}, () => true, connect('acct-c', 'c1'));
  share.wait('acct-c', {}, () => true, connect('acct-c', 'c2'));
  share.wait('acct-d', {}, () => true, connect('acct-d', 'd1'));
  assert.equal(share.full, true);
  share.closed('acct-a');
  assert.deepEqual(connected, ['c1']);
  share.closed('acct-b');
  assert.deepEqual(connected, ['c1', 'd1'], "d's turn before c's second request");
  share.closed('acct-c');
  assert.deepEqual(connected, ['c1', 'd1', 'c2']);
  assert.deepEqual([share.full, share.waiting], [false, 0]);
  // Full only for an org that waits for the process's room: one waiting for its own share is not helped by others' idle sockets.
  const capped = new OrgSocketShare(1, 2);
  capped.opened('acct-x');
  capped.opened('acct-y');
  capped.wait('acct-x', {}, () => true, () => undefined);
  assert.equal(capped.full, false, 'acct-x waits for its own share');
  capped.wait('acct-z', {}, () => true, () => undefined);
  assert.equal(capped.full, true);
  assert.deepEqual([defaultOutboundSocketTotal(20_000), defaultOutboundSocketTotal(256), defaultOutboundSocketTotal(100), defaultOutboundSocketTotal(undefined)], [2492, 24, 8, OUTBOUND_SOCKETS_FALLBACK]);
});

test('past the total, a waiting org that holds no socket gets the room freed before orgs that hold some, whenever it came', () => {
  const { share, connected, connect } = sharing(3);
  for (const org of ['acct-a', 'acct-b', 'acct-c']) share.opened(org);
  // Busy orgs queue first; a quiet one comes last, holding nothing.
  share.wait('acct-a', {}, () => true, connect('acct-a', 'a2'));
  share.wait('acct-b', {}, () => true, connect('acct-b', 'b2'));
  share.wait('acct-quiet', {}, () => true, connect('acct-quiet', 'q1'));
  share.wait('acct-quiet', {}, () => true, connect('acct-quiet', 'q2'));
  share.closed('acct-c');
  assert.deepEqual(connected, ['q1'], 'the org holding none goes first');
  share.closed('acct-quiet');
  // Its one socket closed with a request still waiting: it holds none again, and goes first again.
  assert.deepEqual(connected, ['q1', 'q2']);
  share.closed('acct-a');
  share.closed('acct-b');
  // acct-a and acct-b now hold none either, each with a request waiting: served as they close.
  assert.deepEqual(connected, ['q1', 'q2', 'a2', 'b2']);
  // A waiting org that holds none but whose request was withdrawn is passed over.
  share.wait('acct-gone', {}, () => false, connect('acct-gone', 'gone'));
  share.wait('acct-a', {}, () => true, connect('acct-a', 'a3'));
  share.closed('acct-b');
  assert.deepEqual(connected.at(-1), 'a3');
  assert.equal(share.waiting, 0);
});

// Idle sockets stay a minute here, far past the test's timeout: a room that only their idle timeout
// would free leaves a request waiting until the test fails.
const PAST_IDLE = { timeout: 10_000 };

test("through the pools: past the total, another org's connection takes an idle socket's room, and a finished socket closes for a waiting org instead of idling", PAST_IDLE, async () => {
  const small = new OutboundConnections(4, 'any', { resolver: new ReceiverResolver({ hostsPath: join(dir, 'hosts') }), socketsTotal: 2, idleSocketMs: 60_000 });
  // The receiver keeps idle connections as long (Node's server closes them after 5 s by default).
  const keepAliveBefore = server.keepAliveTimeout;
  server.keepAliveTimeout = 60_000;
  const sendVia = (orgId: string, name: string, path: string) =>
    sendWebhook(
      { orgId, url: `http://${name}:${port}${path}`, headers: {}, timeoutMs: 10_000, body: '{}', idempotencyKey: `run_${orgId}_${name}:t`, fence: 1, attempt: 1, signingSecrets: () => [], nowMs: Date.now() },
      { selfPort: 1, connections: small },
    );
  try {
    assert.equal((await sendVia('acct-total-a', NAMES[0]!, '/ok')).ok, true);
    const b = sendVia('acct-total-b', NAMES[1]!, '/hold');
    await eventually("b's request held", () => held.length, (n) => n === 1);
    assert.deepEqual([small.stats().open, small.stats().limit], [2, 2], "a's socket idle, b's busy");
    // c waits for room: a's idle socket closes for it.
    assert.equal((await sendVia('acct-total-c', NAMES[2]!, '/ok')).ok, true);
    const d = sendVia('acct-total-d', NAMES[3]!, '/hold');
    await eventually("d's request held (c's idle socket closed for it)", () => held.length, (n) => n === 2);
    let eDone = false;
    const e = sendVia('acct-total-e', NAMES[4]!, '/ok').then((outcome) => ((eDone = true), outcome));
    await eventually('e waiting for room', () => small.stats().waiting, (n) => n === 1);
    assert.equal(eDone, false);
    // b's answer: its socket closes for e instead of idling.
    held.shift()!.end('{"ok":true}');
    assert.equal((await b).ok, true);
    assert.equal((await e).ok, true);
    assert.ok(small.stats().open <= 2, `${small.stats().open} open`);
    held.shift()!.end('{"ok":true}');
    assert.equal((await d).ok, true);
  } finally {
    small.close();
    server.keepAliveTimeout = keepAliveBefore;
  }
});

test('a socket the receiver closes does not take the process past its total: the agent serves its origin\'s queue first, the waiting org the room left', PAST_IDLE, async () => {
  // The pools' own count of open sockets, read as each connection arrives (the server's view of
  // closes lags behind the client's).
  let most = 0;
  const closer = createServer((req, res) => {
    req.resume();
    req.on('end', () => (req.url === '/hold' ? held.push(res) : res.writeHead(200, { connection: 'close' }).end('{"ok":true}')));
  });
  closer.on('connection', () => (most = Math.max(most, single.stats().open)));
  await new Promise<void>((resolve) => closer.listen(0, '127.0.0.1', resolve));
  const closerPort = (closer.address() as AddressInfo).port;
  // One connection per receiver: an org's second request waits in the agent's queue for its origin.
  const single = new OutboundConnections(1, 'any', { resolver: new ReceiverResolver({ hostsPath: join(dir, 'hosts') }), socketsTotal: 2, idleSocketMs: 60_000 });
  const sendTo = (orgId: string, name: string, path: string, n: number) =>
    sendWebhook(
      { orgId, url: `http://${name}:${closerPort}${path}`, headers: {}, timeoutMs: 10_000, body: '{}', idempotencyKey: `run_${orgId}_${n}:c`, fence: 1, attempt: 1, signingSecrets: () => [], nowMs: Date.now() },
      { selfPort: 1, connections: single },
    );
  try {
    const heldBefore = held.length;
    const holder = sendTo('acct-close-b', NAMES[1]!, '/hold', 1);
    await eventually("b's request held", () => held.length, (n) => n === heldBefore + 1);
    const a = [sendTo('acct-close-a', NAMES[0]!, '/close', 1), sendTo('acct-close-a', NAMES[0]!, '/close', 2)];
    const c = sendTo('acct-close-c', NAMES[2]!, '/close', 1);
    const outcomes = await Promise.all([...a, c]);
    assert.ok(outcomes.every((outcome) => outcome.ok), JSON.stringify(outcomes));
    assert.equal(most, 2, 'never more than the total open at once');
    held.pop()!.end('{"ok":true}');
    assert.equal((await holder).ok, true);
  } finally {
    single.close();
    await new Promise((resolve) => closer.close(resolve));
  }
});
