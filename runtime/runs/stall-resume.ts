// The run engine's stalled runs (a transition whose read or write failed) and what it keeps for
// them until each is picked up again from the ledger: a step's answer, written again instead of
// sending the step twice (unwritten-reports.ts), and runs whose creating write was not confirmed.

import { asOrgId, asRunId, type OrgId, type RunId } from '../../actors/ids.ts';
import type { PersistedRun } from '../../actors/run-transition.ts';
import type { RunEvent } from '../../actors/run-types.ts';
import { logFailure } from '../ledger/commit-failure-guard.ts';
import { orgScopedKey, orgScopedParts } from '../tenancy/org-scoped-key.ts';
import type { AttemptsOut } from './attempts-out.ts';
import type { ActionEffects } from './custom-action-step.ts';
import type { DerivedBudget } from './derived-budget.ts';
import type { LiveActors } from './live-actors.ts';
import type { OrgAdmission } from './org-admission.ts';
import type { RunChains } from './run-chains.ts';
import type { RunCommand, RunEngineDeps } from './run-engine-deps.ts';
import { StalledRuns } from './stalled-runs.ts';
import { UnwrittenReports, type UnwrittenReport } from './unwritten-reports.ts';

/** What picking a stalled run up again needs of the run engine. */
export interface StallHost {
  readonly deps: RunEngineDeps;
  readonly chains: RunChains;
  readonly actors: LiveActors;
  readonly admission: OrgAdmission;
  readonly dispatched: AttemptsOut;
  readonly derivedBudget: DerivedBudget;
  /** Applies a kept answer to its run at the time it first came; true when it changed the run (durably). */
  readonly apply: (orgId: OrgId, runId: RunId, report: UnwrittenReport) => Promise<boolean>;
  /** Keeps what an effect reported after its run was cancelled, on the done run. */
  readonly recordAfterCancel: (key: string, run: PersistedRun, event: RunEvent) => Promise<void>;
  /** Whether the run's org was deleted: then the engine has let go of everything it held of the run. */
  readonly goneWithOrg: (orgId: OrgId, runId: RunId) => boolean;
  /** The run is gone from the ledger (a sandbox reset): it keeps no actor and no slot. */
  readonly removed: (orgId: OrgId, runId: RunId) => void;
  /** Acts on the work a durable snapshot implies. */
  readonly act: (run: PersistedRun) => void;
}

export class StallResume {
  readonly #host: StallHost;
  /** Runs whose last write failed, each picked up again after its pause (#resume). */
  readonly stalled: StalledRuns;
  /** Stalled runs whose creating write committed (or may yet) without its flush confirmed: see #resume. */
  readonly #unconfirmed = new Set<string>();
  /** Stalled runs whose step answered but whose report could not be written: #resume writes it again instead of sending the step again. */
  readonly #unwrittenReports: UnwrittenReports;

