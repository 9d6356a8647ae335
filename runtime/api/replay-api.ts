// REST: the two event replays. Business replay makes a new event after an explicit side_effects
// choice (once per Idempotency-Key, when given; an unkeyed one is not repeated within minutes
// unless the person says "again"); transport replay only explains what ingest would do with the
// recorded request.

import { shownName } from '../validation/shown-name.ts';
import { ConflictError, InputError, notFound, SluiceError } from '../errors.ts';
import { assertNoBodyFields, parseJsonRequest } from '../http/parse-json.ts';
import { REPLAY_SOURCE, type StoredEvent } from '../events/event-record.ts';
import { eventWithRawPayload } from '../events/payload-text.ts';
import { json, rawJson, type Route } from '../http/types.ts';
import type { Inbox } from '../inbox/inbox.ts';
import type { IngestQuota } from '../ingest/ingest-quota.ts';
import { chosenWorkflows, replayOf } from '../replay/business-replay.ts';
import { explainTransportReplay } from '../replay/transport-replay.ts';
import { CONNECTION_EVENT_TYPES } from '../triggers/device-record.ts';
import { sandboxAllowed } from '../tenancy/sandbox-guard.ts';
import { createBodyParser } from '../validation/body-schema.ts';
import type { WorkflowStore } from '../workflows/workflow-store.ts';
import { summarizeRun } from '../runs/run-summary.ts';
import { KeyedSerial } from '../keyed-serial.ts';
import { parseIdempotencyKey } from './idempotency-key.ts';
import type { ApiContext } from './context.ts';
import { ENVIRONMENT_QUERY, environmentOf } from './query-params.ts';

interface ReplayChoice {
  readonly side_effects: 'skip' | 'run';
  /** Only these workflows start runs (each must listen for the event now); all listeners when absent. */
  readonly workflow_ids?: string[];
  /** Replay once more although the same replay was made moments ago (an unkeyed request's guard). */
  readonly again?: boolean;
}

const MAX_REPLAY_WORKFLOWS = 100;

/**
 * How long an unkeyed replay refuses to be made again with the same choice: a double click, a
 * client retrying after a timeout or a form sent again all come within it, and each would send
 * every effect again under new keys. `"again": true` says the person means it.
 */
export const REPEAT_GUARD_MS = 5 * 60_000;

/** Replays of one event waiting for their turn (or being made) at most; more are 429. */
const MAX_QUEUED_REPLAYS = 100;

/** 429 `too_many_replays`: MAX_QUEUED_REPLAYS replays of the event are waiting already; retry after a second. */
class ReplaysWaitingError extends SluiceError {
  readonly retryAfterMs = 1000;
  constructor() {
    super(429, 'too_many_replays', `${MAX_QUEUED_REPLAYS} replays of this event are being made already; retry in a second.`);
  }
}

/** Replays within the guard looked at for a repeat at most (the newest): more than a person makes by accident. */
const REPEAT_LOOKBACK = 1000;

const parseReplay = createBodyParser<ReplayChoice>({
  type: 'object',
  additionalProperties: false,
  required: ['side_effects'],
  properties: {
    side_effects: { type: 'string', enum: ['skip', 'run'] },
    workflow_ids: { type: 'array', minItems: 1, maxItems: MAX_REPLAY_WORKFLOWS, uniqueItems: true, items: { type: 'string', minLength: 1, maxLength: 200 } },
    again: { type: 'boolean' },
  },
});

/** Whether a replay made earlier (its workflow_ids as stored) chose the same workflows. */
const sameWorkflows = (earlier: readonly string[] | null, choice: ReplayChoice): boolean => JSON.stringify(earlier) === JSON.stringify(chosenWorkflows(choice.workflow_ids));

