// Boot recovery: every unfinished run is read back from its persisted snapshot. A run that was
// `running` when the process died goes back to `queued` with its open attempt marked abandoned
// (actors/run-transition.ts), and those changes commit durably, with their live updates, before
// the engine acts on any run. Runs come back in admission order (see `admissionOrder`), since the
// store keys them by [org, run id] and run ids are hashes. Only what the engine must do next is
// kept per run (its id and pending work, not the decoded snapshot): a million runs waiting in
// long delays restart in a fraction of the memory their snapshots would take. The reading yields to
// the event loop every RECOVERY_BATCH runs, so /healthz answers during a long recovery (requests
// other than it are held until recovery is over: create-runtime.ts).

// nextTurn lets the event loop turn (timers, sockets: a liveness probe) before the next batch.
import { setImmediate as nextTurn } from 'node:timers/promises';
import type { OrgId, RunId } from '../../actors/ids.ts';
import { reclaimAfterRestart, type PersistedRun } from '../../actors/run-transition.ts';
import { pendingWork, type Work } from '../../actors/run-work.ts';
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

/** An unfinished run as recovery hands it to the engine: which run, and what to do for it. */
export interface RecoveredRun {
  readonly orgId: OrgId;
  readonly runId: RunId;
  readonly createdAt: number;
  readonly work: Work;
}

/** Runs read (or acted on, run-engine.ts) between two turns of the event loop during recovery. */
export const RECOVERY_BATCH = 1000;


const recovered = (run: PersistedRun): RecoveredRun => ({ orgId: run.context.orgId, runId: run.context.runId, createdAt: run.context.createdAt, work: pendingWork(run) });

/**
 * Resolves with every unfinished run that has work to do (a failed run waits for a person: none),
 * as now durably stored, in `admissionOrder`: the engine enqueues them in the order given, so that
 * order is what each org's FIFO sees.
 */
export async function recoverUnfinishedRuns(deps: RecoveryDeps, nowMs: number): Promise<RecoveredRun[]> {
  const reclaimed: Array<{ run: PersistedRun; update: NewRunUpdate }> = [];
  const resting: RecoveredRun[] = [];
  let read = 0;
  for (const { orgId, runId } of deps.runs.unfinished()) {
    if (++read % RECOVERY_BATCH === 0) await nextTurn();
    const run = deps.runs.get(orgId, runId);
    if (run === undefined) continue;
    const step = reclaimAfterRestart(run, nowMs);
    if (step.changed) reclaimed.push({ run: step.run, update: deps.updateFor(step.run) });
    else if (pendingWork(run).kind !== 'none') resting.push(recovered(run));
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
  return [...resting, ...reclaimed.map(({ run }) => recovered(run))].sort(admissionOrder);
}

/**
 * The order boot recovery enqueues runs in: runs of the `resume` lane (reclaimed or woken runs,
 * which already claimed a step) before never-admitted ones, as the tenant supervisor serves them,
 * and each lane oldest first by creation time, then run id. The admission order of the previous
 * process is not stored; creation time is what it followed, except that runs created in the same
 * millisecond come back in run-id order.
 */
export function admissionOrder(a: RecoveredRun, b: RecoveredRun): number {
  return laneRank(a) - laneRank(b) || a.createdAt - b.createdAt || (a.runId < b.runId ? -1 : a.runId > b.runId ? 1 : 0);
}

/** Runs that do not wait for admission (timers) can go anywhere; the engine arms them instead. */
const laneRank = ({ work }: RecoveredRun): number => (work.kind === 'await_admission' && work.lane === 'new' ? 1 : 0);
