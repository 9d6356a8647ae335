// Letting go of runs: what the run engine holds of a run (its live actor, the attempt out, an answer
// kept for it, its place in the scheduler, its timer) is dropped when the run is deleted (a sandbox
// reset) or its org is (once the org's deletion mark is written).

import { setImmediate as nextTurn } from 'node:timers/promises';
import { asOrgId, type OrgId, type RunId } from '../../actors/ids.ts';
import { deletionWritten } from '../ledger/org-fence.ts';
import { orgScopedKey } from '../tenancy/org-scoped-key.ts';
import type { AttemptsOut } from './attempts-out.ts';
import type { LiveActors } from './live-actors.ts';
import type { OrgAdmission } from './org-admission.ts';
import type { RunEngineDeps } from './run-engine-deps.ts';
import { RECOVERY_BATCH } from './run-recovery.ts';
import type { RunKeys } from './run-store.ts';
import type { RunTimers } from './run-timers.ts';
import type { StallResume } from './stall-resume.ts';

/** What letting go of runs needs of the run engine. */
export interface ReleaseHost {
  readonly deps: Pick<RunEngineDeps, 'runs' | 'deletedOrgs'>;
  readonly timers: RunTimers;
  readonly actors: LiveActors;
  readonly dispatched: AttemptsOut;
  readonly stallResume: StallResume;
  readonly admission: OrgAdmission;
  /** Admits the runs that have slots now. */
  readonly pump: () => void;
  /** Whether the engine is stopping. */
  readonly closed: () => boolean;
}

export class RunRelease {
  readonly #h: ReleaseHost;

  constructor(host: ReleaseHost) {
    this.#h = host;
  }

  /** Drops every in-memory trace of runs that were deleted (sandbox reset): slots, timers, actors. */
  forget(runs: readonly RunKeys[]): void {
    for (const run of runs) {
      const { orgId, runId } = run.context;
      this.#h.timers.disarm(orgScopedKey(orgId, runId));
      this.#letGo(orgId, runId);
    }
    this.#h.pump();
  }

  /**
   * The org was deleted: at once, its attempts out are withdrawn and its runs leave the scheduler;
   * then its unfinished runs let go of their timers and actors, RECOVERY_BATCH read and let go per
   * event-loop turn (60,000 in one turn held every org's requests ~1.3 s; reading their ids alone,
   * ~50 ms). A command, report or timer that comes for one of its runs meanwhile or later is
   * dropped (goneWithOrg).
   */
  async forgetOrg(orgId: string): Promise<void> {
    const h = this.#h;
    const org = asOrgId(orgId);
    h.dispatched.withdrawOrg(orgId);
    h.admission.forgetOrg(org);
    h.pump();
    const runs = h.deps.runs;
    for (let page = runs.unfinishedPageOf(orgId, undefined, RECOVERY_BATCH); page.length > 0; page = runs.unfinishedPageOf(orgId, page.at(-1), RECOVERY_BATCH)) {
      for (const runId of page) this.#dropDeleted(org, runId);
      await nextTurn();
      // Stopping: the ledger closes next, and a run of a deleted org is never picked up at a start.
      if (h.closed()) return;
    }
  }

  /** The run was deleted (sandbox reset): it keeps no actor and no slot. */
  removed(orgId: OrgId, runId: RunId): void {
    this.#letGo(orgId, runId);
    this.#h.pump();
  }

  /**
   * Whether the run's org was deleted, its mark written: then the run is let go of (#dropDeleted)
   * and the scheduler pumped. Not while the mark is being written: it may fail, and the org stay.
   */
  goneWithOrg(orgId: OrgId, runId: RunId): boolean {
    if (!deletionWritten(this.#h.deps.deletedOrgs, orgId)) return false;
    this.#dropDeleted(orgId, runId);
    this.#h.pump();
    return true;
  }

  /** A run of a deleted org: no timer, no stall to pick it up again, and nothing else of #letGo's; the caller pumps afterwards. */
  #dropDeleted(orgId: OrgId, runId: RunId): void {
    const key = orgScopedKey(orgId, runId);
    this.#h.timers.disarm(key);
    this.#h.stallResume.forgetDeleted(key);
    this.#letGo(orgId, runId);
  }

  /**
   * Drops the run's live actor, withdraws its attempt out (after: a request waiting for a connection
   * asks the actor whether it is still wanted), drops any answer kept for it and its place in the
   * scheduler; the caller pumps afterwards.
   */
  #letGo(orgId: OrgId, runId: RunId): void {
    const key = orgScopedKey(orgId, runId);
    this.#h.actors.drop(key);
    this.#h.dispatched.withdrawIfLeft(key, undefined);
    this.#h.stallResume.dropReport(key);
    this.#h.admission.leave(orgId, runId);
  }
}
