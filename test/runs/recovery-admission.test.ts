// Boot recovery admits the runs it reclaims on the spot, in the transaction that reclaims them, on
// every ledger with the real root scheduler: while the org has a free slot and no run of it waits
// ahead, an interrupted run is stored `running` again under a higher fence (its abandoned attempt
// kept), with both live updates; beyond that it is stored `queued` for the scheduler. A recovery
// whose write fails gives its slots back.

import assert from 'node:assert/strict';
import { afterEach, beforeEach, describe, test } from 'node:test';
import { asEventId, asOrgId, asRunId, asStepId, type OrgId, type RunId } from '../../actors/ids.ts';
import { RootScheduler } from '../../actors/root-scheduler.ts';
import { applyRunEvent, persistedRunOf, startRunActor, type PersistedRun } from '../../actors/run-transition.ts';
import type { Ledger } from '../../runtime/ledger/ledger.ts';
import type { RunUpdate } from '../../runtime/rooms/live-codec.ts';
import type { LiveRooms } from '../../runtime/rooms/live-rooms.ts';
import { UpdateLog } from '../../runtime/rooms/update-log.ts';
import { RECOVERY_BATCH, recoverUnfinishedRuns, type RecoveredRun } from '../../runtime/runs/run-recovery.ts';
import { RunStore } from '../../runtime/runs/run-store.ts';
import { runUpdateFor } from '../../runtime/runs/run-update.ts';
import type { WorkflowVersion } from '../../runtime/workflows/workflow-types.ts';
import { runInput, T0, webhookStep } from '../actors/run-fixtures.ts';
import { LEDGER_KINDS } from '../helpers/ledgers.ts';

const A = asOrgId('acct-a');
const B = asOrgId('acct-b');
const NOW = T0 + 60_000;

const versionOf = (orgId: OrgId): WorkflowVersion =>
  ({
    workflow_id: 'wf_1',
    org_id: orgId,
    version: 3,
    created_at: '2025-01-01T00:00:00.000Z',
    definition: { name: 'w', trigger_event: 'job.run', environment: 'production', status: 'active', steps: [{ id: 's', type: 'webhook', url: 'http://127.0.0.1:9/x', headers: {}, timeout_ms: 1000 }] },
  }) as unknown as WorkflowVersion;

/**
 * A run of one webhook step as the previous process left it: `running` (its step out under fence
 * 1), `queued` (never admitted) or `woken` (queued again for its retry: the resume lane).
 */
function runAt(orgId: OrgId, id: string, createdAt: number, state: 'running' | 'queued' | 'woken'): PersistedRun {
  const input = runInput([webhookStep('s')], { orgId, runId: asRunId(id), eventId: asEventId(`evt_${id}`), createdAt });
  const { actor, run } = startRunActor(input);
  try {
    if (state === 'queued') return run;
    actor.send({ type: 'run.admitted', at: createdAt + 1 });
    if (state === 'woken') {
      const error = { code: 'http_503', message: 'Service Unavailable', retryable: true, retryAfterMs: 10 };
      actor.send({ type: 'step.failed', stepId: asStepId('s'), fence: 1, error, at: createdAt + 2 });
      actor.send({ type: 'timer.fired', at: createdAt + 3_600_000 });
    }
    return persistedRunOf(actor);
  } finally {
    actor.stop();
  }
}

let ledger: Ledger;
let runs: RunStore;
let updateLog: UpdateLog;
let scheduler: RootScheduler;
let published: Array<{ orgId: string; updates: readonly RunUpdate[] }>;

function setUp(onLedger: Ledger): void {
  ledger = onLedger;
  runs = new RunStore(ledger);
  updateLog = new UpdateLog(ledger, 1000);
}

async function store(...stored: PersistedRun[]): Promise<void> {
  await ledger.root.transaction(() => {
    for (const run of stored) runs.write(run, undefined);
  });
}

async function recover(): Promise<RecoveredRun[]> {
  const rooms = { publish: (orgId: string, updates: readonly RunUpdate[]) => published.push({ orgId, updates }) } as unknown as LiveRooms;
  const { runs: recovered } = await recoverUnfinishedRuns(
    {
      ledger,
      runs,
      updateLog,
      rooms,
      updateFor: (run) => runUpdateFor(run, versionOf(run.context.orgId)),
      admitNow: (orgId, runId) => scheduler.admitNow(orgId, runId),
      release: (orgId, runId) => void scheduler.release(orgId, runId),
      observer: { created: () => assert.fail('recovery creates no run'), transitioned: (previous, run) => told.push(`${run.context.runId}: ${previous.value} -> ${run.value}`) },
    },
    NOW,
  );
  return recovered;
}

/** The transitions recovery told its observer of (the metrics count a run failed here as finished). */
let told: string[] = [];

