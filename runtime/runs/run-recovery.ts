// Boot recovery: every unfinished run is read back from its persisted snapshot. A run that was
// `running` when the process died goes back to `queued` with its open attempt marked abandoned
// (actors/run-machine.ts, `run.recovered`), and is admitted again on the spot when its org has a
// free slot and no run of it waits ahead (as a new run is at creation, run-creation.ts): the step
// is claimed under a higher fence with the same idempotency key in the same write. Those changes
// commit durably, with their live updates, before the engine acts on any run.
// Runs come back in admission order (see `admissionOrder`), since the store keys them by
// [org, run id] and run ids are hashes. Only what the engine must do next is kept per resting run
// (its id and pending work, not the decoded snapshot): a million runs waiting in long delays restart
// in a fraction of the memory their snapshots would take (a run that was `running` keeps its stored
// and its reclaimed snapshot until recovery's writes are done: those runs are bounded by the orgs'
// limits). Reading, reclaiming and writing yield to the event loop every RECOVERY_BATCH runs, so
// /healthz answers during a long recovery (requests other than it are held until recovery is over:
// create-runtime.ts).

// nextTurn lets the event loop turn (timers, sockets: a liveness probe) before the next batch.
import { setImmediate as nextTurn } from 'node:timers/promises';
import type { OrgId, RunId } from '../../actors/ids.ts';
import { persistedRunOf, restoreRunActor, type PersistedRun, type RunActor } from '../../actors/run-transition.ts';
import { pendingWork, type Work } from '../../actors/run-work.ts';
import { currentStep } from '../../actors/run-progress.ts';
import type { Environment, RestartCause } from '../../actors/run-types.ts';
import { durably } from '../ledger/durable-write.ts';
import type { Ledger } from '../ledger/ledger.ts';
import type { RunUpdate } from '../rooms/live-codec.ts';
import type { LiveRooms } from '../rooms/live-rooms.ts';
import type { RunObserver } from './run-engine-deps.ts';
import type { NewRunUpdate, UpdateLog } from '../rooms/update-log.ts';
import type { RunStore } from './run-store.ts';
import type { DeletedOrgIds } from '../ledger/org-fence.ts';
import { orgScopedKey } from '../tenancy/org-scoped-key.ts';

export interface RecoveryDeps {
  readonly ledger: Ledger;
  readonly runs: RunStore;
  readonly updateLog: UpdateLog;
  readonly rooms: LiveRooms;
  readonly updateFor: (run: PersistedRun) => NewRunUpdate;
  /** Admits a reclaimed run on the spot if its org's environment has a free slot and nothing waiting (RootScheduler.admitNow). */
  readonly admitNow: (orgId: OrgId, runId: RunId, environment: Environment) => boolean;
  /** Gives back a slot `admitNow` took (recovery failed, and boot with it). */
  readonly release: (orgId: OrgId, runId: RunId) => void;
  /** Orgs deleted (their removal may still be under way): their runs are not picked up. */
  readonly deletedOrgs?: DeletedOrgIds;
  /** Told of each reclaimed run as written (one failed for being cut off too often is finished: the metrics count it). */
  readonly observer?: RunObserver;
}

/** When recovery acts (its `at`, and the claimedAt of what it claims), and how it tells why each open attempt was left. */
export interface RecoveryStart {
  readonly nowMs: number;
  /** How the process that claimed an open attempt (at its claimedAt, under its fence, of the run key) ended (boot-record.ts); default: it crashed. */
  readonly causeOf?: (claimedAt: number, runKey: string, fence: number) => RestartCause;
}

/** An unfinished run as recovery hands it to the engine: which run, and what to do for it. */
export interface RecoveredRun {
  readonly orgId: OrgId;
  readonly runId: RunId;
  readonly createdAt: number;
  readonly work: Work;
  /** A reclaimed run admitted on the spot: its live actor and the snapshot now stored. */
  readonly admitted?: { readonly actor: RunActor; readonly run: PersistedRun };
}

/** What boot recovery found: the runs to act on, and how many were cut off part way by the previous process's end. */
export interface Recovery {
  readonly runs: RecoveredRun[];
  /** Runs that were `running` (a step claimed): reclaimed, their open attempt abandoned. */
  readonly interrupted: number;
  /** Of those, runs failed instead: their step was cut off by restarts too often in a row. */
  readonly failed: number;
}

/** Runs read (or acted on, run-engine.ts) between two turns of the event loop during recovery. */
export const RECOVERY_BATCH = 1000;

/** A run that was `running` at the kill, as stored: the walk in admission order reclaims it. */
interface Interrupted extends RecoveredRun {
  readonly stored: PersistedRun;
}

/**
 * What `run.recovered` leaves an interrupted run to do (run-machine.ts): wait for admission in the
 * resume lane of its environment. Known before its actor is made, so the runs can be sorted first
 * and an actor made only for a run in the walk (and kept only for one admitted).
 */
const reclaimedWork = (run: PersistedRun): Work => ({ kind: 'await_admission', lane: 'resume', environment: run.context.environment });

/** A snapshot recovery writes over the stored one, with its live updates. */
interface Written {
  readonly run: PersistedRun;
  readonly previous: PersistedRun;
  readonly updates: NewRunUpdate[];
}

const recovered = (run: PersistedRun, work: Work = pendingWork(run)): RecoveredRun => ({ orgId: run.context.orgId, runId: run.context.runId, createdAt: run.context.createdAt, work });

