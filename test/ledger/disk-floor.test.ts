// Below the free-space floor of the data dir's disk the runtime writes nothing and says why: a
// webhook or API write is 503 write_failed, a run whose step answered stalls, reads go on; once
// space is back, writes resume and the stalled run writes the answer it kept (the step is not sent again).
// The free space is injected (a real disk cannot be filled here); the ledger is the real LMDB one.

import assert from 'node:assert/strict';
import { rmSync } from 'node:fs';
import { after, before, test } from 'node:test';
import { ManualClock } from '../../runtime/clock.ts';
import { loadRuntimeConfig } from '../../runtime/config.ts';
import { InputError } from '../../runtime/errors.ts';
import { DEFAULT_MIN_FREE_DISK_MIB, DiskFloor, DiskSpaceLowError, statfsProbe } from '../../hook-runner/disk-floor.ts';
import { durably } from '../../runtime/ledger/durable-write.ts';
import { flooredLedger } from '../../runtime/ledger/floored-ledger.ts';
import { openLedger } from '../../runtime/ledger/open-ledger.ts';
import { createLogger } from '../../runtime/log.ts';
import { ProjectionStore } from '../../runtime/projections/projection-store.ts';
import { FIRST_RETRY_MS } from '../../runtime/runs/stalled-runs.ts';
import { upload } from '../actions/action-fixtures.ts';
import { assembleWat, ECHO_WAT } from '../helpers/hook-runner-wat.ts';
import { connectDevice } from '../helpers/device-client.ts';
import { connectLive } from '../helpers/live-client.ts';
import { call, createOrg, newStandardSecret, signStandard } from '../helpers/http.ts';
import { eventually, startReceiver, type Receiver } from '../helpers/receiver.ts';
import { ADMIN_TOKEN, startRuntime, tempDir, type TestRuntime } from '../helpers/runtime.ts';

const MIB = 1024 * 1024;
const ORG = 'acct-disk';
const clock = new ManualClock(Date.UTC(2026, 11, 2, 9, 0, 0));
let free = 10_000 * MIB;
const lines: Array<{ level: string; message: string; free_mib?: number; floor_mib?: number }> = [];
let rt: TestRuntime;
let receiver: Receiver;
let key: string;
const secret = newStandardSecret();

before(async () => {
  receiver = await startReceiver();
  rt = await startRuntime({ clock, freeDiskSpace: async () => free, logger: createLogger('info', (line) => lines.push(JSON.parse(line) as (typeof lines)[number])) });
  key = await createOrg(rt.url, ADMIN_TOKEN, ORG);
  assert.equal((await call(rt.url, 'POST', `/organizations/${ORG}/sources`, { token: key, json: { name: 'psp', secrets: [secret] } })).status, 201);
  const workflow = await call(rt.url, 'POST', `/organizations/${ORG}/workflows`, { token: key, json: { name: 'w', trigger_event: 'pay.ok', steps: [{ id: 's', type: 'webhook', url: `${receiver.url}/effect` }] } });
  assert.equal(workflow.status, 201, workflow.text);
});
after(async () => {
  await rt.close();
  await receiver.close();
});

const setFree = async (bytes: number): Promise<void> => {
  free = bytes;
  await rt.runtime.disk.probeNow();
};

const hook = (id: string) => {
  const body = JSON.stringify({ type: 'pay.ok', amount: 1 });
  return call(rt.url, 'POST', `/hooks/${ORG}/psp`, { body, headers: signStandard(secret, id, Math.floor(clock.now() / 1000), body) });
};

const runStates = async (): Promise<string[]> =>
  ((await call(rt.url, 'GET', `/organizations/${ORG}/runs`, { token: key })).body.runs as Array<{ state: string }>).map((run) => run.state);

