// Live rooms over a real WebSocket: auth at upgrade, revoked keys, protobuf frames, replay after a
// sequence number without duplicates, filters, protocol errors that close only that socket, slow consumers.

import assert from 'node:assert/strict';
import { request as httpRequest } from 'node:http';
import { after, before, test } from 'node:test';
import { durably } from '../../runtime/ledger/durable-write.ts';
import type { RunUpdate } from '../../runtime/rooms/live-codec.ts';
import type { NewRunUpdate } from '../../runtime/rooms/update-log.ts';
import { CLOSE_KEY_REVOKED, CLOSE_PROTOCOL_ERROR, CLOSE_SLOW_CONSUMER } from '../../runtime/rooms/live-close-codes.ts';
import { LIVE_PROTOCOL } from '../../runtime/rooms/live-upgrade.ts';
import { MAX_CLIENT_FRAME_BYTES } from '../../runtime/rooms/live-rooms.ts';
import { ADMIN_TOKEN, startRuntime, type TestRuntime } from '../helpers/runtime.ts';
import { call, createOrg } from '../helpers/http.ts';
import { connectLive, type LiveClient } from '../helpers/live-client.ts';
import { upgradeAnswer } from '../helpers/upgrade-answer.ts';

let rt: TestRuntime;
let key: string;
let otherKey: string;
before(async () => {
  rt = await startRuntime({ args: ['--live-retention', '50'] });
  key = await createOrg(rt.url, ADMIN_TOKEN, 'acct-live');
  otherKey = await createOrg(rt.url, ADMIN_TOKEN, 'acct-other');
});
after(async () => rt.close());

function update(runId: string, state: string, environment = 'production'): NewRunUpdate {
  return { run_id: runId, state, channel: 'orders', workflow_id: 'wf', event_id: 'evt', step_id: 's1', attempt: 1, at_ms: 1, error: '', environment };
}

/** The production path: append in one durable transaction, then publish. */
async function commit(orgId: string, updates: NewRunUpdate[]): Promise<RunUpdate[]> {
  const { ledger, updateLog, rooms } = rt.runtime;
  const stored = await durably(ledger.root, ledger.root.transaction(() => updates.map((u) => updateLog.append(orgId, u))));
  rooms.publish(orgId, stored);
  return stored;
}

/** An upgrade request by hand, to read a refusal's status and body (WebSocket clients hide them). */
function refusal(path: string): Promise<{ status: number; error: { code: string; message: string; field?: string } }> {
  return new Promise((resolve, reject) => {
    const request = httpRequest(`${rt.url}${path}`, { headers: { connection: 'Upgrade', upgrade: 'websocket', 'sec-websocket-version': '13', 'sec-websocket-key': 'dGhlIHNhbXBsZSBub25jZQ==' } });
    request.on('upgrade', () => reject(new Error('upgraded')));
    request.on('response', (response) => {
      let text = '';
      response.on('data', (chunk: Buffer) => (text += chunk.toString('utf8')));
      response.on('end', () => resolve({ status: response.statusCode ?? 0, error: JSON.parse(text).error }));
    });
    request.on('error', reject);
    request.end();
  });
}

