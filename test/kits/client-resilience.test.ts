// The client against servers that misbehave (a `ws` or plain TCP server playing Sluice) and
// against messages Sluice would refuse: an unknown frame or a throwing callback does not crash
// the program, a refusal cut off mid-body or a server that goes silent is retried, a server that
// ends every connection at once is retried with waits, and a device message that can never be
// stored is rejected before it is sent instead of hanging.

import assert from 'node:assert/strict';
import { createServer } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { WebSocketServer } from 'ws';
import { connectDevice, DeviceError, watchRuns, type RunUpdate, type Sleep } from '../../kits/client/index.ts';
import { durably } from '../../runtime/ledger/durable-write.ts';
import { encodeLiveMessage } from '../../runtime/rooms/live-codec.ts';
import { call, createOrg } from '../helpers/http.ts';
import { eventually } from '../helpers/receiver.ts';
import { ADMIN_TOKEN, startRuntime, type TestRuntime } from '../helpers/runtime.ts';

const noWait: Sleep = async () => undefined;

/** A WebSocket server speaking as the live room would; `onConnection` decides what it does. */
async function fakeLiveRoom(onConnection: (socket: import('ws').WebSocket) => void): Promise<{ url: string; close: () => void }> {
  const server = new WebSocketServer({ port: 0, host: '127.0.0.1', handleProtocols: () => 'sluice-live' });
  await new Promise((resolve) => server.on('listening', resolve));
  server.on('connection', onConnection);
  return { url: `http://127.0.0.1:${(server.address() as { port: number }).port}`, close: () => server.close() };
}

const update = (seq: number): RunUpdate => ({ run_id: `run_${seq}`, state: 'completed', channel: '', workflow_id: 'w', event_id: 'e', step_id: '', attempt: 0, seq, at_ms: 1, error: '', environment: 'production' });

test('an unknown frame is skipped and a throwing onUpdate is reported; later updates still arrive', async () => {
  const room = await fakeLiveRoom((socket) => {
    socket.send(encodeLiveMessage({ heartbeat: { at_ms: 1, last_seq: 5, subscribe_frames: 0 } }));
    socket.send(Buffer.alloc(0)); // a LiveMessage of a kind this client does not know
    socket.send(encodeLiveMessage({ run_update: update(6) }));
    socket.send(encodeLiveMessage({ run_update: update(7) }));
  });
  const seen: number[] = [];
  const errors: unknown[] = [];
  const live = watchRuns({
    url: room.url, apiKey: 'k', org: 'o', sleep: noWait,
    onUpdate: (u) => {
      if (u.seq === 6) throw new Error('the application failed on 6');
      seen.push(u.seq);
    },
    onError: (error) => errors.push(error),
  });
  await eventually('update 7', () => seen, (list) => list.includes(7));
  live.close();
  room.close();
  assert.deepEqual(seen, [7]);
  assert.match(String(errors[0]), /failed on 6/);
  assert.equal(live.position, 7);
});

test('no onUpdate after close(): frames still on their way are dropped, so the position read at close() is the one to resume from', async () => {
  const room = await fakeLiveRoom((socket) => {
    socket.send(encodeLiveMessage({ heartbeat: { at_ms: 1, last_seq: 5, subscribe_frames: 0 } }));
    for (let seq = 6; seq <= 15; seq++) socket.send(encodeLiveMessage({ run_update: update(seq) }));
  });
  const seen: number[] = [];
  const live = watchRuns({
    url: room.url, apiKey: 'k', org: 'o', sleep: noWait,
    onUpdate: (u) => {
      seen.push(u.seq);
      live.close();
    },
  });
  await live.done;
  room.close();
  assert.deepEqual(seen, [6]);
  assert.equal(live.position, 6);
});

test('a refusal whose body is cut off, and a server that goes silent, are retried', async () => {
  let refusals = 0;
  const tcp = createServer((socket) => {
    refusals++;
    // The client's close() may reset an attempt under way.
    socket.on('error', () => undefined);
    socket.once('data', () => {
      socket.write('HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n{"error":');
      setTimeout(() => socket.destroy(), 20);
    });
  });
  await new Promise<void>((resolve) => tcp.listen(0, '127.0.0.1', resolve));
  const cutOff = watchRuns({ url: `http://127.0.0.1:${(tcp.address() as { port: number }).port}`, apiKey: 'k', org: 'o', onUpdate: () => undefined, sleep: noWait });
  await eventually('a second attempt', () => refusals, (n) => n >= 2);
  cutOff.close();
  tcp.close();

  let connections = 0;
  const silent = await fakeLiveRoom(() => void connections++);
  const quiet = watchRuns({ url: silent.url, apiKey: 'k', org: 'o', onUpdate: () => undefined, sleep: noWait, silenceMs: 50 });
  await eventually('a reconnect after the silence', () => connections, (n) => n >= 2);
  quiet.close();
  silent.close();
});

