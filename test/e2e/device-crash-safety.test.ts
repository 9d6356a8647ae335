// Crash safety of device sockets. A device connects to `sluice serve` and sends messages; once each
// is acked the runtime is SIGKILLed. After restarts on the same data dir (one killed again as soon
// as it listens, while it may be ending the dead connection), every acked message is stored once,
// and the dead connection ended with exactly one `device.disconnected` (runtime_restarted) and one
// completed run. A clean stop ends its connections as `runtime_stopped` instead.

import assert from 'node:assert/strict';
import { rmSync } from 'node:fs';
import { test } from 'node:test';
import { connectDevice } from '../helpers/device-client.ts';
import { call, createOrg } from '../helpers/http.ts';
import { eventually, startReceiver } from '../helpers/receiver.ts';
import { holdLedgerWrites, type WriteHold } from '../helpers/lmdb-write-hold.ts';
import { watchCalls } from '../helpers/method-gate.ts';
import { ADMIN_TOKEN, spawnRuntime, startRuntime, tempDir, type ChildRuntime } from '../helpers/runtime.ts';

const ORG = 'acct-crash-devices';

async function eventsOf(url: string, key: string, type: string): Promise<Array<{ provider_event_id: string | null; payload: Record<string, unknown> }>> {
  const answer = await call(url, 'GET', `/organizations/${ORG}/events?type=${type}&limit=500`, { token: key });
  return answer.body?.events ?? [];
}

test('SIGKILL with a device connected: acked messages stay stored once, the connection ends once as runtime_restarted', async () => {
  const dataDir = tempDir();
  const receiver = await startReceiver();
  let runtime: ChildRuntime | undefined;
  try {
    runtime = await spawnRuntime(dataDir);
    const first = runtime.url;
    const key = await createOrg(first, ADMIN_TOKEN, ORG);
    const wf = await call(first, 'POST', `/organizations/${ORG}/workflows`, { token: key, json: { name: 'offline', trigger_event: 'device.disconnected', steps: [{ id: 'alert', type: 'webhook', url: `${receiver.url}/offline` }] } });
    assert.equal(wf.status, 201, wf.text);
    const created = await call(first, 'POST', `/organizations/${ORG}/devices`, { token: key, json: { name: 'press-7' } });
    assert.equal(created.status, 201, created.text);
    const device = await connectDevice(first, ORG, 'press-7', created.body.token);
    for (let i = 0; i < 20; i++) device.send({ id: `m-${i}`, type: 'press.cycle', payload: { i } });
    await device.waitFor(() => device.frames.filter((f) => f.type === 'ack').length === 20, 'every ack');
    runtime.child.kill('SIGKILL');
    await runtime.exited;
    assert.equal((await device.closed).code, 1006, 'the socket died with the process');

    runtime = await spawnRuntime(dataDir);
    runtime.child.kill('SIGKILL');
    await runtime.exited;
    runtime = await spawnRuntime(dataDir);
    const url = runtime.url;

    const messages = await eventsOf(url, key, 'press.cycle');
    assert.deepEqual(messages.map((e) => e.provider_event_id).sort(), Array.from({ length: 20 }, (_, i) => `m-${i}`).sort(), 'every acked message, once');
    const endings = await eventually('the dead connection to end', () => eventsOf(url, key, 'device.disconnected'), (list) => list.length > 0, 20_000);
    assert.equal(endings.length, 1);
    assert.equal(endings[0]!.payload.reason, 'runtime_restarted');
    assert.equal(endings[0]!.payload.connection_id, device.frames[0]!.connection_id);
    const state = await call(url, 'GET', `/organizations/${ORG}/devices/press-7`, { token: key });
    assert.deepEqual([state.body.device.state, state.body.device.last_disconnect_reason], ['disconnected', 'runtime_restarted']);
    const runs = await eventually('its run completed', async () => (await call(url, 'GET', `/organizations/${ORG}/runs`, { token: key })).body.runs as Array<{ state: string }>, (list) => list.length === 1 && list[0]!.state === 'completed', 20_000);
    assert.equal(runs.length, 1);
    assert.equal(new Set(receiver.received.filter((r) => r.path === '/offline').map((r) => r.headers['idempotency-key'])).size, 1);

    // The device comes back: a new connection, ready as before.
    const back = await connectDevice(url, ORG, 'press-7', created.body.token);
    assert.notEqual(back.frames[0]!.connection_id, device.frames[0]!.connection_id);
    back.close();
    await back.closed;
  } finally {
    runtime?.child.kill('SIGKILL');
    await runtime?.exited;
    await receiver.close();
    rmSync(dataDir, { recursive: true, force: true });
  }
});