test('each refused upgrade says why, in the API\'s words; a plain GET is told to upgrade', async () => {
  const live = '/organizations/acct-live/live';
  const cases = [
    [`${live}`, 401, 'unauthorized', /valid API key is required/],
    [`${live}?token=${encodeURIComponent(otherKey)}`, 404, 'not_found', /Organization was not found/],
    [`${live}?token=${encodeURIComponent(key)}&after_seq=abc`, 400, 'invalid_subscription', /^after_seq must be a sequence number \(.*\)\.$/],
    [`${live}?token=${encodeURIComponent(key)}&environment=staging`, 400, 'invalid_subscription', /^environment must be "production" or "sandbox"\.$/],
    [`${live}?token=${encodeURIComponent(key)}&run_id=${'r'.repeat(201)}`, 400, 'invalid_subscription', /^run_id must be at most 200 characters\.$/],
    [`${live}?token=${encodeURIComponent(key)}&enviroment=sandbox`, 400, 'unknown_query_parameter', /no query parameter "enviroment"/],
    [`${live}?token=${encodeURIComponent(key)}&after_seq=1&after_seq=2`, 400, 'repeated_query_parameter', /"after_seq" is given more than once/],
    // Not the REST route the path reads as without its empty segment (GET /organizations/:org, a 401 about the key).
    [`/organizations//live?token=${encodeURIComponent(key)}`, 404, 'not_found', /No WebSocket endpoint at this path/],
    [`/organizations/acct-live//live?token=${encodeURIComponent(key)}`, 404, 'not_found', /No WebSocket endpoint at this path/],
    // Percent-decoded as REST paths are: a malformed escape says so.
    [`/organizations/acct%E0%A4live/live?token=${encodeURIComponent(key)}`, 400, 'malformed_path', /invalid percent-encoding/],
    [`/organizations/${'o'.repeat(5000)}/live?token=${encodeURIComponent(key)}`, 404, 'not_found', /Organization was not found/],
  ] as const;
  const starterKey = await createOrg(rt.url, ADMIN_TOKEN, 'acct-live-starter', 'starter');
  const sandbox = await refusal(`/organizations/acct-live-starter/live?token=${encodeURIComponent(starterKey)}&environment=sandbox`);
  assert.deepEqual([sandbox.status, sandbox.error.code], [402, 'sandbox_disabled']);
  assert.match(sandbox.error.message, /not available on the starter plan/);
  for (const [path, status, code, message] of cases) {
    const answer = await refusal(path);
    assert.equal(answer.status, status, path);
    assert.equal(answer.error.code, code, path);
    assert.match(answer.error.message, message, path);
    // As every API error: a field where one is at fault.
    if (code === 'invalid_subscription') assert.equal(answer.error.field, /^(after_seq|environment|run_id)/.exec(answer.error.message)?.[1], path);
  }
  const plain = await call(rt.url, 'GET', live, { token: key });
  assert.equal(plain.status, 426);
  assert.equal(plain.body.error.code, 'upgrade_required');
  assert.equal(plain.headers.get('upgrade'), 'websocket', 'RFC 9110: a 426 names the protocol to switch to');
});

test('upgrade needs a key of that org: none 401, other org 404, viewer via ?token= or subprotocol', async () => {
  await assert.rejects(connectLive(rt.url, 'acct-live'), /401/);
  await assert.rejects(connectLive(rt.url, 'acct-live', { token: otherKey }), /404/);
  await assert.rejects(connectLive(rt.url, 'acct-live', { token: 'sk_forged' }), /401/);
  const viewer = await call(rt.url, 'POST', '/organizations/acct-live/api-keys', { token: key, json: { role: 'viewer' } });
  const byQuery = await connectLive(rt.url, 'acct-live', { token: viewer.body.key });
  const byProtocol = await connectLive(rt.url, 'acct-live', { protocols: [LIVE_PROTOCOL, viewer.body.key] });
  assert.equal(byProtocol.socket.protocol, LIVE_PROTOCOL);
  // The key alone as a subprotocol would have to be echoed in the answer's headers: refused instead.
  await assert.rejects(connectLive(rt.url, 'acct-live', { protocols: [viewer.body.key] }), /400/);
  // Also with the key in ?token=: the missing subprotocol is the problem, not two tokens.
  for (const url of [`${rt.url}/organizations/acct-live/live`, `${rt.url}/organizations/acct-live/live?token=${viewer.body.key}`]) {
    assert.equal((await upgradeAnswer(url, ['foo'])).code, 'invalid_subprotocol', url);
  }
  // The org percent-encoded, as a client that escapes every path segment sends it.
  const encoded = await connectLive(rt.url, 'acct%2Dlive', { token: viewer.body.key });
  byQuery.close();
  byProtocol.close();
  encoded.close();
});

/** The close code and reason, once the socket has closed (bounded by the client's waitFor deadline). */
async function closeOf(client: LiveClient): Promise<{ code: number; reason: string }> {
  let result: { code: number; reason: string } | undefined;
  void client.closed.then((closed) => (result = closed));
  await client.waitFor(() => result !== undefined, 'the socket to close');
  return result!;
}

const seqsOf = (client: LiveClient): number[] => client.updates().map((u) => u.seq);

