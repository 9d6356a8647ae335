// Boot recovery: every unfinished run is read back from its persisted snapshot. A run that was
// `running` when the process died goes back to `queued` with its open attempt marked abandoned
// (actors/run-transition.ts), and those changes commit durably, with their live updates, before
// the engine acts on any run. Runs come back in admission order (see `admissionOrder`), since the
// store keys them by [org, run id] and run ids are hashes.

import { reclaimAfterRestart, type PersistedRun } from '../../actors/run-transition.ts';
import { admissionLane } from '../../actors/run-work.ts';
import { durably } from '../ledger/durable-write.ts';
import type { Ledger } from '../ledger/ledger.ts';
import type { LiveRooms } from '../rooms/live-rooms.ts';
import type { NewRunUpdate, UpdateLog } from '../rooms/update-log.ts';
import type { RunStore } from './run-store.ts';

export interface RecoveryDeps {
  readonly ledger: Ledger;
  readonly runs: RunStore;
  readonly updateLog: UpdateLog;
  readonly rooms: LiveRooms;
  readonly updateFor: (run: PersistedRun) => NewRunUpdate;
}

/**
 * Resolves with every unfinished run, as now durably stored, in `admissionOrder`: the engine
 * enqueues them in the order given, so that order is what each org's FIFO sees.
 */
export async function recoverUnfinishedRuns(deps: RecoveryDeps, nowMs: number): Promise<PersistedRun[]> {
  const reclaimed: Array<{ run: PersistedRun; update: NewRunUpdate }> = [];
  const resting: PersistedRun[] = [];
  for (const { orgId, runId } of deps.runs.unfinished()) {
    const run = deps.runs.get(orgId, runId);
    if (run === undefined) continue;
    const step = reclaimAfterRestart(run, nowMs);
    if (step.changed) reclaimed.push({ run: step.run, update: deps.updateFor(step.run) });
    else resting.push(run);
  }
  const { root } = deps.ledger;
  const stored = await durably(
    root,
    root.transaction(() =>
      reclaimed.map(({ run, update }) => {
        deps.runs.write(run, deps.runs.get(run.context.orgId, run.context.runId));
        return deps.updateLog.append(run.context.orgId, update);
      }),
    ),
  );
  stored.forEach((update, i) => deps.rooms.publish((reclaimed[i] as { run: PersistedRun }).run.context.orgId, [update]));
  return [...resting, ...reclaimed.map((r) => r.run)].sort(admissionOrder);
}

/**
 * The order boot recovery enqueues runs in: runs of the `resume` lane (reclaimed or woken runs,
 * which already claimed a step) before never-admitted ones, as the tenant supervisor serves them,
 * and each lane oldest first by creation time, then run id. The admission order of the previous
 * process is not stored; creation time is what it followed, except that runs created in the same
 * millisecond come back in run-id order.
 */
export function admissionOrder(a: PersistedRun, b: PersistedRun): number {
  return laneRank(a) - laneRank(b) || a.context.createdAt - b.context.createdAt || (a.context.runId < b.context.runId ? -1 : a.context.runId > b.context.runId ? 1 : 0);
}

/** Runs that do not wait for admission (timers) can go anywhere; the engine arms them instead. */
const laneRank = (run: PersistedRun): number => (run.value === 'queued' && admissionLane(run.context) === 'new' ? 1 : 0);