/** Runs recovery with the run store's `nth` write throwing (a disk that fails part way); expects it to reject. */
async function recoverFailingAtWrite(nth: number): Promise<void> {
  const write = runs.write.bind(runs);
  let writes = 0;
  runs.write = (run, previous) => {
    if (++writes === nth) throw new Error('disk said no');
    write(run, previous);
  };
  try {
    await assert.rejects(recover(), /disk said no/);
  } finally {
    runs.write = write;
  }
}

const storedRun = (orgId: OrgId, id: string): PersistedRun | undefined => runs.get(orgId, asRunId(id));
const attemptsOf = (run: PersistedRun | undefined): Array<[string, number]> =>
  (run?.context.steps[0]?.attempts ?? []).map((attempt) => [attempt.outcome, attempt.fence]);
const place = (orgId: OrgId, id: string): string => scheduler.placeOf(orgId, id as RunId);

for (const kind of LEDGER_KINDS) describe(`boot recovery admission (${kind.name} ledger)`, () => {
  let opened: ReturnType<typeof kind.open>;
  beforeEach(() => {
    opened = kind.open();
    setUp(opened.ledger);
  });
  afterEach(() => opened.close());

  test('reclaimed runs take free slots in the reclaiming write, oldest first, never ahead of a run that waits', async () => {
    scheduler = new RootScheduler();
    published = [];
    // Org A: three runs out at the kill, its limit now two. Org B: an older run queued again for
    // its retry (resume lane, like a reclaimed run) ahead of a run that was out, and a new run.
    scheduler.setLimit(A, 2);
    scheduler.setLimit(B, 5);
    await store(runAt(A, 'a3', T0 + 3, 'running'), runAt(A, 'a1', T0 + 1, 'running'), runAt(A, 'a2', T0 + 2, 'running'), runAt(B, 'b1', T0, 'woken'), runAt(B, 'b2', T0 + 4, 'running'), runAt(B, 'b0', T0 - 5, 'queued'));

    const recovered = await recover();

    assert.deepEqual(
      recovered.map((r) => [r.runId, r.work.kind, r.admitted === undefined ? 'waits' : 'admitted']),
      [
        ['b1', 'await_admission', 'waits'],
        ['a1', 'dispatch_step', 'admitted'],
        ['a2', 'dispatch_step', 'admitted'],
        ['a3', 'await_admission', 'waits'],
        ['b2', 'await_admission', 'waits'],
        ['b0', 'await_admission', 'waits'],
      ],
      'resume lane first, oldest first; only what fits the limit and waits behind nothing is admitted',
    );
    for (const id of ['a1', 'a2']) {
      const run = storedRun(A, id);
      assert.equal(run?.value, 'running', `${id} is stored running again`);
      assert.deepEqual(attemptsOf(run), [['abandoned', 1], ['pending', 2]], `${id}: the attempt out at the kill is abandoned, the step claimed under a higher fence`);
      assert.equal(place(A, id), 'running', `${id} holds its slot`);
      const admitted = recovered.find((r) => r.runId === id)?.admitted;
      assert.deepEqual(admitted?.run, run, 'the engine is handed the snapshot now stored');
      assert.equal(admitted?.actor.getSnapshot().value, 'running');
      admitted?.actor.stop();
    }
    for (const [orgId, id] of [[A, 'a3'], [B, 'b2']] as const) {
      const run = storedRun(orgId, id);
      assert.equal(run?.value, 'queued', `${id} is stored queued, for the scheduler`);
      assert.deepEqual(attemptsOf(run), [['abandoned', 1]]);
      assert.equal(place(orgId, id), 'absent', 'the engine enqueues it');
    }
    assert.deepEqual(attemptsOf(storedRun(B, 'b1')), [['failed', 1]], 'a run waiting for admission is left as it was');
    assert.equal(storedRun(B, 'b0')?.value, 'queued');

    // Each reclaimed run's updates, in order: `queued` (its attempt abandoned), then `running` if admitted.
    const states = (orgId: OrgId): string[] => updateLog.range(orgId, 0, Number.MAX_SAFE_INTEGER).map((u) => `${u.run_id}:${u.state}`);
    assert.deepEqual(states(A), ['a1:queued', 'a1:running', 'a2:queued', 'a2:running', 'a3:queued']);
    assert.deepEqual(states(B), ['b2:queued']);
    assert.deepEqual(
      published.flatMap(({ orgId, updates }) => updates.map((u) => `${orgId}/${u.run_id}:${u.state}:${u.seq}`)),
      ['acct-a/a1:queued:1', 'acct-a/a1:running:2', 'acct-a/a2:queued:3', 'acct-a/a2:running:4', 'acct-a/a3:queued:5', 'acct-b/b2:queued:1'],
      'published once durable, with their stored seqs',
    );
  });

  test('a large recovery writes in transactions of RECOVERY_BATCH runs, and the org limit holds across them', async () => {
    scheduler = new RootScheduler();
    published = [];
    const total = RECOVERY_BATCH + 5;
    scheduler.setLimit(A, RECOVERY_BATCH);
    await store(...Array.from({ length: total }, (_, i) => runAt(A, `r${String(i).padStart(5, '0')}`, T0 + i, 'running')));
    const transaction = ledger.root.transaction.bind(ledger.root);
    const sizes: number[] = [];
    ledger.root.transaction = ((work: () => unknown) =>
      transaction(() => {
        const result = work();
        sizes.push((result as unknown[]).length);
        return result;
      })) as typeof ledger.root.transaction;
    let recovered: RecoveredRun[];
    try {
      recovered = await recover();
    } finally {
      ledger.root.transaction = transaction;
    }
    assert.deepEqual(sizes, [RECOVERY_BATCH, 5], 'one transaction per batch');
    assert.equal(recovered.filter((r) => r.admitted !== undefined).length, RECOVERY_BATCH);
    assert.equal(scheduler.stats(A).running, RECOVERY_BATCH);
    const last = recovered[total - 1];
    assert.equal(last?.admitted, undefined, 'the run past the limit waits');
    assert.equal(storedRun(A, last?.runId ?? '')?.value, 'queued');
    assert.equal(updateLog.lastSeq(A), RECOVERY_BATCH * 2 + 5, 'every update stored');
    assert.equal(published.length, total);
    for (const r of recovered) r.admitted?.actor.stop();
  });

  test('a write that fails in a later batch gives back every slot; the batches before it stay written', async () => {
    scheduler = new RootScheduler();
    published = [];
    scheduler.setLimit(A, RECOVERY_BATCH + 5);
    const ids = Array.from({ length: RECOVERY_BATCH + 5 }, (_, i) => `f${String(i).padStart(5, '0')}`);
    await store(...ids.map((id, i) => runAt(A, id, T0 + i, 'running')));
    await recoverFailingAtWrite(RECOVERY_BATCH + 2);
    assert.equal(scheduler.stats(A).running, 0, 'boot fails: no slot is kept');
    assert.deepEqual(attemptsOf(storedRun(A, ids[0] ?? '')), [['abandoned', 1], ['pending', 2]], 'the first batch committed');
    assert.deepEqual(attemptsOf(storedRun(A, ids.at(-1) ?? '')), [['pending', 1]], 'the failing batch left nothing');
    assert.equal(published.length, RECOVERY_BATCH, 'only what committed was published');
  });

  test('a recovery whose write fails gives back the slots it took and changes nothing stored', async () => {
    scheduler = new RootScheduler();
    published = [];
    scheduler.setLimit(A, 5);
    const before = runAt(A, 'c1', T0 + 10, 'running');
    await store(before, runAt(A, 'c2', T0 + 11, 'running'));
    await recoverFailingAtWrite(2);
    assert.equal(scheduler.stats(A).running, 0, 'no slot is kept by a run the ledger does not hold as running');
    assert.equal(place(A, 'c1'), 'absent');
    assert.deepEqual(attemptsOf(storedRun(A, 'c1')), [['pending', 1]], 'the transaction left nothing');
    assert.deepEqual(published, []);
  });

  test('a run whose step was cut off at the fifth restart in a row is stored failed, takes no slot and is not handed on', async () => {
    scheduler = new RootScheduler();
    published = [];
    scheduler.setLimit(A, 5);
    // Four restarts already cut its step off; the process died with the fifth attempt out too.
    let crashing = runAt(A, 'p1', T0, 'running');
    for (let restart = 1; restart <= 4; restart += 1) {
      crashing = applyRunEvent(crashing, { type: 'run.recovered', at: T0 + restart * 10 }).run;
      crashing = applyRunEvent(crashing, { type: 'run.admitted', at: T0 + restart * 10 + 1 }).run;
    }
    await store(crashing, runAt(A, 'p2', T0 + 1, 'running'));

    told = [];
    const recovered = await recover();
    assert.deepEqual(told.sort(), ['p1: running -> failed', 'p2: running -> running'], 'each written run told once: p1 finished failed');

    assert.deepEqual(recovered.map((r) => [r.runId, r.work.kind]), [['p2', 'dispatch_step']], 'only the other run goes on');
    assert.equal(storedRun(A, 'p1')?.value, 'failed');
    assert.equal(storedRun(A, 'p1')?.context.error?.code, 'step_interrupted_repeatedly');
    assert.deepEqual(attemptsOf(storedRun(A, 'p1')).map(([outcome]) => outcome), ['abandoned', 'abandoned', 'abandoned', 'abandoned', 'abandoned']);
    assert.equal(place(A, 'p1'), 'absent', 'it holds no slot');
    assert.deepEqual(published.flatMap((p) => p.updates.filter((u) => u.run_id === 'p1').map((u) => u.state)), ['failed'], 'its failure is published live');
  });
});
