// The budget of runs the event writes in flight may build together (event-runs-gate.ts), and the
// turn every path that stores an event takes first (event-write-turns.ts). The gate: an org's
// writes go in the order they came, orgs waiting take turns, one heavier than the budget goes
// alone, one that builds no run waits only behind its own org. With a real runtime: API events and
// schedule ticks fanning out to several workflows each all store, their writes never holding more
// than the budget at once; a webhook, an API event, a replay, a device message, a device connection
// and a device deletion each wait for their turn; a sandbox write waits out its org's reset holding
// none of it, and keeps its place among its org's writes.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ManualClock } from '../../runtime/clock.ts';
import { EventRunsGate, runWeight } from '../../runtime/events/event-runs-gate.ts';
import { EventWriteTurns } from '../../runtime/events/event-write-turns.ts';
import { SandboxGenerations } from '../../runtime/events/sandbox-generation.ts';
import { openMemoryLedger } from '../../runtime/ledger/memory-ledger.ts';
import { connectDevice, type DeviceClient } from '../helpers/device-client.ts';
import { call, createOrg, newStandardSecret, registerDevice, signStandard } from '../helpers/http.ts';
import { eventually } from '../helpers/receiver.ts';
import { ADMIN_TOKEN, startRuntime } from '../helpers/runtime.ts';

const turn = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));
/** A workflow of one long delay step: its runs wait, and each weighs runWeight(1). */
const WAITING_STEPS = [{ type: 'delay', duration_ms: 3_600_000 }];
const ONE_STEP_RUN = runWeight(1);

/** The gate, with `most` reading the most weight it held at once since made. */
function watchedGate(capacity: number): { gate: EventRunsGate; most: () => number } {
  const gate = new EventRunsGate(capacity);
  let most = 0;
  const note = (): void => void (most = Math.max(most, gate.stats().held));
  const [take, tryTake] = [gate.take.bind(gate), gate.tryTake.bind(gate)];
  gate.take = async (orgId, weight) => {
    await take(orgId, weight);
    note();
  };
  gate.tryTake = (orgId, weight) => {
    const taken = tryTake(orgId, weight);
    note();
    return taken;
  };
  return { gate, most: () => most };
}

test('an org\'s writes go in the order they came, orgs take turns, and one heavier than the budget goes alone', async () => {
  const gate = new EventRunsGate(10);
  const granted: string[] = [];
  const take = (org: string, name: string, weight: number): Promise<void> => gate.take(org, weight).then(() => void granted.push(name));
  await take('a', 'a1', 6);
  const waiting = [take('a', 'a2', 5), take('a', 'a3', 3), take('b', 'b1', 3), take('a', 'a4', 25), take('b', 'b2', 4)];
  await turn();
  assert.deepEqual(granted, ['a1'], 'a2 does not fit beside a1; a3 and b1 wait behind it, though they would');
  gate.give(6);
  await turn();
  assert.deepEqual(granted, ['a1', 'a2', 'b1'], 'a, then b, in turn; a3 does not fit beside them');
  gate.give(5);
  await turn();
  assert.deepEqual(granted, ['a1', 'a2', 'b1', 'a3', 'b2'], 'a, then b; a4 does not fit');
  gate.give(3);
  gate.give(3);
  gate.give(4);
  await turn();
  assert.deepEqual(granted, ['a1', 'a2', 'b1', 'a3', 'b2', 'a4'], 'past the budget, alone');
  assert.deepEqual(gate.stats(), { held: 25, waiting: 0 });
  gate.give(25);
  await Promise.all(waiting);
  assert.deepEqual(gate.stats(), { held: 0, waiting: 0 });
});

test('a write that builds no run waits only behind its own org\'s writes, and takes nothing', async () => {
  const gate = new EventRunsGate(10);
  await gate.take('a', 8);
  let queued = false;
  const aNext = gate.take('a', 5).then(() => void (queued = true));
  assert.equal(gate.tryTake('b', 0), true, 'another org\'s write of no run goes at once');
  assert.equal(gate.tryTake('b', 1), false, 'one that builds runs waits behind the orgs waiting');
  assert.equal(gate.tryTake('a', 0), false, 'its own org\'s earlier write comes first');
  let empty = false;
  const aEmpty = gate.take('a', 0).then(() => void (empty = true));
  await turn();
  assert.deepEqual([queued, empty], [false, false]);
  gate.give(8);
  await Promise.all([aNext, aEmpty]);
  assert.deepEqual(gate.stats(), { held: 5, waiting: 0 });
});

