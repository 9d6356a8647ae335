// Races between a device's connection changes on the real runtime: a newer connection, a token
// rotation or a deletion while another socket of the device is open or being recorded. A gate
// wrapped around DeviceStore's writes holds one of them open (the window a slow fsync gives), so
// the order the test needs happens every time. What must hold: no socket opened with a rotated
// token or of a deleted device stays open, no message is stored after its connection's
// `device.disconnected`, a connection the device closed itself ends as `client_closed`, and a write
// that failed after it committed (a failed flush) leaves no socket storing on a stale view.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import WebSocket from 'ws';
import { SandboxGenerations } from '../../runtime/events/sandbox-generation.ts';
import { DeviceSockets } from '../../runtime/triggers/device-sockets.ts';
import { DeviceStore } from '../../runtime/triggers/device-store.ts';
import { IngestQuota } from '../../runtime/ingest/ingest-quota.ts';
import { connectDevice } from '../helpers/device-client.ts';
import { connectLive } from '../helpers/live-client.ts';
import { call, createOrg } from '../helpers/http.ts';
import { eventually } from '../helpers/receiver.ts';
import { ADMIN_TOKEN, startRuntime, type TestRuntime } from '../helpers/runtime.ts';

const ORG = 'acct-device-races';
let rt: TestRuntime;
let key: string;

/** A point a DeviceStore write waits at, once, while armed. */
class Gate {
  armed = false;
  #release: () => void = () => undefined;
  #wait: Promise<void> = Promise.resolve();
  /** Set when a write reached the gate. */
  reached = false;
  arm(): void {
    this.armed = true;
    this.reached = false;
    this.#wait = new Promise((resolve) => (this.#release = resolve));
  }
  async pass(): Promise<void> {
    if (!this.armed) return;
    this.armed = false;
    this.reached = true;
    await this.#wait;
  }
  release(): void {
    this.#release();
  }
}
const beforeConnect = new Gate();
const afterConnect = new Gate();
const afterDelete = new Gate();
const beforeDisconnect = new Gate();
/** The next such write fails after it committed, as when its flush fails (settleDurably throws). */
const failAfterCommit = { connect: false, rotateToken: false };
const store = DeviceStore.prototype as unknown as Record<'connect' | 'delete' | 'rotateToken' | 'disconnect', (...args: unknown[]) => Promise<unknown>>;
const { connect, delete: remove, rotateToken, disconnect } = store;
store.disconnect = async function (this: unknown, ...args: unknown[]) {
  await beforeDisconnect.pass();
  return disconnect.apply(this, args);
};
store.connect = async function (this: unknown, ...args: unknown[]) {
  await beforeConnect.pass();
  const result = await connect.apply(this, args);
  await afterConnect.pass();
  if (failAfterCommit.connect) {
    failAfterCommit.connect = false;
    throw new Error('flush failed');
  }
  return result;
};
/** A rotation waits here once its write is durable. */
const afterRotate = new Gate();
store.rotateToken = async function (this: unknown, ...args: unknown[]) {
  const result = await rotateToken.apply(this, args);
  await afterRotate.pass();
  if (failAfterCommit.rotateToken) {
    failAfterCommit.rotateToken = false;
    throw new Error('flush failed');
  }
  return result;
};
store.delete = async function (this: unknown, ...args: unknown[]) {
  const result = await remove.apply(this, args);
  await afterDelete.pass();
  return result;
};

/** A stored event of these types waits at its gate before its store resolves (the window a slow flush gives). */
const HELD_TYPE = 'held.reading';
const HELD_TYPE_2 = 'held.other';
const afterStore = new Gate();
const afterStore2 = new Gate();
const quota = IngestQuota.prototype as unknown as { storeEvent: (...args: unknown[]) => Promise<unknown> };
const { storeEvent } = quota;
quota.storeEvent = async function (this: unknown, ...args: unknown[]) {
  const result = await storeEvent.apply(this, args);
  const { type } = (args[2] as { event: { type: string } }).event;
  if (type === HELD_TYPE) await afterStore.pass();
  if (type === HELD_TYPE_2) await afterStore2.pass();
  return result;
};
/** Set once DeviceSockets.rotateToken was called: the rotation is in the device's queue of changes. */
let rotationQueued = false;
const sockets = DeviceSockets.prototype as unknown as { rotateToken: (...args: unknown[]) => Promise<unknown> };
const queueRotation = sockets.rotateToken;
sockets.rotateToken = function (this: unknown, ...args: unknown[]) {
  const queued = queueRotation.apply(this, args);
  rotationQueued = true;
  return queued;
};

