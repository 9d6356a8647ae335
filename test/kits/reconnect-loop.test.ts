// The reconnect loop the client's live and device connections share, against a real `ws` server
// that ends each connection as the test says: the backoff grows while connections do not work and
// starts again after one that did, an error from `classify` ends it, close() ends it at once, and
// an open() that throws ends it through `cannotOpen`.

import assert from 'node:assert/strict';
import { EventEmitter } from 'node:events';
import { test } from 'node:test';
import { WebSocketServer, type WebSocket } from 'ws';
import { ReconnectLoop } from '../../kits/client/reconnect-loop.ts';
import { MAX_RETRY_AFTER_MS, realSleep } from '../../kits/client/retry.ts';
import { runSocket, type SocketEnd } from '../../kits/client/socket-run.ts';
import { eventually } from '../helpers/receiver.ts';

/** A server that hands the nth connection (from 1) to `onConnection`. */
async function server(onConnection: (socket: WebSocket, n: number) => void): Promise<{ url: URL; close: () => void }> {
  const wss = new WebSocketServer({ port: 0, host: '127.0.0.1' });
  await new Promise((resolve) => wss.on('listening', resolve));
  let n = 0;
  wss.on('connection', (socket) => onConnection(socket, ++n));
  return { url: new URL(`ws://127.0.0.1:${(wss.address() as { port: number }).port}`), close: () => wss.close() };
}

/** A connection that calls `working` on every frame, as the live subscription does. */
const opener = (url: URL, opens: { n: number }) => (working: () => void) => {
  opens.n++;
  return runSocket(url, ['sluice-test'], () => working(), 5_000);
};

/** For loops whose open() never throws. */
const cannotOpen = (error: unknown): Error => (error instanceof Error ? error : new Error(String(error)));

/** The range backoffMs draws the wait before attempt `attempt + 1` from. */
const inRange = (ms: number, attempt: number): boolean => ms >= 125 * 2 ** attempt && ms <= 250 * 2 ** attempt;

test('the backoff grows while connections do not work and starts again after one that did; an error from classify ends the loop', async () => {
  const room = await server((socket, n) => {
    if (n === 3) socket.send('hello'); // the third connection works
    socket.close(n === 5 ? 4000 : 1011);
  });
  const opens = { n: 0 };
  const waits: number[] = [];
  const ends: SocketEnd[] = [];
  const stop = new Error('the end');
  const loop = new ReconnectLoop({
    open: opener(room.url, opens),
    classify: (end) => {
      ends.push(end);
      return end.kind === 'closed' && end.code === 4000 ? stop : undefined;
    },
    cannotOpen,
    sleep: async (ms) => void waits.push(ms),
  });
  await assert.rejects(loop.done, (error) => error === stop);
  room.close();
  assert.equal(opens.n, 5);
  assert.deepEqual(ends.map((end) => end.kind === 'closed' && end.code), [1011, 1011, 1011, 1011, 4000]);
  assert.equal(waits.length, 4, 'a wait before each new attempt, none after the end');
  assert.ok([0, 1, 0, 1].every((attempt, i) => inRange(waits[i]!, attempt)), `waits ${waits.join(', ')}`);
});

