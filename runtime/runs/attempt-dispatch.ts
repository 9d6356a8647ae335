// Sends one claimed step attempt of a durable run and hands its report back to the run engine:
// the step's input budget, its place in the derived-event budget, a plan that lost its sandbox,
// and whether the run still waits for the attempt.

import type { OrgId, RunId } from '../../actors/ids.ts';
import type { PersistedRun } from '../../actors/run-transition.ts';
import type { Work } from '../../actors/run-work.ts';
import { logFailure } from '../ledger/commit-failure-guard.ts';
import { orgScopedKey } from '../tenancy/org-scoped-key.ts';
import { sandboxAllowed, sandboxDisabledMessage } from '../tenancy/sandbox-guard.ts';
import type { AttemptOut, AttemptsOut } from './attempts-out.ts';
import type { ActionEffects } from './custom-action-step.ts';
import type { DerivedBudget, DerivedHold } from './derived-budget.ts';
import type { DurableStand, LiveActors } from './live-actors.ts';
import type { RunCommand, RunEngineDeps } from './run-engine-deps.ts';
import { performStep, priorResultsText, type StepContext, type StepOutcome, type StepReport } from './step-dispatcher.ts';
import type { StalledRuns } from './stalled-runs.ts';
import { derivedEventId } from './step-effects.ts';
import { StepInputWithdrawnError, withStepInput } from './step-input.ts';
import type { WorkflowVersion } from '../workflows/workflow-types.ts';
import { withoutResults } from './held-results.ts';
import { deletionWritten } from '../ledger/org-fence.ts';

type DispatchWork = Extract<Work, { kind: 'dispatch_step' }>;

/** The failures of a step attempt dropped unsent because stillWanted said no (webhook-step.ts, custom-action-step.ts). */
const WITHDRAWN_CODES: ReadonlySet<string> = new Set(['webhook_withdrawn', 'custom_action_withdrawn']);

/** What an attempt needs of the run engine that claimed it. */
export interface AttemptHost {
  readonly deps: RunEngineDeps;
  readonly derivedBudget: DerivedBudget;
  readonly dispatched: AttemptsOut;
  /** The live actors, whose last durable snapshots say where their runs stand without a read. */
  readonly actors: LiveActors;
  /** A run whose attempt could not be read or sent stalls here, to be picked up again later. */
  readonly stalled: StalledRuns;
  /** Applies the attempt's report to its run (RunEngine.send). */
  readonly send: (orgId: string, runId: string, command: RunCommand, effects?: ActionEffects) => Promise<void>;
  /** Awaited before the step's effect may go out: the start's first one is put on record (boot-record.ts). */
  readonly beforeEffect: () => Promise<void> | undefined;
}

/** An attempt ready to go: what it needs of its run's snapshot, taken before it is sent. */
interface PreparedAttempt {
  /** The run's snapshot without its step results (withoutResults): the attempt holds it while it is out. */
  readonly run: PersistedRun;
  readonly work: DispatchWork;
  readonly version: WorkflowVersion | undefined;
  /**
   * A webhook step's prior step results as JSON text (priorResultsText), counted with its input;
   * undefined for other steps, and while the step waits for its share of the step input budget
   * (read again from the ledger once it has it).
   */
  priorResults: string | undefined;
  /** The UTF-8 bytes of priorResults as taken (0: not a webhook step). */
  readonly priorResultsBytes: number;
}

/**
 * Sends the run's attempt `work` from its snapshot: `run`, or the one in the ledger (boot recovery
 * keeps none). Reading what the step needs (its version, its event) can fail like any read: the run
 * is then picked up again later, as after a failed write, instead of an unhandled rejection.
 */
export function sendAttempt(host: AttemptHost, orgId: OrgId, runId: RunId, work: DispatchWork, run: PersistedRun | undefined): void {
  const failed = (error: unknown): void => {
    logFailure(host.deps.logger, 'step dispatch failed', { org_id: orgId, run_id: runId }, error);
    host.stalled.failed(orgScopedKey(orgId, runId));
  };
  let prepared: PreparedAttempt | undefined;
  try {
    const snapshot = run ?? host.deps.runs.get(orgId, runId);
    prepared = snapshot === undefined ? undefined : prepareAttempt(host.deps, snapshot, work);
  } catch (error) {
    failed(error);
  }
  if (prepared !== undefined) dispatchAttempt(host, prepared).catch(failed);
}