/** Set once DeviceSockets.deleteDevice was called: the delete is in the device's queue of changes. */
let deleteQueued = false;
const queueDelete = (DeviceSockets.prototype as unknown as { deleteDevice: (...args: unknown[]) => Promise<unknown> }).deleteDevice;
(DeviceSockets.prototype as unknown as { deleteDevice: (...args: unknown[]) => Promise<unknown> }).deleteDevice = function (this: unknown, ...args: unknown[]) {
  const queued = queueDelete.apply(this, args);
  deleteQueued = true;
  return queued;
};

before(async () => {
  rt = await startRuntime();
  key = await createOrg(rt.url, ADMIN_TOKEN, ORG);
});
after(() => rt.close());

async function register(name: string): Promise<string> {
  const created = await call(rt.url, 'POST', `/organizations/${ORG}/devices`, { token: key, json: { name } });
  assert.equal(created.status, 201, created.text);
  return created.body.token;
}

/** A socket that is open (upgraded) but may not be recorded yet. */
function openRaw(name: string, token: string): Promise<{ socket: WebSocket; closed: Promise<number> }> {
  const socket = new WebSocket(`${rt.url.replace('http', 'ws')}/devices/${ORG}/${name}?token=${token}`);
  const closed = new Promise<number>((resolve) => socket.on('close', (code) => resolve(code)));
  return new Promise((resolve, reject) => {
    socket.on('error', reject);
    socket.on('open', () => resolve({ socket, closed }));
  });
}

async function endingsOf(name: string): Promise<Array<{ payload: Record<string, unknown> }>> {
  const listed = await call(rt.url, 'GET', `/organizations/${ORG}/events?type=device.disconnected&limit=500`, { token: key });
  return listed.body.events.filter((e: { source: string }) => e.source === `@device:${name}`);
}

async function storedIds(name: string): Promise<string[]> {
  const listed = await call(rt.url, 'GET', `/organizations/${ORG}/events?type=reading.taken&limit=500`, { token: key });
  return listed.body.events.filter((e: { source: string }) => e.source === `@device:${name}`).map((e: { provider_event_id: string }) => e.provider_event_id);
}

test('a rotation while a newer connection with the old token is being recorded leaves no socket of the old token open', async () => {
  const token = await register('rot');
  const first = await connectDevice(rt.url, ORG, 'rot', token);
  beforeConnect.arm();
  const second = await openRaw('rot', token);
  await eventually('the second connection at the gate', () => beforeConnect.reached, Boolean);
  const rotating = call(rt.url, 'POST', `/organizations/${ORG}/devices/rot/token`, { token: key });
  // Give the rotation time to commit, were it not ordered after the connection being recorded.
  const prefix = async (): Promise<string> => (await call(rt.url, 'GET', `/organizations/${ORG}/devices/rot`, { token: key })).body.device.token_prefix;
  const before = await prefix();
  await eventually('the rotation to be held back or written', prefix, (now) => now !== before, 300).catch(() => undefined);
  beforeConnect.release();
  assert.equal((await rotating).status, 200);
  // The second connection was recorded first (it came first), replacing the first; the rotation then closed it.
  const firstClosed = await Promise.race([first.closed.then(({ code }) => code), new Promise<string>((resolve) => setTimeout(() => resolve('still open'), 3000))]);
  assert.equal(firstClosed, 4409, 'no socket opened with the rotated token stays open');
  assert.equal(await second.closed, 4401);
  const endings = await eventually('the endings', () => endingsOf('rot'), (list) => list.length === 2);
  assert.deepEqual(endings.map((e) => e.payload.reason).sort(), ['replaced', 'token_rotated']);
});

