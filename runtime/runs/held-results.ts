// What a run's step results weigh in memory, and the run without them. A run holding more than
// RESTING_RESULT_BYTES of results keeps no live actor between transitions (run-engine.ts).

import type { JsonValue } from '../../actors/json.ts';
import type { PersistedRun } from '../../actors/run-transition.ts';

/**
 * A running run whose step results pass this (as JSON text) rests as its durable snapshot between
 * transitions, and is read back for each one: up to 49 custom action outputs of 256 KiB would
 * otherwise stay in memory for as long as the run holds its slot, for every running run of every org.
 * A run with one full output, or with webhook results only (each keeps at most 4 KiB of its answer), stays live.
 */
export const RESTING_RESULT_BYTES = 256 * 1024;

/** A step result's length as JSON text: about what its decoded value holds, at least. */
export function resultBytes(result: JsonValue | null): number {
  return result === null ? 0 : JSON.stringify(result).length;
}

/** What the run's step results weigh together (resultBytes of each). */
export function heldResultBytes(run: PersistedRun): number {
  let bytes = 0;
  for (const step of run.context.steps) bytes += resultBytes(step.result);
  return bytes;
}

/**
 * The snapshot with every step result left out (null), for what holds a run while its step is out:
 * only a webhook step sends the results, as text it takes before (counted in its input budget).
 * The same object when it has none.
 */
export function withoutResults(run: PersistedRun): PersistedRun {
  if (run.context.steps.every((step) => step.result === null)) return run;
  return { ...run, context: { ...run.context, steps: run.context.steps.map((step) => (step.result === null ? step : { ...step, result: null })) } };
}
