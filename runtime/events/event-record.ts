// The stored event and its bounded request recording, plus id generation.
// Events are keyed [orgId, eventId]; event ids sort by time of arrival.

import { randomFillSync } from 'node:crypto';
import { InputError } from '../errors.ts';
import type { Environment } from '../sources/source-record.ts';

export const EVENT_ID_PATTERN = '^[A-Za-z0-9_][A-Za-z0-9_.:-]{0,127}$';
/**
 * Sluice's own deterministic event ids: a custom action's derived event (runs/step-effects.ts), a
 * device's connection events (triggers/device-record.ts), a schedule's ticks (schedule-record.ts).
 * Each is written once and an existing one counts as written already (a crash's retry), so an API
 * event that took one first would make Sluice drop its own: such ids are not the caller's to choose.
 */
export const RESERVED_EVENT_ID_PREFIXES = ['evt_d_', 'evt_dev_', 'evt_sch_'] as const;

/** How a custom action's derived event's id begins (runs/step-effects.ts). */
export const DERIVED_EVENT_ID_PREFIX = RESERVED_EVENT_ID_PREFIXES[0];

/** Whether `id` is a derived event's: the only events whose chain's root is another event. */
export const isDerivedEventId = (id: string): boolean => id.startsWith(DERIVED_EVENT_ID_PREFIX);

/**
 * The ids generateEventId makes (webhook deliveries, replays). Pruning keeps no tombstone of them
 * (only of caller-chosen ids), so a caller taking a pruned one would give its runs the old runs'
 * ids and effect keys. Provider ids of the same prefix (Stripe's `evt_` + 24 mixed-case
 * characters) have another shape.
 */
const GENERATED_EVENT_ID = /^evt_[0-9a-z]{11}[0-9a-f]{16}$/;

/** Whether `id` is in one of Sluice's own id namespaces (a reserved prefix, or the shape it generates). */
export const isReservedEventId = (id: string): boolean => RESERVED_EVENT_ID_PREFIXES.some((reserved) => id.startsWith(reserved)) || GENERATED_EVENT_ID.test(id);

/** 400 `reserved_event_id` for a caller-chosen id in one of Sluice's own id namespaces. */
export function assertNotReservedEventId(id: string, field: string): void {
  const prefix = RESERVED_EVENT_ID_PREFIXES.find((reserved) => id.startsWith(reserved));
  if (prefix !== undefined) {
    throw new InputError(400, 'reserved_event_id', `Event ids starting with "${prefix}" are Sluice's own (derived, device and schedule events); choose another id.`, { field });
  }
  if (GENERATED_EVENT_ID.test(id)) {
    throw new InputError(400, 'reserved_event_id', 'Event ids of the shape Sluice generates ("evt_" + 11 base-36 and 16 hex digits, lower case) are its own; choose another id.', { field });
  }
}

export const API_SOURCE = '@api';
/** The source of a business replay's event (runtime/replay/business-replay.ts). */
export const REPLAY_SOURCE = '@replay';

export interface StoredEvent {
  readonly id: string;
  readonly org_id: string;
  readonly type: string;
  readonly payload: unknown;
  readonly environment: Environment;
  /** The source name for webhooks, `@api` for events sent through the events API. */
  readonly source: string;
  readonly provider_event_id: string | null;
  readonly received_at: string;
  readonly received_at_ms: number;
  readonly correlation_id: string;
  readonly causation_id: string | null;
  readonly depth: number;
  readonly replay_skip_side_effects: boolean;
  /** A business replay limited to these workflows (the person's choice): only they start runs; null: every listener. */
  readonly replay_workflow_ids: readonly string[] | null;
}

/** What a trigger knows of an event it received (a webhook, an API call, a tick, a device message). */
export type RootEventFields = Pick<StoredEvent, 'id' | 'org_id' | 'type' | 'payload' | 'environment' | 'source' | 'provider_event_id' | 'received_at_ms'>;

/** An event a trigger received at `received_at_ms`: the root of its own correlation, caused by no run, effects not skipped. */
export function rootEvent(fields: RootEventFields): StoredEvent {
  return {
    id: fields.id,
    org_id: fields.org_id,
    type: fields.type,
    payload: fields.payload,
    environment: fields.environment,
    source: fields.source,
    provider_event_id: fields.provider_event_id,
    received_at: new Date(fields.received_at_ms).toISOString(),
    received_at_ms: fields.received_at_ms,
    correlation_id: fields.id,
    causation_id: null,
    depth: 0,
    replay_skip_side_effects: false,
    replay_workflow_ids: null,
  };
}

/** Bounded evidence of the request that created an event; secrets and signatures are redacted. */
export interface Recording {
  readonly method: string;
  readonly path: string;
  readonly headers: Readonly<Record<string, string>>;
  readonly body: string;
  readonly body_bytes: number;
  readonly body_truncated: boolean;
  readonly verifier: { readonly scheme: string; readonly key_index: number } | null;
  readonly received_at: string;
}

// Random bytes are drawn from a pool refilled 4 KiB at a time: one syscall per 512 ids instead of
// one per id (per-id randomBytes showed up in ingest profiles).
const pool = Buffer.alloc(4096);
let offset = pool.length;

function randomHex8(): string {
  if (offset + 8 > pool.length) {
    randomFillSync(pool);
    offset = 0;
  }
  offset += 8;
  return pool.toString('hex', offset - 8, offset);
}

/** Time-ordered, collision-resistant event id: `evt_` + 11 base36 chars of ms + 16 random hex chars. */
export function generateEventId(nowMs: number): string {
  return `evt_${nowMs.toString(36).padStart(11, '0')}${randomHex8()}`;
}
