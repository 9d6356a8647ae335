// The run machine as a pure function over persisted snapshots: what the ledger stores in, the
// next snapshot plus the work it implies out. The shell needs no long-lived actor per run.

import { createActor, transition, type Actor, type Snapshot } from 'xstate';
import { runMachine } from './run-machine.ts';
import type { StepId } from './ids.ts';
import { recordAfterCancel, stepErrorOf } from './run-progress.ts';
import type { LateOutcome, RunContext, RunEvent, RunInput, RunStateName } from './run-types.ts';
import { isRunStateName, pendingWork, type Work } from './run-work.ts';

/**
 * Exactly what `actor.getPersistedSnapshot()` returns for a run, after a JSON round trip.
 * `createActor(runMachine, { snapshot })` accepts it. Extra keys are XState bookkeeping.
 */
export interface PersistedRun {
  readonly status: 'active' | 'done';
  readonly value: RunStateName;
  readonly context: RunContext;
  readonly [xstateBookkeeping: string]: unknown;
}

export interface RunStep {
  readonly run: PersistedRun;
  /** False when the event was ignored (stale fence, early timer, not valid in this state). */
  readonly changed: boolean;
  readonly work: Work;
}

type MachineSnapshot = ReturnType<typeof runMachine.resolveState>;

/** A live run actor, as the shell keeps one for a run between transitions. */
export type RunActor = Actor<typeof runMachine>;

function persist(snapshot: MachineSnapshot): PersistedRun {
  return persistSnapshot(runMachine.getPersistedSnapshot(snapshot));
}

/**
 * What a reload of `persisted` yields. XState's persisted snapshot carries `undefined` for an
 * absent output and error; those keys are dropped, as a JSON round trip would. No deep copy is
 * needed: the context is only ever replaced, never mutated (run-progress.ts), so sharing it with
 * the live actor is safe.
 */
export function persistSnapshot(persisted: unknown): PersistedRun {
  const record = { ...(persisted as Record<string, unknown>) };
  for (const key of Object.keys(record)) if (record[key] === undefined) delete record[key];
  return readPersistedRun(record);
}

/**
 * The persisted snapshot of a live run actor: what `persistSnapshot(actor.getPersistedSnapshot())`
 * gives, key for key and in the same order, without XState's deep walk of the context looking for
 * actor references (and its copies), which was ~3 % of the runtime's busy time in the end-to-end
 * bench. It holds for this machine: no child actors, no history states, no actor in the context;
 * a snapshot that ever had either goes the general way.
 */
export function persistedRunOf(actor: RunActor): PersistedRun {
  const snapshot = actor.getSnapshot();
  const { children, historyValue } = snapshot as { children: object; historyValue: object };
  if (!isEmpty(children) || !isEmpty(historyValue)) return persistSnapshot(actor.getPersistedSnapshot());
  const run: Record<string, unknown> = { status: snapshot.status };
  if (snapshot.output !== undefined) run['output'] = snapshot.output;
  if (snapshot.error !== undefined) run['error'] = snapshot.error;
  run['value'] = snapshot.value;
  run['historyValue'] = {};
  run['context'] = snapshot.context;
  run['children'] = {};
  return readPersistedRun(run);
}

function isEmpty(record: object): boolean {
  for (const _key in record) return false;
  return true;
}

/** The initial snapshot of a new run (`queued`). Persist it with the event that created it. */
export function startRun(input: RunInput): RunStep {
  const { actor, run } = startRunActor(input);
  actor.stop();
  return { run, changed: true, work: pendingWork(run) };
}

/**
 * A live actor for a new run, started in `queued`, with its snapshot to persist. Cheaper than the
 * pure `initialTransition`/`transition`, which build a throwaway actor system on every call: a
 * shell that goes on sending events (admission) keeps the actor. No entry action runs on start.
 */
export function startRunActor(input: RunInput): { actor: RunActor; run: PersistedRun } {
  const actor = createActor(runMachine, { input });
  actor.start();
  return { actor, run: persistedRunOf(actor) };
}