test('a refusal answered in full on a kept-alive connection: the client closes that connection, so a program ends at once', async () => {
  let connection: import('node:net').Socket | undefined;
  const tcp = createServer((socket) => {
    connection = socket;
    socket.once('data', () => {
      const body = '{"error":{"code":"unauthorized","message":"no"}}';
      socket.write(`HTTP/1.1 401 Unauthorized\r\nconnection: keep-alive\r\ncontent-type: application/json\r\ncontent-length: ${body.length}\r\n\r\n${body}`);
    });
  });
  await new Promise<void>((resolve) => tcp.listen(0, '127.0.0.1', resolve));
  const closedByClient = new Promise<void>((resolve) => tcp.once('connection', (socket) => socket.once('close', () => resolve())));
  const live = watchRuns({ url: `http://127.0.0.1:${(tcp.address() as { port: number }).port}`, apiKey: 'k', org: 'o', sleep: noWait, onUpdate: () => undefined });
  await assert.rejects(live.done, /refused the connection \(401\): unauthorized: no$/);
  // The server never closes it: only the client can end this wait.
  await closedByClient;
  assert.ok(connection?.destroyed);
  tcp.close();
});

test('a server that ends every connection with 4410 gets a wait before each new attempt, and close() ends a wait', async () => {
  let connections = 0;
  const room = await fakeLiveRoom((socket) => {
    connections++;
    socket.close(4410, 'replay_gone');
  });
  const waits: number[] = [];
  let release: () => void = () => undefined;
  const live = watchRuns({
    url: room.url, apiKey: 'k', org: 'o', onUpdate: () => undefined,
    sleep: async (ms) => {
      waits.push(ms);
      if (waits.length === 3) await new Promise<void>((resolve) => (release = resolve)); // a long wait
    },
  });
  await eventually('the third wait', () => waits.length, (n) => n === 3);
  assert.equal(connections, 3, 'one connection per wait');
  live.close();
  await live.done; // resolves although the third wait never ends by itself
  release();
  room.close();
});

describe('devices', () => {
  let rt: TestRuntime;
  let token: string;
  const ORG = 'acct-client-resilience';
  before(async () => {
    rt = await startRuntime();
    const key = await createOrg(rt.url, ADMIN_TOKEN, ORG);
    token = (await call(rt.url, 'POST', `/organizations/${ORG}/devices`, { token: key, json: { name: 'd1' } })).body.token;
  });
  after(() => rt.close());

  test('a device message Sluice can never store (an id it cannot read, a frame too large) is rejected before sending', async () => {
    const device = connectDevice({ url: rt.url, org: ORG, device: 'd1', token, sleep: noWait });
    const badId = await device.send({ id: 'café-1', type: 'reading.taken' }).catch((error: unknown) => error);
    assert.ok(badId instanceof DeviceError && badId.code === 'invalid_message' && badId.field === 'id');
    const tooLarge = await device.send({ type: 'reading.taken', payload: { blob: 'x'.repeat(200_000) } }).catch((error: unknown) => error);
    assert.ok(tooLarge instanceof DeviceError && tooLarge.code === 'frame_too_large');
    assert.equal((await device.send({ id: 'fine-1', type: 'reading.taken' })).duplicate, false, 'the connection goes on');
    assert.equal(device.pending, 0);
    device.close();
  });
});

/**
 * Runs `body` against a runtime started with `args`; `watch` starts a subscription that, like the
 * runtime, is ended afterwards whatever happened.
 */
async function withRuntime(args: string[], body: (rt: TestRuntime, watch: typeof watchRuns) => Promise<void>): Promise<void> {
  const rt = await startRuntime({ args });
  const subscriptions: Array<ReturnType<typeof watchRuns>> = [];
  try {
    await body(rt, (options) => {
      const subscription = watchRuns(options);
      subscriptions.push(subscription);
      return subscription;
    });
  } finally {
    for (const subscription of subscriptions) subscription.close();
    await Promise.allSettled(subscriptions.map((subscription) => subscription.done));
    await rt.close();
  }
}