test('a message of a connection being replaced is refused (retryable), never stored after its device.disconnected', async () => {
  const token = await register('rep');
  const first = await connectDevice(rt.url, ORG, 'rep', token);
  afterConnect.arm();
  const second = await openRaw('rep', token);
  await eventually('the first connection ended in the ledger', () => endingsOf('rep'), (list) => list.length === 1);
  first.send({ id: 'late', type: 'reading.taken' });
  const answer = await first.answerTo('late');
  afterConnect.release();
  assert.deepEqual([answer.type, answer.error?.code, answer.retryable], ['nack', 'connection_closing', true]);
  assert.equal((await first.closed).code, 4409);
  assert.deepEqual(await storedIds('rep'), []);
  second.socket.close();
  await second.closed;
});

test('a connection replaced by one that waited its turn in the device\'s queue ends after every message it stored meanwhile', async () => {
  const token = await register('turn');
  const oldest = await connectDevice(rt.url, ORG, 'turn', token);
  // The next connection replaces the oldest, whose ending then holds the device's queue at the gate.
  beforeDisconnect.arm();
  const replacing = await connectDevice(rt.url, ORG, 'turn', token);
  assert.equal((await oldest.closed).code, 4409);
  await eventually('the oldest one\'s ending at the gate', () => beforeDisconnect.reached, Boolean);
  // A newer connection upgrades now, and waits its turn behind that ending.
  const newest = await openRaw('turn', token);
  const upgradedAt = Date.now();
  while (Date.now() <= upgradedAt + 2) await new Promise((resolve) => setImmediate(resolve));
  // Meanwhile the connection it will replace stores a message.
  replacing.send({ id: 'meanwhile', type: 'reading.taken' });
  assert.equal((await replacing.answerTo('meanwhile')).type, 'ack');
  beforeDisconnect.release();
  assert.equal((await replacing.closed).code, 4409);
  const endings = await eventually('both endings', () => endingsOf('turn'), (list) => list.length === 2);
  const replacingId = replacing.frames.find((frame) => frame.type === 'ready')?.connection_id;
  const replaced = endings.find((e) => e.payload.connection_id === replacingId);
  assert.ok(replaced !== undefined, JSON.stringify(endings));
  const stored = (await call(rt.url, 'GET', `/organizations/${ORG}/events?type=reading.taken&limit=500`, { token: key })).body.events.find((e: { provider_event_id: string }) => e.provider_event_id === 'meanwhile');
  assert.ok(Date.parse(String(replaced.payload.disconnected_at)) >= stored.received_at_ms, `ended at ${String(replaced.payload.disconnected_at)}, before its message of ${new Date(stored.received_at_ms).toISOString()}`);
  newest.socket.close();
  await newest.closed;
});

test('a message sent while the device is being deleted is refused; a device made again under its name starts afresh', async () => {
  const token = await register('del');
  const first = await connectDevice(rt.url, ORG, 'del', token);
  afterDelete.arm();
  const deleting = call(rt.url, 'DELETE', `/organizations/${ORG}/devices/del`, { token: key });
  await eventually('deleted in the ledger', () => call(rt.url, 'GET', `/organizations/${ORG}/devices/del`, { token: key }), (answer) => answer.status === 404);
  first.send({ id: 'x-1', type: 'reading.taken' });
  const late = await first.answerTo('x-1');
  afterDelete.release();
  assert.equal((await deleting).status, 204);
  assert.deepEqual([late.type, late.error?.code], ['nack', 'connection_closing']);
  assert.equal((await first.closed).code, 4404);
  const renewed = await connectDevice(rt.url, ORG, 'del', await register('del'));
  renewed.send({ id: 'x-1', type: 'reading.taken' });
  assert.equal((await renewed.answerTo('x-1')).duplicate, false);
  renewed.close();
  await renewed.closed;
});

