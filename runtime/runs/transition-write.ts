// One run transition made durable: the run's new snapshot, its live update and, for a step that
// completed with them, the step's effects (projection, derived event), in one write, flushed
// before it resolves; and a report that came after the run was cancelled, kept on the done run.
// The engine acts on a transition only after this; a failed write throws.

import { applyReportAfterCancel, type PersistedRun } from '../../actors/run-transition.ts';
import type { RunEvent } from '../../actors/run-types.ts';
import type { Clock } from '../clock.ts';
import { settleDurably, type Reaction } from '../events/event-store.ts';
import { durably } from '../ledger/durable-write.ts';
import type { Ledger, LedgerWrite } from '../ledger/ledger.ts';
import type { RunUpdate } from '../rooms/live-codec.ts';
import type { NewRunUpdate, UpdateLog } from '../rooms/update-log.ts';
import type { ActionEffects } from './custom-action-step.ts';
import type { RunStore } from './run-store.ts';
import { writeStepEffects, type StepEffectStores } from './step-effects.ts';

export interface TransitionWriteDeps extends StepEffectStores {
  readonly ledger: Ledger;
  readonly runs: RunStore;
  readonly updateLog: UpdateLog;
  readonly clock: Clock;
}

export interface TransitionWritten {
  /** The live update stored with it, to publish (none when the run was gone). */
  readonly update: RunUpdate | undefined;
  /** The run was removed (a sandbox reset) before the write: nothing was written. */
  readonly gone: boolean;
}

/** Writes `run` over `previous` with its live `update` and the completed step's effects, if any; resolves once flushed. */
export async function writeTransition(
  d: TransitionWriteDeps,
  run: PersistedRun,
  previous: PersistedRun,
  update: NewRunUpdate,
  step: { readonly stepId: string; readonly effects: ActionEffects } | undefined,
): Promise<TransitionWritten> {
  const { orgId, runId } = run.context;
  const { root } = d.ledger;
  let reactions: Reaction[] = [];
  let appended: RunUpdate | undefined;
  // A sandbox reset may remove the run after the engine read it and commit after this write is
  // queued. A sandbox run is therefore written in a transaction, which runs after the reset's
  // and finds the run gone; a batch would commit behind the reset and bring the run back.
  const checkExists = run.context.environment === 'sandbox';
  let gone = false;
  const writes = (): void => {
    if (checkExists && !d.runs.has(orgId, runId)) {
      gone = true;
      return;
    }
    d.runs.write(run, previous);
    // The step's outputs commit with its completion: a crash leaves both or neither.
    if (step !== undefined) reactions = writeStepEffects(d, run, step.stepId, step.effects, d.clock.now());
    appended = d.updateLog.append(orgId, update);
  };
  // Effects read what they update (a projection's revision), so they need a transaction of their
  // own; a plain transition only writes, and a batch spares the write thread a round trip here.
  const write: LedgerWrite<unknown> = step !== undefined || checkExists ? root.transaction(writes) : root.batch(writes);
  await settleDurably(root, write, () => reactions, () => true);
  return { update: appended, gone };
}

/**
 * Keeps what an effect reported after its run was cancelled (see applyReportAfterCancel), in a
 * transaction that checks the run still exists (a sandbox reset may have removed it). Resolves
 * whether the run changed.
 */
export async function writeReportAfterCancel(d: TransitionWriteDeps, previous: PersistedRun, event: RunEvent): Promise<boolean> {
  const late = applyReportAfterCancel(previous, event);
  if (!late.changed) return false;
  const { orgId, runId } = previous.context;
  const { root } = d.ledger;
  await durably(root, root.transaction(() => {
    if (d.runs.has(orgId, runId)) d.runs.write(late.run, previous);
  }));
  return true;
}
