// The client against a real TCP server that accepts connections and never says a word: a live or
// device socket whose handshake never completes is given up after silenceMs and retried (it used
// to wait forever), a REST attempt times out after timeoutMs and counts as a network failure, and
// a call's signal cancels it at once, not retried. Timeouts are injected small; nothing sleeps.

import assert from 'node:assert/strict';
import { createServer as createHttpServer } from 'node:http';
import { WebSocketServer, type WebSocket } from 'ws';
import { createServer, type Server } from 'node:net';
import { after, test } from 'node:test';
import { setTimeout as delay } from 'node:timers/promises';
import { connectDevice, DeviceError, SluiceClient, SluiceNetworkError, watchRuns, type Sleep } from '../../kits/client/index.ts';
import { DEVICE_MIN_UPTIME_MS } from '../../kits/client/device-connection.ts';
import { eventually } from '../helpers/receiver.ts';
import { silentListener, type SilentListener } from '../helpers/silent-listener.ts';
import { answeredWithoutTls, plainHttpHint } from '../../kits/client/plain-http-hint.ts';
import { runSocket } from '../../kits/client/socket-run.ts';

const noWait: Sleep = async () => undefined;
const servers: Server[] = [];
const silentListeners: SilentListener[] = [];
after(async () => {
  servers.forEach((server) => server.close());
  await Promise.all(silentListeners.map((silent) => silent.close()));
});

/** A server that accepts, reads and never answers (silent-listener.ts), closed after the file's tests. */
async function silentServer(): Promise<{ url: string; requests: () => number }> {
  const silent = await silentListener();
  silentListeners.push(silent);
  return { url: `http://127.0.0.1:${silent.port}`, requests: () => silent.requests() };
}

test('a live subscription whose handshake is never answered gives up after silenceMs, says so, and reconnects', async () => {
  const { url, requests } = await silentServer();
  const disconnects: string[] = [];
  const live = watchRuns({ url, apiKey: 'k', org: 'o', silenceMs: 200, sleep: noWait, onUpdate: () => undefined, onDisconnect: (why) => disconnects.push(why) });
  await eventually('a reconnect', requests, (n) => n >= 2);
  live.close();
  await live.done;
  assert.equal(disconnects[0], 'the live room did not answer within 200 ms');
});

// Found by review: what onDisconnect threw ended the subscription (done rejected) instead of
// reaching onError as what the other callbacks throw does.
test('what onDisconnect throws goes to onError, and the subscription reconnects', async () => {
  const { url, requests } = await silentServer();
  const errors: unknown[] = [];
  const live = watchRuns({ url, apiKey: 'k', org: 'o', silenceMs: 200, sleep: noWait, onUpdate: () => undefined, onError: (error) => errors.push(error), onDisconnect: () => {
    throw new Error('a bug in the application');
  } });
  await eventually('two reconnects', requests, (n) => n >= 3);
  live.close();
  await live.done;
  assert.ok(errors.length >= 2, `reported each time: ${errors.length}`);
  assert.equal((errors[0] as Error).message, 'a bug in the application');
});

test('a device socket whose handshake is never answered is retried; a send waits for it and close() rejects it', async () => {
  const { url, requests } = await silentServer();
  const device = connectDevice({ url, org: 'o', device: 'd', token: 't', silenceMs: 200, sleep: noWait });
  const sent = device.send({ type: 'reading.taken' });
  await eventually('a reconnect', requests, (n) => n >= 2);
  assert.equal(device.pending, 1, 'held across the attempts');
  device.close();
  await assert.rejects(sent, (error: unknown) => error instanceof DeviceError && error.code === 'closed');
});