test('below the floor nothing is written and requests are told why; above it again, writes and the stalled run go on', async () => {
  await setFree(10_000 * MIB);
  let release: () => void = () => undefined;
  receiver.script([{ status: 200, after: new Promise<void>((resolve) => (release = resolve)) }, { status: 200 }]);
  assert.equal((await hook('msg_before')).status, 204);
  await eventually('the step to be out', () => receiver.received.length, (n) => n === 1);
  const created = await call(rt.url, 'POST', `/organizations/${ORG}/devices`, { token: key, json: { name: 'till' } });
  assert.equal(created.status, 201, created.text);
  const device = await connectDevice(rt.url, ORG, 'till', created.body.token);

  await setFree(100 * MIB);
  const refused = await hook('msg_during');
  assert.deepEqual([refused.status, refused.body.error?.code, refused.headers.get('retry-after')], [503, 'write_failed', '5']);
  assert.match(refused.body.error.message, /disk is nearly full/);
  const apiEvent = await call(rt.url, 'POST', `/organizations/${ORG}/events`, { token: key, json: { type: 'other.thing', payload: {} } });
  assert.deepEqual([apiEvent.status, apiEvent.body.error?.code], [503, 'write_failed']);
  device.send({ id: 'sale-1', type: 'sale.made', payload: {} });
  const nack = await device.answerTo('sale-1');
  assert.deepEqual([nack.type, nack.error?.code, nack.retryable], ['nack', 'write_failed', true]);
  assert.match(nack.error.message, /disk is nearly full/);
  const events = await call(rt.url, 'GET', `/organizations/${ORG}/events`, { token: key });
  assert.equal(events.status, 200, 'reads go on');
  assert.deepEqual(events.body.events.map((event: { type: string }) => event.type).sort(), ['device.connected', 'pay.ok'], 'the refused events were not kept');

  // The held step answers: the run cannot write its result, so it stalls (it is not lost).
  release();
  await eventually('the run to stall', () => rt.runtime.engine.stalled.size, (n) => n === 1);
  assert.deepEqual(await runStates(), ['running']);
  const metrics = (await call(rt.url, 'GET', '/metrics')).text;
  assert.match(metrics, new RegExp(`^sluice_disk_free_bytes ${100 * MIB}$`, 'm'));
  assert.match(metrics, new RegExp(`^sluice_disk_floor_bytes ${DEFAULT_MIN_FREE_DISK_MIB * MIB}$`, 'm'));
  assert.match(metrics, /^sluice_ingest_total\{outcome="write_failed"\} 1$/m);
  assert.doesNotMatch(metrics, /outcome="internal_error"/);

  await setFree(300 * MIB);
  assert.equal((await hook('msg_during')).status, 204, 'the delivery refused before is taken now: nothing of it was kept');
  device.send({ id: 'sale-1', type: 'sale.made', payload: {} });
  await device.waitFor(() => device.frames.filter((frame) => frame.id === 'sale-1').length === 2, 'the second answer');
  assert.deepEqual([device.frames.filter((frame) => frame.id === 'sale-1')[1]!.type], ['ack'], 'the message refused before is stored now');
  device.close(1000);
  await device.closed;
  clock.advance(FIRST_RETRY_MS);
  assert.equal(rt.runtime.engine.stalled.timers.fireDue(), 1);
  await eventually('both runs to complete', runStates, (states) => states.length === 2 && states.every((state) => state === 'completed'));
  const [stalledKey, ...later] = receiver.received.map((request) => String(request.headers['idempotency-key']));
  assert.equal(later.length, 1, 'the new run\'s step went out; the stalled one\'s answer was kept and written, not asked for again');
  assert.notEqual(later[0], stalledKey);

  const floorLines = lines.filter((line) => line.message.includes('its floor'));
  assert.deepEqual(floorLines.map((line) => [line.level, line.free_mib, line.floor_mib]), [['error', 100, 256], ['info', 300, 256]], 'one line down, one line up');
  assert.deepEqual(lines.filter((line) => line.level === 'error' && !line.message.includes('its floor')), [], 'the refused writes log no errors of their own');
});