/**
 * Whether the run still waits for the attempt under `fence`: what the ledger holds (the live
 * actor's last durable snapshot when there is one). A cancel or reset answered as done is durable,
 * so a request still waiting for a connection after it is never sent. A deleted org's runs want
 * nothing once its mark is written, though their records stay until the removal reaches them; one
 * whose connection comes while the mark is being written is sent (withdrawn, it would fail its
 * run for good should the mark fail).
 */
function stillWanted(host: AttemptHost, orgId: OrgId, runId: RunId, fence: number): boolean {
  if (deletionWritten(host.deps.deletedOrgs, orgId)) return false;
  const key = orgScopedKey(orgId, runId);
  const stand = host.actors.standOf(key) ?? standInLedger(host.deps, orgId, runId);
  return stand !== undefined && stand.value === 'running' && stand.fence === fence;
}

function standInLedger(d: RunEngineDeps, orgId: OrgId, runId: RunId): DurableStand | undefined {
  const run = d.runs.get(orgId, runId);
  return run === undefined ? undefined : { value: run.value, fence: run.context.fence };
}

/**
 * Takes from the durable snapshot `run` what its attempt `work` needs, so that nothing holds the
 * step results while the step is out. Reads the pinned version, which can fail like any read.
 */
function prepareAttempt(d: RunEngineDeps, run: PersistedRun, work: DispatchWork): PreparedAttempt {
  const ctx = run.context;
  const version = d.workflows.version(ctx.orgId, ctx.workflowId, ctx.workflowVersion);
  const priorResults = priorResultsText(run, work, version);
  return { run: withoutResults(run), work, version, priorResults, priorResultsBytes: priorResults === undefined ? 0 : Buffer.byteLength(priorResults) };
}

/** A webhook step's prior results read again, after it let them go to wait for its share; `{}` when its run is gone (its step is then withdrawn unsent). */
function priorResultsAgain(d: RunEngineDeps, { run, work, version }: PreparedAttempt): string {
  const stored = d.runs.get(run.context.orgId, run.context.runId);
  return (stored === undefined ? undefined : priorResultsText(stored, work, version)) ?? '{}';
}

/** Sends a prepared attempt and reports its outcome; the attempt counts as out until then. */
async function dispatchAttempt(host: AttemptHost, prepared: PreparedAttempt): Promise<void> {
  const ctx = prepared.run.context;
  const key = orgScopedKey(ctx.orgId, ctx.runId);
  const attempt = host.dispatched.start(key, prepared.work.fence, ctx.environment === 'sandbox' ? ctx.orgId : undefined);
  try {
    await perform(host, prepared, attempt);
  } finally {
    // The report may already have dispatched the run's next attempt, under another fence.
    host.dispatched.finish(key, attempt);
  }
}

async function perform(host: AttemptHost, prepared: PreparedAttempt, attempt: AttemptOut): Promise<void> {
  const { run, work, version } = prepared;
  const ctx = run.context;
  const d = host.deps;
  const sandboxGone = sandboxGoneFailure(d, run, work);
  if (sandboxGone !== undefined) {
    await host.send(ctx.orgId, ctx.runId, sandboxGone);
    return;
  }
  // A place in the root's derived-event budget, taken when the output derives an event, counts
  // until that event is stored, and is let go once the completion's write has settled (stored,
  // or failed). A completion whose write failed takes a place again when stall-resume.ts writes it again.
  // The hold is made only by an output that derives an event (its id is a hash): not per step.
  let derived: DerivedHold | undefined;
  try {
    const alsoHeld = { bytes: prepared.priorResultsBytes, letGo: () => void (prepared.priorResults = undefined) };
    const { report, effects } = await withStepInput(d.stepInputs, d.events, ctx.orgId, ctx.eventId, alsoHeld, async (event, holdInput): Promise<StepOutcome> => {
      // Asked again: the plan may have lost its sandbox while the step waited for memory.
      const goneMeanwhile = sandboxGoneFailure(d, run, work);
      if (goneMeanwhile !== undefined) return { report: goneMeanwhile };
      const takeDerived = (): boolean => {
        if (event === undefined) return true;
        derived ??= host.derivedBudget.hold(ctx.orgId, event.correlation_id, derivedEventId(ctx.runId, work.stepId));
        return derived.take();
      };
      // A failed write stalls the run (dispatchAttempt's caller), as any: nothing went out.
      await host.beforeEffect();
      if (prepared.priorResultsBytes > 0) prepared.priorResults ??= priorResultsAgain(d, prepared);
      return performWith(host, run, work, { version, event, holdInput, takeDerived, priorResults: prepared.priorResults }, attempt);
    }, () => attempt.signal()).catch((error: unknown): StepOutcome => {
      if (error instanceof StepInputWithdrawnError) return { report: withdrawnWaitingForMemory(version, work) };
      throw error;
    });
    await host.send(ctx.orgId, ctx.runId, withdrawnForSandbox(host, run, work, report), effects);
  } finally {
    derived?.release();
  }
}