test('a REST attempt with no answer times out after timeoutMs and is retried like a network failure', async () => {
  const { url, requests } = await silentServer();
  const client = new SluiceClient({ url, apiKey: 'k', org: 'o', timeoutMs: 200, maxAttempts: 2, sleep: noWait });
  const failed = await client.getEvent('evt_1').catch((error: unknown) => error);
  assert.ok(failed instanceof SluiceNetworkError, String(failed));
  assert.equal(failed.code, 'timeout');
  assert.equal(failed.attempts, 2);
  assert.match(failed.message, /^GET http:\/\/127\.0\.0\.1:\d+\/organizations\/o\/events\/evt_1\?environment=production: no answer within 200 ms \(2 attempts\)\.$/);
  assert.equal(requests(), 2);

  // A POST that is not safe to repeat times out once, as a call's own timeoutMs says.
  await assert.rejects(client.resumeRun('run_1', 'production', { timeoutMs: 100 }), (error: unknown) => error instanceof SluiceNetworkError && error.code === 'timeout' && error.attempts === 1);
  assert.equal(requests(), 3, 'one more attempt');
});

test("a call's signal cancels it at once with the signal's reason, during an attempt or a wait, and it is not retried", async () => {
  const { url, requests } = await silentServer();
  const client = new SluiceClient({ url, apiKey: 'k', org: 'o', sleep: noWait });
  const controller = new AbortController();
  const sending = client.sendEvent({ type: 'note.added', payload: {} }, { signal: controller.signal });
  await eventually('the attempt sent', requests, (n) => n === 1);
  const reason = new Error('the user went away');
  controller.abort(reason);
  await assert.rejects(sending, (error: unknown) => error === reason);
  assert.equal(requests(), 1, 'not retried');

  // The client's own signal ends a wait between attempts (this sleep never ends by itself).
  const clientSignal = new AbortController();
  let waits = 0;
  const neverEnds: Sleep = () => {
    waits++;
    return new Promise(() => undefined);
  };
  // Long enough for the attempt to reach the server on a loaded machine (50 ms timed out before it
  // was sent, under a full test run), so the count below is the client's doing, not the machine's.
  const waiting = new SluiceClient({ url, apiKey: 'k', org: 'o', timeoutMs: 500, signal: clientSignal.signal, sleep: neverEnds });
  const listing = waiting.getRun('run_1');
  await eventually('the attempt sent', requests, (n) => n === 2);
  await eventually('the wait after the first attempt timed out', () => waits, (n) => n === 1);
  clientSignal.abort();
  await assert.rejects(listing, (error: unknown) => error instanceof DOMException && error.name === 'AbortError');
  assert.equal(requests(), 2, 'the first call, and the one attempt of the second');
});

test('an unreachable server is a SluiceNetworkError that keeps fetch\'s error as its cause', async () => {
  const closed = createServer();
  await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
  const port = (closed.address() as { port: number }).port;
  await new Promise((resolve) => closed.close(resolve));
  const client = new SluiceClient({ url: `http://127.0.0.1:${port}`, apiKey: 'k', org: 'o', sleep: noWait, maxAttempts: 2 });
  const failed = await client.getEvent('evt_1').catch((error: unknown) => error);
  assert.ok(failed instanceof SluiceNetworkError, String(failed));
  assert.equal(failed.code, 'network_error');
  assert.ok(failed.cause instanceof TypeError);
  assert.match(failed.message, /ECONNREFUSED.*\(2 attempts\)/);
});

