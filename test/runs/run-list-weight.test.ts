// Run lists weigh the snapshots they read: a run holds its steps' results (megabytes), so a page of
// runs, or of failed events with their runs, ends with a cursor once the snapshots it read pass
// MAX_PAGE_BYTES as stored, and keeps only each run's view. On every ledger.

import assert from 'node:assert/strict';
import { afterEach, beforeEach, describe, test } from 'node:test';
import { asEventId, asRunId, asStepId } from '../../actors/ids.ts';
import { persistedRunOf, startRunActor, type PersistedRun } from '../../actors/run-transition.ts';
import type { Ledger } from '../../runtime/ledger/ledger.ts';
import { MAX_PAGE_BYTES } from '../../runtime/ledger/page-by-time.ts';
import { RunStore } from '../../runtime/runs/run-store.ts';
import { runInput, T0, webhookStep } from '../actors/run-fixtures.ts';
import { LEDGER_KINDS } from '../helpers/ledgers.ts';

const RESULT_BYTES = 5 * 1024 * 1024;
const RUNS = 6;

/** A failed run whose first step succeeded with a RESULT_BYTES result; one event per run. */
function heavyFailedRun(n: number): PersistedRun {
  const input = runInput([webhookStep('first'), webhookStep('second')], { runId: asRunId(`run_${n}`), eventId: asEventId(`evt_${n}`), createdAt: T0 + n });
  const { actor } = startRunActor(input);
  try {
    const at = T0 + n;
    actor.send({ type: 'run.admitted', at });
    actor.send({ type: 'step.succeeded', stepId: asStepId('first'), fence: 1, result: { body: 'x'.repeat(RESULT_BYTES) }, at });
    actor.send({ type: 'step.failed', stepId: asStepId('second'), fence: 2, error: { code: 'http_400', message: 'no', retryable: false }, at });
    const run = persistedRunOf(actor);
    assert.equal(run.value, 'failed');
    return run;
  } finally {
    actor.stop();
  }
}

for (const kind of LEDGER_KINDS) {
  describe(`run lists weigh what they read: ${kind.name}`, () => {
    let opened: ReturnType<typeof kind.open>;
    let ledger: Ledger;
    let runs: RunStore;

    beforeEach(async () => {
      opened = kind.open();
      ledger = opened.ledger;
      runs = new RunStore(ledger);
      await ledger.root.transaction(() => {
        for (let n = 0; n < RUNS; n++) runs.write(heavyFailedRun(n), undefined);
      });
    });
    afterEach(() => opened.close());

    test('the stored size of a run is what the ledger weighs it by', () => {
      const bytes = ledger.openDatabase('runs').getBinaryFast(['org_a', 'run_0'])?.length ?? 0;
      assert.ok(bytes > RESULT_BYTES && bytes < RESULT_BYTES + 64 * 1024, `stored ${bytes} bytes`);
      assert.equal(ledger.openDatabase('runs').getBinaryFast(['org_a', 'run_none']), undefined);
    });

    test('a run list ends past MAX_PAGE_BYTES of snapshots read, with a cursor, and goes on from it', () => {
      const perPage = Math.ceil(MAX_PAGE_BYTES / RESULT_BYTES);
      const first = runs.list('org_a', 'production', { state: 'failed', limit: 50 }, (run) => run.context.runId);
      assert.equal(first.runs.length, perPage);
      assert.notEqual(first.nextCursor, null);
      const second = runs.list('org_a', 'production', { state: 'failed', limit: 50, cursor: first.nextCursor! }, (run) => run.context.runId);
      assert.equal(second.nextCursor, null);
      const expected = Array.from({ length: RUNS }, (_, n) => `run_${RUNS - 1 - n}`);
      assert.deepEqual([...first.runs, ...second.runs], expected, 'newest first, none skipped or repeated');
    });

    test('a failed-events page ends past MAX_PAGE_BYTES of run snapshots read, after a whole event', () => {
      const perPage = Math.ceil(MAX_PAGE_BYTES / RESULT_BYTES);
      const first = runs.failedEvents('org_a', 'production', 50, undefined, (run) => run.context.runId);
      assert.equal(first.events.length, perPage);
      assert.ok(first.events.every((event) => event.runs.length === 1 && event.failedRuns === 1));
      assert.notEqual(first.nextCursor, null);
      const second = runs.failedEvents('org_a', 'production', 50, first.nextCursor!, (run) => run.context.runId);
      assert.equal(second.nextCursor, null);
      const ids = [...first.events, ...second.events].map((event) => event.eventId);
      assert.deepEqual(ids, Array.from({ length: RUNS }, (_, n) => `evt_${RUNS - 1 - n}`));
    });
  });
}