test('revoking an API key closes its live sockets with 4401; other keys and the platform admin token keep theirs', async () => {
  const issued = await call(rt.url, 'POST', '/organizations/acct-live/api-keys', { token: key, json: { role: 'viewer' } });
  const byQuery = await connectLive(rt.url, 'acct-live', { token: issued.body.key });
  const byProtocol = await connectLive(rt.url, 'acct-live', { protocols: [LIVE_PROTOCOL, issued.body.key] });
  const otherKeySocket = await connectLive(rt.url, 'acct-live', { token: key });
  const admin = await connectLive(rt.url, 'acct-live', { token: ADMIN_TOKEN });
  const revoked = await call(rt.url, 'DELETE', `/organizations/acct-live/api-keys/${issued.body.id}`, { token: key });
  assert.equal(revoked.status, 200);
  for (const client of [byQuery, byProtocol]) assert.equal((await closeOf(client)).code, CLOSE_KEY_REVOKED);
  await assert.rejects(connectLive(rt.url, 'acct-live', { token: issued.body.key }), /401/);

  const [next] = await commit('acct-live', [update('run-after-revoke', 'running')]);
  await otherKeySocket.waitFor(() => seqsOf(otherKeySocket).includes(next!.seq), 'the other key still streams');
  await admin.waitFor(() => seqsOf(admin).includes(next!.seq), 'the platform admin still streams');
  admin.subscribe({ after_seq: next!.seq - 1, run_id: 'run-after-revoke' });
  const [last] = await commit('acct-live', [update('run-after-revoke', 'completed')]);
  await admin.waitFor(() => seqsOf(admin).includes(last!.seq), 'the platform admin can still subscribe');
  otherKeySocket.close();
  admin.close();
  assert.equal((await admin.closed).code, 1005, 'the admin socket closed only when its client closed it');
});

test('a revocation whose flush fails (it may have committed) answers an error and still closes the key\'s sockets', async () => {
  const issued = await call(rt.url, 'POST', '/organizations/acct-live/api-keys', { token: key, json: { role: 'viewer' } });
  const socket = await connectLive(rt.url, 'acct-live', { token: issued.body.key });
  const { apiKeys } = rt.runtime.context;
  const revoke = apiKeys.revoke.bind(apiKeys);
  // Committed, then the flush fails: what the caller hears is an error.
  apiKeys.revoke = async (...args) => {
    await revoke(...args);
    throw new Error('flush failed (injected)');
  };
  try {
    const answer = await call(rt.url, 'DELETE', `/organizations/acct-live/api-keys/${issued.body.id}`, { token: key });
    assert.equal(answer.status, 503, answer.text);
    assert.equal(answer.body.error.code, 'write_failed');
  } finally {
    apiKeys.revoke = revoke;
  }
  assert.equal((await closeOf(socket)).code, CLOSE_KEY_REVOKED);
  await assert.rejects(connectLive(rt.url, 'acct-live', { token: issued.body.key }), /401/, 'the revocation did commit');
  const unknown = await call(rt.url, 'DELETE', '/organizations/acct-live/api-keys/key_unknown', { token: key });
  assert.equal(unknown.status, 404);
});

test('a Subscribe on a socket whose key was revoked is refused with 4401 instead of replaying history', async () => {
  await commit('acct-live', [update('run-history', 'running')]);
  const issued = await call(rt.url, 'POST', '/organizations/acct-live/api-keys', { token: key, json: { role: 'viewer' } });
  const client = await connectLive(rt.url, 'acct-live', { token: issued.body.key });
  // Revoked in the store, without the route's notice to the rooms: as if this Subscribe raced the
  // DELETE request, the check at Subscribe must refuse it on its own.
  await rt.runtime.context.apiKeys.revoke('acct-live', issued.body.id, new Date(0).toISOString());
  client.subscribe({ after_seq: 0 });
  assert.equal((await closeOf(client)).code, CLOSE_KEY_REVOKED);
  assert.deepEqual(client.updates(), [], 'nothing was replayed');
});

test('live updates arrive as protobuf RunUpdates with per-org monotonic seq', async () => {
  const client = await connectLive(rt.url, 'acct-live', { token: key });
  const other = await connectLive(rt.url, 'acct-other', { token: otherKey });
  const stored = await commit('acct-live', [update('run-1', 'running'), update('run-1', 'completed')]);
  await client.waitFor(() => client.updates().length === 2, 'two updates');
  assert.deepEqual(client.updates(), stored);
  assert.equal(stored[1]!.seq, stored[0]!.seq + 1);
  assert.equal(client.updates()[1]!.state, 'completed');
  await commit('acct-other', [update('run-x', 'running')]);
  await other.waitFor(() => other.updates().length === 1, 'other org update');
  assert.ok(!client.updates().some((u) => u.run_id === 'run-x'), 'no tenant sees another tenant’s runs');
  client.close();
  other.close();
});