test('a sandbox write that meets its org\'s reset beginning gives its turn back and keeps its place among its org\'s writes', async () => {
  const gate = new EventRunsGate(10);
  const generations = new SandboxGenerations(openMemoryLedger());
  const turns = new EventWriteTurns(gate, generations, () => 6);
  const granted: string[] = [];
  // Another org's write holds 6: the sandbox org's two writes, and a third org's, wait in turn.
  assert.equal(gate.tryTake('acct-z', 6), true);
  const first = turns.take('acct-x', 'sandbox', 'e').then((turn) => (granted.push('x1'), turn));
  await turn();
  void gate.take('acct-w', 6).then(() => void granted.push('w'));
  const second = turns.take('acct-x', 'sandbox', 'e').then((turn) => (granted.push('x2'), turn));
  await turn();
  let endReset: () => void = () => undefined;
  const reset = generations.during('acct-x', () => new Promise<void>((done) => (endReset = done)));
  // x1 gets the room, finds the reset, gives it back and waits it out; w's turn takes the room.
  gate.give(6);
  await turn();
  assert.deepEqual(granted, ['w']);
  endReset();
  await reset;
  await turn();
  // The room w held goes to the sandbox org's oldest write.
  gate.give(6);
  await turn();
  assert.deepEqual(granted, ['w', 'x1'], 'x1 before x2, which came after it');
  (await first).release();
  (await second).release();
  assert.deepEqual(granted, ['w', 'x1', 'x2']);
  assert.deepEqual(gate.stats(), { held: 0, waiting: 0 });
});

test('API events at once, each starting three runs, all store; their writes hold at most the budget at once', async () => {
  const budget = 7 * ONE_STEP_RUN;
  const gate = new EventRunsGate(budget);
  const rt = await startRuntime({ args: ['--runner', 'off'], eventRuns: gate });
  let holding = false;
  try {
    const org = 'acct-api-fanout';
    const key = await createOrg(rt.url, ADMIN_TOKEN, org);
    const post = (path: string, json: unknown) => call(rt.url, 'POST', `/organizations/${org}${path}`, { token: key, json });
    for (let n = 0; n < 3; n++) assert.equal((await post('/workflows', { name: `w${n}`, trigger_event: 'fan.out', steps: WAITING_STEPS })).status, 201);
    // Another org's write holds the budget until all ten wait (a ledger that commits at once would let them go one by one).
    assert.equal((holding = gate.tryTake('acct-elsewhere', budget)), true);
    const answering = Promise.all(Array.from({ length: 10 }, () => post('/events', { type: 'fan.out', payload: {} })));
    await eventually('the ten events waiting for their turn', () => gate.stats().waiting, (count) => count === 10);
    holding = false;
    gate.give(budget);
    assert.deepEqual(gate.stats(), { held: 6 * ONE_STEP_RUN, waiting: 8 }, 'two events of three runs at a time: a third does not fit');
    assert.deepEqual((await answering).map((answer) => answer.status), Array(10).fill(202));
    const runs = (await call(rt.url, 'GET', `/organizations/${org}/runs?limit=100`, { token: key })).body.runs as unknown[];
    assert.equal(runs.length, 30);
    assert.deepEqual(gate.stats(), { held: 0, waiting: 0 }, 'every turn given back');
  } finally {
    if (holding) gate.give(budget);
    await rt.close();
  }
});

