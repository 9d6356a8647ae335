// A sandbox reset removes in bounded transactions, so other orgs' writes go on between them (one
// transaction held every org's writes for the whole removal), and a reset cut short part-way is
// finished at the next start, before that start recovers the sandbox runs it was removing. What
// lands between its transactions stays right: a device rotated meanwhile, a late sandbox event, a
// second reset; production's replay claims stay. On a real runtime over LMDB in a temp dir.

import assert from 'node:assert/strict';
import { rmSync } from 'node:fs';
import { test } from 'node:test';
import { API_SOURCE, rootEvent } from '../../runtime/events/event-record.ts';
import { resetSandbox, type SandboxResetDeps } from '../../runtime/events/sandbox-reset.ts';
import { createLogger } from '../../runtime/log.ts';
import { ProjectionStore } from '../../runtime/projections/projection-store.ts';
import type { RunKeys } from '../../runtime/runs/run-store.ts';
import { connectDevice } from '../helpers/device-client.ts';
import { call, createOrg } from '../helpers/http.ts';
import { connectLive } from '../helpers/live-client.ts';
import { eventually } from '../helpers/receiver.ts';
import { ADMIN_TOKEN, startRuntime, tempDir, type TestRuntime } from '../helpers/runtime.ts';

const ORG = 'acct-reset-chunks';
const OTHER = 'acct-reset-bystander';

/** The reset's dependencies over the runtime's own stores, removing `chunk` records per transaction. */
function resetDeps(rt: TestRuntime, chunk: number, forget: (runs: readonly RunKeys[]) => void): SandboxResetDeps {
  const { ledger, events, runs, sources } = rt.runtime.context;
  return { ledger, events, runs, sources, devices: rt.runtime.deviceStore, updateLog: rt.runtime.updateLog, projections: new ProjectionStore(ledger), forget, chunk };
}

/** An org with a sandbox workflow whose runs wait an hour, and `count` sandbox events each with its run waiting. */
async function sandboxWithWaitingRuns(rt: TestRuntime, count: number): Promise<{ key: string; runIds: string[] }> {
  const key = await createOrg(rt.url, ADMIN_TOKEN, ORG, 'pro');
  assert.equal((await call(rt.url, 'PATCH', `/organizations/${ORG}`, { token: ADMIN_TOKEN, json: { max_concurrent_runs: 100 } })).status, 200);
  const workflow = await call(rt.url, 'POST', `/organizations/${ORG}/workflows`, {
    token: key,
    json: { name: 'waits', trigger_event: 'order.placed', environment: 'sandbox', steps: [{ id: 'wait', type: 'delay', duration_ms: 3_600_000 }] },
  });
  assert.equal(workflow.status, 201, workflow.text);
  for (let i = 0; i < count; i++) assert.equal((await send(rt, key, `order-${i}`)).status, 202);
  const runIds = await eventually(
    `${count} sandbox runs waiting`,
    async () => (await call(rt.url, 'GET', `/organizations/${ORG}/runs?environment=sandbox&limit=100`, { token: key })).body.runs as { run_id: string }[],
    (runs) => runs.length === count && runs.every((run) => rt.runtime.engine.timerDueAt(ORG, run.run_id) !== undefined),
  );
  return { key, runIds: runIds.map((run) => run.run_id) };
}

const send = (rt: TestRuntime, key: string, id: string) =>
  call(rt.url, 'POST', `/organizations/${ORG}/events`, { token: key, json: { type: 'order.placed', environment: 'sandbox', id, payload: { id } } });

/** Runs `body` on a runtime of its own (LMDB in a temp dir), closed and removed afterwards. */
async function onFreshRuntime(body: (rt: TestRuntime) => Promise<void>): Promise<void> {
  const rt = await startRuntime();
  try {
    await body(rt);
  } finally {
    await rt.close();
    rmSync(rt.dataDir, { recursive: true, force: true });
  }
}

const sandboxEventsStored = (rt: TestRuntime): number => rt.runtime.ledger.eventsByTime.getKeysCount({ start: [ORG, 'sandbox'], end: [ORG, 'sandbox', Number.MAX_SAFE_INTEGER] });