test('a reconnecting subscriber first gets every retained update after after_seq, then live ones', async () => {
  const first = await commit('acct-live', [update('run-2', 'queued'), update('run-2', 'running')]);
  const missedFrom = first[0]!.seq;
  const missed = await commit('acct-live', [update('run-2', 'backoff'), update('run-2', 'running'), update('run-3', 'queued', 'sandbox')]);
  const client = await connectLive(rt.url, 'acct-live', { token: key });
  client.subscribe({ after_seq: missedFrom });
  await client.waitFor(() => client.updates().length === 3, 'replayed production updates');
  assert.deepEqual(client.updates().map((u) => u.seq), [first[1]!.seq, missed[0]!.seq, missed[1]!.seq]);
  const live = await commit('acct-live', [update('run-2', 'completed')]);
  await client.waitFor(() => client.updates().length === 4, 'live update after replay');
  assert.equal(client.updates()[3]!.seq, live[0]!.seq);
  client.close();
});

test('a Subscribe does not send again an update the socket already got live (no duplicate at the replay/live boundary)', async () => {
  const client = await connectLive(rt.url, 'acct-live', { token: key });
  const [early] = await commit('acct-live', [update('run-edge', 'running')]);
  await client.waitFor(() => seqsOf(client).includes(early!.seq), 'the live update');
  client.subscribe({ after_seq: early!.seq - 1 });
  const [late] = await commit('acct-live', [update('run-edge', 'completed')]);
  await client.waitFor(() => seqsOf(client).includes(late!.seq), 'the next live update');
  // The server handles the Subscribe before the close frame sent after it: once closed, any replay is in.
  client.close();
  await client.closed;
  assert.deepEqual(seqsOf(client), [early!.seq, late!.seq]);
});

test('after_seq in the URL replays before the socket joins the live stream: every update once, in seq order', async () => {
  const missed = await commit('acct-live', [update('run-url', 'queued'), update('run-other', 'queued'), update('run-url', 'running')]);
  const from = missed[0]!.seq - 1;
  const all = await connectLive(rt.url, 'acct-live', { query: `?token=${encodeURIComponent(key)}&after_seq=${from}` });
  const oneRun = await connectLive(rt.url, 'acct-live', { query: `?token=${encodeURIComponent(key)}&after_seq=${from}&run_id=run-url` });
  const [live] = await commit('acct-live', [update('run-url', 'completed')]);
  for (const client of [all, oneRun]) await client.waitFor(() => seqsOf(client).includes(live!.seq), 'the live update');
  assert.deepEqual(seqsOf(all), [...missed.map((u) => u.seq), live!.seq]);
  assert.deepEqual(seqsOf(oneRun), [missed[0]!.seq, missed[2]!.seq, live!.seq]);
  await assert.rejects(connectLive(rt.url, 'acct-live', { query: `?token=${encodeURIComponent(key)}&after_seq=-1` }), /400/);
  all.close();
  oneRun.close();
});

test('filters: sandbox environment and a single run', async () => {
  const sandbox = await connectLive(rt.url, 'acct-live', { token: key });
  sandbox.subscribe({ environment: 'sandbox', after_seq: 0 });
  const oneRun = await connectLive(rt.url, 'acct-live', { token: key });
  // From its current position (the opening heartbeat's): only what comes next, no replay.
  await oneRun.waitFor(() => oneRun.messages.some((m) => 'heartbeat' in m), 'the opening heartbeat');
  const opening = oneRun.messages.find((m) => 'heartbeat' in m);
  oneRun.subscribe({ run_id: 'run-9', after_seq: opening !== undefined && 'heartbeat' in opening ? Number(opening.heartbeat.last_seq) : 0 });
  await sandbox.waitFor(() => sandbox.updates().some((u) => u.run_id === 'run-3'), 'retained sandbox update');
  // A heartbeat comes when a socket joins the live stream and when it leaves it: one at its opening,
  // then one each as its Subscribe takes it out and, replayed, back in.
  const heartbeats = (client: LiveClient): number => client.messages.filter((m) => 'heartbeat' in m).length;
  await oneRun.waitFor(() => heartbeats(oneRun) >= 3, 'run-9 subscription live');
  await sandbox.waitFor(() => heartbeats(sandbox) >= 3, 'sandbox subscription live');
  await commit('acct-live', [update('run-9', 'running'), update('run-8', 'running'), update('run-7', 'running', 'sandbox')]);
  await oneRun.waitFor(() => oneRun.updates().length === 1, 'run-9 only');
  await sandbox.waitFor(() => sandbox.updates().some((u) => u.run_id === 'run-7'), 'live sandbox update');
  assert.ok(sandbox.updates().every((u) => u.environment === 'sandbox'));
  assert.equal(oneRun.updates()[0]!.run_id, 'run-9');
  sandbox.close();
  oneRun.close();
});

