// What a succeeded custom-action step writes besides its own completion, in the same transaction:
// its projection row and its derived event (whose runs the event store's reactors create).

import { createHash } from 'node:crypto';
import type { PersistedRun } from '../../actors/run-transition.ts';
import type { EventStore, Reaction } from '../events/event-store.ts';
import { DERIVED_EVENT_ID_PREFIX } from '../events/event-record.ts';
import type { ProjectionStore } from '../projections/projection-store.ts';
import type { ActionEffects } from './custom-action-step.ts';

/** The `source` of events that custom actions derive. */
export const DERIVED_SOURCE = '@derived';

export interface StepEffectStores {
  readonly projections: ProjectionStore;
  readonly events: EventStore;
}

/** The id of the event a run's step derives: a function of the step key, so a replayed step cannot emit it twice. */
export const derivedEventId = (runId: string, stepId: string): string => `${DERIVED_EVENT_ID_PREFIX}${createHash('sha256').update(`${runId}:${stepId}`).digest('hex').slice(0, 28)}`;

/** Call inside the step-completing transaction; returns the derived event's reactions to settle. */
export function writeStepEffects(stores: StepEffectStores, run: PersistedRun, stepId: string, effects: ActionEffects, at: number): Reaction[] {
  const ctx = run.context;
  if (effects.projection !== null) {
    stores.projections.write(effects.projection, { orgId: ctx.orgId, environment: ctx.environment, runId: ctx.runId, stepId, eventId: ctx.eventId, at });
  }
  const spec = effects.derivedEvent;
  const parent = stores.events.get(ctx.orgId, ctx.eventId);
  if (spec === null || parent === undefined) return [];
  const id = derivedEventId(ctx.runId, stepId);
  if (stores.events.has(ctx.orgId, id)) return [];
  stores.events.countDerivedWithin(ctx.orgId, parent.correlation_id);
  return stores.events.writeWithin(
    {
      id,
      org_id: ctx.orgId,
      type: spec.type,
      payload: spec.payload,
      environment: parent.environment,
      source: DERIVED_SOURCE,
      provider_event_id: null,
      received_at: new Date(at).toISOString(),
      received_at_ms: at,
      correlation_id: parent.correlation_id,
      causation_id: ctx.runId,
      depth: parent.depth + 1,
      replay_skip_side_effects: parent.replay_skip_side_effects,
      replay_workflow_ids: null,
    },
    null,
  );
}