test('a reset removes in transactions of at most its chunk, and a write queued meanwhile commits between them', () =>
  onFreshRuntime(async (rt) => {
    const { runIds } = await sandboxWithWaitingRuns(rt, 7);
    const batches: number[] = [];
    const reset = resetSandbox(
      resetDeps(rt, 2, (runs) => {
        batches.push(runs.length);
        rt.runtime.engine.forget(runs);
      }),
      ORG,
      Date.now(),
    );
    // Queued right after the reset's first transaction: it runs before the removal is done.
    const seenByBystander = rt.runtime.ledger.root.transaction(() => {
      rt.runtime.ledger.events.put([OTHER, 'evt-bystander'], { marker: true });
      return sandboxEventsStored(rt);
    });
    const result = await reset;
    assert.equal(await seenByBystander, 7, "another org's write went in before the reset's removals, not after all of them");
    assert.deepEqual(batches, [2, 2, 2, 1], 'runs removed two per transaction, each batch forgotten once durable');
    assert.deepEqual([result.runs, result.events, result.generation], [7, 7, 1]);
    assert.equal(sandboxEventsStored(rt), 0);
    for (const runId of runIds) assert.equal(rt.runtime.engine.timerDueAt(ORG, runId), undefined, `${runId}'s delay timer is disarmed`);
    assert.deepEqual(rt.runtime.context.runs.sandboxGenerations.interruptedResets(), [], 'a finished reset leaves no mark');
  }));

test('a reset cut short part-way is finished at the next start, before its sandbox runs could be recovered', async () => {
  const dataDir = tempDir();
  const first = await startRuntime({ dataDir });
  let key: string;
  let runIds: string[];
  let lateRunId: string | undefined;
  try {
    ({ key, runIds } = await sandboxWithWaitingRuns(first, 5));
    // The first batch of runs is removed and durable, then the reset fails (as a failed write would).
    const cutShort = resetSandbox(
      resetDeps(first, 2, () => {
        throw new Error('the reset stops here');
      }),
      ORG,
      Date.now(),
    );
    await assert.rejects(cutShort, /the reset stops here/);
    assert.deepEqual(first.runtime.context.runs.sandboxGenerations.interruptedResets(), [ORG], 'the reset is marked as under way');
    assert.equal(sandboxEventsStored(first), 5, 'its events are still there');
    // The process goes on after the failed write: a sandbox event now makes a run in the generation
    // the cut-short reset started, which the finishing removes; a sandbox device connects, and the
    // process ends with that connection open (as a crash leaves it).
    assert.equal((await send(first, key, 'order-late')).status, 202);
    const device = await call(first.url, 'POST', `/organizations/${ORG}/devices`, { token: key, json: { name: 'till-9', environment: 'sandbox' } });
    assert.equal(device.status, 201, device.text);
    const store = first.runtime.deviceStore;
    assert.equal(await store.connect(store.require(ORG, 'till-9'), { id: 'conn_left_open', connected_at_ms: Date.now() }, () => assert.fail('no earlier connection')), true);
    lateRunId = (await eventually('the late run', async () => (await call(first.url, 'GET', `/organizations/${ORG}/events/order-late?environment=sandbox`, { token: key })).body?.reactions ?? [], (r) => r.length === 1))[0].run_id;
  } finally {
    await first.close();
  }
  const lines: string[] = [];
  const second = await startRuntime({ dataDir, logger: createLogger('info', (line) => lines.push(line)) });
  try {
    assert.ok(lines.some((line) => line.includes('sandbox resets cut short were finished') && line.includes(ORG)), lines.join(''));
    assert.equal(sandboxEventsStored(second), 0, 'nothing sandbox is left, nor written at start for the connection left open');
    const runs = await call(second.url, 'GET', `/organizations/${ORG}/runs?environment=sandbox`, { token: key });
    assert.deepEqual(runs.body.runs, []);
    for (const runId of runIds) {
      assert.equal(second.runtime.engine.timerDueAt(ORG, runId), undefined, `${runId} was not recovered`);
      assert.equal((await call(second.url, 'GET', `/organizations/${ORG}/runs/${runId}?environment=sandbox`, { token: key })).status, 404);
    }
    assert.deepEqual(second.runtime.context.runs.sandboxGenerations.interruptedResets(), []);
    assert.equal(second.runtime.context.runs.sandboxGenerations.current(ORG), 2, 'the finishing started a generation of its own');
    // The live rooms passed over the finished reset's mark, as after a reset made through the API: a
    // client joining now hears a position past it, and resuming from that is no position before the reset.
    const fresh = await connectLive(second.url, ORG, { query: `?token=${key}&environment=sandbox` });
    await fresh.waitFor(() => fresh.messages.some((message) => 'heartbeat' in message), 'the joining heartbeat');
    const heard = fresh.messages.flatMap((message) => ('heartbeat' in message ? [message.heartbeat.last_seq] : []))[0]!;
    fresh.close();
    const resumed = await connectLive(second.url, ORG, { query: `?token=${key}&environment=sandbox&after_seq=${heard}&strict=true` });
    let resumedClosed: number | undefined;
    void resumed.closed.then((closed) => (resumedClosed = closed.code));
    await resumed.waitFor(() => resumed.messages.some((message) => 'heartbeat' in message), 'a heartbeat after resuming');
    assert.equal(resumedClosed, undefined, `resuming from ${heard} is not refused with 4409`);
    resumed.close();
    // Ids sent before the reset, and between its failure and the restart, are new again, and make
    // runs of the new generation: never the ids of runs that were removed.
    for (const id of ['order-0', 'order-late']) assert.equal((await send(second, key, id)).status, 202, id);
    const [again] = await eventually("the late event's new run", async () => (await call(second.url, 'GET', `/organizations/${ORG}/events/order-late?environment=sandbox`, { token: key })).body?.reactions ?? [], (r) => r.length === 1);
    assert.notEqual(again.run_id, lateRunId);
  } finally {
    await second.close();
    rmSync(dataDir, { recursive: true, force: true });
  }
});