test('no ack goes out before its message has committed: with the write lock held elsewhere none comes, and all come once it is let go', async () => {
  // The test above cannot tell an ack sent before the commit from one sent after: the kill lands
  // long after the commits. Here the commits cannot happen until the hold ends. The runtime runs in
  // this process (on LMDB in its data dir) so the test sees each message reach its write.
  const dataDir = tempDir();
  const rt = await startRuntime({ dataDir });
  let hold: WriteHold | undefined;
  try {
    const key = await createOrg(rt.url, ADMIN_TOKEN, ORG);
    const created = await call(rt.url, 'POST', `/organizations/${ORG}/devices`, { token: key, json: { name: 'press-8' } });
    assert.equal(created.status, 201, created.text);
    const device = await connectDevice(rt.url, ORG, 'press-8', created.body.token);
    hold = await holdLedgerWrites(dataDir);
    const writes = watchCalls(rt.runtime.context.events, 'store', 5);
    for (let i = 0; i < 5; i++) device.send({ id: `h-${i}`, type: 'press.cycle', payload: { i } });
    // Every message has issued its write (or, should one not get that far, an answer came): one
    // acked without waiting for its commit is acked in the same turn, before the runtime takes the
    // next request. Reads go on meanwhile.
    const answeredEarly = device.waitFor(() => device.frames.some((f) => f.type !== 'ready'), 'an answer', 60_000);
    await Promise.race([writes.made, answeredEarly]);
    writes.restore();
    assert.equal((await call(rt.url, 'GET', '/healthz')).status, 200);
    assert.deepEqual(device.frames.filter((f) => f.type !== 'ready'), [], 'nothing acked while its commit cannot happen');
    await hold.release();
    hold = undefined;
    await device.waitFor(() => device.frames.filter((f) => f.type === 'ack').length === 5, 'every ack once the hold ends');
    await answeredEarly;
    device.close();
    await device.closed;
  } finally {
    await hold?.release();
    await rt.close();
    rmSync(dataDir, { recursive: true, force: true });
  }
});

test('a clean stop ends open connections as runtime_stopped (1001), and the next start finds none open', async () => {
  const dataDir = tempDir();
  try {
    const before = await startRuntime({ dataDir });
    const key = await createOrg(before.url, ADMIN_TOKEN, ORG);
    const created = await call(before.url, 'POST', `/organizations/${ORG}/devices`, { token: key, json: { name: 'press-8' } });
    const device = await connectDevice(before.url, ORG, 'press-8', created.body.token);
    // The first step of the runtime's close: it resolves once the endings are durable.
    await before.runtime.devices.close();
    const state = await call(before.url, 'GET', `/organizations/${ORG}/devices/press-8`, { token: key });
    assert.deepEqual([state.body.device.state, state.body.device.last_disconnect_reason], ['disconnected', 'runtime_stopped']);
    await assert.rejects(connectDevice(before.url, ORG, 'press-8', created.body.token), { status: 503 }, 'no new socket while stopping');
    await before.close();
    assert.equal((await device.closed).code, 1001);

    const after = await startRuntime({ dataDir });
    try {
      const endings = await eventsOf(after.url, key, 'device.disconnected');
      assert.deepEqual(endings.map((e) => e.payload.reason), ['runtime_stopped'], 'written before the ledger closed, and not again at start');
    } finally {
      await after.close();
    }
  } finally {
    rmSync(dataDir, { recursive: true, force: true });
  }
});