  constructor(host: StallHost) {
    this.#host = host;
    this.stalled = new StalledRuns(host.deps.clock, (key) => this.#resume(key));
    this.#unwrittenReports = new UnwrittenReports(host.deps.events, host.derivedBudget);
  }

  /** The runs' creating transaction committed but its flush failed (run-creation.ts): each is picked up from the ledger later. */
  unconfirmed(orgId: OrgId, runIds: readonly RunId[]): void {
    for (const runId of runIds) {
      this.#unconfirmed.add(orgScopedKey(orgId, runId));
      this.stalled.failed(orgScopedKey(orgId, runId));
    }
  }

  /**
   * A command that could not be applied (its read or its write failed): the live actor is dropped,
   * a step's answer is kept to be written when the run is picked up again (#resume; the step is not
   * sent twice), and the run stalls until then.
   */
  unapplied(key: string, command: RunCommand, effects: ActionEffects | undefined, at: number): void {
    this.#host.actors.drop(key);
    this.#unwrittenReports.keep(key, command, effects, at);
    this.stalled.failed(key);
  }

  /**
   * A transition of the run was written: it stalls no more. Returns the step answer kept for it, if
   * any: another command (a cancel) went through while the run was stalled with that answer kept.
   */
  written(key: string): UnwrittenReport | undefined {
    this.stalled.cleared(key);
    return this.#unwrittenReports.take(key);
  }

  /**
   * A step answer kept while its run was stalled, once a cancel went through: recorded as an answer
   * that came after the cancel (the effect was sent), as a live report would be. A failure to write
   * it only loses that record (the attempt says `effect_sent: unknown`), never the cancel.
   */
  async keepAfterCancel(key: string, run: PersistedRun, kept: UnwrittenReport): Promise<void> {
    if (run.value !== 'cancelled') return;
    try {
      await this.#host.recordAfterCancel(key, run, { ...kept.command, at: kept.at } as RunEvent);
    } catch (error) {
      logFailure(this.#host.deps.logger, 'step answer kept while the run was stalled could not be recorded after its cancel', { run_id: run.context.runId }, error);
    }
  }

  /** A run of a deleted org: it is not picked up again. */
  forgetDeleted(key: string): void {
    this.stalled.cleared(key);
    this.#unconfirmed.delete(key);
  }

  /** The run was let go: no answer stays kept for it. */
  dropReport(key: string): void {
    this.#unwrittenReports.delete(key);
  }

  close(): void {
    this.stalled.close();
  }

  /**
   * Picks a stalled run up again from what the ledger holds, unless a later transition of it was
   * written meanwhile. A queued run gives back the slot its unwritten admission took, and queues again.
   */
  #resume(key: string): void {
    const host = this.#host;
    const [org, id] = orgScopedParts(key);
    const orgId = asOrgId(org);
    const runId = asRunId(id);
    // A read that fails here (the disk that stalled the run) stalls it again, for the next pause.
    host.chains.serially(key, async () => {
      if (!this.stalled.has(key)) return;
      if (host.goneWithOrg(orgId, runId)) return;
      const run = host.deps.runs.get(orgId, runId);
      // Taken once the read worked: a failed read keeps it for the next pause.
      const report = this.#unwrittenReports.take(key);
      // The step answered but its report was not written: while the ledger still has that attempt
      // out, its report is written again (a failure stalls the run again, keeping the report), so a
      // stall never sends the step twice. A restart loses the report, and sends it again under its key.
      if (report !== undefined && run !== undefined) {
        const apply = (kept: UnwrittenReport): Promise<boolean> => host.apply(orgId, runId, kept);
        if (await this.#unwrittenReports.writeAgain(key, run, report, apply, () => this.stalled.failed(key))) return;
      }
      // A run whose creating write was not confirmed may still be on its way (a put threw in its
      // batch, settled before the batch committed): it gets one more pause before it counts as gone.
      const unconfirmed = this.#unconfirmed.delete(key);
      if (run === undefined && unconfirmed) {
        this.stalled.failed(key);
        return;
      }
      // Found in the ledger, it was made: counted now (a put that threw settled it before its batch
      // committed, and a write refused in its transaction, an org fenced off, made nothing).
      if (unconfirmed && run !== undefined) host.deps.observer?.created(run);
      // A cancel whose flush failed after its commit: the answer kept goes on record after it.
      if (report !== undefined && run !== undefined) await this.keepAfterCancel(key, run, report);
      // Memory now holds what the ledger does and no answer is kept: nothing waits to be written.
      // The work the snapshot implies (a timer armed again, a place in the queue, a step sent) is
      // done below, and stalls the run again if its own write fails. (A run waiting for a timer
      // stayed counted in sluice_runs_stalled until the timer fired, up to days later.) A failure of
      // that work before any write of the run succeeds goes on doubling the pause (resumed).
      if (run === undefined) {
        this.stalled.cleared(key);
        host.removed(orgId, runId);
        return;
      }
      this.stalled.resumed(key);
      if (run.value === 'queued' && host.admission.placeOf(orgId, runId) === 'running') host.admission.release(orgId, runId);
      host.dispatched.withdrawIfLeft(key, run);
      host.act(run);
    }).catch(() => this.stalled.failed(key));
  }
}
