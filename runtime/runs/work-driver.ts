// Acting on the work a durable run snapshot implies (the snapshot is the outbox): queue the run for
// admission, send its step, or arm its timer; and the pump that admits queued runs into free slots.

import type { OrgId, RunId } from '../../actors/ids.ts';
import type { PersistedRun } from '../../actors/run-transition.ts';
import { pendingWork, type Work } from '../../actors/run-work.ts';
import { orgScopedKey } from '../tenancy/org-scoped-key.ts';
import { sendAttempt, type AttemptHost } from './attempt-dispatch.ts';
import type { AttemptsOut } from './attempts-out.ts';
import type { LiveActors } from './live-actors.ts';
import type { OrgAdmission } from './org-admission.ts';
import type { RunCommand, RunEngineDeps } from './run-engine-deps.ts';
import type { RunRelease } from './run-release.ts';
import type { RunTimers } from './run-timers.ts';
import type { StalledRuns } from './stalled-runs.ts';

/** Runs admitted per event-loop turn at most (WorkDriver.pump). */
export const ADMITTED_PER_TURN = 64;

/** What acting on a run's work needs of the run engine. */
export interface WorkHost {
  readonly deps: Pick<RunEngineDeps, 'deletedOrgs'>;
  readonly timers: RunTimers;
  readonly admission: OrgAdmission;
  readonly dispatched: AttemptsOut;
  readonly actors: LiveActors;
  readonly stalled: StalledRuns;
  readonly release: () => RunRelease;
  readonly attemptHost: AttemptHost;
  /** Queues a command for a run (RunEngine.send). */
  readonly send: (orgId: OrgId, runId: RunId, command: RunCommand) => void;
  /** Whether the engine is stopping. */
  readonly closed: () => boolean;
}

export class WorkDriver {
  readonly #h: WorkHost;
  /** A pump is scheduled for the next turn: the last one admitted ADMITTED_PER_TURN. */
  #pumpScheduled = false;

  constructor(host: WorkHost) {
    this.#h = host;
  }

  /** Acts on the work a durable snapshot implies. Only ever called after the snapshot is flushed. */
  act(run: PersistedRun): void {
    const work: Work = pendingWork(run);
    this.settleSlot(run);
    this.actOn(run.context.orgId, run.context.runId, work, run);
  }

  /**
   * Does the run's pending work: queues it for admission, sends its step, or arms its timer. A step
   * is sent from the run's snapshot: `run`, or the one in the ledger (boot recovery keeps none).
   */
  actOn(orgId: OrgId, runId: RunId, work: Work, run?: PersistedRun): void {
    const h = this.#h;
    const key = orgScopedKey(orgId, runId);
    if (h.release().goneWithOrg(orgId, runId)) return;
    // The org's deletion is being written: nothing goes out meanwhile. The run is picked up again
    // from the ledger after a pause, should the mark fail (one that goes through lets it go).
    if (work.kind !== 'none' && work.kind !== 'done' && h.deps.deletedOrgs?.marking(orgId) !== undefined) {
      h.stalled.failed(key);
      return;
    }
    if (work.kind !== 'arm_timer') h.timers.disarm(key);
    switch (work.kind) {
      case 'await_admission':
        h.admission.enqueue(orgId, runId, work.lane, work.environment);
        break;
      case 'dispatch_step':
        // A stalled run picked up again while this very attempt is still out: its report carries the run on.
        if (h.dispatched.fenceOf(key) !== work.fence) sendAttempt(h.attemptHost, orgId, runId, work, run);
        break;
      case 'arm_timer':
        h.timers.arm(key, work.at);
        break;
      case 'none':
      case 'done':
        break;
    }
    this.pump();
  }

  /**
   * Brings the scheduler in line with a durable snapshot; the caller pumps afterwards. A `running`
   * run keeps its slot. A `queued` run keeps its place, or the slot of an admission whose
   * `run.admitted` is still on its way. A run in any other state leaves the scheduler wherever it
   * was: a run cancelled while queued must not keep a turn it would refuse. Outside `running`, the
   * live actor rests as a snapshot.
   */
  settleSlot(run: PersistedRun): void {
    if (run.value === 'running') return;
    const { orgId, runId } = run.context;
    if (run.value !== 'queued') this.#h.admission.leave(orgId, runId);
    this.#h.actors.drop(orgScopedKey(orgId, runId));
  }

  /**
   * Admits the runs that have slots, ADMITTED_PER_TURN at most, the rest in the next turns (a pump
   * is scheduled for them): raising an org's limit by 999 over a deep queue admitted them all, and
   * sent their first steps, in one stretch that held every org's requests ~0.7 s.
   */
  pump(): void {
    if (this.#h.closed()) return;
    const admissions = this.#h.admission.nextAdmissions(ADMITTED_PER_TURN);
    for (const admission of admissions) this.#h.send(admission.orgId, admission.runId, { type: 'run.admitted' });
    if (admissions.length === ADMITTED_PER_TURN && !this.#pumpScheduled) {
      this.#pumpScheduled = true;
      setImmediate(() => {
        this.#pumpScheduled = false;
        this.pump();
      });
    }
  }
}