/**
 * Resolves with every unfinished run that has work to do (a failed run waits for a person: none),
 * as now durably stored, in `admissionOrder`: the engine enqueues them in the order given, so that
 * order is what each org's FIFO sees; a run given with `admitted` already holds its slot. Also
 * counts the runs the previous process's end cut off (Recovery), for the start's log line.
 * `begin`: the time recovery acts at, or what opens it once the runs are read and before anything
 * is written, given the latest claimedAt of the attempts left open (boot-record.ts, beginBoot).
 */
export async function recoverUnfinishedRuns(deps: RecoveryDeps, begin: number | ((latestClaimedAt: number) => Promise<RecoveryStart>)): Promise<Recovery> {
  const found: Array<RecoveredRun | Interrupted> = [];
  let latestClaimedAt = -Infinity;
  let read = 0;
  for (const { orgId, runId } of deps.runs.unfinished()) {
    if (++read % RECOVERY_BATCH === 0) await nextTurn();
    if (deps.deletedOrgs?.has(orgId) === true) continue;
    const run = deps.runs.get(orgId, runId);
    if (run === undefined) continue;
    if (run.value === 'running') {
      latestClaimedAt = Math.max(latestClaimedAt, currentStep(run.context)?.attempts.at(-1)?.claimedAt ?? -Infinity);
      found.push({ ...recovered(run, reclaimedWork(run)), stored: run });
      continue;
    }
    const work = pendingWork(run);
    if (work.kind !== 'none') found.push(recovered(run, work));
  }
  found.sort(admissionOrder);
  const start = typeof begin === 'number' ? { nowMs: begin } : await begin(latestClaimedAt);
  const ordered: RecoveredRun[] = [];
  let written: Written[];
  try {
    written = await admitInOrder(deps, found, start, ordered);
    found.length = 0;
    for (let from = 0; from < written.length; from += RECOVERY_BATCH) await storeAndPublish(deps, written.slice(from, from + RECOVERY_BATCH));
  } catch (error) {
    // Boot fails with this error, and no run is acted on: the slots taken go back all the same.
    // Batches written before the failing one stay written: the next boot reclaims their runs again,
    // and each then shows one more attempt abandoned at a restart, never sent (same key, higher fence).
    for (const { admitted, orgId, runId } of ordered) {
      if (admitted === undefined) continue;
      admitted.actor.stop();
      deps.release(orgId, runId);
    }
    throw error;
  }
  return { runs: ordered, interrupted: written.length, failed: written.filter(({ run }) => run.value === 'failed').length };
}

/**
 * One transaction of reclaimed snapshots and their updates, published once durable. Recovery
 * writes RECOVERY_BATCH runs per transaction: the event loop turns between them (a liveness probe
 * is answered), and no write holds every interrupted run of a large deployment at once.
 */
async function storeAndPublish(deps: RecoveryDeps, batch: readonly Written[]): Promise<void> {
  const { root } = deps.ledger;
  const stored = await durably(
    root,
    root.transaction(() =>
      batch.map(({ run, previous, updates }) => {
        deps.runs.write(run, previous);
        return updates.map((update) => deps.updateLog.append(run.context.orgId, update));
      }),
    ),
  );
  stored.forEach((updates: RunUpdate[], i) => deps.rooms.publish((batch[i] as Written).run.context.orgId, updates));
  for (const { run, previous } of batch) deps.observer?.transitioned(previous, run, { type: 'run.recovered' });
}

const isInterrupted = (run: RecoveredRun | Interrupted): run is Interrupted => 'stored' in run;

/**
 * Walks the runs in admission order, appending each to `ordered` as the engine is to take it, and
 * reclaims each interrupted run with a live actor: admitted on the spot (the actor kept) while its
 * org has a free slot and no run of the org waits ahead of it (a run waiting for admission, or a
 * reclaimed one refused a slot), which is what enqueueing them all in this order would do; stored
 * `queued` otherwise. Returns the snapshots (with their updates) recovery writes.
 */
async function admitInOrder(deps: RecoveryDeps, found: ReadonlyArray<RecoveredRun | Interrupted>, { nowMs, causeOf }: RecoveryStart, ordered: RecoveredRun[]): Promise<Written[]> {
  const waiting = new Set<OrgId>();
  const written: Written[] = [];
  for (const entry of found) {
    if (written.length > 0 && written.length % RECOVERY_BATCH === 0 && isInterrupted(entry)) await nextTurn();
    if (!isInterrupted(entry)) {
      if (entry.work.kind === 'await_admission') waiting.add(entry.orgId);
      ordered.push(entry);
      continue;
    }
    const { orgId, runId, createdAt, stored } = entry;
    const actor = restoreRunActor(stored).start();
    const open = currentStep(stored.context)?.attempts.at(-1);
    const cause = open === undefined ? 'crashed' : (causeOf?.(open.claimedAt, orgScopedKey(orgId, runId), open.fence) ?? 'crashed');
    actor.send({ type: 'run.recovered', at: nowMs, cause });
    const queued = persistedRunOf(actor);
    const updates = [deps.updateFor(queued)];
    // Failed instead: its step was cut off by a restart too often in a row (run-progress.ts, abandonsTooOften).
    if (queued.value === 'failed') {
      actor.stop();
      written.push({ run: queued, previous: stored, updates });
      continue;
    }
    if (!waiting.has(orgId) && deps.admitNow(orgId, runId, stored.context.environment)) {
      actor.send({ type: 'run.admitted', at: nowMs });
      const run = persistedRunOf(actor);
      updates.push(deps.updateFor(run));
      written.push({ run, previous: stored, updates });
      ordered.push({ orgId, runId, createdAt, work: pendingWork(run), admitted: { actor, run } });
      continue;
    }
    actor.stop();
    waiting.add(orgId);
    written.push({ run: queued, previous: stored, updates });
    ordered.push({ orgId, runId, createdAt, work: pendingWork(queued) });
  }
  return written;
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