test('a device that closes with messages in flight and reconnects at once: its connection ends as client_closed, after those of its messages that were stored', async () => {
  const token = await register('flap');
  for (let round = 0; round < 5; round++) {
    const device = await connectDevice(rt.url, ORG, 'flap', token);
    await device.sendAtOnce(Array.from({ length: 10 }, (_, i) => JSON.stringify({ id: `m-${round}-${i}`, type: 'reading.taken' })));
    device.close(1000);
    const next = await connectDevice(rt.url, ORG, 'flap', token);
    const endings = await eventually('its ending', () => endingsOf('flap'), (list) => list.some((e) => e.payload.connection_id === device.frames[0]!.connection_id));
    const ending = endings.find((e) => e.payload.connection_id === device.frames[0]!.connection_id)!;
    assert.deepEqual([ending.payload.reason, ending.payload.close_code], ['client_closed', 1000], `round ${round}`);
    // A message still being stored when the socket closed is stored before the ending, or not at all (never acked: sent again).
    const listed = await call(rt.url, 'GET', `/organizations/${ORG}/events?type=reading.taken&source=${encodeURIComponent('@device:flap')}&limit=500`, { token: key });
    const late = listed.body.events.filter((e: { provider_event_id: string; received_at_ms: number }) => e.provider_event_id.startsWith(`m-${round}-`) && e.received_at_ms > Date.parse(String(ending.payload.disconnected_at)));
    assert.deepEqual(late, [], `round ${round}: no message stored after the ending`);
    next.close(1000);
    await next.closed;
  }
  const endings = await eventually('every ending', () => endingsOf('flap'), (list) => list.length === 10);
  const ids = endings.map((e) => e.payload.connection_id);
  assert.equal(new Set(ids).size, ids.length, 'each connection ends once');
});

test('a device that closes itself while a newer connection is being recorded ends as client_closed, not replaced', async () => {
  const token = await register('flap2');
  const first = await connectDevice(rt.url, ORG, 'flap2', token);
  beforeConnect.arm();
  const second = await openRaw('flap2', token);
  await eventually('the second connection at the gate', () => beforeConnect.reached, Boolean);
  first.close(1000);
  await first.closed;
  beforeConnect.release();
  const endings = await eventually('the first ending', () => endingsOf('flap2'), (list) => list.length === 1);
  assert.deepEqual([endings[0]!.payload.connection_id, endings[0]!.payload.reason, endings[0]!.payload.close_code], [first.frames[0]!.connection_id, 'client_closed', 1000]);
  second.socket.close();
  await second.closed;
});

test('a delete refused because another device holds the name now (404, nothing written) leaves that device\'s sockets open and storing', async () => {
  const token = await register('held');
  const device = await connectDevice(rt.url, ORG, 'held', token);
  // A delete of the device the name held before (deleted and made again while the delete waited its turn).
  await assert.rejects(rt.runtime.devices.deleteDevice(ORG, 'held', 'dev_made_before'), (error: { status?: number }) => error.status === 404);
  device.send({ id: 'after-refused-delete', type: 'reading.taken' });
  assert.equal((await device.answerTo('after-refused-delete')).type, 'ack');
  assert.deepEqual(await storedIds('held'), ['after-refused-delete']);
  device.close();
  assert.equal((await device.closed).code, 1000);
});

/** Registers a sandbox device of `org`; its token. */
async function sandboxDevice(org: string, orgKey: string, name: string): Promise<string> {
  const created = await call(rt.url, 'POST', `/organizations/${org}/devices`, { token: orgKey, json: { name, environment: 'sandbox' } });
  assert.equal(created.status, 201, created.text);
  return created.body.token;
}

/** A new org whose sandbox device `lab` is connected and has its message `id` stored and held at afterStore. */
async function labHoldingMessage(org: string, id: string): Promise<{ orgKey: string; lab: Awaited<ReturnType<typeof connectDevice>> }> {
  const orgKey = await createOrg(rt.url, ADMIN_TOKEN, org);
  const lab = await connectDevice(rt.url, org, 'lab', await sandboxDevice(org, orgKey, 'lab'));
  afterStore.arm();
  lab.send({ id, type: HELD_TYPE });
  await eventually(`${id} stored and held`, () => afterStore.reached, Boolean);
  return { orgKey, lab };
}