test('below the floor a second socket of a device is refused alone, and an ending that cannot be written is written once space is back', async () => {
  await setFree(10_000 * MIB);
  const created = await call(rt.url, 'POST', `/organizations/${ORG}/devices`, { token: key, json: { name: 'kiosk' } });
  assert.equal(created.status, 201, created.text);
  const first = await connectDevice(rt.url, ORG, 'kiosk', created.body.token);
  const firstId = first.frames.find((frame) => frame.type === 'ready')!.connection_id;
  await setFree(100 * MIB);
  await assert.rejects(connectDevice(rt.url, ORG, 'kiosk', created.body.token), (error: { closedWith?: { code: number; reason: string } }) => error.closedWith?.code === 1011 && /disk is nearly full/.test(error.closedWith.reason));
  first.send({ id: 'ping-1', type: 'kiosk.ping', payload: {} });
  const nack = await first.answerTo('ping-1');
  assert.deepEqual([nack.type, nack.error?.code], ['nack', 'write_failed'], 'the first socket stays open and stores again once it can');

  // It leaves while its ending cannot be written: the device stays connected on record, and its ending waits.
  const leftAt = clock.now();
  first.close(1000);
  await first.closed;
  await eventually('the ending to wait for its retry', () => rt.runtime.devices.endingRetries.size, (n) => n === 1);
  const device = async () => (await call(rt.url, 'GET', `/organizations/${ORG}/devices/kiosk`, { token: key })).body.device;
  assert.equal((await device()).state, 'connected');
  clock.advance(FIRST_RETRY_MS);
  assert.equal(rt.runtime.devices.endingRetries.timers.fireDue(), 1);
  await eventually('the retry to fail too', () => rt.runtime.devices.endingRetries.size === 1 && rt.runtime.devices.endingRetries.timers.dueAt(firstId) !== undefined, (waiting) => waiting);

  await setFree(10_000 * MIB);
  clock.advance(2 * FIRST_RETRY_MS);
  assert.equal(rt.runtime.devices.endingRetries.timers.fireDue(), 1, 'the pause doubled');
  await eventually('the ending to be written', () => rt.runtime.devices.endingRetries.size, (n) => n === 0);
  const ended = await device();
  assert.deepEqual([ended.state, ended.last_disconnect_reason, ended.last_disconnected_at], ['disconnected', 'client_closed', new Date(leftAt).toISOString()], 'ended as it ended, when it ended');
  const events = (await call(rt.url, 'GET', `/organizations/${ORG}/events?type=device.disconnected`, { token: key })).body.events as Array<{ payload: { device: string; connection_id: string; reason: string; close_code: number | null } }>;
  assert.deepEqual(events.filter((event) => event.payload.device === 'kiosk').map((event) => [event.payload.connection_id, event.payload.reason, event.payload.close_code]), [[firstId, 'client_closed', 1000]]);
});