test('a sandbox socket that joins after a reset, while an earlier update is still on its way to disk, hears a position past the reset: resuming from it is not refused', async () => {
  const orgId = 'acct-live-reset-position';
  const orgKey = await createOrg(rt.url, ADMIN_TOKEN, orgId);
  const { updateLog } = rt.runtime;
  await commit(orgId, [update('run-p1', 'queued')]);
  // A production update's seq handed out, its write not durable yet (it lands after the reset).
  const inFlight = updateLog.reserve(orgId, update('run-p2', 'queued'));
  const production = await connectLive(rt.url, orgId, { token: orgKey });
  assert.equal((await call(rt.url, 'POST', `/organizations/${orgId}/sandbox/reset`, { token: orgKey })).status, 200);
  const resetSeq = updateLog.resetSeq(orgId, 'sandbox');
  assert.ok(inFlight.seq <= resetSeq, 'the reset came after the in-flight seq');
  const fresh = await connectLive(rt.url, orgId, { query: `?token=${orgKey}&environment=sandbox` });
  await fresh.waitFor(() => fresh.messages.some((m) => 'heartbeat' in m), 'the join heartbeat');
  const heard = fresh.messages.flatMap((m) => ('heartbeat' in m ? [m.heartbeat.last_seq] : []))[0]!;
  assert.ok(heard > resetSeq, `heard ${heard}, past the reset's ${resetSeq}`);
  fresh.close();
  const resumed = await connectLive(rt.url, orgId, { query: `?token=${orgKey}&environment=sandbox&after_seq=${heard}&strict=true` });
  await resumed.waitFor(() => resumed.messages.some((m) => 'heartbeat' in m), 'the resumed socket\'s heartbeat');
  let closedWith: number | undefined;
  void resumed.closed.then((closed) => (closedWith = closed.code));
  // The in-flight update lands late: the production socket still gets it.
  rt.runtime.rooms.publish(orgId, [inFlight]);
  await production.waitFor(() => production.updates().some((u) => u.run_id === 'run-p2'), 'the late production update');
  assert.equal(closedWith, undefined, 'the resumed sandbox socket stays open');
  resumed.close();
  production.close();
});

test('retention: only the last N updates are replayed', async () => {
  const many = await commit('acct-live', Array.from({ length: 80 }, (_, i) => update(`run-r${i}`, 'queued')));
  const client = await connectLive(rt.url, 'acct-live', { token: key });
  client.subscribe({ after_seq: 0 });
  const last = many[many.length - 1]!.seq;
  await client.waitFor(() => client.updates().some((u) => u.seq === last), 'newest retained update');
  assert.equal(client.updates()[0]!.seq, last - 49, 'the oldest replayed update is the 50th newest');
  client.close();
});