/**
 * The failure of a sandbox run's step when the org's plan has lost its sandbox, else undefined. It
 * sends nothing more from it (as its schedules and sockets stop): the step fails for good, so the
 * run ends instead of retrying where no one can see or stop it.
 */
function sandboxGoneFailure(d: RunEngineDeps, run: PersistedRun, work: DispatchWork): StepReport | undefined {
  const ctx = run.context;
  const org = ctx.environment === 'sandbox' ? d.orgs.get(ctx.orgId) : undefined;
  if (org === undefined || sandboxAllowed(org)) return undefined;
  return { type: 'step.failed', stepId: work.stepId, fence: work.fence, error: { code: 'sandbox_disabled', message: sandboxDisabledMessage(org.plan), retryable: false } };
}

/** The failure of a step withdrawn while it waited for the step input budget: it neither read its event nor sent or ran anything. */
function withdrawnWaitingForMemory(version: WorkflowVersion | undefined, work: DispatchWork): StepReport {
  const action = version?.definition.steps.find((step) => step.id === work.stepId)?.type === 'custom_action';
  const [code, what] = action ? ['custom_action_withdrawn', 'Not run'] : ['webhook_withdrawn', 'Not sent'];
  const message = `${what}: the run left this attempt (cancelled or deleted) while the step waited for memory to read its event (the step input budget).`;
  return { type: 'step.failed', stepId: work.stepId, fence: work.fence, error: { code, message, retryable: false } };
}

/**
 * A step withdrawn unsent (it waited for a connection, stillWanted, or for a runner slot, its
 * attempt withdrawn by withdrawSandboxIfDisallowed) because the plan lost its sandbox meanwhile
 * fails as sandbox_disabled, not as a cancelled run's withdrawal.
 */
function withdrawnForSandbox(host: AttemptHost, run: PersistedRun, work: DispatchWork, report: StepReport): StepReport {
  if (report.type !== 'step.failed' || !WITHDRAWN_CODES.has(report.error.code)) return report;
  // Withdrawn for the run's own sake (cancelled, deleted, moved on): that is what it says.
  if (!stillWanted(host, run.context.orgId, run.context.runId, work.fence)) return report;
  const gone = sandboxGoneFailure(host.deps, run, work);
  return gone?.type === 'step.failed' ? { ...report, error: gone.error } : report;
}

function performWith(host: AttemptHost, run: PersistedRun, work: DispatchWork, input: Pick<StepContext, 'version' | 'event' | 'holdInput' | 'takeDerived' | 'priorResults'>, attempt: AttemptOut): Promise<StepOutcome> {
  const ctx = run.context;
  const d = host.deps;
  return performStep({
    run,
    work,
    ...input,
    signingSecrets: () => d.workflows.signingSecrets(ctx.orgId, ctx.workflowId),
    selfPort: d.selfPort(),
    connections: d.connections,
    nowMs: d.clock.now(),
    actions: d.actions,
    runner: d.runner,
    rowLimitReached: (projection) => {
      const { projections } = d;
      return projections.hasRoomFor(projection, ctx.orgId, ctx.environment, ctx.runId, work.stepId) ? undefined : projections.maxRowsPerOrg;
    },
    stillWanted: () => stillWanted(host, ctx.orgId, ctx.runId, work.fence) && sandboxGoneFailure(d, run, work) === undefined,
    withdrawn: () => attempt.signal(),
    goingOut: () => attempt.goingOut(),
  });
}
