// Outbound connections of webhook attempts against real local HTTP servers: a kept-alive
// connection reused, the per-org cap per receiver with requests waiting in order (their deadline
// and evidence counting from when they get a connection), and closing the pools. One attempt's
// answers and evidence: webhook-send.test.ts.

import assert from 'node:assert/strict';
import type { ServerResponse } from 'node:http';
import { mock, test } from 'node:test';
import { OutboundConnections } from '../../runtime/runs/outbound-connections.ts';
import { attempt, connectionPool, errorOf, serve, settlesWithin } from '../helpers/webhook-attempts.ts';

test('consecutive attempts to one receiver reuse a kept-alive connection', async () => {
  const local = await serve((_req, res) => res.writeHead(200).end('{}'));
  for (let i = 0; i < 5; i += 1) assert.equal((await attempt(local.url)).ok, true);
  assert.equal(local.requests.length, 5);
  assert.equal(local.connections, 1);
});

/** A receiver that holds every request until the test answers it; `arrived(n)` waits for n requests. */
async function holdingReceiver() {
  const held = new Map<string, ServerResponse>();
  const order: string[] = [];
  const timestamps = new Map<string, string>();
  let waiter: { count: number; resolve: () => void } | undefined;
  const local = await serve((req, res) => {
    const key = String(req.headers['idempotency-key']);
    timestamps.set(key, String(req.headers['webhook-timestamp']));
    held.set(key, res);
    order.push(key);
    if (waiter !== undefined && order.length >= waiter.count) waiter.resolve();
  });
  return {
    local,
    order,
    timestamps,
    arrived: (count: number) =>
      new Promise<void>((resolve) => {
        if (order.length >= count) resolve();
        else waiter = { count, resolve };
      }),
    answer: (key: string) => held.get(key)?.writeHead(200).end('{}'),
    /** Closes the connection of the request sent under `key` without answering it (a receiver crashing). */
    cut: (key: string) => held.get(key)?.socket?.destroy(),
    drop: () => {
      for (const res of held.values()) res.destroy();
    },
  };
}

/** The pools' sockets open and requests waiting (their limit is the process's, not the test's). */
const openAndWaiting = (pools: OutboundConnections): { open: number; waiting: number } => {
  const { open, waiting } = pools.stats();
  return { open, waiting };
};

// A broken cap or deadline leaves a request that never arrives: the timeout turns that wait into a failure.
const HOLDING_TEST = { timeout: 10_000 };

test('an org holds at most the capped connections per receiver; more requests wait in order, another org has its own', HOLDING_TEST, async () => {
  const receiver = await holdingReceiver();
  const capped = connectionPool(2);
  const send = (orgId: string, key: string) => attempt(receiver.local.url, { orgId, idempotencyKey: key }, capped);
  try {
    const a = [send('acct-a', 'a1'), send('acct-a', 'a2'), send('acct-a', 'a3')];
    const b = send('acct-b', 'b1');
    await receiver.arrived(3);
    assert.deepEqual(receiver.order.slice(0, 3).sort(), ['a1', 'a2', 'b1'], 'acct-a waits at two; acct-b is not queued behind it');
    assert.deepEqual(openAndWaiting(capped), { open: 3, waiting: 1 });
    receiver.answer('a1');
    assert.equal((await a[0])?.ok, true);
    await receiver.arrived(4);
    assert.equal(receiver.order[3], 'a3');
    for (const key of ['a2', 'a3', 'b1']) receiver.answer(key);
    const outcomes = await Promise.all([...a, b]);
    assert.ok(outcomes.every((outcome) => outcome.ok));
    assert.equal(receiver.local.connections, 3, "a3 reused a1's connection");
    assert.deepEqual(openAndWaiting(capped), { open: 3, waiting: 0 }, 'idle, kept alive');
  } finally {
    receiver.drop();
  }
});

test('a request waiting for a connection starts its deadline when it gets one, and its evidence says how long it waited', HOLDING_TEST, async () => {
  const receiver = await holdingReceiver();
  const single = connectionPool(1);
  mock.timers.enable({ apis: ['setTimeout', 'Date'], now: 0 });
  try {
    const send = (key: string) => attempt(receiver.local.url, { idempotencyKey: key, timeoutMs: 2500 }, single);
    const first = send('first');
    await receiver.arrived(1);
    const second = send('second');
    const third = send('third');
    await new Promise((resolve) => setImmediate(resolve)); // both attempts reach the pool's queue
    mock.timers.tick(2500);
    const firstError = await first;
    assert.equal(errorOf(firstError)?.code, 'webhook_timeout');
    assert.equal((firstError.evidence as Record<string, unknown>)['queued_ms'], undefined, 'the first had a connection at once');
    await receiver.arrived(2);
    assert.equal(receiver.order[1], 'second');
    assert.equal(await settlesWithin(second, 2499), false, 'the wait for the connection did not count against the deadline');
    mock.timers.tick(1);
    const secondOutcome = await second;
    assert.equal(errorOf(secondOutcome)?.code, 'webhook_timeout', 'the deadline runs from the connection');
    assert.equal((secondOutcome.evidence as Record<string, unknown>)['queued_ms'], 2500);
    assert.equal((secondOutcome.evidence as Record<string, unknown>)['duration_ms'], 2500, 'its duration counts from the connection: the receiver\'s time, not the wait');
    await receiver.arrived(3);
    receiver.answer('third');
    const thirdOutcome = await third;
    assert.equal(thirdOutcome.ok, true);
    assert.equal((thirdOutcome.evidence as Record<string, unknown>)['queued_ms'], 5000);
    assert.equal((thirdOutcome.evidence as Record<string, unknown>)['duration_ms'], 0, 'answered at once once connected');
    // Signed when sent: each timestamp is the attempt's clock plus its wait for the connection.
    const at = Math.floor(Date.UTC(2026, 10, 30) / 1000);
    assert.deepEqual(['first', 'second', 'third'].map((key) => receiver.timestamps.get(key)), [String(at), String(at + 2), String(at + 5)]);
  } finally {
    mock.timers.reset();
    receiver.drop();
  }
});