test('strict: after_seq 0 is a position (a quiet org\'s heartbeat), refused with 4410 once the log was trimmed past it; without strict it asks for whatever is retained', async () => {
  const orgId = 'acct-live-strict';
  const strictKey = await createOrg(rt.url, ADMIN_TOKEN, orgId);
  await commit(orgId, Array.from({ length: 60 }, (_, i) => update(`run-s${i}`, 'queued')));
  const retained = await connectLive(rt.url, orgId, { query: `?token=${strictKey}&after_seq=0` });
  await retained.waitFor(() => retained.updates().length === 50, 'the retained updates');
  retained.close();
  const viaUrl = await connectLive(rt.url, orgId, { query: `?token=${strictKey}&after_seq=0&strict=true` });
  assert.equal((await viaUrl.closed).code, 4410);
  assert.deepEqual(viaUrl.updates(), [], 'nothing replayed past the gap');
  const viaFrame = await connectLive(rt.url, orgId, { token: strictKey });
  viaFrame.subscribe({ after_seq: 0, strict: true });
  assert.equal((await viaFrame.closed).code, 4410);
  // Within the log, strict changes nothing: every update after the position, once.
  const within = await connectLive(rt.url, orgId, { query: `?token=${strictKey}&after_seq=55&strict=true` });
  await within.waitFor(() => within.updates().length === 5, 'the five updates after seq 55');
  within.close();
  // A sandbox reset after the position: 4409 when strict; without strict, 0 is whatever is retained.
  await commit(orgId, [update('run-sandbox', 'queued', 'sandbox')]);
  assert.equal((await call(rt.url, 'POST', `/organizations/${orgId}/sandbox/reset`, { token: strictKey })).status, 200);
  const strictSandbox = await connectLive(rt.url, orgId, { query: `?token=${strictKey}&environment=sandbox&after_seq=0&strict=true` });
  assert.equal((await strictSandbox.closed).code, 4409);
  const retainedSandbox = await connectLive(rt.url, orgId, { query: `?token=${strictKey}&environment=sandbox&after_seq=0` });
  await retainedSandbox.waitFor(() => retainedSandbox.messages.some((m) => 'heartbeat' in m), 'the replay to catch up');
  retainedSandbox.close();
  assert.deepEqual((await refusal(`/organizations/${orgId}/live?token=${strictKey}&after_seq=0&strict=yes`)).error.field, 'strict');
  assert.deepEqual((await refusal(`/organizations/${orgId}/live?token=${strictKey}&strict=true`)).error.field, 'strict');
});

test('an invalid ClientMessage closes that socket with 1002 and affects nobody else', async () => {
  const bad = await connectLive(rt.url, 'acct-live', { token: key });
  const good = await connectLive(rt.url, 'acct-live', { token: key });
  bad.socket.send(Buffer.from([0xff, 0xff, 0xff, 0xff]));
  const { code } = await bad.closed;
  assert.equal(code, CLOSE_PROTOCOL_ERROR);
  const text = await connectLive(rt.url, 'acct-live', { token: key });
  text.socket.send('subscribe please');
  assert.equal((await text.closed).code, CLOSE_PROTOCOL_ERROR);
  // Larger than any ClientMessage: told so (a connection cut with no close frame reads as a network drop).
  const large = await connectLive(rt.url, 'acct-live', { token: key });
  large.socket.send(Buffer.alloc(MAX_CLIENT_FRAME_BYTES + 1));
  assert.deepEqual(await large.closed, { code: CLOSE_PROTOCOL_ERROR, reason: `invalid ClientMessage: a frame has at most ${MAX_CLIENT_FRAME_BYTES} bytes` });
  // An after_seq the URL would refuse (more than 15 digits; a uint64 past 2^53 would arrive rounded) is refused, not answered about another number.
  for (const afterSeq of ['18446744073709551615', '1000000000000000']) {
    const huge = await connectLive(rt.url, 'acct-live', { token: key });
    // protobufjs takes a uint64 as decimal text; the helper's type says number.
    huge.subscribe({ after_seq: afterSeq as unknown as number, strict: true });
    assert.deepEqual(await huge.closed, { code: CLOSE_PROTOCOL_ERROR, reason: 'invalid ClientMessage: after_seq must be a sequence number (a whole number of at most 15 digits).' }, afterSeq);
  }
  await commit('acct-live', [update('run-after-bad', 'running')]);
  await good.waitFor(() => good.updates().some((u) => u.run_id === 'run-after-bad'), 'the good socket still streams');
  good.close();
});