test("a sandbox device whose token is rotated while a reset runs keeps the new token: the reset ends its connection first and writes it no more", () =>
  onFreshRuntime(async (rt) => {
    const { key } = await sandboxWithWaitingRuns(rt, 6);
    const created = await call(rt.url, 'POST', `/organizations/${ORG}/devices`, { token: key, json: { name: 'till-1', environment: 'sandbox' } });
    assert.equal(created.status, 201, created.text);
    const device = await connectDevice(rt.url, ORG, 'till-1', created.body.token);
    try {
      const store = rt.runtime.deviceStore;
      const deps = resetDeps(rt, 2, (runs) => rt.runtime.engine.forget(runs));
      // Late in the reset (its projection rows go last but one), as a rotation through the API would land.
      let rotation: Promise<unknown> | undefined;
      const projections = deps.projections;
      const lateRotation: SandboxResetDeps['projections'] = Object.assign(Object.create(projections) as typeof projections, {
        removeEnvironment: (orgId: string, environment: string, limit?: number) => {
          rotation ??= store.rotateToken(ORG, 'till-1', store.require(ORG, 'till-1').id, 'f'.repeat(64), 'sdt_rotated0', Date.now());
          return projections.removeEnvironment(orgId, environment, limit);
        },
      });
      const result = await resetSandbox({ ...deps, projections: lateRotation }, ORG, Date.now());
      assert.ok(rotation !== undefined);
      await rotation;
      assert.equal(result.device_connections.length, 1, 'the open connection was ended');
      const read = await call(rt.url, 'GET', `/organizations/${ORG}/devices/till-1?environment=sandbox`, { token: key });
      assert.equal(read.body.device.token_prefix, 'sdt_rotated0', read.text);
      assert.deepEqual([read.body.device.state, read.body.device.last_disconnect_reason], ['disconnected', 'sandbox_reset'], read.text);
    } finally {
      device.close();
    }
  }));

test('a sandbox event stored while a reset runs, by a writer that did not wait for it, goes with its runs', () =>
  onFreshRuntime(async (rt) => {
    await sandboxWithWaitingRuns(rt, 4);
    const { events } = rt.runtime.context;
    let late: Promise<unknown> | undefined;
    const result = await resetSandbox(
      resetDeps(rt, 3, (runs) => {
        // After the last runs the run sweep finds (a batch short of its chunk): the event makes a run
        // of its own, which that sweep never sees.
        if (runs.length < 3) late ??= events.store({ event: rootEvent({ id: 'evt_late', org_id: ORG, type: 'order.placed', payload: {}, environment: 'sandbox', source: API_SOURCE, provider_event_id: null, received_at_ms: Date.now() }), recording: null, claim: null });
        rt.runtime.engine.forget(runs);
      }),
      ORG,
      Date.now(),
    );
    await late;
    assert.equal(sandboxEventsStored(rt), 0);
    assert.deepEqual([...rt.runtime.context.runs.allIn(ORG, 'sandbox')], [], 'no run is left without its event');
    assert.deepEqual([result.events, result.runs], [5, 5]);
  }));