test('schedules ticking together, each starting three runs, all send; their writes hold at most the budget at once', async () => {
  const clock = new ManualClock(Date.UTC(2026, 10, 2, 9, 0, 30));
  const { gate, most } = watchedGate(7 * ONE_STEP_RUN);
  const rt = await startRuntime({ args: ['--runner', 'off'], clock, eventRuns: gate });
  try {
    const org = 'acct-tick-fanout';
    const key = await createOrg(rt.url, ADMIN_TOKEN, org);
    const post = (path: string, json: unknown) => call(rt.url, 'POST', `/organizations/${org}${path}`, { token: key, json });
    for (let n = 0; n < 3; n++) assert.equal((await post('/workflows', { name: `w${n}`, trigger_event: 'tick.event', steps: WAITING_STEPS })).status, 201);
    for (let n = 0; n < 10; n++) assert.equal((await post('/schedules', { name: `s${n}`, cron: '* * * * *', event_type: 'tick.event' })).status, 201);
    clock.advance(60_000);
    rt.runtime.ticker.timers.fireDue();
    await rt.runtime.ticker.idle();
    const events = await eventually('the ticks stored', async () => (await call(rt.url, 'GET', `/organizations/${org}/events?limit=50`, { token: key })).body.events as unknown[], (found) => found.length === 10);
    assert.equal(events.length, 10);
    const runs = (await call(rt.url, 'GET', `/organizations/${org}/runs?limit=100`, { token: key })).body.runs as unknown[];
    assert.equal(runs.length, 30);
    assert.equal(most(), 6 * ONE_STEP_RUN, 'two ticks of three runs at a time');
  } finally {
    await rt.close();
  }
});

test('a webhook, an API event, a replay, a device message, a device connection and a device deletion each wait for their turn', async () => {
  const gate = new EventRunsGate(4 * ONE_STEP_RUN);
  const rt = await startRuntime({ args: ['--runner', 'off'], eventRuns: gate });
  const sockets: DeviceClient[] = [];
  let holding = false;
  try {
    const org = 'acct-every-path';
    const key = await createOrg(rt.url, ADMIN_TOKEN, org);
    const post = (path: string, json: unknown) => call(rt.url, 'POST', `/organizations/${org}${path}`, { token: key, json });
    for (const type of ['hook.came', 'api.came', 'reading.taken', 'device.connected', 'device.disconnected']) {
      assert.equal((await post('/workflows', { name: type.replace('.', '-'), trigger_event: type, steps: WAITING_STEPS })).status, 201);
    }
    const secret = newStandardSecret();
    assert.equal((await post('/sources', { name: 'shop', secrets: [secret] })).status, 201);
    const meterToken = await registerDevice(rt.url, org, key, 'meter');
    const gaugeToken = await registerDevice(rt.url, org, key, 'gauge');
    const doomedToken = await registerDevice(rt.url, org, key, 'doomed');
    const meter = await connectDevice(rt.url, org, 'meter', meterToken);
    const doomed = await connectDevice(rt.url, org, 'doomed', doomedToken);
    sockets.push(meter, doomed);
    const original = (await post('/events', { type: 'api.came', id: 'first', payload: {} })).status;
    assert.equal(original, 202);
    // Another org's write in flight holds the whole budget: every write that starts a run waits.
    assert.equal((holding = gate.tryTake('acct-elsewhere', 4 * ONE_STEP_RUN)), true);
    const answered: string[] = [];
    const noted = <T>(name: string, answer: Promise<T>): Promise<T> => answer.then((value) => (answered.push(name), value));
    const hookBody = JSON.stringify({ type: 'hook.came', id: 'delivery-1' });
    const waiting = [
      noted('webhook', call(rt.url, 'POST', `/hooks/${org}/shop`, { body: hookBody, headers: signStandard(secret, 'delivery-1', Math.floor(Date.now() / 1000), hookBody) })),
      noted('api', post('/events', { type: 'api.came', payload: {} })),
      noted('replay', post('/events/first/replay', { side_effects: 'skip', again: true })),
    ];
    meter.send({ id: 'reading-1', type: 'reading.taken' });
    const connecting = noted('connect', connectDevice(rt.url, org, 'gauge', gaugeToken));
    // Deleting a connected device writes its connection's device.disconnected.
    const deleting = noted('delete', call(rt.url, 'DELETE', `/organizations/${org}/devices/doomed`, { token: key }));
    await eventually('six writes waiting for their turn', () => gate.stats().waiting, (count) => count === 6);
    await new Promise((resolve) => setTimeout(resolve, 50));
    assert.deepEqual(answered, [], 'none answered while the budget is held');
    assert.equal(meter.frames.filter((frame) => frame.type === 'ack').length, 0, 'the message is not acked meanwhile');
    holding = false;
    gate.give(4 * ONE_STEP_RUN);
    const statuses = (await Promise.all(waiting)).map((answer) => answer.status);
    assert.deepEqual(statuses, [204, 202, 202]);
    sockets.push(await connecting);
    assert.equal((await meter.answerTo('reading-1')).type, 'ack');
    assert.equal((await deleting).status, 204);
    const runs = await eventually('every event\'s run made', async () => (await call(rt.url, 'GET', `/organizations/${org}/runs?limit=100`, { token: key })).body.runs as unknown[], (found) => found.length === 9);
    // meter's and doomed's connections and the first API event, then the six that waited (gauge's
    // connection and doomed's disconnection among them).
    assert.equal(runs.length, 9);
    // The deleted device's socket, closed by the delete, writes nothing more (its connection ended in the delete) in a turn of its own.
    await eventually('every turn given back', () => gate.stats(), (stats) => stats.held === 0 && stats.waiting === 0);
  } finally {
    // Given back on a failure too: the writes waiting would hold the stop.
    if (holding) gate.give(4 * ONE_STEP_RUN);
    for (const socket of sockets) socket.close();
    await rt.close();
  }
});