test('updates that become durable out of order are still delivered in seq order', async () => {
  const { ledger, updateLog, rooms } = rt.runtime;
  const client = await connectLive(rt.url, 'acct-live', { token: key });
  const write = (u: NewRunUpdate) => durably(ledger.root, ledger.root.transaction(() => updateLog.append('acct-live', u)));
  const first = await write(update('run-order', 'running'));
  const second = await write(update('run-order', 'completed'));
  rooms.publish('acct-live', [second]);
  rooms.publish('acct-live', [first]);
  await client.waitFor(() => client.updates().filter((u) => u.run_id === 'run-order').length === 2, 'both updates');
  assert.deepEqual(client.updates().filter((u) => u.run_id === 'run-order').map((u) => u.seq), [first.seq, second.seq]);

  // A seq whose write never became durable holds later ones back only until the gap is released.
  await write(update('run-lost', 'running'));
  const after = await write(update('run-gap', 'running'));
  const emittedBefore = rooms.emittedSeq('acct-live');
  rooms.publish('acct-live', [after]);
  // Sending is synchronous in publish: not sent out now means held back.
  assert.equal(rooms.emittedSeq('acct-live'), emittedBefore, 'held back behind the missing seq');
  assert.ok(emittedBefore < after.seq - 1, 'the missing seq lies between');
  rooms.releaseGaps();
  assert.equal(rooms.emittedSeq('acct-live'), after.seq, 'released: the gap is passed over');
  await client.waitFor(() => client.updates().some((u) => u.run_id === 'run-gap'), 'released after the gap');
  client.close();
});

test('a consumer that stops reading is closed instead of buffering without bound', async () => {
  const slow = await connectLive(rt.url, 'acct-live', { token: key });
  const fast = await connectLive(rt.url, 'acct-live', { token: key });
  (slow.socket as unknown as { _socket: { pause(): void } })._socket.pause();
  const big = { ...update('run-flood', 'running'), error: 'e'.repeat(1000) };
  for (let round = 0; round < 200; round++) {
    rt.runtime.rooms.publish('acct-live', Array.from({ length: 100 }, (_, i) => ({ ...big, seq: 10_000_000 + round * 100 + i })));
    await new Promise((r) => setImmediate(r));
  }
  (slow.socket as unknown as { _socket: { resume(): void } })._socket.resume();
  const result = await slow.closed;
  // Cut off by uWS at the backpressure limit (1006, no close frame): without the limit, the
  // heartbeat's check of what is queued would close it later with 4008.
  assert.equal(result.code, 1006);
  await fast.waitFor(() => fast.updates().length > 1000, 'the fast consumer keeps receiving');
  fast.close();
});

test('a consumer that reads nothing of what is queued for six heartbeats is closed long before the 512 KiB cut', async () => {
  const stalled = await connectLive(rt.url, 'acct-live', { token: key });
  (stalled.socket as unknown as { _socket: { pause(): void } })._socket.pause();
  const sockets = rt.runtime.rooms.subscriberCount;
  const big = { ...update('run-stall', 'running'), error: 'e'.repeat(1000) };
  // 50 KB a heartbeat: once the kernel's buffers are full the runtime queues them, and six beats
  // after it holds 16 KiB the socket is closed with about 300 KB queued: under the 512 KiB cut.
  const first = rt.runtime.rooms.emittedSeq('acct-live') + 1;
  for (let round = 0; round < 400 && rt.runtime.rooms.subscriberCount === sockets; round++) {
    rt.runtime.rooms.publish('acct-live', Array.from({ length: 50 }, (_, i) => ({ ...big, seq: first + round * 50 + i })));
    await new Promise((r) => setImmediate(r));
    rt.runtime.rooms.heartbeat();
  }
  const closedByRuntime = rt.runtime.rooms.subscriberCount === sockets - 1;
  if (!closedByRuntime) stalled.socket.terminate();
  (stalled.socket as unknown as { _socket: { resume(): void } })._socket.resume();
  const result = await stalled.closed;
  assert.ok(closedByRuntime, 'closed by the runtime');
  assert.deepEqual([result.code, result.reason], [CLOSE_SLOW_CONSUMER, 'slow consumer: too little read for 30 s']);
});

test('once the rooms close (the runtime stopping), open sockets get 1001 and a new upgrade is refused 503, not cut off without a close frame', async () => {
  const own = await startRuntime();
  try {
    const ownKey = await createOrg(own.url, ADMIN_TOKEN, 'acct-live-stopping');
    const open = await connectLive(own.url, 'acct-live-stopping', { token: ownKey });
    own.runtime.rooms.close();
    assert.equal((await open.closed).code, 1001);
    await assert.rejects(connectLive(own.url, 'acct-live-stopping', { token: ownKey }), /upgrade refused: 503/);
  } finally {
    await own.close();
  }
});