test('a plan that loses the sandbox answers the messages its sandbox devices are storing before closing them (4402)', async () => {
  const org = 'acct-device-races-plan';
  const { lab: device } = await labHoldingMessage(org, 'in-flight');
  const openBefore = rt.runtime.devices.openSockets;
  try {
    assert.equal((await call(rt.url, 'PATCH', `/organizations/${org}`, { token: ADMIN_TOKEN, json: { plan: 'starter' } })).status, 200);
    assert.equal(rt.runtime.devices.openSockets, openBefore, 'not closed while its message is being stored');
  } finally {
    afterStore.release();
  }
  const answer = await device.answerTo('in-flight');
  assert.deepEqual([answer.type, answer.duplicate], ['ack', false]);
  assert.equal((await device.closed).code, 4402);
});

test('a plan that loses the sandbox while a device\'s connection is being recorded closes it only after that connection\'s messages are answered', async () => {
  const org = 'acct-device-races-plan-late';
  const { orgKey, lab } = await labHoldingMessage(org, 'a-1');
  const lateToken = await sandboxDevice(org, orgKey, 'late');
  // The other device's connection is being recorded (its write held) when the plan changes.
  beforeConnect.arm();
  const late = new WebSocket(`${rt.url.replace('http', 'ws')}/devices/${org}/late?token=${lateToken}`);
  const frames: Array<Record<string, unknown>> = [];
  late.on('message', (data: Buffer) => frames.push(JSON.parse(data.toString('utf8')) as Record<string, unknown>));
  let lateCode: number | undefined;
  const lateClosed = new Promise<number>((resolve) => late.on('close', (code) => resolve((lateCode = code))));
  await new Promise((resolve, reject) => {
    late.on('open', resolve);
    late.on('error', reject);
  });
  await eventually('its connect write held', () => beforeConnect.reached, Boolean);
  try {
    assert.equal((await call(rt.url, 'PATCH', `/organizations/${org}`, { token: ADMIN_TOKEN, json: { plan: 'starter' } })).status, 200);
    beforeConnect.release();
    await eventually('the late connection recorded', () => frames.some((frame) => frame.type === 'ready'), Boolean);
    afterStore2.arm();
    late.send(JSON.stringify({ id: 'b-1', type: HELD_TYPE_2 }));
    // Stored (then held, and answered before the close), refused, or not taken by a socket already
    // closing: never stored unanswered.
    await eventually('b-1 held, answered or its socket closed', () => afterStore2.reached || frames.some((frame) => frame.id === 'b-1') || lateCode !== undefined, Boolean);
  } finally {
    beforeConnect.release();
    afterStore.release();
  }
  assert.equal((await lab.answerTo('a-1')).type, 'ack');
  afterStore2.release();
  assert.equal(await lateClosed, 4402);
  const stored = rt.runtime.context.events.inbox.liveClaim(org, '@device:late', 'b-1', Date.now()) !== undefined;
  assert.ok(!stored || frames.some((frame) => frame.id === 'b-1'), `b-1 was stored, so answered before the close: ${JSON.stringify(frames)}`);
  assert.equal((await lab.closed).code, 4402);
});

test('a plan that loses the sandbox and gets it back during a rotation does not let the old token store after the rotation', async () => {
  const org = 'acct-device-races-plan-back';
  const { orgKey, lab } = await labHoldingMessage(org, 'm1');
  // The rotation stops the socket and waits for m1.
  afterRotate.arm();
  rotationQueued = false;
  const rotating = call(rt.url, 'POST', `/organizations/${org}/devices/lab/token?environment=sandbox`, { token: orgKey });
  await eventually('the rotation queued', () => rotationQueued, Boolean);
  try {
    assert.equal((await call(rt.url, 'PATCH', `/organizations/${org}`, { token: ADMIN_TOKEN, json: { plan: 'starter' } })).status, 200);
    assert.equal((await call(rt.url, 'PATCH', `/organizations/${org}`, { token: ADMIN_TOKEN, json: { plan: 'pro' } })).status, 200);
  } finally {
    afterStore.release();
  }
  assert.equal((await lab.answerTo('m1')).type, 'ack');
  await eventually('the rotation durable', () => afterRotate.reached, Boolean);
  lab.send({ id: 'm2', type: 'reading.taken' });
  const answer = await lab.answerTo('m2').catch(() => undefined);
  afterRotate.release();
  assert.equal((await rotating).status, 200);
  assert.notEqual(answer?.type, 'ack', `m2, sent with the old token after the rotation was durable, was stored: ${JSON.stringify(answer)}`);
  assert.equal((await lab.closed).code, 4401);
});

