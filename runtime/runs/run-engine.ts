// The run host: applies events to each run's XState actor one at a time, persists every transition
// (snapshot + live update in one write, flushed) before acting on it, and drives admission, step
// effects, timers and boot recovery. The snapshot is the outbox: work is derived from it and done by
// work-driver.ts. New runs are created by run-creation.ts inside the transaction that stores their
// event; deleted runs and the runs of deleted orgs are let go of by run-release.ts.

import { setImmediate as nextTurn } from 'node:timers/promises';
import { asOrgId, asRunId, type OrgId, type RunId } from '../../actors/ids.ts';
import { persistedRunOf, type PersistedRun, type RunActor } from '../../actors/run-transition.ts';
import type { Environment, RunEvent } from '../../actors/run-types.ts';
import { pendingWork } from '../../actors/run-work.ts';
import { RetryableError } from '../errors.ts';
import { refusedForDeletion } from '../ledger/org-fence.ts';
import { logFailure } from '../ledger/commit-failure-guard.ts';
import type { NewRunUpdate } from '../rooms/update-log.ts';
import { orgScopedKey, orgScopedParts } from '../tenancy/org-scoped-key.ts';
import { sandboxAllowed } from '../tenancy/sandbox-guard.ts';
import type { WorkflowVersion } from '../workflows/workflow-types.ts';
import { MAX_DERIVED_PER_ROOT, type ActionEffects } from './custom-action-step.ts';
import { RunChains } from './run-chains.ts';
import type { RunKeys } from './run-store.ts';
import { RunCreation } from './run-creation.ts';
import { RunRelease } from './run-release.ts';
import type { RunCommand, RunEngineDeps } from './run-engine-deps.ts';
import { RECOVERY_BATCH, recoverUnfinishedRuns, type Recovery } from './run-recovery.ts';
import type { BootRecovery } from './boot-record.ts';
import { RunTimers } from './run-timers.ts';
import { runUpdateFor } from './run-update.ts';
import type { StalledRuns } from './stalled-runs.ts';
import { writeReportAfterCancel, writeTransition, type TransitionWritten } from './transition-write.ts';
import { DiskSpaceLowError } from '../../hook-runner/disk-floor.ts';
import { diskLowWriteError } from '../ledger/commit-failure-guard.ts';
import { DerivedBudget } from './derived-budget.ts';
import { StallResume } from './stall-resume.ts';
import { AttemptsOut } from './attempts-out.ts';
import { OrgAdmission } from './org-admission.ts';
import { LiveActors } from './live-actors.ts';
import { RESTING_RESULT_BYTES, resultBytes } from './held-results.ts';
import type { AttemptHost } from './attempt-dispatch.ts';
import { WorkDriver } from './work-driver.ts';