test('a sandbox write waits out its org\'s reset holding none of the budget: another org\'s goes meanwhile', async () => {
  const clock = new ManualClock(Date.UTC(2026, 10, 2, 9, 0, 30));
  const gate = new EventRunsGate(4 * ONE_STEP_RUN);
  const rt = await startRuntime({ args: ['--runner', 'off'], clock, eventRuns: gate });
  let endReset: () => void = () => undefined;
  try {
    const keys = new Map<string, string>();
    for (const org of ['acct-resetting', 'acct-other-tick']) keys.set(org, await createOrg(rt.url, ADMIN_TOKEN, org));
    const post = (org: string, path: string, json: unknown) => call(rt.url, 'POST', `/organizations/${org}${path}`, { token: keys.get(org)!, json });
    // The resetting org's sandbox tick takes the whole budget (4 runs); the other org's takes 1.
    for (let n = 0; n < 4; n++) assert.equal((await post('acct-resetting', '/workflows', { environment: 'sandbox', name: `w${n}`, trigger_event: 'tick', steps: WAITING_STEPS })).status, 201);
    assert.equal((await post('acct-resetting', '/schedules', { name: 'sandboxed', cron: '* * * * *', event_type: 'tick', environment: 'sandbox' })).status, 201);
    assert.equal((await post('acct-other-tick', '/workflows', { name: 'w', trigger_event: 'tick', steps: WAITING_STEPS })).status, 201);
    assert.equal((await post('acct-other-tick', '/schedules', { name: 'plain', cron: '* * * * *', event_type: 'tick' })).status, 201);
    // A reset of the first org's sandbox in flight (a big sandbox, or resets one after another).
    const reset = rt.runtime.context.runs.sandboxGenerations.during('acct-resetting', () => new Promise<void>((done) => (endReset = done)));
    clock.advance(60_000);
    rt.runtime.ticker.timers.fireDue();
    const events = (org: string, environment: string) => async () => ((await call(rt.url, 'GET', `/organizations/${org}/events?environment=${environment}&limit=10`, { token: keys.get(org)! })).body.events as unknown[]).length;
    await eventually('the other org\'s tick stored while the reset goes on', events('acct-other-tick', 'production'), (count) => count === 1);
    assert.equal(await events('acct-resetting', 'sandbox')(), 0, 'the sandbox tick waits for the reset');
    endReset();
    await reset;
    await eventually('the sandbox tick stored after the reset', events('acct-resetting', 'sandbox'), (count) => count === 1);
  } finally {
    endReset();
    await rt.close();
  }
});