test('closing the pools fails the requests in flight and the queued ones, and opens no connection', HOLDING_TEST, async () => {
  const receiver = await holdingReceiver();
  const closing = new OutboundConnections(2, 'any');
  const send = (key: string) => attempt(receiver.local.url, { idempotencyKey: key }, closing);
  try {
    // Two busy sockets: each one closing used to hand the head of the queue a second error.
    const outcomes = ['a', 'b', 'c', 'd', 'e'].map(send);
    await receiver.arrived(2);
    closing.close();
    const errors = (await Promise.all(outcomes)).map(errorOf);
    assert.deepEqual(errors.map((error) => error?.code), Array(5).fill('webhook_network_error'));
    assert.deepEqual(
      errors.map((error) => (/before the receiver answered/.test(error?.message ?? '') ? 'in flight' : /not sent/.test(error?.message ?? '') ? 'not sent' : error?.message)),
      ['in flight', 'in flight', 'not sent', 'not sent', 'not sent'],
    );
    assert.equal(errorOf(await send('after'))?.code, 'webhook_network_error', 'a request after close is refused too');
    await new Promise((resolve) => setImmediate(resolve));
    assert.deepEqual(receiver.order, ['a', 'b']);
    assert.equal(receiver.local.connections, 2);
  } finally {
    receiver.drop();
  }
});

test('a request no longer wanted when it gets its connection (its run was cancelled) is dropped unsent', HOLDING_TEST, async () => {
  const receiver = await holdingReceiver();
  const single = connectionPool(1);
  let wanted = true;
  try {
    const first = attempt(receiver.local.url, { idempotencyKey: 'w1' }, single);
    await receiver.arrived(1);
    const second = attempt(receiver.local.url, { idempotencyKey: 'w2', stillWanted: () => wanted }, single);
    while (single.stats().waiting === 0) await new Promise((resolve) => setImmediate(resolve));
    assert.deepEqual(openAndWaiting(single), { open: 1, waiting: 1 });
    wanted = false;
    receiver.answer('w1');
    assert.equal((await first).ok, true);
    const withdrawn = await second;
    assert.deepEqual([errorOf(withdrawn)?.code, errorOf(withdrawn)?.retryable], ['webhook_withdrawn', false]);
    assert.equal('sentAt' in withdrawn, false, 'it never started');
    assert.equal(typeof (withdrawn.evidence as { queued_ms?: number }).queued_ms, 'number');
    const third = attempt(receiver.local.url, { idempotencyKey: 'w3', stillWanted: () => true }, single);
    await receiver.arrived(2);
    receiver.answer('w3');
    assert.equal((await third).ok, true);
    assert.deepEqual(receiver.order, ['w1', 'w3'], 'w2 never reached the receiver');
  } finally {
    receiver.drop();
  }
});

test('a request that waited for a connection and then lost it unanswered says how long it waited, and was sent only once it had one', HOLDING_TEST, async () => {
  const receiver = await holdingReceiver();
  const single = connectionPool(1);
  mock.timers.enable({ apis: ['setTimeout', 'Date'], now: 0 });
  try {
    const nowMs = Date.UTC(2026, 10, 30);
    const first = attempt(receiver.local.url, { idempotencyKey: 'first' }, single);
    await receiver.arrived(1);
    const second = attempt(receiver.local.url, { idempotencyKey: 'second', nowMs }, single);
    await new Promise((resolve) => setImmediate(resolve)); // it reaches the pool's queue
    mock.timers.tick(1200);
    receiver.answer('first');
    assert.equal((await first).ok, true);
    await receiver.arrived(2);
    receiver.cut('second');
    const lost = await second;
    assert.match(errorOf(lost)?.code ?? '', /^webhook_(network_error|connection_closed)$/);
    assert.equal((lost.evidence as Record<string, unknown>)['queued_ms'], 1200);
    assert.equal(lost.sentAt, nowMs + 1200, 'started when it got its connection, not when it was queued');
  } finally {
    mock.timers.reset();
    receiver.drop();
  }
});

test('queued_ms is there exactly when a request waited for a connection, even for 0 ms', HOLDING_TEST, async () => {
  const receiver = await holdingReceiver();
  const single = connectionPool(1);
  mock.timers.enable({ apis: ['Date'], now: 0 });
  try {
    const first = attempt(receiver.local.url, { idempotencyKey: 'first' }, single);
    await receiver.arrived(1);
    const second = attempt(receiver.local.url, { idempotencyKey: 'second' }, single);
    await new Promise((resolve) => setImmediate(resolve)); // the attempt reaches the pool's queue
    receiver.answer('first');
    await receiver.arrived(2);
    receiver.answer('second');
    const [firstOutcome, secondOutcome] = await Promise.all([first, second]);
    assert.equal((firstOutcome.evidence as Record<string, unknown>)['queued_ms'], undefined);
    assert.equal((secondOutcome.evidence as Record<string, unknown>)['queued_ms'], 0);
  } finally {
    mock.timers.reset();
    receiver.drop();
  }
});