test("a refused upgrade's Retry-After is the wait before the next attempt, at most 5 minutes; a refusal without one gets the backoff", async () => {
  const wss = new WebSocketServer({
    port: 0,
    host: '127.0.0.1',
    // The first two upgrades are refused with a hint (a paused device, say), the third with a proxy's
    // hint past what a timer holds, the fourth without one, the fifth accepted.
    verifyClient: (_info, done) => {
      refusals += 1;
      if (refusals <= 2) done(false, 429, 'Too Many Requests', { 'Retry-After': '3' });
      else if (refusals === 3) done(false, 503, 'Service Unavailable', { 'Retry-After': '99999999' });
      else if (refusals === 4) done(false, 429, 'Too Many Requests');
      else done(true);
    },
  });
  let refusals = 0;
  await new Promise((resolve) => wss.on('listening', resolve));
  wss.on('connection', (socket) => socket.close(4000));
  const opens = { n: 0 };
  const waits: number[] = [];
  const stop = new Error('the end');
  const loop = new ReconnectLoop({
    open: opener(new URL(`ws://127.0.0.1:${(wss.address() as { port: number }).port}`), opens),
    classify: (end) => (end.kind === 'closed' && end.code === 4000 ? stop : undefined),
    cannotOpen,
    sleep: async (ms) => void waits.push(ms),
  });
  await assert.rejects(loop.done, (error) => error === stop);
  wss.close();
  assert.equal(opens.n, 5);
  assert.deepEqual(waits.slice(0, 3), [3000, 3000, MAX_RETRY_AFTER_MS]);
  assert.ok(inRange(waits[3]!, 3), `the fourth wait ${waits[3]} is the backoff's fourth`);
});

test('close() during a wait ends the loop at once; close() during a connection ends it without classify', async () => {
  const room = await server((socket, n) => {
    if (n === 1) socket.close(1011);
  });
  const opens = { n: 0 };
  let classified = 0;
  const waiting = new ReconnectLoop({ open: opener(room.url, opens), classify: () => void classified++, cannotOpen, sleep: () => new Promise(() => undefined) });
  await eventually('the first wait', () => classified, (n) => n === 1);
  waiting.close();
  await waiting.done; // resolves although the wait never ends by itself
  assert.equal(opens.n, 1);

  const open = new ReconnectLoop({ open: opener(room.url, opens), classify: () => void classified++, cannotOpen, sleep: async () => undefined });
  await eventually('the second connection open', () => open.socket?.readyState, (state) => state === open.socket?.OPEN);
  open.close();
  await open.done;
  assert.equal(classified, 1, 'an end that close() caused is not classified');
  assert.equal(opens.n, 2);
  assert.equal(open.closed, true);
  room.close();
});

test('an open() that throws (a subprotocol ws refuses) ends the loop with what cannotOpen made of it, and opens nothing more', async () => {
  const room = await server(() => undefined);
  const heard: unknown[] = [];
  const ended = new Error('cannot open');
  let opens = 0;
  const loop = new ReconnectLoop({
    open: (working) => {
      opens++;
      return runSocket(room.url, ['key with a newline\n'], () => working(), 5_000);
    },
    classify: () => undefined,
    cannotOpen: (error) => {
      heard.push(error);
      return ended;
    },
    sleep: async () => undefined,
  });
  await assert.rejects(loop.done, (error) => error === ended);
  assert.equal(opens, 1);
  assert.match(String(heard[0]), /subprotocol/, 'cannotOpen heard what ws threw');
  room.close();
});

test('close() during a real wait clears its timer, so a program that closed its last loop can exit at once', async () => {
  const room = await server((socket) => socket.close(1011));
  const timers = (): number => process.getActiveResourcesInfo().filter((kind) => kind === 'Timeout').length;
  const before = timers();
  let waits = 0;
  const loop = new ReconnectLoop({
    open: opener(room.url, { n: 0 }),
    classify: () => undefined,
    cannotOpen,
    // The real sleep, with a wait long enough that only its timer would keep the process alive.
    sleep: (_ms, signal) => {
      waits++;
      return realSleep(60_000, signal);
    },
  });
  try {
    await eventually('a wait under way', () => waits, (n) => n === 1);
    assert.ok(timers() > before, 'the wait holds a timer');
    loop.close();
    await loop.done;
    await eventually('its timer cleared', () => timers(), (n) => n <= before, 2000);
  } finally {
    loop.close();
    room.close();
  }
});

test('waits that end on their own take their abort listener off the loop\'s signal (one signal serves every wait)', async () => {
  const controller = new AbortController();
  for (let i = 0; i < 20; i++) await realSleep(1, controller.signal);
  assert.equal(EventEmitter.getEventListeners(controller.signal, 'abort').length, 0);
});