test('an https:// or wss:// url at a plain-HTTP server is told to use http:// or ws://: the TLS handshake\'s own words do not say so', async () => {
  // A plain HTTP server answers the TLS hello as a bad request (OpenSSL: "wrong version number").
  const plain = createHttpServer(() => undefined);
  servers.push(plain);
  await new Promise<void>((resolve) => plain.listen(0, '127.0.0.1', resolve));
  const address = `127.0.0.1:${(plain.address() as { port: number }).port}`;
  const client = new SluiceClient({ url: `https://${address}`, apiKey: 'k', org: 'o', sleep: noWait });
  const failed = await client.getEvent('evt_1').catch((error: unknown) => error);
  assert.ok(failed instanceof SluiceNetworkError, String(failed));
  assert.match(failed.message, /\(1 attempt\); if the server speaks plain HTTP \(Sluice does unless TLS is put in front of it\), use http:\/\/ instead of https:\/\/\.$/, 'not retried: it fails the same way each time');
  const disconnects: string[] = [];
  const live = watchRuns({ url: `https://${address}`, apiKey: 'k', org: 'o', sleep: noWait, onUpdate: () => undefined, onDisconnect: (why) => disconnects.push(why) });
  await eventually('a disconnect', () => disconnects.length, (n) => n >= 1);
  live.close();
  await live.done;
  // Named for the url given (`sluice watch` takes an http(s):// url, never a ws:// one).
  assert.match(disconnects[0]!, /^the live room could not be reached \(.+\); if the server speaks plain HTTP .*use http:\/\/ instead of https:\/\/$/);
  // Not for a plain url, nor for another failure.
  assert.equal(plainHttpHint(new URL('http://127.0.0.1:1'), 'Connect Timeout Error UND_ERR_CONNECT_TIMEOUT'), '');
  assert.equal(plainHttpHint(new URL('https://127.0.0.1:1'), 'connect ECONNREFUSED 127.0.0.1:1 ECONNREFUSED'), '');
  assert.notEqual(plainHttpHint(new URL('https://127.0.0.1:1'), 'Connect Timeout Error UND_ERR_CONNECT_TIMEOUT'), '', 'a server that ignores the hello times out the connect');
  assert.equal(answeredWithoutTls(new URL('https://127.0.0.1:1'), 'Connect Timeout Error UND_ERR_CONNECT_TIMEOUT'), false, 'but so does an unreachable one: that is retried');
  assert.equal(answeredWithoutTls(new URL('https://127.0.0.1:1'), 'Client network socket disconnected before secure TLS connection was established ECONNRESET'), false, 'and a TLS server restarting closes as a plain one does: retried');
});

test('an open socket pings the server every keepAliveMs (a client reading a long replay slowly is not idle to the server), and the answers keep a quiet socket open: a server that hears them never pings (it used to drop itself after silenceMs)', async () => {
  const server = new WebSocketServer({ port: 0, host: '127.0.0.1' });
  await new Promise<void>((resolve) => server.once('listening', () => resolve()));
  let pings = 0;
  server.on('connection', (peer) => peer.on('ping', () => pings++));
  try {
    let over = false;
    const { socket, ended } = runSocket(new URL(`ws://127.0.0.1:${(server.address() as { port: number }).port}`), [], () => undefined, 200, 5_000, 40);
    void ended.then(() => (over = true));
    // Twelve pings take ~480 ms, past twice silenceMs, with no frame and no ping from the server.
    await eventually('twelve pings answered', () => (over ? -1 : pings), (n) => n >= 12 || n === -1);
    assert.equal(over, false, 'still open');
    socket.close();
    assert.equal((await ended).kind, 'closed');
  } finally {
    server.close();
  }
});

/**
 * A device endpoint of the test's own on port 0: each connection is sent `ready` (numbered from 1
 * in its ids), then handed to `onConnection`; `url` is for connectDevice, `close` ends it all.
 */