test('a plan that loses the sandbox leaves open a production device that took the name of a deleted sandbox device still ending', async () => {
  const org = 'acct-device-races-plan-prod';
  const orgKey = await createOrg(rt.url, ADMIN_TOKEN, org);
  const old = await connectDevice(rt.url, org, 'lab', await sandboxDevice(org, orgKey, 'lab'));
  // The sandbox socket's ending write is held: the socket stays among the name's until it is written.
  beforeDisconnect.arm();
  try {
    assert.equal((await call(rt.url, 'DELETE', `/organizations/${org}/devices/lab?environment=sandbox`, { token: orgKey })).status, 204);
    assert.equal((await old.closed).code, 4404);
    await eventually('the sandbox socket\'s ending held', () => beforeDisconnect.reached, Boolean);
    const production = await call(rt.url, 'POST', `/organizations/${org}/devices`, { token: orgKey, json: { name: 'lab', environment: 'production' } });
    assert.equal(production.status, 201, production.text);
    const socket = new WebSocket(`${rt.url.replace('http', 'ws')}/devices/${org}/lab?token=${production.body.token}`);
    const frames: Array<Record<string, unknown>> = [];
    socket.on('message', (data: Buffer) => frames.push(JSON.parse(data.toString('utf8')) as Record<string, unknown>));
    const closed = new Promise<number>((resolve) => socket.on('close', (code) => resolve(code)));
    await new Promise((resolve, reject) => {
      socket.on('open', resolve);
      socket.on('error', reject);
    });
    assert.equal((await call(rt.url, 'PATCH', `/organizations/${org}`, { token: ADMIN_TOKEN, json: { plan: 'starter' } })).status, 200);
    beforeDisconnect.release();
    await eventually('the production connection recorded', () => frames.some((frame) => frame.type === 'ready'), Boolean);
    for (const id of ['p-1', 'p-2']) {
      socket.send(JSON.stringify({ id, type: 'reading.taken' }));
      const answer = await eventually(`${id} answered or the socket closed`, async () => frames.find((frame) => frame.id === id) ?? (await Promise.race([closed, Promise.resolve(undefined)])), (found) => found !== undefined);
      assert.deepEqual(typeof answer === 'object' ? answer.type : `closed ${answer}`, 'ack');
    }
    socket.close();
    assert.equal(await closed, 1005);
  } finally {
    beforeDisconnect.release();
  }
});

test('a rotation whose write fails after committing closes the sockets (1011): none stores on the old token', async () => {
  const token = await register('rot-fail');
  const first = await connectDevice(rt.url, ORG, 'rot-fail', token);
  failAfterCommit.rotateToken = true;
  const rotated = await call(rt.url, 'POST', `/organizations/${ORG}/devices/rot-fail/token`, { token: key });
  assert.equal(rotated.status, 500, rotated.text);
  assert.equal((await first.closed).code, 1011);
  await assert.rejects(connectDevice(rt.url, ORG, 'rot-fail', token), { status: 401 }, 'the rotation took effect');
});

test('a connection write that fails after committing closes the replaced socket too, and its own ending is still written', async () => {
  const token = await register('con-fail');
  const first = await connectDevice(rt.url, ORG, 'con-fail', token);
  failAfterCommit.connect = true;
  const second = await openRaw('con-fail', token);
  assert.equal(await second.closed, 1011);
  assert.equal((await first.closed).code, 1011, 'the replaced socket does not go on storing after its ending');
  await eventually('the device disconnected', async () => (await call(rt.url, 'GET', `/organizations/${ORG}/devices/con-fail`, { token: key })).body.device.state, (state) => state === 'disconnected');
  const endings = await endingsOf('con-fail');
  assert.equal(endings.length, 2, 'both connections ended, once each');
  assert.equal(new Set(endings.map((e) => e.payload.connection_id)).size, 2);
});

