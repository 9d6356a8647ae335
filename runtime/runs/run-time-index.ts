// What the runs-by-time index holds per entry: the run's workflow and its state, rewritten when the
// state changes, so that a filtered run list skips runs that do not match without reading them.
// Entries written before the index held them are null: those runs are read to be filtered
// (entryMayMatch in ledger/page-by-time.ts).

import type { PersistedRun } from '../../actors/run-transition.ts';

/** [workflowId, state]. */
export type RunTimeEntry = readonly [string, string];

export const runTimeEntryOf = (run: PersistedRun): RunTimeEntry => [run.context.workflowId, run.value];