export function replayRoutes(ctx: ApiContext, inbox: Inbox, workflows: WorkflowStore, quota: IngestQuota): Route[] {
  const base = '/organizations/:org_id/events/:event_id';
  const serial = new KeyedSerial();
  /** The answer for a replay made (now or by an earlier keyed request): the event and the runs it started. */
  const made = (replay: StoredEvent) => ({ event: eventWithRawPayload(replay), reactions: ctx.runs.forEvent(replay.org_id, replay.id, summarizeRun) });
  /**
   * Refuses an unkeyed replay that repeats one made within REPEAT_GUARD_MS with the same choice
   * (on either side of now: after the clock was set back, a replay made minutes ago reads as later).
   * One that started no run (no workflow listened then) sent nothing: it holds no replay off.
   */
  const refuseRepeat = (orgId: string, original: StoredEvent, choice: ReplayChoice): void => {
    const nowMs = ctx.clock.now();
    const repeated = ctx.events.replays
      .within(orgId, original.environment, original.id, nowMs - REPEAT_GUARD_MS + 1, nowMs + REPEAT_GUARD_MS, REPEAT_LOOKBACK)
      .find((earlier) => earlier.side_effects === choice.side_effects && sameWorkflows(earlier.workflow_ids, choice) && ctx.runs.hasRunsFor(orgId, earlier.event_id));
    if (repeated === undefined) return;
    const ago = Math.max(0, Math.round((nowMs - repeated.received_at_ms) / 1000));
    throw new ConflictError(
      'replay_just_made',
      `This event was replayed with the same side_effects and workflows ${ago} s ago (event ${repeated.event_id}). To replay it once more, send "again": true; to make retries of one replay safe, send an Idempotency-Key.`,
      { replay_event_id: repeated.event_id },
    );
  };
  return [
    {
      method: 'POST',
      pattern: `${base}/replay`,
      query: ENVIRONMENT_QUERY,
      handler: async (request) => {
        const org = ctx.auth.requireOrg(request, request.params.org_id ?? '', 'developer');
        const eventId = request.params.event_id ?? '';
        const environment = environmentOf(request, org);
        const choiceOf = (): ReplayChoice => {
          try {
            return parseReplay(parseJsonRequest(request));
          } catch (error) {
            // Missing, or not one of the two: the choice is explained. Any other problem (an unknown
            // field, a duplicate member, a body nested too deep) keeps its own error.
            if (error instanceof InputError && error.field === 'side_effects') {
              throw new InputError(400, 'side_effects_required', 'Choose side_effects: "skip" (webhook steps are recorded as skipped, not sent; custom actions still run and write their projection rows) or "run" (everything runs again under new keys).', { field: 'side_effects' });
            }
            throw error;
          }
        };
        /**
         * The replay of `eventId` a key made before the claim's separator was a space (data written
         * by earlier releases, claimed as `<event>:<key>`), if that claim is still inside the dedup
         * window. That form could also name a replay of another event (an event id ending in
         * `:<part of the key>`), so only a replay of this very event counts.
         */
        const legacyReplay = (key: string) => {
          const claim = inbox.liveClaim(org.id, REPLAY_SOURCE, `${eventId}:${key}`, ctx.clock.now());
          const earlier = claim === undefined ? undefined : ctx.events.get(org.id, claim.event_id);
          return earlier?.causation_id === eventId ? earlier : undefined;
        };
        /** The replay this key already made of `eventId`, if its claim is still inside the dedup window. */
        const earlierReplay = (key: string) => {
          const claim = inbox.liveClaim(org.id, REPLAY_SOURCE, `${eventId} ${key}`, ctx.clock.now());
          return claim === undefined ? legacyReplay(key) : ctx.events.get(org.id, claim.event_id);
        };
        /** The keyed retry's answer: the earlier replay, if it was made with the same choice. */
        const replayedAnswer = (earlier: StoredEvent, choice: ReplayChoice) => {
          if (earlier.causation_id !== eventId || earlier.environment !== environment) {
            // Only a claim written before the separator was a space can name another event's replay.
            throw new ConflictError('idempotency_key_reused', 'This Idempotency-Key already made a replay of another event.');
          }
          if (earlier.replay_skip_side_effects !== (choice.side_effects === 'skip')) {
            throw new ConflictError('idempotency_key_reused', 'This Idempotency-Key already made a replay of this event with a different side_effects choice.', { original_event_id: earlier.id });
          }
          if (!sameWorkflows(earlier.replay_workflow_ids, choice)) {
            throw new ConflictError('idempotency_key_reused', 'This Idempotency-Key already made a replay of this event for other workflow_ids.', { original_event_id: earlier.id });
          }
          // Said in the body too, for clients that read only the body (the TypeScript client, the CLI).
          return rawJson(202, { ...made(earlier), idempotent_replayed: true }, { 'idempotent-replayed': 'true' });
        };
        let original;
        try {
          original = ctx.events.require(org.id, eventId, environment);
        } catch (error) {
          // The original may have been pruned (retention) while the key's claim, younger, is live:
          // a retry still learns of the replay it made.
          const key = request.headers['idempotency-key'] === undefined ? undefined : parseIdempotencyKey(request.headers['idempotency-key']);
          const earlier = key === undefined ? undefined : earlierReplay(key);
          // Only a replay of this very event in this environment: anything else is the 404 it was.
          if (earlier === undefined || earlier.causation_id !== eventId || earlier.environment !== environment) throw error;
          return replayedAnswer(earlier, choiceOf());
        }
        const choice = choiceOf();
        // Only Sluice says when a device connection opened or ended (a workflow on device.disconnected
        // trusts the device is gone): a replay of such an event would claim it again.
        if (CONNECTION_EVENT_TYPES.has(original.type)) {
          throw new InputError(400, 'reserved_event_type', `A "${original.type}" event is written by Sluice when a device connection opens or ends and cannot be replayed; resume a failed run of it instead.`);
        }
        const idempotencyKey = parseIdempotencyKey(request.headers['idempotency-key']);
        // One replay of an event at a time, so the second of a double click (or a keyed and an
        // unkeyed request overlapping) sees the first one's replay. Everything a queued request
        // checked is read again inside: a reset or retention may have removed the original meanwhile.
        const queue = `${org.id} ${original.id}`;
        // Bounded: a flood of replays of one event is refused, not held in memory behind the first.
        if (serial.queued(queue) >= MAX_QUEUED_REPLAYS) {
          throw new ReplaysWaitingError();
        }
        return serial.run(queue, async () => {
          // A replay is a new event: it counts toward the ingest quota (a keyed retry that stores
          // nothing does not), and is stored in its turn like API events (events-api.ts), with no
          // await between the turn and the store.
          const turn = await ctx.writeTurns.take(org.id, original.environment, original.type);
          try {
            // Meanwhile (a sandbox reset waited for, say) the original may have gone, retention pruned it, or the plan lost its sandbox.
            const current = ctx.events.require(org.id, original.id, environmentOf(request, ctx.auth.requireOrg(request, org.id, 'developer')));
            // A reset freed the id and a new event took it: the choice was made for the one removed.
            if (current.received_at_ms !== original.received_at_ms) throw notFound(`Event "${original.id}"`, 'event_id');
            // A keyed retry answers with the replay the key made, whatever changed since (a workflow
            // it named disabled meanwhile): the replay exists, and its runs were made.
            const earlier = idempotencyKey === undefined ? undefined : earlierReplay(idempotencyKey);
            if (earlier !== undefined) return replayedAnswer(earlier, choice);
            if (choice.workflow_ids !== undefined) {
              // A workflow named that would start no run is a mistake to say now, not a replay that does nothing.
              const listening = new Set(workflows.matching(org.id, current.environment, current.type).map((version) => String(version.workflow_id)));
              const idle = choice.workflow_ids.find((id) => !listening.has(id));
              if (idle !== undefined) {
                throw new InputError(422, 'workflow_not_listening', `Workflow "${shownName(idle)}" is not an enabled ${current.environment} workflow of this organization listening for "${current.type}": a replay limited to it would start no run.`, { field: 'workflow_ids' });
              }
            }
            if (idempotencyKey === undefined) {
              if (choice.again !== true) refuseRepeat(org.id, current, choice);
              const replay = replayOf(current, choice.side_effects, ctx.clock.now(), choice.workflow_ids);
              await quota.storeEvent(org, ctx.events, { event: replay, recording: null, claim: null });
              ctx.metrics.ingestTotal.inc({ outcome: 'accepted_replay' });
              return rawJson(202, made(replay));
            }
            // The key is claimed in the inbox with the new event, so a retried or double-clicked replay
            // (within the dedup window) answers with the replay it already made instead of a second one.
            const replay = replayOf(current, choice.side_effects, ctx.clock.now(), choice.workflow_ids);
            try {
              // A space occurs in neither part, so no two (event, key) pairs share a claim.
              await quota.storeEvent(org, ctx.events, { event: replay, recording: null, claim: { source: REPLAY_SOURCE, providerEventId: `${current.id} ${idempotencyKey}` } });
              ctx.metrics.ingestTotal.inc({ outcome: 'accepted_replay' });
              return rawJson(202, made(replay));
            } catch (error) {
              const earlier = error instanceof ConflictError ? ctx.events.get(org.id, String(error.details['original_event_id'])) : undefined;
              if (earlier === undefined) throw error;
              return replayedAnswer(earlier, choice);
            }
          } finally {
            turn.release();
          }
        });
      },
    },
    {
      method: 'POST',
      pattern: `${base}/transport-replay`,
      query: ENVIRONMENT_QUERY,
      handler: async (request) => {
        const org = ctx.auth.requireOrg(request, request.params.org_id ?? '', 'developer');
        const event = ctx.events.require(org.id, request.params.event_id ?? '', environmentOf(request, org));
        assertNoBodyFields(request);
        const report = await explainTransportReplay(event, ctx.events.recording(org.id, event.id), {
          source: ctx.sources.get(org.id, event.source),
          schemaChecks: ctx.schemas.payloads,
          sandboxAllowed: sandboxAllowed(org),
          inbox,
          matching: (type, environment) => workflows.matching(org.id, environment, type),
          nowMs: ctx.clock.now(),
        });
        return json(200, { report });
      },
    },
  ];
}