test('an org at its live-socket cap (429) is retried, and the subscription connects once a socket closes', async () => {
  await withRuntime(['--live-sockets-per-org', '1'], async (capped, watch) => {
    const apiKey = await createOrg(capped.url, ADMIN_TOKEN, 'acct-kit-capped');
    const first = watch({ url: capped.url, apiKey, org: 'acct-kit-capped', onUpdate: () => undefined, sleep: noWait });
    await eventually('the first socket open', () => capped.runtime.rooms.subscriberCount, (n) => n === 1);
    const refusals: string[] = [];
    // A short real wait between attempts: the test only needs the refusals not to spin the loop.
    const second = watch({ url: capped.url, apiKey, org: 'acct-kit-capped', onUpdate: () => undefined, sleep: () => new Promise((resolve) => setTimeout(resolve, 10)), onDisconnect: (why) => refusals.push(why) });
    let ended: unknown;
    second.done.catch((error: unknown) => (ended = error));
    await eventually('refusals retried', () => (ended === undefined ? refusals.length : -1), (n) => n >= 2 || n === -1);
    assert.equal(ended, undefined, 'a 429 does not end the subscription');
    assert.match(refusals[0]!, /429/);
    first.close();
    await first.done;
    await eventually('the second socket open once the first closed', () => capped.runtime.rooms.subscriberCount, (n) => n === 1);
    assert.equal(ended, undefined, 'the subscription never gave up');
  });
});

test('a position of 0 (a quiet org\'s heartbeat) is a position: updates after it that Sluice no longer retains end in onReload, not in a silent gap', async () => {
  await withRuntime(['--live-retention', '20'], async (rt, watch) => {
    const apiKey = await createOrg(rt.url, ADMIN_TOKEN, 'acct-kit-quiet');
    const first = watch({ url: rt.url, apiKey, org: 'acct-kit-quiet', onUpdate: () => undefined, sleep: noWait });
    await eventually('a position from the first heartbeat', () => first.position, (position) => position === 0);
    first.close();
    await first.done;
    // 30 updates while nobody watches: the log keeps the newest 20.
    const { ledger, updateLog, rooms } = rt.runtime;
    const fresh = Array.from({ length: 30 }, (_, i) => ({ run_id: `run_q${i}`, state: 'queued', channel: '', workflow_id: 'w', event_id: 'e', step_id: '', attempt: 0, at_ms: 1, error: '', environment: 'production' }));
    rooms.publish('acct-kit-quiet', await durably(ledger.root, ledger.root.transaction(() => fresh.map((u) => updateLog.append('acct-kit-quiet', u)))));
    const reloads: string[] = [];
    const seen: number[] = [];
    watch({ url: rt.url, apiKey, org: 'acct-kit-quiet', afterSeq: first.position ?? 0, onUpdate: (u) => void seen.push(u.seq), onReload: (reason) => void reloads.push(reason), sleep: noWait });
    await eventually('the reload', () => reloads, (list) => list.length > 0);
    assert.deepEqual(reloads, ['replay_gone']);
    assert.deepEqual(seen, [], 'no partial replay passed off as complete');
    // Stopped while its reload is pending (the reconnect still waiting): the position stays where
    // the gap is, so a program that resumes from it is told to reload again.
    const ends: string[] = [];
    const stalled = watch({ url: rt.url, apiKey, org: 'acct-kit-quiet', afterSeq: 1, onUpdate: () => undefined, onReload: (reason) => void reloads.push(reason), onDisconnect: (why) => void ends.push(why), sleep: () => new Promise<void>(() => undefined) });
    await eventually('the 4410', () => ends, (list) => list.some((why) => why.includes('4410')));
    stalled.close();
    await stalled.done;
    assert.equal(stalled.position, 1, 'not undefined ("live from now"), which would skip the gap silently');
    assert.deepEqual(reloads, ['replay_gone'], 'its reload was not told yet');
  });
});

test('a refusal whose body is not Sluice\'s (a proxy\'s page) is told by its size, never quoted, by live and device sockets: it may hold a session id', async () => {
  const page = '<html>session=abc123</html>';
  const tcp = createServer((socket) => {
    socket.once('data', () => socket.end(`HTTP/1.1 403 Forbidden\r\ncontent-type: text/html\r\ncontent-length: ${page.length}\r\n\r\n${page}`));
  });
  await new Promise<void>((resolve) => tcp.listen(0, '127.0.0.1', resolve));
  try {
    const url = `http://127.0.0.1:${(tcp.address() as { port: number }).port}`;
    const live = watchRuns({ url, apiKey: 'k', org: 'o', sleep: noWait, onUpdate: () => undefined });
    await assert.rejects(live.done, (error: unknown) => {
      assert.match(String(error), /refused the connection \(403\): a body of 27 bytes that is not Sluice's JSON error \(not shown\)/);
      assert.doesNotMatch(String(error), /session/);
      return true;
    });
    const device = connectDevice({ url, org: 'o', device: 'd', token: 't', sleep: noWait });
    await assert.rejects(device.done, (error: unknown) => {
      assert.ok(error instanceof DeviceError && error.code === 'http_403', String(error));
      assert.match(error.message, /refused the device socket \(403\): a body of 27 bytes that is not Sluice's JSON error \(not shown\)/);
      return true;
    });
  } finally {
    tcp.close();
  }
});
