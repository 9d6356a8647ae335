// Business replay (DESIGN 5): a NEW event with a new identity (so new run ids and new effect keys),
// made only after a person explicitly chose side_effects "skip" or "run". "skip" marks the event
// `replay_skip_side_effects`: its webhook steps are recorded as skipped, and derived events inherit it.
// `workflow_ids` limits which of the workflows listening now start a run (derived events are not limited).
// A replay is a root of its own (its correlation_id is its id, its depth 0; causation_id names the
// replayed event): the events its runs derive count against its own budget and depth, not the
// original's, which earlier replays would otherwise use up until no replay could derive anything.

import { generateEventId, REPLAY_SOURCE, type StoredEvent } from '../events/event-record.ts';
import { membersBesidesPayload, payloadTextOf, withLazyPayload } from '../events/payload-text.ts';

/** The workflows a replay is limited to, as the event stores them (sorted), or null for every listener. */
export const chosenWorkflows = (workflowIds: readonly string[] | undefined): readonly string[] | null => (workflowIds === undefined ? null : [...workflowIds].sort());

/**
 * The replay of `original`, with its payload exactly as the original received it, parsed only if
 * something reads it: a payload can be megabytes, and parsing it here held every org's requests.
 */
export function replayOf(original: StoredEvent, sideEffects: 'skip' | 'run', nowMs: number, workflowIds?: readonly string[]): StoredEvent {
  const id = generateEventId(nowMs);
  const replay = {
    ...membersBesidesPayload(original),
    id,
    source: REPLAY_SOURCE,
    provider_event_id: null,
    received_at: new Date(nowMs).toISOString(),
    received_at_ms: nowMs,
    correlation_id: id,
    depth: 0,
    causation_id: original.id,
    // The person's choice, also on a replay of a skip replay: "run" there sends what it skipped.
    replay_skip_side_effects: sideEffects === 'skip',
    // Limited to the workflows the person named (one run to redo, not every listener's effects).
    replay_workflow_ids: chosenWorkflows(workflowIds),
  };
  return withLazyPayload(replay as StoredEvent, payloadTextOf(original));
}