async function deviceEndpoint(onConnection: (socket: WebSocket, n: number) => void): Promise<{ url: string; close: () => Promise<void> }> {
  const server = new WebSocketServer({ port: 0, host: '127.0.0.1', handleProtocols: (offered) => [...offered][0] ?? false });
  let connections = 0;
  server.on('connection', (socket) => {
    connections++;
    socket.send(JSON.stringify({ type: 'ready', device: 'd', connection_id: `con_${connections}`, event_id: `evt_${connections}` }));
    onConnection(socket, connections);
  });
  await new Promise((resolve) => server.once('listening', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as { port: number }).port}`,
    close: async () => {
      for (const client of server.clients) client.terminate();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

test('a device connection ready for DEVICE_MIN_UPTIME_MS counts as working: its backoff starts again; one cut off sooner backs off; each end is told to onDisconnect', async () => {
  // Every connection is cut when the test says.
  const peers: WebSocket[] = [];
  const endpoint = await deviceEndpoint((socket) => void peers.push(socket));
  const waits: number[] = [];
  // The waits for DEVICE_MIN_UPTIME_MS end when the test says (the connection has been up that long); the backoff waits at once.
  const uptimes: Array<() => void> = [];
  const sleep: Sleep = (ms) => (ms === DEVICE_MIN_UPTIME_MS ? new Promise<void>((resolve) => uptimes.push(resolve)) : (waits.push(ms), Promise.resolve()));
  const whys: string[] = [];
  const device = connectDevice({ url: endpoint.url, org: 'o', device: 'd', token: 'sdt_test', sleep, onDisconnect: (why) => whys.push(why) });
  try {
    for (let n = 1; n <= 2; n++) {
      await eventually(`connection ${n} ready`, () => uptimes.length, (count) => count === n);
      peers[n - 1]!.terminate();
      await eventually(`wait ${n}`, () => waits.length, (count) => count === n);
    }
    await eventually('connection 3 ready', () => uptimes.length, (count) => count === 3);
    uptimes[2]!();
    await new Promise((resolve) => setImmediate(resolve));
    peers[2]!.terminate();
    await eventually('wait 3', () => waits.length, (count) => count === 3);
    assert.ok(waits[0]! >= 125 && waits[0]! <= 250, `first wait ${waits[0]}`);
    assert.ok(waits[1]! >= 250 && waits[1]! <= 500, `second wait, doubled: ${waits[1]}`);
    assert.ok(waits[2]! >= 125 && waits[2]! <= 250, `after a connection up long enough, the first wait again: ${waits[2]}`);
    assert.deepEqual(whys, Array(3).fill('the connection closed (1006)'));
  } finally {
    device.close();
    await endpoint.close();
  }
});

test('a sleep that rejects when its signal aborts (as node:timers/promises\' does) raises nothing when a connection ends before DEVICE_MIN_UPTIME_MS', async () => {
  let connections = 0;
  const endpoint = await deviceEndpoint((socket, n) => {
    connections = n;
    setImmediate(() => socket.terminate());
  });
  const unhandled: unknown[] = [];
  const heard = (reason: unknown): void => void unhandled.push(reason);
  process.on('unhandledRejection', heard);
  // Backoff waits pass at once; the uptime wait rejects when aborted, as timers/promises' setTimeout does.
  const sleep: Sleep = (ms, signal) => (ms === DEVICE_MIN_UPTIME_MS ? delay(60_000, undefined, { signal }) : Promise.resolve());
  const device = connectDevice({ url: endpoint.url, org: 'o', device: 'd', token: 'sdt_test', sleep });
  try {
    await eventually('three connections, each cut after ready', () => connections, (n) => n >= 3);
    device.close();
    await device.done;
    await new Promise((resolve) => setImmediate(resolve));
    assert.deepEqual(unhandled, []);
  } finally {
    process.off('unhandledRejection', heard);
    device.close();
    await endpoint.close();
  }
});

test('a quiet device socket pings every third of a silenceMs under 20 s, and the answers keep it open', async () => {
  let pings = 0;
  let connections = 0;
  const endpoint = await deviceEndpoint((socket, n) => {
    connections = n;
    socket.on('ping', () => pings++);
  });
  const device = connectDevice({ url: endpoint.url, org: 'o', device: 'd', token: 'sdt_test', silenceMs: 300, sleep: noWait });
  try {
    // Six pings (every 100 ms) take twice silenceMs: the same connection all along.
    await eventually('six pings', () => pings, (n) => n >= 6);
    assert.equal(connections, 1);
    assert.equal(device.connected, true);
  } finally {
    device.close();
    await endpoint.close();
  }
});

test('a device connection that cannot reach Sluice says why to onDisconnect, and what throws there is a warning', async () => {
  const { port } = await silentListener().then(async (silent) => {
    await silent.close();
    return silent;
  });
  const whys: string[] = [];
  const device = connectDevice({ url: `http://127.0.0.1:${port}`, org: 'o', device: 'd', token: 't', sleep: noWait, onDisconnect: (why) => {
    whys.push(why);
    throw new Error('the log is full');
  } });
  const warnings: string[] = [];
  const warned = (warning: Error): void => void warnings.push(warning.message);
  process.on('warning', warned);
  try {
    await eventually('two ends told', () => whys.length, (n) => n >= 2);
    assert.match(whys[0]!, /^the device socket could not be reached \(connect ECONNREFUSED 127\.0\.0\.1:\d+\)$/);
    await eventually('the warning', () => warnings, (w) => w.length >= 1);
    assert.equal(warnings[0], 'sluice connectDevice: onDisconnect threw: the log is full');
    assert.equal(device.pending, 0);
  } finally {
    device.close();
    process.off('warning', warned);
  }
});

