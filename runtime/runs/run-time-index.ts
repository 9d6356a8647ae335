// What the runs-by-time index holds per entry: the run's workflow and its state, rewritten when the
// state changes, so that a filtered run list skips runs that do not match without reading them.
// Entries written before the index held them are null: those runs are read to be filtered.

import type { PersistedRun } from '../../actors/run-transition.ts';

/** [workflowId, state]. */
export type RunTimeEntry = readonly [string, string];

export const runTimeEntryOf = (run: PersistedRun): RunTimeEntry => [run.context.workflowId, run.value];

/** False when the entry shows that the run does not pass the filter; true when it does or cannot tell. */
export function mayMatch(entry: unknown, filter: { readonly state?: string; readonly workflowId?: string }): boolean {
  if (!Array.isArray(entry) || entry.length !== 2) return true;
  const [workflowId, state] = entry as unknown[];
  return (filter.workflowId === undefined || filter.workflowId === workflowId) && (filter.state === undefined || filter.state === state);
}
