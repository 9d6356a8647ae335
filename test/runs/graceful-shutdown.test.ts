// A runtime closed while webhook steps wait (one for its answer, two for a connection) stops at
// once, sends nothing more, and after a restart on the same data dir every run completes: the
// interrupted step again under its key with a higher fence, the queued ones once; the start logs
// how many runs it picked up.

import assert from 'node:assert/strict';
import { rmSync } from 'node:fs';
import { connect } from 'node:net';
import { test } from 'node:test';
import { createLogger } from '../../runtime/log.ts';
import { call } from '../helpers/http.ts';
import { gateNextCall } from '../helpers/method-gate.ts';
import { eventually, startReceiver, type Receiver } from '../helpers/receiver.ts';
import { ADMIN_TOKEN, startRuntime, tempDir, type TestRuntime } from '../helpers/runtime.ts';

const ORG = 'acct-shutdown';

/** The org (as many runs at once as `orders`), a workflow posting each paid order to `receiver`, and one event per order; answers the org's key. */
async function paidOrders(rt: TestRuntime, receiver: Receiver, orders: readonly string[]): Promise<string> {
  const org = await call(rt.url, 'POST', '/organizations', { token: ADMIN_TOKEN, json: { id: ORG, name: ORG, plan: 'pro', max_concurrent_runs: orders.length } });
  assert.equal(org.status, 201, org.text);
  const key = org.body.api_key as string;
  const workflow = { name: 'crm', trigger_event: 'order.paid', steps: [{ id: 'crm', type: 'webhook', url: `${receiver.url}/crm` }] };
  assert.equal((await call(rt.url, 'POST', `/organizations/${ORG}/workflows`, { token: key, json: workflow })).status, 201);
  for (const id of orders) assert.equal((await call(rt.url, 'POST', `/organizations/${ORG}/events`, { token: key, json: { type: 'order.paid', payload: { id }, id } })).status, 202);
  return key;
}

test('closing the runtime mid-step loses no run and sends no step twice but the one in flight', { timeout: 30_000 }, async () => {
  const dataDir = tempDir();
  let answerHeld: () => void = () => undefined;
  const held = new Promise<void>((resolve) => (answerHeld = resolve));
  const receiver = await startReceiver([{ status: 200, after: held }]);
  let rt: TestRuntime | undefined;
  try {
    rt = await startRuntime({ dataDir, args: ['--webhook-connections', '1'] });
    const key = await paidOrders(rt, receiver, ['o1', 'o2', 'o3']);
    await eventually('the first step at the receiver', () => receiver.received.length, (n) => n === 1);
    const inFlight = String(receiver.received[0]?.headers['idempotency-key']);

    await rt.close();
    rt = undefined;
    // Had the closed runtime kept its connection, this answer would free it for a queued step, sent
    // then as well as after the restart: the check of one delivery per queued key below says not.
    answerHeld();

    receiver.script([{ status: 200, body: '{}' }]);
    const logged: string[] = [];
    rt = await startRuntime({ dataDir, logger: createLogger('info', (line) => void logged.push(line)) });
    // The start says what it picked up: three runs, each with a step claimed (two waited for a connection).
    const pickedUp = logged.map((line) => JSON.parse(line) as Record<string, unknown>).filter((line) => line.message === 'unfinished runs picked up from the previous process');
    assert.deepEqual(pickedUp.map(({ runs, interrupted }) => ({ runs, interrupted })), [{ runs: 3, interrupted: 3 }], logged.join('\n'));
    const url = rt.url;
    await eventually(
      'every run completed after the restart',
      async () => (await call(url, 'GET', `/organizations/${ORG}/runs?state=completed`, { token: key })).body.runs.length as number,
      (n) => n === 3,
    );
    const deliveries = receiver.received.map((r) => ({ key: String(r.headers['idempotency-key']), fence: Number(r.headers['sluice-fence']) }));
    const perKey = new Map<string, number[]>();
    for (const { key: k, fence } of deliveries) perKey.set(k, [...(perKey.get(k) ?? []), fence]);
    assert.equal(perKey.size, 3);
    const [before, again] = perKey.get(inFlight) ?? [];
    assert.ok(before !== undefined && again !== undefined && again > before, 'the interrupted step went out again under its key, with a higher fence');
    for (const [k, fences] of perKey) if (k !== inFlight) assert.equal(fences.length, 1, `${k} was sent once`);
  } finally {
    await rt?.close();
    await receiver.close();
    rmSync(dataDir, { recursive: true, force: true });
  }
});

test('during a stop nothing more is sent: an answer that comes is recorded, a step waiting for a connection waits for the next start', { timeout: 30_000 }, async () => {
  const dataDir = tempDir();
  let answerHeld: () => void = () => undefined;
  const held = new Promise<void>((resolve) => (answerHeld = resolve));
  const receiver = await startReceiver([{ status: 200, after: held }, { status: 200, body: '{}' }]);
  let rt: TestRuntime | undefined;
  try {
    rt = await startRuntime({ dataDir, args: ['--webhook-connections', '1'] });
    const key = await paidOrders(rt, receiver, ['o1', 'o2']);
    await eventually('the first step at the receiver, the second waiting for the connection', () => receiver.received.length, (n) => n === 1);
    const first = String(receiver.received[0]?.headers['idempotency-key']);
    const firstRun = first.split(':')[0]!;

    // A keep-alive connection a client opened before the stop.
    const client = connect(rt.runtime.port, '127.0.0.1');
    let clientReceived = '';
    client.on('data', (chunk: Buffer) => (clientReceived += chunk.toString('latin1')));
    client.on('error', () => undefined);
    await new Promise<void>((resolve) => client.once('connect', () => resolve()));
    // The stop is held open early on (before the run engine closes) while the answer comes.
    const stopHeld = gateNextCall(rt.runtime.deletions, 'idle');
    const runtime = rt;
    const closed = runtime.close();
    rt = undefined;
    try {
      await stopHeld.whenReached;
      // The answer comes while the run engine still records: the first run completes. The connection
      // it frees carries nothing more out.
      answerHeld();
      await eventually('the first run completed during the stop', () => runtime.runtime.context.runs.get(ORG, firstRun)?.value, (state) => state === 'completed');
      // From the signal on, a request on an open connection is refused, and the connection closed.
      client.write(`GET /organizations/${ORG}/runs HTTP/1.1\r\nhost: x\r\nauthorization: Bearer ${key}\r\n\r\n`);
      await eventually('the answer to a request sent during the stop', () => clientReceived, (text) => text.includes('\r\n\r\n'));
      assert.match(clientReceived, /^HTTP\/1\.1 503 [^]*\r\nconnection: close\r\n[^]*"code":"shutting_down"/i);
    } finally {
      client.destroy();
      stopHeld.done();
    }
    await closed;
    assert.equal(receiver.received.length, 1, 'the queued step was not sent during the stop');

    rt = await startRuntime({ dataDir });
    const url = rt.url;
    await eventually('both runs completed after the restart', async () => (await call(url, 'GET', `/organizations/${ORG}/runs?state=completed`, { token: key })).body.runs.length as number, (n) => n === 2);
    const keys = receiver.received.map((r) => String(r.headers['idempotency-key']));
    assert.equal(keys.length, 2, `each step sent once: ${keys.join(', ')}`);
    assert.equal(new Set(keys).size, 2);
  } finally {
    await rt?.close();
    await receiver.close();
    rmSync(dataDir, { recursive: true, force: true });
  }
});