test('a sandbox reset refused below the floor removes nothing and leaves the sandbox sockets open', async () => {
  await setFree(10_000 * MIB);
  const org = 'acct-disk-reset';
  const orgKey = await createOrg(rt.url, ADMIN_TOKEN, org, 'pro');
  const created = await call(rt.url, 'POST', `/organizations/${org}/devices`, { token: orgKey, json: { name: 'till', environment: 'sandbox' } });
  assert.equal(created.status, 201, created.text);
  const device = await connectDevice(rt.url, org, 'till', created.body.token);
  const live = await connectLive(rt.url, org, { token: orgKey });
  const socketsOpen = async (): Promise<string | undefined> => /^sluice_websockets_open (\d+)$/m.exec((await call(rt.url, 'GET', '/metrics')).text)?.[1];
  const openBefore = await socketsOpen();

  await setFree(100 * MIB);
  const refused = await call(rt.url, 'POST', `/organizations/${org}/sandbox/reset`, { token: orgKey });
  assert.deepEqual([refused.status, refused.body.error?.code, refused.headers.get('retry-after')], [503, 'write_failed', '5']);
  assert.match(refused.body.error.message, /could not start: the server's disk is nearly full\. Nothing was removed/);
  assert.equal(await socketsOpen(), openBefore, 'no socket was closed');
  device.send({ id: 'sale-1', type: 'sale.made', payload: {} });
  assert.equal((await device.answerTo('sale-1')).error?.code, 'write_failed', 'the device socket is still there');

  await setFree(10_000 * MIB);
  device.send({ id: 'sale-2', type: 'sale.made', payload: {} });
  assert.equal((await device.answerTo('sale-2')).type, 'ack');
  const events = (await call(rt.url, 'GET', `/organizations/${org}/events?environment=sandbox`, { token: orgKey })).body.events as Array<{ type: string }>;
  assert.deepEqual(events.map((event) => event.type).sort(), ['device.connected', 'sale.made'], 'nothing was removed');
  live.close();
  device.close(1000);
  await device.closed;
});

test('projection deletes refused below the floor remove nothing and say so; above it they go through', async () => {
  const projections = new ProjectionStore(rt.runtime.ledger);
  await durably(rt.runtime.ledger.root, rt.runtime.ledger.root.transaction(() => {
    for (let i = 0; i < 3; i++) projections.write({ name: 'scores', entity: { type: 'order', id: `o${i}` }, title: null, status: null, data: {} }, { orgId: ORG, environment: 'production', runId: `run_${i}`, stepId: 's', eventId: `evt_${i}`, at: clock.now() });
  }));
  await setFree(100 * MIB);
  try {
    const all = await call(rt.url, 'DELETE', `/organizations/${ORG}/projections/scores`, { token: key });
    assert.deepEqual([all.status, all.body.error?.code, all.headers.get('retry-after')], [503, 'write_failed', '5']);
    assert.match(all.body.error.message, /could not all be deleted: a write failed \(the disk may be full\)\. Nothing was removed; send the DELETE again later/);
    const one = await call(rt.url, 'DELETE', `/organizations/${ORG}/projections/scores/order/o1`, { token: key });
    assert.deepEqual([one.status, one.body.error?.code], [503, 'write_failed']);
    assert.equal(projections.rowCount(ORG), 3);
  } finally {
    await setFree(10_000 * MIB);
  }
  assert.equal((await call(rt.url, 'DELETE', `/organizations/${ORG}/projections/scores/order/o1`, { token: key })).status, 204);
  assert.deepEqual((await call(rt.url, 'DELETE', `/organizations/${ORG}/projections/scores`, { token: key })).body, { removed: 2 });
  assert.equal(projections.rowCount(ORG), 0);
});

test('schedule ticks that fall due below the floor are each sent once space is back, oldest first', async () => {
  await setFree(10_000 * MIB);
  const created = await call(rt.url, 'POST', `/organizations/${ORG}/schedules`, { token: key, json: { name: 'every-minute', cron: '* * * * *', event_type: 'tick.minute' } });
  assert.equal(created.status, 201, created.text);
  const ticker = rt.runtime.ticker;
  const sent = async (): Promise<string[]> =>
    ((await call(rt.url, 'GET', `/organizations/${ORG}/events?type=tick.minute&limit=500`, { token: key })).body.events as Array<{ payload: { scheduled_for: string } }>).map((event) => event.payload.scheduled_for).sort();
  const minute = (n: number): number => (Math.floor(clock.now() / 60_000) + n) * 60_000;
  const first = minute(1);
  clock.set(first);
  assert.equal(ticker.timers.fireDue(), 1);
  await eventually('the first tick', sent, (ticks) => ticks.length === 1);
  // The event is visible once its write commits, a moment before the ticker hears so and arms the next tick.
  await eventually('the next tick to be armed', () => ticker.timers.dueAt(`${ORG}\u0000every-minute`), (due) => due === first + 60_000);

  await setFree(100 * MIB);
  for (const at of [first + 60_000, first + 121_000, first + 181_000]) {
    clock.set(at);
    assert.equal(ticker.timers.fireDue(), 1);
    await eventually('the tick to be refused and tried again later', () => ticker.timers.dueAt(`${ORG}\u0000every-minute`), (due) => due !== undefined && due > at);
  }
  assert.deepEqual(await sent(), [new Date(first).toISOString()], 'nothing was written below the floor');

  await setFree(10_000 * MIB);
  clock.advance(5_000);
  const ticks = await eventually('the three ticks owed to be sent', async () => {
    ticker.timers.fireDue();
    return sent();
  }, (list) => list.length === 4);
  assert.deepEqual(ticks, [0, 1, 2, 3].map((n) => new Date(first + n * 60_000).toISOString()), 'each once, none passed over');
  await eventually('the next tick to be armed', () => ticker.timers.dueAt(`${ORG}\u0000every-minute`), (due) => due === first + 4 * 60_000);

  // Far behind: 150 ticks owed; the newest 100 are sent, the older ones passed over with a warning.
  await setFree(100 * MIB);
  clock.set(first + 4 * 60_000);
  assert.equal(ticker.timers.fireDue(), 1);
  await eventually('the tick to be refused', () => ticker.timers.dueAt(`${ORG}\u0000every-minute`), (due) => due !== undefined && due > first + 4 * 60_000);
  const late = first + 153 * 60_000;
  clock.set(late + 30_000);
  await setFree(10_000 * MIB);
  const caughtUp = await eventually('the newest 100 ticks to be sent', async () => {
    ticker.timers.fireDue();
    return sent();
  }, (list) => list.length === 104);
  assert.deepEqual(caughtUp.slice(4), Array.from({ length: 100 }, (_, n) => new Date(late - (99 - n) * 60_000).toISOString()));
  const passedOver = lines.filter((line) => line.level === 'warn' && line.message.includes('older ticks are passed over')) as unknown as Array<{ passed_over_from: string; sending_from: string }>;
  assert.deepEqual(passedOver.map((line) => [line.passed_over_from, line.sending_from]), [[new Date(first + 4 * 60_000).toISOString(), new Date(late - 99 * 60_000).toISOString()]], 'said once, naming the first tick passed over');
  assert.equal((await call(rt.url, 'DELETE', `/organizations/${ORG}/schedules/every-minute`, { token: key })).status, 204);
});

test('the ledger refuses each write and group started below the floor, never a write inside a group it admitted', async () => {
  const dir = tempDir('sluice-floored-');
  let freeHere = 10_000 * MIB;
  const floor = new DiskFloor(256, async () => freeHere, createLogger('silent'));
  const ledger = flooredLedger(openLedger(dir), floor);
  try {
    await floor.probeNow();
    floor.arm();
    const table = ledger.openDatabase('things');
    // Admitted while above the floor; its body runs later, after the floor is crossed.
    let lowWhenBodyRan: boolean | undefined;
    const admitted = ledger.root.transaction(() => {
      lowWhenBodyRan = floor.refusal() !== undefined;
      void table.put(['a'], 1);
      void table.put(['b'], 2);
      return 'done';
    });
    freeHere = 10 * MIB;
    await floor.probeNow();
    assert.equal(await admitted, 'done');
    assert.equal(lowWhenBodyRan, true, 'the body ran below the floor');
    assert.deepEqual([table.get(['a']), table.get(['b'])], [1, 2], 'its writes were kept');

    let ran = false;
    const isLow = (error: unknown) => error instanceof DiskSpaceLowError && /10 MiB free, below the floor of 256 MiB/.test(error.message);
    await assert.rejects(ledger.root.transaction(() => (ran = true)), isLow);
    await assert.rejects(ledger.root.batch(() => void (ran = true)), isLow);
    await assert.rejects(table.ifNoExists(['c'], () => void (ran = true)), isLow);
    await assert.rejects(table.put(['c'], 3), isLow);
    await assert.rejects(table.remove(['a']), isLow);
    assert.equal(ran, false, 'no refused callback ran');
    assert.deepEqual([table.get(['a']), table.get(['c'])], [1, undefined]);

    freeHere = 257 * MIB;
    await floor.probeNow();
    assert.equal(await table.put(['c'], 3), true);
    assert.equal(table.get(['c']), 3);
  } finally {
    floor.close();
    await ledger.close();
    rmSync(dir, { recursive: true, force: true });
  }
});

test('the floor: armed once started, 0 turns it off, a failed read keeps the last answer and logs once, statfs reads a real disk', async () => {
  const off = new DiskFloor(0, async () => 0, createLogger('silent'));
  off.arm();
  await off.probeNow();
  assert.deepEqual([off.freeBytes, off.refusal()], [0, undefined]);

  const logged: string[] = [];
  let answer: number | Error = 1 * MIB;
  const floor = new DiskFloor(2, async () => {
    if (answer instanceof Error) throw answer;
    return answer;
  }, createLogger('warn', (line) => logged.push(line)));
  await floor.probeNow();
  assert.equal(floor.refusal(), undefined, 'nothing is refused before the floor is armed');
  floor.arm();
  assert.ok(floor.refusal() instanceof DiskSpaceLowError);
  answer = new Error('ENOENT: no such file or directory');
  await floor.probeNow();
  await floor.probeNow();
  assert.equal(floor.freeBytes, 1 * MIB);
  assert.ok(floor.refusal() instanceof DiskSpaceLowError, 'still below: the last answer holds');
  assert.equal(logged.filter((line) => line.includes('could not read the free space')).length, 1);
  answer = 3 * MIB;
  await floor.probeNow();
  assert.equal(floor.refusal(), undefined);

  const dir = tempDir('sluice-statfs-');
  try {
    assert.ok((await statfsProbe(dir)()) > 0);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('--min-free-disk-mib: default 256, SLUICE_MIN_FREE_DISK_MIB, 0 allowed, a bad value named', () => {
  assert.equal(loadRuntimeConfig([], {}).minFreeDiskMib, DEFAULT_MIN_FREE_DISK_MIB);
  assert.equal(loadRuntimeConfig([], { SLUICE_MIN_FREE_DISK_MIB: '1024' }).minFreeDiskMib, 1024);
  assert.equal(loadRuntimeConfig(['--min-free-disk-mib', '0'], { SLUICE_MIN_FREE_DISK_MIB: '1024' }).minFreeDiskMib, 0);
  for (const bad of ['-1', '1048577', '1.5', 'lots']) {
    assert.throws(() => loadRuntimeConfig([`--min-free-disk-mib=${bad}`], {}), (error: unknown) => error instanceof InputError && error.message.includes('--min-free-disk-mib'));
  }
});

test('a runtime restarted below the floor starts (its start-up writes go ahead), answers reads and refuses writes', async () => {
  const dataDir = tempDir('sluice-floor-boot-');
  let freeHere = 10_000 * MIB;
  try {
    const first = await startRuntime({ dataDir, freeDiskSpace: async () => freeHere });
    const bootKey = await createOrg(first.url, ADMIN_TOKEN, 'acct-boot');
    await first.close();
    freeHere = 10 * MIB;
    const second = await startRuntime({ dataDir, freeDiskSpace: async () => freeHere });
    try {
      await second.runtime.disk.probeNow();
      assert.equal((await call(second.url, 'GET', '/organizations/acct-boot/events', { token: bootKey })).status, 200);
      const refused = await call(second.url, 'POST', '/organizations/acct-boot/events', { token: bootKey, json: { type: 'a.b', payload: {} } });
      assert.deepEqual([refused.status, refused.body.error?.code], [503, 'write_failed']);
      freeHere = 10_000 * MIB;
      await second.runtime.disk.probeNow();
      assert.equal((await call(second.url, 'POST', '/organizations/acct-boot/events', { token: bootKey, json: { type: 'a.b', payload: {} } })).status, 202);
    } finally {
      await second.close();
    }
  } finally {
    rmSync(dataDir, { recursive: true, force: true });
  }
});

test('below the floor a custom action secret is refused before the hook-runner keeps it', { timeout: 60_000 }, async () => {
  let freeHere = 10_000 * MIB;
  const withRunner = await startRuntime({ args: ['--runner', 'child'], freeDiskSpace: async () => freeHere });
  try {
    const orgKey = await createOrg(withRunner.url, ADMIN_TOKEN, 'acct-floor-actions');
    const created = await upload(withRunner.url, '/organizations/acct-floor-actions/custom-actions', orgKey, { name: 'echo', file: await assembleWat('echo', ECHO_WAT), permissions: 'read_secret:API_KEY' });
    assert.equal(created.status, 201, created.text);
    const secrets = `/organizations/acct-floor-actions/custom-actions/${created.body.custom_action.id}/secrets`;
    freeHere = 10 * MIB;
    await withRunner.runtime.disk.probeNow();
    const refused = await call(withRunner.url, 'POST', secrets, { token: orgKey, json: { key: 'API_KEY', value: 'kept-nowhere' } });
    assert.deepEqual([refused.status, refused.body.error?.code], [503, 'write_failed']);
    assert.deepEqual((await call(withRunner.url, 'GET', secrets, { token: orgKey })).body.keys, [], 'the runner was not given it');
    const missing = await call(withRunner.url, 'DELETE', `${secrets}/API_KEY`, { token: orgKey });
    assert.deepEqual([missing.status, missing.body.error?.code], [404, 'not_found'], 'a secret nobody holds is not there, disk or no disk');
    const upload2 = await upload(withRunner.url, '/organizations/acct-floor-actions/custom-actions', orgKey, { name: 'echo 2', file: await assembleWat('echo', ECHO_WAT) });
    assert.deepEqual([upload2.status, upload2.body.error?.code], [503, 'write_failed']);
    freeHere = 10_000 * MIB;
    await withRunner.runtime.disk.probeNow();
    assert.equal((await call(withRunner.url, 'POST', secrets, { token: orgKey, json: { key: 'API_KEY', value: 'kept' } })).status, 204);
    assert.deepEqual((await call(withRunner.url, 'GET', secrets, { token: orgKey })).body.keys, ['API_KEY']);
    freeHere = 10 * MIB;
    await withRunner.runtime.disk.probeNow();
    const held = await call(withRunner.url, 'DELETE', `${secrets}/API_KEY`, { token: orgKey });
    assert.deepEqual([held.status, held.body.error?.code], [503, 'write_failed'], 'one that is held cannot be deleted below the floor');
    assert.deepEqual((await call(withRunner.url, 'GET', secrets, { token: orgKey })).body.keys, ['API_KEY']);
  } finally {
    await withRunner.close();
  }
});

test('a hook-runner below its own floor shows in /metrics, and an upload it refuses is a 503 that leaves nothing behind', { timeout: 60_000 }, async () => {
  // The runtime's floor reads an injected, roomy disk; its child runner gets the same floor (1 TiB)
  // and reads the real disk, which is below it.
  const lowRunner = await startRuntime({ args: ['--runner', 'child', '--min-free-disk-mib', '1048576'], freeDiskSpace: async () => 2 * 1_048_576 * MIB });
  try {
    const metrics = (await call(lowRunner.url, 'GET', '/metrics')).text;
    assert.match(metrics, /^sluice_hook_runner_up 1$/m, 'it still runs guests it has');
    assert.match(metrics, /^sluice_hook_runner_disk_low 1$/m);
    assert.match(metrics, /^sluice_disk_free_bytes 2199023255552$/m, "the runtime's own disk is roomy");
    const orgKey = await createOrg(lowRunner.url, ADMIN_TOKEN, 'acct-floor-runner');
    const refused = await upload(lowRunner.url, '/organizations/acct-floor-runner/custom-actions', orgKey, { name: 'echo', file: await assembleWat('echo', ECHO_WAT) });
    assert.deepEqual([refused.status, refused.body.error?.code, refused.headers.get('retry-after')], [503, 'hook_runner_disk_full', '5'], refused.text);
    assert.match(refused.body.error.message, /hook-runner's disk is nearly full/);
    assert.doesNotMatch(refused.body.error.message, /MiB|--min-free-disk-mib/, "the operator's disk figures are not a tenant's to read");
    assert.deepEqual((await call(lowRunner.url, 'GET', '/organizations/acct-floor-runner/custom-actions', { token: orgKey })).body.custom_actions, []);
  } finally {
    await lowRunner.close();
  }
});
