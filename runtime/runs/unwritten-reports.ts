// Step answers whose transition could not be written, kept per stalled run so that picking the run
// up again writes the answer instead of sending the step a second time (stall-resume.ts).

import type { PersistedRun } from '../../actors/run-transition.ts';
import { pendingWork } from '../../actors/run-work.ts';
import type { EventStore } from '../events/event-store.ts';
import { DERIVED_BUDGET_EXCEEDED, type ActionEffects } from './custom-action-step.ts';
import type { DerivedBudget, DerivedHold } from './derived-budget.ts';
import type { RunCommand } from './run-engine-deps.ts';
import { derivedEventId } from './step-effects.ts';

/** A step's report (its outcome) whose transition could not be written, kept while its run is stalled. */
export interface UnwrittenReport {
  readonly command: Extract<RunCommand, { readonly fence: number; readonly stepId: string }>;
  readonly effects: ActionEffects | undefined;
  /** When the report first came, so the attempt's times are the step's own, not the retry's. */
  readonly at: number;
}

/** A kept completion whose derived event no longer fits its root's budget: the step fails as it would have when it answered. */
function overDerivedBudget(report: UnwrittenReport): UnwrittenReport {
  const { stepId, fence } = report.command;
  const { startedAt, evidence } = report.command as Extract<RunCommand, { type: 'step.succeeded' }>;
  const failed = { type: 'step.failed' as const, stepId, fence, error: DERIVED_BUDGET_EXCEEDED, ...(startedAt === undefined ? {} : { startedAt }), ...(evidence === undefined ? {} : { evidence }) };
  return { command: failed, effects: undefined, at: report.at };
}

const isStepReport = (command: RunCommand): command is UnwrittenReport['command'] =>
  command.type === 'step.succeeded' || command.type === 'step.failed' || command.type === 'step.skipped';

/** The answers kept, by run key (orgScopedKey); one per run at most. */
export class UnwrittenReports {
  readonly #kept = new Map<string, UnwrittenReport>();
  readonly #events: Pick<EventStore, 'getRecord'>;
  readonly #derivedBudget: DerivedBudget;

  constructor(events: Pick<EventStore, 'getRecord'>, derivedBudget: DerivedBudget) {
    this.#events = events;
    this.#derivedBudget = derivedBudget;
  }

  /** Keeps `command` for the run when it is a step's answer (other commands are not kept). */
  keep(key: string, command: RunCommand, effects: ActionEffects | undefined, at: number): void {
    if (isStepReport(command)) this.#kept.set(key, { command, effects, at });
  }

  /** The answer kept for the run, if any, which is no longer kept. */
  take(key: string): UnwrittenReport | undefined {
    const report = this.#kept.get(key);
    this.#kept.delete(key);
    return report;
  }

  delete(key: string): void {
    this.#kept.delete(key);
  }

  /**
   * Writes a kept answer again (through `apply`) while the ledger's snapshot `run` still has that
   * very attempt out; false, writing nothing, when it has not. A failed read or write keeps the
   * report again (unless another was kept meanwhile) and calls `stalled`, so a stall never sends the
   * step twice; a restart loses the report, and the step goes out again under its key.
   */
  async writeAgain(key: string, run: PersistedRun, report: UnwrittenReport, apply: (kept: UnwrittenReport) => Promise<unknown>, stalled: () => void): Promise<boolean> {
    const work = pendingWork(run);
    if (work.kind !== 'dispatch_step' || work.fence !== report.command.fence || work.stepId !== report.command.stepId) return false;
    let derived: DerivedHold | undefined;
    try {
      // Its place in the derived-event budget was let go when its write failed: it takes one
      // again. (Read inside: a failed read keeps the report, as a failed write does.)
      derived = this.#holdFor(run, report);
      await apply(derived === undefined || derived.take() ? report : overDerivedBudget(report));
    } catch {
      // A failed read or write kept the report and stalled the run again; anything else did neither.
      if (!this.#kept.has(key)) {
        this.#kept.set(key, report);
        stalled();
      }
    } finally {
      derived?.release();
    }
    return true;
  }

  /** For a kept completion whose output derives an event: a hold on a place in its root's budget. */
  #holdFor(run: PersistedRun, report: UnwrittenReport): DerivedHold | undefined {
    if (report.command.type !== 'step.succeeded' || report.effects?.derivedEvent == null) return undefined;
    const { orgId, runId, eventId } = run.context;
    const event = this.#events.getRecord(orgId, eventId);
    return event === undefined ? undefined : this.#derivedBudget.hold(orgId, event.correlation_id, derivedEventId(runId, report.command.stepId));
  }
}