export class RunEngine {
  readonly #d: RunEngineDeps;
  readonly #admission: OrgAdmission;
  readonly #timers: RunTimers;
  /** Stalled runs, and what is kept for them until each is picked up again from the ledger (stall-resume.ts). */
  readonly #stallResume: StallResume;
  readonly #derivedBudget: DerivedBudget;
  readonly #creation: RunCreation;
  /** Lets go of deleted runs and the runs of deleted orgs (run-release.ts). */
  readonly #release: RunRelease;
  /** Acts on the work each durable snapshot implies, and admits queued runs (work-driver.ts). */
  readonly #work: WorkDriver;
  /** This start's record (boot-record.ts), from its recovery on: the first effect sent goes on record. */
  #boot: BootRecovery | undefined;
  /** Live actors of the runs that are currently admitted (`running`), with their last persisted snapshot; others rest as snapshots. */
  readonly #actors = new LiveActors();
  /** Step results a running run may hold and keep its actor live (held-results.ts). */
  readonly #restingResultBytes: number;
  /** The next transition of a run waits for the previous one to be durable. */
  readonly #chains: RunChains;
  /** Per run, the step attempt that is out and has not reported yet; withdrawn when the run leaves it. */
  readonly #dispatched = new AttemptsOut();
  /** Admission in the write that stores a run, for run creation and boot recovery: a slot taken on the spot, given back if the write fails. */
  readonly #onTheSpot = {
    admitNow: (orgId: OrgId, runId: RunId, environment: Environment): boolean => this.#admission.admitNow(orgId, runId, environment),
    release: (orgId: OrgId, runId: RunId): void => this.#admission.release(orgId, runId),
  };
  #closed = false;

  constructor(deps: RunEngineDeps) {
    this.#d = deps;
    this.#admission = new OrgAdmission(deps.orgs);
    this.#restingResultBytes = deps.restingResultBytes ?? RESTING_RESULT_BYTES;
    this.#timers = new RunTimers(deps.clock, (key) => void this.send(...orgScopedParts(key), { type: 'timer.fired' }));
    this.#chains = new RunChains((key, error) => {
      const [orgId, runId] = orgScopedParts(key);
      logFailure(deps.logger, 'run transition failed', { org_id: orgId, run_id: runId }, error);
    });
    this.#derivedBudget = new DerivedBudget(MAX_DERIVED_PER_ROOT, {
      derivedSoFar: (orgId, rootEventId) => deps.events.derivedCount(orgId, rootEventId),
      eventStored: (orgId, eventId) => deps.events.has(orgId, eventId),
    });
    this.#stallResume = new StallResume({
      deps,
      chains: this.#chains,
      actors: this.#actors,
      admission: this.#admission,
      dispatched: this.#dispatched,
      derivedBudget: this.#derivedBudget,
      apply: (orgId, runId, kept) => this.#apply(orgId, runId, kept.command, kept.effects, kept.at),
      recordAfterCancel: (key, run, event) => this.#recordAfterCancel(key, run, event),
      goneWithOrg: (orgId, runId) => this.#release.goneWithOrg(orgId, runId),
      removed: (orgId, runId) => this.#release.removed(orgId, runId),
      act: (run) => this.#work.act(run),
    });
    this.#release = new RunRelease({
      deps,
      timers: this.#timers,
      actors: this.#actors,
      dispatched: this.#dispatched,
      stallResume: this.#stallResume,
      admission: this.#admission,
      pump: () => this.#work.pump(),
      closed: () => this.#closed,
    });
    // What a step attempt sent from a snapshot needs of the engine (attempt-dispatch.ts).
    const attemptHost: AttemptHost = {
      deps,
      derivedBudget: this.#derivedBudget,
      dispatched: this.#dispatched,
      actors: this.#actors,
      stalled: this.#stallResume.stalled,
      send: (orgId, runId, command, effects) => this.send(orgId, runId, command, effects),
      beforeEffect: () => this.#boot?.beforeFirstEffect(),
    };
    this.#work = new WorkDriver({
      deps,
      timers: this.#timers,
      admission: this.#admission,
      dispatched: this.#dispatched,
      actors: this.#actors,
      stalled: this.#stallResume.stalled,
      release: () => this.#release,
      attemptHost,
      send: (orgId, runId, command) => void this.send(orgId, runId, command),
      closed: () => this.#closed,
    });
    this.#creation = new RunCreation({
      runs: deps.runs,
      updateLog: deps.updateLog,
      matching: (event) => {
        const listening = deps.workflows.matching(event.org_id, event.environment, event.type);
        const only = event.replay_workflow_ids;
        return only === null ? listening : listening.filter((version) => only.includes(version.workflow_id));
      },
      updateFor: (run, version) => this.#updateFor(run, version),
      ...this.#onTheSpot,
      started: (orgId, updates, runs) => {
        this.#d.rooms.publish(orgId, updates);
        for (const { run, actor } of runs) {
          this.#d.observer?.created(run);
          this.#startLive(run, actor);
        }
      },
      pump: () => this.#work.pump(),
      unconfirmed: (orgId, runIds) => this.#stallResume.unconfirmed(orgId, runIds),
    });
    deps.events.addReactor((event) => this.#creation.createRuns(event));
  }

  get timers(): RunTimers {
    return this.#timers;
  }

  /** Runs whose last write failed, waiting to be picked up again. */
  get stalled(): StalledRuns {
    return this.#stallResume.stalled;
  }

  /** Runs holding a concurrency slot and runs waiting for one, over every org (for the metrics). */
  admissionTotals(): { readonly running: number; readonly queued: number } {
    return this.#admission.totals();
  }

  /** Running runs that rest as their snapshot between transitions, their step results too many to keep live (held-results.ts). */
  get restingRuns(): number {
    return this.#actors.restingCount;
  }

  /** How many of the org's runs in `environment` wait for a slot, those being written included (run-backlog.ts). */
  queuedRuns(orgId: string, environment: Environment): number {
    return this.#admission.queued(asOrgId(orgId), environment) + this.#creation.queuedInFlight(asOrgId(orgId), environment);
  }

  /** When the durable timer of a run (backoff or delay) is armed to fire, if it is. */
  timerDueAt(orgId: string, runId: string): number | undefined {
    return this.#timers.dueAt(orgScopedKey(orgId, runId));
  }

  /** Queues `command` for the run; resolves once it has been applied (and, if it changed the run, persisted). */
  send(orgId: string, runId: string, command: RunCommand, effects?: ActionEffects): Promise<void> {
    return this.#chains.serially(orgScopedKey(orgId, runId), () => this.#apply(asOrgId(orgId), asRunId(runId), command, effects)).then(
      () => undefined,
      () => undefined,
    );
  }

  /**
   * As `send`, for a caller that must know whether it took effect (a person through the API):
   * resolves true once the run's transition is durable, false when the run did not take the command
   * (it moved on meanwhile, or is gone); rejects with a retryable 503 when the transition could not
   * be written.
   */
  async command(orgId: string, runId: string, command: RunCommand): Promise<boolean> {
    try {
      return (await this.#chains.serially(orgScopedKey(orgId, runId), () => this.#apply(asOrgId(orgId), asRunId(runId), command, undefined))) === true;
    } catch (error) {
      if (error instanceof DiskSpaceLowError) throw diskLowWriteError('change to the run');
      // Usually nothing was written; a commit whose flush failed may still have taken effect.
      throw new RetryableError('write_failed', 'The change to the run could not be saved durably. Read the run, then try again if it did not change.', undefined, { cause: error });
    }
  }

  /**
   * Boot recovery: re-enqueue, re-arm or reclaim every unfinished run from its persisted snapshot;
   * `beginBoot` opens this start's record (boot-record.ts) once the runs are read, given the latest
   * claimedAt of the attempts left open: it tells how the previous processes ended.
   */
  async recover(beginBoot?: (latestClaimedAt: number) => Promise<BootRecovery>): Promise<Omit<Recovery, 'runs'> & { readonly unfinished: number }> {
    const d = this.#d;
    const { runs, interrupted, failed } = await recoverUnfinishedRuns(
      { ...d, updateFor: (run) => this.#updateFor(run), ...this.#onTheSpot },
      beginBoot === undefined ? d.clock.now() : async (latestClaimedAt) => (this.#boot = await beginBoot(latestClaimedAt)),
    );
    for (const [i, { orgId, runId, work, admitted }] of runs.entries()) {
      if (i > 0 && i % RECOVERY_BATCH === 0) await nextTurn();
      if (admitted === undefined) this.#work.actOn(orgId, runId, work);
      else this.#startLive(admitted.run, admitted.actor);
    }
    return { unfinished: runs.length, interrupted, failed };
  }

  /** A run admitted (or not) in the write that stored it, now durable: it keeps its actor live while `running`, and its work is done. */
  #startLive(run: PersistedRun, actor: RunActor): void {
    const key = orgScopedKey(run.context.orgId, run.context.runId);
    const live = run.value === 'running' ? this.#actors.keep(key, actor, run) : undefined;
    if (live === undefined) actor.stop();
    this.#work.act(run);
    if (live !== undefined) this.#actors.restIfHeavy(key, live, run, this.#restingResultBytes);
  }

  /**
   * The attempts out whose effect has not gone out, as [run key, fence] (AttemptsOut.neverSent),
   * for a test to watch; `seal`: none of them goes out any more (AttemptsOut.sealUnsent), which a
   * clean stop asks before it records them (boot-record.ts).
   */
  attemptsNeverSent(seal = false): Array<readonly [string, number]> {
    return seal ? this.#dispatched.sealUnsent() : this.#dispatched.neverSent();
  }

  /** Stops timers and new transitions, then waits for the ones in progress to be durable. */
  /** Stops timers and new transitions, then waits for the ones in progress to be durable. */
  /** Drops every in-memory trace of runs that were deleted (sandbox reset): slots, timers, actors. */
  forget(runs: readonly RunKeys[]): void {
    this.#release.forget(runs);
  }

  /** The org was deleted: its runs are let go of (RunRelease.forgetOrg). */
  forgetOrg(orgId: string): Promise<void> {
    return this.#release.forgetOrg(orgId);
  }

  async close(): Promise<void> {
    this.#closed = true;
    this.#timers.close();
    this.#stallResume.close();
    await this.#chains.close();
    this.#actors.stopAll();
  }

  /** Applies one command; true when it changed the run (and the change is durable). */
  async #apply(orgId: OrgId, runId: RunId, command: RunCommand, effects: ActionEffects | undefined, at = this.#d.clock.now()): Promise<boolean> {
    const key = orgScopedKey(orgId, runId);
    // The run's creating write has committed, not settled: its actor starts once it has.
    const creating = this.#creation.settling(key);
    if (creating !== undefined) await creating;
    // The org's deletion is being written: the command waits for it, dropped if it goes through.
    const marking = this.#d.deletedOrgs?.marking(orgId);
    if (marking !== undefined) await marking;
    if (this.#release.goneWithOrg(orgId, runId)) return false;
    const cached = this.#actors.get(key);
    let previous: PersistedRun | undefined;
    try {
      // The cached snapshot saves a read and decode per transition; the existence check still sees a reset.
      previous = cached !== undefined && this.#d.runs.has(orgId, runId) ? cached.persisted : this.#d.runs.get(orgId, runId);
    } catch (error) {
      // A failed read must not lose the command (a step's answer, a timer that fired, an admission
      // that took a slot): the run is picked up again from the ledger, as after a failed write.
      this.#stallResume.unapplied(key, command, effects, at);
      throw error;
    }
    if (previous === undefined) {
      this.#release.removed(orgId, runId);
      return false;
    }
    const live = cached ?? this.#actors.restore(key, previous);
    const { actor } = live;
    const before = actor.getSnapshot();
    const event = { ...command, at } as RunEvent;
    actor.send(event);
    if (actor.getSnapshot() === before) {
      await this.#recordAfterCancel(key, previous, event);
      // A timer that fired but whose event the run refused as early (the wall clock stepped back
      // in between) left its heap: arm it again, or the run would wait until the next restart.
      if (command.type === 'timer.fired' && !this.#closed) {
        const work = pendingWork(previous);
        if (work.kind === 'arm_timer') this.#timers.arm(key, work.at);
      }
      this.#work.settleSlot(previous);
      // Read back only for this command: a run that rested goes back to rest.
      if (cached === undefined) this.#actors.restIfHeavy(key, live, previous, this.#restingResultBytes);
      this.#work.pump();
      return false;
    }
    const run = persistedRunOf(actor);
    let written: TransitionWritten;
    try {
      const stepEffects = effects !== undefined && command.type === 'step.succeeded' ? { stepId: command.stepId, effects } : undefined;
      written = await writeTransition(this.#d, run, previous, this.#updateFor(run), stepEffects);
    } catch (error) {
      // The org was deleted while the write waited for its turn (a transaction's callback runs
      // then): the fence refused it, and the run goes with its org, as a later command's would.
      // A deletion whose mark then failed left the org: the run stalls, as after any failed write.
      if ((await refusedForDeletion(error, this.#d.deletedOrgs)) && this.#release.goneWithOrg(orgId, runId)) {
        this.#d.logger.debug('run transition dropped: its organization was deleted meanwhile', { org_id: orgId, run_id: runId });
        return false;
      }
      // The actor moved on but the ledger did not: forget it, and pick the run up again later.
      this.#stallResume.unapplied(key, command, effects, at);
      throw error;
    }
    // Another command went through while the run was stalled with a step's answer kept (a cancel).
    const kept = this.#stallResume.written(key);
    if (written.gone) {
      this.#release.removed(orgId, runId);
      return false;
    }
    live.persisted = run;
    this.#d.observer?.transitioned(previous, run, command);
    if (command.type === 'step.succeeded') live.resultBytes += resultBytes(command.result);
    // Before #act: the attempt out now is the one this transition may have left.
    this.#dispatched.withdrawIfLeft(key, run);
    if (written.update !== undefined) this.#d.rooms.publish(orgId, [written.update]);
    this.#work.act(run);
    this.#actors.restIfHeavy(key, live, run, this.#restingResultBytes);
    if (kept !== undefined) await this.#stallResume.keepAfterCancel(key, run, kept);
    return true;
  }

  /** Keeps what an effect reported after its run was cancelled; the done actor is dropped, so the next read takes the record from the ledger. */
  async #recordAfterCancel(key: string, previous: PersistedRun, event: RunEvent): Promise<void> {
    if (!(await writeReportAfterCancel(this.#d, previous, event))) return;
    this.#actors.drop(key);
    // The attempt reported after all: counted as any other (the run stays cancelled).
    this.#d.observer?.transitioned(previous, previous, event);
  }

  /**
   * After the org's plan lost its sandbox: its sandbox runs' attempts out are withdrawn (a custom
   * action call still waiting in the hook-runner for a guest slot is dropped there unrun), and fail
   * as sandbox_disabled.
   */
  withdrawSandboxIfDisallowed(orgId: string): void {
    const org = this.#d.orgs.get(orgId);
    if (org !== undefined && !sandboxAllowed(org)) this.#dispatched.withdrawSandboxOf(orgId);
  }

  /** Re-reads an org's concurrency limit (after the org is updated). */
  refreshLimit(orgId: string): void {
    this.#admission.refreshLimit(orgId);
    this.#work.pump();
  }

  /** The live update of a transition; `version` when the caller already has it. */
  #updateFor(run: PersistedRun, version?: WorkflowVersion): NewRunUpdate {
    const ctx = run.context;
    return runUpdateFor(run, version ?? this.#d.workflows.version(ctx.orgId, ctx.workflowId, ctx.workflowVersion));
  }
}
