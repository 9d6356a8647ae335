// Run creation's first-in-first-out guard, on every ledger (LMDB and memory) and the real root scheduler: while a run
// written as `queued` has not committed (the scheduler does not know it yet), a later run of the
// same org is not admitted on the spot, even when a slot is free. The test holds each creating
// transaction's reaction and settles it by hand, which is the race the HTTP tests cannot pin down.

import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { asOrgId, asRunId, type OrgId } from '../../actors/ids.ts';
import { RootScheduler } from '../../actors/root-scheduler.ts';
import type { StoredEvent } from '../../runtime/events/event-record.ts';
import type { Reaction } from '../../runtime/events/event-store.ts';
import type { Ledger } from '../../runtime/ledger/ledger.ts';
import { UpdateLog } from '../../runtime/rooms/update-log.ts';
import { RunCreation } from '../../runtime/runs/run-creation.ts';
import { RunStore, runIdFor } from '../../runtime/runs/run-store.ts';
import { runUpdateFor } from '../../runtime/runs/run-update.ts';
import type { WorkflowVersion } from '../../runtime/workflows/workflow-types.ts';
import { LEDGER_KINDS } from '../helpers/ledgers.ts';

const ORG = asOrgId('acct-fifo');
const version = {
  workflow_id: 'wf_fifo',
  org_id: ORG,
  version: 1,
  created_at: '2026-11-30T00:00:00.000Z',
  definition: { name: 'fifo', trigger_event: 'job.run', environment: 'production', status: 'active', steps: [{ id: 's', type: 'webhook', url: 'http://127.0.0.1:9/unused', headers: {}, timeout_ms: 1000 }] },
} as unknown as WorkflowVersion;

let ledger: Ledger;
let runs: RunStore;
let scheduler: RootScheduler;
let creation: RunCreation;
/** The runs the host was told about once their transaction committed, in that order. */
let started: string[];
/** Whether a test settles a reaction as unflushed (the others fail if one is). */
let unflushedExpected = false;

/** A run creation host over `onLedger`, as the engine would be, with a limit of one running run. */
function setUp(onLedger: Ledger): void {
  ledger = onLedger;
  runs = new RunStore(ledger);
  const updateLog = new UpdateLog(ledger, 1000);
  scheduler = new RootScheduler();
  scheduler.setLimit(ORG, 1);
  started = [];
  creation = new RunCreation({
    runs,
    updateLog,
    matching: () => [version],
    updateFor: (run, v) => runUpdateFor(run, v),
    admitNow: (orgId, runId) => scheduler.admitNow(orgId, runId),
    release: (orgId, runId) => void scheduler.release(orgId, runId),
    // As the engine does on commit: a run left `queued` joins its org's queue.
    started: (orgId, _updates, created) => {
      for (const { run } of created) {
        started.push(run.context.runId);
        if (run.value === 'queued') scheduler.enqueue(orgId, run.context.runId);
      }
    },
    pump: () => undefined,
    unconfirmed: () => assert.ok(unflushedExpected, 'every write here is flushed'),
  });
}

const event = (id: string): StoredEvent => ({
  id, org_id: ORG, type: 'job.run', payload: {}, environment: 'production', source: '@api', provider_event_id: null,
  received_at: '2026-11-30T00:00:00.000Z', received_at_ms: 1_000, correlation_id: id, causation_id: null, depth: 0, replay_skip_side_effects: false, replay_workflow_ids: null,
});

/** Creates the event's run inside a real transaction and returns its (not yet settled) reaction. */
async function create(eventId: string): Promise<{ runId: string; reaction: Reaction }> {
  const reaction = await ledger.root.transaction(() => {
    const prepared = creation.createRuns(event(eventId));
    prepared?.write();
    return prepared;
  });
  assert.ok(reaction !== undefined, 'the workflow matched');
  return { runId: runIdFor(ORG, eventId, version.workflow_id), reaction };
}

const stateOf = (runId: string): string | undefined => runs.get(ORG, asRunId(runId))?.value;
const placeOf = (orgId: OrgId, runId: string): string => scheduler.placeOf(orgId, asRunId(runId));

for (const kind of LEDGER_KINDS) describe(`run creation (${kind.name} ledger)`, () => {
  let opened: ReturnType<typeof kind.open>;
  before(() => {
    opened = kind.open();
    setUp(opened.ledger);
  });
  after(() => opened.close());

  test('a run created while an earlier queued run of its org is still committing waits behind it', async () => {
    const first = await create('evt_1');
    assert.equal(stateOf(first.runId), 'running', 'a free slot admits the first run on the spot');
    first.reaction.committed();

    const second = await create('evt_2');
    assert.equal(stateOf(second.runId), 'queued', 'the only slot is taken');

    // The slot frees before the second run's reaction settles: the scheduler's queue is still empty.
    scheduler.release(ORG, asRunId(first.runId));
    const third = await create('evt_3');
    assert.equal(stateOf(third.runId), 'queued', 'the third run does not jump ahead of the uncommitted second');
    assert.equal(placeOf(ORG, third.runId), 'absent');

    second.reaction.committed();
    third.reaction.committed();
    assert.deepEqual(started, [first.runId, second.runId, third.runId]);
    assert.deepEqual(scheduler.nextAdmissions().map((a) => a.runId), [second.runId], 'the earlier run is admitted first');
    assert.equal(placeOf(ORG, third.runId), 'queued');

    // Nothing is in flight any more: once the slot frees and the queue drains, on-the-spot admission is back.
    scheduler.release(ORG, asRunId(second.runId));
    assert.deepEqual(scheduler.nextAdmissions().map((a) => a.runId), [third.runId]);
    scheduler.release(ORG, asRunId(third.runId));
    const fourth = await create('evt_4');
    assert.equal(stateOf(fourth.runId), 'running');
    fourth.reaction.committed();
    scheduler.release(ORG, asRunId(fourth.runId));
  });

  test('an abandoned queued run stops holding back the runs after it', async () => {
    const busy = await create('evt_busy');
    assert.equal(stateOf(busy.runId), 'running');
    busy.reaction.committed();
    const lost = await create('evt_lost');
    assert.equal(stateOf(lost.runId), 'queued');
    lost.reaction.abandoned();
    scheduler.release(ORG, asRunId(busy.runId));

    const next = await create('evt_next');
    assert.equal(stateOf(next.runId), 'running', 'the abandoned run no longer counts as waiting');
    next.reaction.committed();
  });
});

test('the host is told of each run once its creating write is durable; one committed without its flush, or never committed, is not told here (stall-resume counts the first when it finds it)', async () => {
  const opened = LEDGER_KINDS[0]!.open();
  try {
    setUp(opened.ledger);
    unflushedExpected = true;
    const committed = await create('evt_told_1');
    committed.reaction.committed();
    const unflushed = await create('evt_told_2');
    unflushed.reaction.unflushed();
    // Refused in its transaction (the org fenced off): prepared, never written.
    const refused = creation.createRuns(event('evt_told_3'));
    refused?.unflushed();
    assert.deepEqual(started, [committed.runId]);
    assert.ok(runs.has(ORG, asRunId(unflushed.runId)), 'the unflushed one is in the ledger, to be picked up');
  } finally {
    unflushedExpected = false;
    await opened.close();
  }
});