test('an abort during a wait between attempts also ends the wait: its timer keeps no program alive', async () => {
  let answered = 0;
  const busy = createHttpServer((_request, response) => {
    answered++;
    response.writeHead(503, { 'retry-after': '20', 'content-type': 'application/json' }).end('{"error":{"code":"busy","message":"busy"}}');
  });
  await new Promise<void>((resolve) => busy.listen(0, '127.0.0.1', resolve));
  try {
    const timers = (): number => process.getActiveResourcesInfo().filter((kind) => kind === 'Timeout').length;
    const controller = new AbortController();
    // The real sleep: after the 503 it waits the 20 s Retry-After.
    const client = new SluiceClient({ url: `http://127.0.0.1:${(busy.address() as { port: number }).port}`, apiKey: 'k', org: 'o', signal: controller.signal });
    const before = timers();
    const reading = client.getRun('run_1');
    await eventually('the first answer', () => answered, (n) => n === 1);
    await eventually('the 20 s wait', timers, (n) => n > before);
    controller.abort();
    await assert.rejects(reading, (error: unknown) => error instanceof DOMException && error.name === 'AbortError');
    assert.ok(timers() <= before, 'the wait\'s timer was cleared with the abort');
  } finally {
    busy.closeAllConnections();
    busy.close();
  }
});

test('close() during a device\'s waits after retryable nacks ends them: their timers keep no program alive, and 20 at once raise no leak warning', async () => {
  // A retryable nack with a 20 s wait for every message.
  const endpoint = await deviceEndpoint((socket) => {
    socket.on('message', (data) => {
      const { id } = JSON.parse(data.toString()) as { id: string };
      socket.send(JSON.stringify({ type: 'nack', id, retryable: true, retry_after_ms: 20_000, error: { code: 'server_busy', message: 'busy' } }));
    });
  });
  try {
    const timers = (): number => process.getActiveResourcesInfo().filter((kind) => kind === 'Timeout').length;
    const device = connectDevice({ url: endpoint.url, org: 'o', device: 'd', token: 'sdt_test' });
    await eventually('the socket ready', () => device.connected, (connected) => connected);
    const before = timers();
    const warnings: string[] = [];
    const warned = (warning: Error): void => void warnings.push(warning.name);
    process.on('warning', warned);
    // Twenty messages nacked at once wait at once (a quota used up does that), each on the close signal.
    const sent = Array.from({ length: 20 }, () => device.send({ type: 'reading.taken' }));
    await eventually('the 20 s waits after the nacks', timers, (n) => n >= before + 20);
    device.close();
    for (const one of sent) await assert.rejects(one, (error: unknown) => error instanceof DeviceError && error.code === 'closed');
    await device.done;
    process.off('warning', warned);
    assert.ok(timers() <= before, 'the waits\' timers were cleared with close()');
    assert.deepEqual(warnings, [], 'no MaxListenersExceededWarning: each wait removes its own listener');
  } finally {
    await endpoint.close();
  }
});

test('a silenceMs or timeoutMs no timer can wait (0, Infinity, past 2^31 - 1 ms) is refused when given, not turned into a reconnect loop', () => {
  for (const silenceMs of [0, -1, Infinity, 2 ** 31, Number.NaN]) {
    assert.throws(() => watchRuns({ url: 'http://127.0.0.1:1', apiKey: 'k', org: 'o', onUpdate: () => undefined, silenceMs }), /silenceMs is a number of milliseconds from 1 to 2147483647/, String(silenceMs));
    assert.throws(() => connectDevice({ url: 'http://127.0.0.1:1', org: 'o', device: 'd', token: 't', silenceMs }), /silenceMs is a number of milliseconds from 1 to 2147483647/, String(silenceMs));
    assert.throws(() => new SluiceClient({ url: 'http://127.0.0.1:1', apiKey: 'k', org: 'o', timeoutMs: silenceMs }), /timeoutMs is a number of milliseconds/, String(silenceMs));
  }
});