test('a sandbox reset whose socket close never came (its answer failed): the next message is refused, not stored, and the socket closes (4410)', async () => {
  const org = 'acct-device-races-reset';
  const orgKey = await createOrg(rt.url, ADMIN_TOKEN, org);
  const device = await connectDevice(rt.url, org, 'lab', await sandboxDevice(org, orgKey, 'lab'));
  const sockets = DeviceSockets.prototype as unknown as { closeConnectionsEndedByReset: (...args: unknown[]) => void };
  const closeAfterReset = sockets.closeConnectionsEndedByReset;
  sockets.closeConnectionsEndedByReset = () => undefined;
  try {
    assert.equal((await call(rt.url, 'POST', `/organizations/${org}/sandbox/reset`, { token: orgKey })).status, 200);
  } finally {
    sockets.closeConnectionsEndedByReset = closeAfterReset;
  }
  device.send({ id: 'after-reset', type: 'reading.taken', payload: {} });
  const answer = await device.answerTo('after-reset');
  assert.deepEqual([answer.type, answer.error?.code, answer.retryable], ['nack', 'connection_closing', true]);
  assert.equal((await device.closed).code, 4410);
  const stored = await call(rt.url, 'GET', `/organizations/${org}/events?environment=sandbox`, { token: orgKey });
  assert.deepEqual(stored.body.events, [], 'nothing of the ended connection is stored in the new sandbox, not even its ending');
});

test('a message that waited for a sandbox reset is answered (connection_closing) before its socket closes (4410): closed first, it got no answer at all (found by a probe)', async () => {
  const org = 'acct-device-races-reset-wait';
  const orgKey = await createOrg(rt.url, ADMIN_TOKEN, org);
  const device = await connectDevice(rt.url, org, 'lab', await sandboxDevice(org, orgKey, 'lab'));
  const generations = SandboxGenerations.prototype as unknown as {
    during: (orgId: string, reset: () => Promise<unknown>) => Promise<unknown>;
    quiet: (orgId: string) => Promise<void>;
  };
  const { during, quiet } = generations;
  let letResetGo: () => void = () => undefined;
  const held = new Promise<void>((resolve) => (letResetGo = resolve));
  let resetting = false;
  let messageWaiting = false;
  // The reset is held once under way (its org resetting); a sandbox message then waits for it.
  generations.during = function (this: unknown, orgId: string, reset: () => Promise<unknown>) {
    generations.during = during;
    return during.call(this, orgId, async () => {
      resetting = true;
      await held;
      return reset();
    });
  };
  generations.quiet = function (this: unknown, orgId: string) {
    if (orgId === org && resetting) messageWaiting = true;
    return quiet.call(this, orgId);
  };
  try {
    const reset = call(rt.url, 'POST', `/organizations/${org}/sandbox/reset`, { token: orgKey });
    await eventually('the reset under way', () => resetting, Boolean);
    device.send({ id: 'during-reset', type: 'reading.taken', payload: {} });
    await eventually('the message waiting for the reset', () => messageWaiting, Boolean);
    letResetGo();
    assert.equal((await reset).status, 200);
    const answer = await device.answerTo('during-reset');
    assert.deepEqual([answer.type, answer.error?.code, answer.retryable], ['nack', 'connection_closing', true]);
    assert.equal((await device.closed).code, 4410);
  } finally {
    generations.during = during;
    generations.quiet = quiet;
    letResetGo();
  }
  const stored = await call(rt.url, 'GET', `/organizations/${org}/events?environment=sandbox`, { token: orgKey });
  assert.deepEqual(stored.body.events, [], 'nothing of the ended connection is stored in the new sandbox');
});