/**
 * Applies one event. Persist `run` (and `work`, as the outbox) in one transaction before
 * performing `work` or applying the next event: the snapshot is the only durable truth.
 */
export function applyRunEvent(run: PersistedRun, event: RunEvent): RunStep {
  // XState's pure `transition` does not check status (only a live actor does): a finished
  // run would otherwise still take the root-level `run.cancel`.
  if (run.status !== 'active') return { run, changed: false, work: pendingWork(run) };
  const current = runMachine.resolveState({ value: run.value, context: run.context });
  const [next] = transition(runMachine, current, event);
  if (next === current) return { run, changed: false, work: pendingWork(run) };
  const persisted = persist(next);
  return { run: persisted, changed: true, work: pendingWork(persisted) };
}

/**
 * A step report that reaches a cancelled run. XState's final state takes no event, so the attempt
 * the cancel closed records the report here (`recordAfterCancel`); the run stays `cancelled`.
 */
export function applyReportAfterCancel(run: PersistedRun, event: RunEvent): RunStep {
  const late = run.value === 'cancelled' ? lateOutcomeOf(event) : undefined;
  const context = late === undefined ? run.context : recordAfterCancel(run.context, late.stepId, late.fence, late.outcome);
  if (context === run.context) return { run, changed: false, work: pendingWork(run) };
  const next: PersistedRun = { ...run, context };
  return { run: next, changed: true, work: pendingWork(next) };
}

function lateOutcomeOf(event: RunEvent): { stepId: StepId; fence: number; outcome: LateOutcome } | undefined {
  const base = { at: event.at, startedAt: 'startedAt' in event ? (event.startedAt ?? null) : null };
  switch (event.type) {
    case 'step.succeeded':
      return { stepId: event.stepId, fence: event.fence, outcome: { ...base, outcome: 'succeeded', error: null, evidence: event.evidence ?? null } };
    case 'step.failed':
      return { stepId: event.stepId, fence: event.fence, outcome: { ...base, outcome: 'failed', error: stepErrorOf(event.error), evidence: event.evidence ?? null } };
    case 'step.skipped':
      return { stepId: event.stepId, fence: event.fence, outcome: { ...base, outcome: 'skipped', error: null, evidence: event.evidence ?? { reason: event.reason } } };
    default:
      return undefined;
  }
}

/**
 * A (not yet started) actor continuing from a stored snapshot, for shells that prefer live
 * actors. XState re-runs no actions on restore: act on `pendingWork`. On boot, a run that was
 * `running` is sent `run.recovered` first (runtime/runs/run-recovery.ts): its open attempt is
 * marked `abandoned`, and the admission that follows claims the same step under a higher fence,
 * with the same idempotency key.
 */
export function restoreRunActor(run: PersistedRun): RunActor {
  // The cast bridges two typing gaps, not a runtime difference: XState's Snapshot type wants
  // `output`/`error` keys that JSON drops, and its options want `input`, ignored on restore.
  const options = { snapshot: run as unknown as Snapshot<unknown> } as { snapshot: Snapshot<unknown>; input: RunInput };
  return createActor(runMachine, options);
}

/** Checks the shape of a stored snapshot (trusted storage, so only the parts this core reads). */
export function readPersistedRun(value: unknown): PersistedRun {
  if (typeof value !== 'object' || value === null) throw new TypeError('persisted run: not an object');
  const record = value as Record<string, unknown>;
  if (!isRunStateName(record['value'])) throw new TypeError(`persisted run: unknown state ${String(record['value'])}`);
  if (record['status'] !== 'active' && record['status'] !== 'done') throw new TypeError('persisted run: bad status');
  const context = record['context'] as Partial<RunContext> | null | undefined;
  if (typeof context !== 'object' || context === null || typeof context.runId !== 'string' || !Array.isArray(context.steps)) {
    throw new TypeError('persisted run: bad context');
  }
  // The placeholder context of XState's input-less inert actor (run-machine.ts) has empty ids.
  if (context.runId === '' || context.orgId === '') throw new TypeError('persisted run: empty run or org id');
  return value as PersistedRun;
}