test('two resets of one org asked for together run one after the other: the first removes everything, the second finds nothing', () =>
  onFreshRuntime(async (rt) => {
    await sandboxWithWaitingRuns(rt, 5);
    const deps = resetDeps(rt, 2, (runs) => rt.runtime.engine.forget(runs));
    const [first, second] = await Promise.all([resetSandbox(deps, ORG, Date.now()), resetSandbox(deps, ORG, Date.now())]);
    assert.deepEqual([first.events, first.runs, first.generation], [5, 5, 1]);
    assert.deepEqual([second.events, second.runs, second.generation], [0, 0, 2]);
    assert.deepEqual(rt.runtime.context.runs.sandboxGenerations.interruptedResets(), []);
  }));

test("a reset leaves production's keyed replay claims: the same keyed replay of a production event is still the same replay", () =>
  onFreshRuntime(async (rt) => {
    const { key } = await sandboxWithWaitingRuns(rt, 3);
    assert.equal((await call(rt.url, 'POST', `/organizations/${ORG}/events`, { token: key, json: { type: 'order.placed', id: 'prod-1', payload: {} } })).status, 202);
    const replay = () => call(rt.url, 'POST', `/organizations/${ORG}/events/prod-1/replay`, { token: key, json: { side_effects: 'skip' }, headers: { 'idempotency-key': 'ticket-9' } });
    const before = await replay();
    assert.equal(before.status, 202, before.text);
    const result = await resetSandbox(resetDeps(rt, 2, (runs) => rt.runtime.engine.forget(runs)), ORG, Date.now());
    assert.equal(result.inbox_claims, 0);
    const after = await replay();
    assert.equal(after.body.event.id, before.body.event.id, after.text);
    assert.equal(after.headers.get('idempotent-replayed'), 'true');
  }));

test("a reset sweeps the org's retained live updates in steps of its chunk too; its last write looks only at what is left, and the mark is past every seq", () =>
  onFreshRuntime(async (rt) => {
    const { key } = await sandboxWithWaitingRuns(rt, 6);
    // Production updates between the sandbox ones: the sweep looks at both and removes only the sandbox's.
    const production = await call(rt.url, 'POST', `/organizations/${ORG}/workflows`, { token: key, json: { name: 'prod', trigger_event: 'order.placed', steps: [{ id: 'wait', type: 'delay', duration_ms: 3_600_000 }] } });
    assert.equal(production.status, 201, production.text);
    for (let i = 0; i < 4; i++) {
      assert.equal((await call(rt.url, 'POST', `/organizations/${ORG}/events`, { token: key, json: { type: 'order.placed', id: `prod-${i}`, payload: {} } })).status, 202);
    }
    const log = rt.runtime.updateLog;
    // Every production run's last update (it waits an hour): none of theirs comes after this snapshot.
    const before = await eventually('production updates retained', () => log.range(ORG, 0, Number.MAX_SAFE_INTEGER), (updates) => updates.filter((update) => update.environment === 'production' && update.state === 'delaying').length === 4);
    assert.ok(before.filter((update) => update.environment === 'sandbox').length >= 6);
    const highest = Math.max(...before.map((update) => update.seq));

    let leftForTheLastWrite = -1;
    const removeEnvironment = log.removeEnvironment.bind(log);
    log.removeEnvironment = (orgId, environment, fromSeq) => {
      leftForTheLastWrite = log.range(orgId, (fromSeq ?? 0) - 1, Number.MAX_SAFE_INTEGER).length;
      return removeEnvironment(orgId, environment, fromSeq);
    };
    try {
      const result = await resetSandbox(resetDeps(rt, 2, (runs) => rt.runtime.engine.forget(runs)), ORG, Date.now());
      assert.ok(result.live_mark > highest, 'the mark is past every seq handed out');
    } finally {
      log.removeEnvironment = removeEnvironment;
    }
    assert.equal(leftForTheLastWrite, 1, 'the last write looks only at the newest update (kept for its seq), not at every retained one');
    const after = log.range(ORG, 0, Number.MAX_SAFE_INTEGER);
    assert.deepEqual(after.filter((update) => update.environment === 'sandbox'), []);
    assert.deepEqual(after.map((update) => update.seq), before.filter((update) => update.environment === 'production').map((update) => update.seq), "production's updates stay, all of them");
  }));