test('a sandbox reset that fails after committing (its flush failed) closes the sandbox device sockets (1011), which reconnect into the new sandbox, and the sandbox live rooms (4409)', async () => {
  const org = 'acct-device-races-unflushed';
  const orgKey = await createOrg(rt.url, ADMIN_TOKEN, org);
  const created = await call(rt.url, 'POST', `/organizations/${org}/devices`, { token: orgKey, json: { name: 'lab', environment: 'sandbox' } });
  assert.equal(created.status, 201, created.text);
  const plant = await call(rt.url, 'POST', `/organizations/${org}/devices`, { token: orgKey, json: { name: 'plant' } });
  const listening = await connectDevice(rt.url, org, 'lab', created.body.token);
  const production = await connectDevice(rt.url, org, 'plant', plant.body.token);
  const sandboxRoom = await connectLive(rt.url, org, { token: orgKey, query: `?token=${encodeURIComponent(orgKey)}&environment=sandbox` });
  const generations = SandboxGenerations.prototype as unknown as { during: (orgId: string, reset: () => Promise<unknown>) => Promise<unknown> };
  const during = generations.during;
  generations.during = function (this: unknown, orgId: string, reset: () => Promise<unknown>) {
    return during.call(this, orgId, async () => {
      await reset();
      throw new Error('flush failed');
    });
  };
  try {
    assert.equal((await call(rt.url, 'POST', `/organizations/${org}/sandbox/reset`, { token: orgKey })).status, 500);
  } finally {
    generations.during = during;
  }
  assert.equal((await listening.closed).code, 1011, 'a device that sends nothing is told too');
  assert.equal((await sandboxRoom.closed).code, 4409, 'a live room on the sandbox reloads, as after a reset');
  const view = await call(rt.url, 'GET', `/organizations/${org}/devices/lab?environment=sandbox`, { token: orgKey });
  assert.deepEqual([view.body.device.state, view.body.device.last_disconnect_reason], ['disconnected', 'sandbox_reset'], 'the reset committed');
  const again = await connectDevice(rt.url, org, 'lab', created.body.token);
  again.close(1000);
  await again.closed;
  const endings = await eventually('the new connection ending', async () => (await call(rt.url, 'GET', `/organizations/${org}/events?type=device.disconnected&environment=sandbox`, { token: orgKey })).body.events as Array<{ payload: Record<string, unknown> }>, (list) => list.length === 1);
  assert.equal(endings[0]!.payload.connection_id, again.frames[0]!.connection_id, 'only the new connection ends in the new sandbox');
  production.send({ id: 'p-1', type: 'reading.taken', payload: {} });
  assert.equal((await production.answerTo('p-1')).type, 'ack', 'the production device stays connected');
  production.close(1000);
  await production.closed;
});

for (const change of ['rotation', 'delete'] as const) {
  test(`a key revoked while its device ${change} waits for the device's messages is 401 and changes nothing; the socket goes on`, async () => {
    const name = `revoked-${change}`;
    const token = await register(name);
    const device = await connectDevice(rt.url, ORG, name, token);
    const developer = await call(rt.url, 'POST', `/organizations/${ORG}/api-keys`, { token: key, json: { role: 'developer' } });
    assert.equal(developer.status, 201, developer.text);
    afterStore.arm();
    device.send({ id: 'held', type: HELD_TYPE });
    await eventually('the message stored and held', () => afterStore.reached, Boolean);
    rotationQueued = deleteQueued = false;
    const path = `/organizations/${ORG}/devices/${name}`;
    const answer = change === 'rotation' ? call(rt.url, 'POST', `${path}/token`, { token: developer.body.key }) : call(rt.url, 'DELETE', path, { token: developer.body.key });
    try {
      await eventually(`the ${change} queued behind the message`, () => (change === 'rotation' ? rotationQueued : deleteQueued), Boolean);
      assert.equal((await call(rt.url, 'DELETE', `/organizations/${ORG}/api-keys/${developer.body.id}`, { token: key })).status, 200);
    } finally {
      afterStore.release();
    }
    assert.equal((await device.answerTo('held')).type, 'ack');
    const refused = await answer;
    assert.deepEqual([refused.status, refused.body.error?.code, refused.body.token], [401, 'unauthorized', undefined], refused.text);
    const stored = await call(rt.url, 'GET', path, { token: key });
    assert.deepEqual([stored.status, stored.body.device.state], [200, 'connected'], 'the device is there, its connection open');
    device.send({ id: 'after', type: 'reading.taken' });
    assert.equal((await device.answerTo('after')).type, 'ack', 'its token still works: the socket goes on storing');
    device.close();
    assert.equal((await device.closed).code, 1000);
  });
}
