// How a step reads its run's event under the step input budget (step-input-budget.ts): the payload
// stays the stored text (the step hands it on as received and never needs it parsed), the bytes are
// taken before the step (with the earlier steps' results a webhook step's body carries) and given
// back after it on every path (or, when the step hands over something that still holds them, such
// as a request body still being sent, once that is done), and a step that has to wait holds neither
// the event nor those results meanwhile (the wait exists to bound how many payloads are in memory).

import type { EventRecord } from '../events/event-codec.ts';
import type { EventStore } from '../events/event-store.ts';
import type { StepInputBudget } from './step-input-budget.ts';

/** Keeps the step input's bytes taken until `stillHeld` settles, past the step's own end. */
export type HoldStepInput = (stillHeld: Promise<unknown>) => void;

/** What a step holds besides its event (a webhook step's prior results): its UTF-8 bytes, and how to let it go while the step waits for them. */
export interface AlsoHeld {
  readonly bytes: number;
  /** Called before the step waits for its bytes: it holds that input again (reads it anew) only once they are taken. */
  readonly letGo: () => void;
}

/** A step holding nothing besides its event. */
export const NOTHING_ELSE: AlsoHeld = { bytes: 0, letGo: () => undefined };

/** Thrown by withStepInput when the step was withdrawn while it waited for its bytes: it never ran. */
export class StepInputWithdrawnError extends Error {
  constructor() {
    super('the step was withdrawn while it waited for the step input budget');
  }
}

/**
 * Runs `use` with the run's event (undefined when it is gone), its payload's bytes and `alsoHeld`'s
 * taken from `budget` meanwhile and, past its end, until whatever `use` holds them for has settled.
 * A step that has to wait asks `withdrawn` for its signal (made only then): should it abort first,
 * the step leaves the queue and this throws StepInputWithdrawnError, `use` never called.
 */
export async function withStepInput<T>(budget: StepInputBudget, events: EventStore, orgId: string, eventId: string, alsoHeld: AlsoHeld, use: (event: EventRecord | undefined, hold: HoldStepInput) => Promise<T>, withdrawn?: () => AbortSignal): Promise<T> {
  let event = events.getRecord(orgId, eventId);
  // UTF-8 bytes, as the budget and sluice_step_input_bytes count: a payload of CJK text is 3x its length.
  const bytes = (event === undefined ? 0 : Buffer.byteLength(event.payload_json)) + alsoHeld.bytes;
  const waited = !budget.tryTake(orgId, bytes);
  if (waited) {
    event = undefined;
    alsoHeld.letGo();
    if (!(await budget.take(orgId, bytes, withdrawn?.()))) throw new StepInputWithdrawnError();
  }
  const held: Promise<unknown>[] = [];
  try {
    // Read again inside: a failed read must give back what the wait took.
    if (waited) event = events.getRecord(orgId, eventId);
    return await use(event, (stillHeld) => void held.push(stillHeld));
  } finally {
    if (held.length === 0) budget.release(orgId, bytes);
    else void Promise.allSettled(held).then(() => budget.release(orgId, bytes));
  }
}
