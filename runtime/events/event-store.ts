// Stores events durably: inbox claim + event + time index (+ replay index) + recording in ONE atomic write, and
// resolves only after it is flushed. Reactors (workflow runs) join the same write.

import { ConflictError, InputError, notFound } from '../errors.ts';
import type { Inbox } from '../inbox/inbox.ts';
import { entryMayMatch, pageByTime } from '../ledger/page-by-time.ts';
import { removeEnvironmentKeys } from '../ledger/remove-environment.ts';
import type { Ledger, LedgerRoot, LedgerTable, LedgerWrite } from '../ledger/ledger.ts';
import { ENVIRONMENTS, type Environment } from '../sources/source-record.ts';
import { currentEventRecord, fromEventRecord, fromRecordingRecord, toEventRecord, toRecordingRecord, type EventRecord, type RecordingRecord } from './event-codec.ts';
import { API_SOURCE, REPLAY_SOURCE, type Recording, type StoredEvent } from './event-record.ts';
import { payloadTextOf, weighEvent } from './payload-text.ts';
import { eventTimeEntryOf } from './event-time-index.ts';
import { DerivedCounts } from './derived-counts.ts';
import { ReplayIndex } from './replay-index.ts';

/** What a reactor did inside a storing transaction, to finish once its fate is known. */
export interface Reaction {
  /** The transaction is durable: act on what was written (start the runs). */
  readonly committed: () => void;
  /** The transaction did not commit (a duplicate, a failed write): undo in-memory effects. */
  readonly abandoned: () => void;
  /**
   * The transaction committed but its flush failed: what it wrote is in the ledger, not known to be
   * on disk. Leave it to the path that picks work up from the ledger again (stalled runs).
   */
  readonly unflushed: () => void;
}

/** A reaction computed but not yet written: `write` only queues puts of values computed already (no reads). */
export interface PreparedReaction extends Reaction {
  readonly write: () => void;
}

/**
 * Called inside the storing transaction; computes what the event causes (its runs) without
 * writing anything, so that a failure leaves the batch untouched: lmdb-js commits the writes a
 * conditional batch queued before a throw.
 */
export type EventReactor = (event: StoredEvent) => PreparedReaction | undefined;

type Outcome = 'committed' | 'abandoned' | 'unflushed';

/** Finishes reactions once their transaction's fate is known. */
function settleReactions(reactions: readonly Reaction[], outcome: Outcome): void {
  // Each is told, whatever an earlier one threw (then thrown after them all): one left unsettled
  // holds its runs' commands for good (run-creation.ts).
  let failure: { readonly error: unknown } | undefined;
  for (const reaction of reactions) {
    try {
      reaction[outcome]();
    } catch (error) {
      failure ??= { error };
    }
  }
  if (failure !== undefined) throw failure.error;
}

/**
 * Waits for `write` to commit and then to be flushed (the rule of durably()), and settles the
 * reactions it collected: committed once durable (if `committed(result)` says the write took),
 * abandoned if it never committed or did not take, unflushed if it took but the flush failed.
 */
export async function settleDurably<T>(root: LedgerRoot, write: LedgerWrite<T>, reactions: () => readonly Reaction[], committed: (result: T) => boolean): Promise<T> {
  const ownFlush = write.flushed;
  let result: T;
  try {
    result = await write;
  } catch (error) {
    settleReactions(reactions(), 'abandoned');
    throw error;
  }
  const took = committed(result);
  try {
    await (ownFlush ?? root.flushed);
  } catch (error) {
    settleReactions(reactions(), took ? 'unflushed' : 'abandoned');
    throw error;
  }
  settleReactions(reactions(), took ? 'committed' : 'abandoned');
  return result;
}

export interface NewEvent {
  readonly event: StoredEvent;
  /** The JSON text of `event.payload` when the caller has it (a webhook's body); else it is serialized. */
  readonly payloadJson?: string;
  readonly recording: Recording | null;
  /** For webhook deliveries: the inbox claim to check and write. */
  readonly claim: { readonly source: string; readonly providerEventId: string } | null;
}

export interface EventPage {
  readonly events: StoredEvent[];
  /** Position after the last event of this page, or null when there is no more. */
  readonly nextCursor: [number, string] | null;
}

const duplicateError = (originalEventId: string): ConflictError =>
  new ConflictError('duplicate_event', 'This event was already received.', { original_event_id: originalEventId });

export class EventStore {
  readonly #ledger: Ledger;
  /** The claims written with webhook events (sandbox reset and source deletion remove some). */
  readonly inbox: Inbox;
  readonly #reactors: EventReactor[] = [];
  /**
   * [orgId, environment, eventId] -> pruned-at ms, for API events whose id the caller chose and that
   * retention removed: such an id is never accepted again, or its runs would get the ids, effect
   * keys and fences of the removed ones (run ids are a function of org, event and workflow).
   */
  readonly #tombstones: LedgerTable;
  /** Each chain's derived-event count (derived-counts.ts). */
  readonly #derivedCounts: DerivedCounts;
  /** Each event's business replays, written and removed with them. */
  readonly replays: ReplayIndex;

  constructor(ledger: Ledger, inbox: Inbox) {
    this.#ledger = ledger;
    this.inbox = inbox;
    this.#tombstones = ledger.openDatabase('event-tombstones');
    this.#derivedCounts = new DerivedCounts(ledger);
    this.replays = new ReplayIndex(ledger);
  }

  /** Registers a reactor that runs inside every event-storing transaction. */
  addReactor(reactor: EventReactor): void {
    this.#reactors.push(reactor);
  }

  /**
   * Stores the event atomically with its claim and recording; resolves after the write is durable.
   * Throws a 409 ConflictError naming the original event when the delivery or id was seen before.
   *
   * The common case is one conditional batch (`ifNoExists` on the inbox claim, or on the event key
   * for API events): lmdb-js evaluates the condition on its write thread, so ingest never holds the
   * write lock on the main thread. Only an expired, not yet pruned claim takes the transaction path.
   */
  async store({ event, payloadJson, recording, claim }: NewEvent): Promise<StoredEvent> {
    const { root, events, inbox } = this.#ledger;
    // One read of the claim tells both whether this is a duplicate and whether an expired claim is in the way.
    const stored = claim === null ? undefined : this.inbox.storedClaim(event.org_id, claim.source, claim.providerEventId);
    const duplicate = claim === null ? this.#duplicateOf(event, null) : stored !== undefined && this.inbox.isLive(stored, event.received_at_ms) ? stored.event_id : undefined;
    if (duplicate !== undefined) {
      // The claim it duplicates may be committed but not yet on disk: a 409 is an answer too, so it
      // waits for that flush (a crash before it must not lose the original as well).
      await root.flushed;
      throw duplicateError(duplicate);
    }
    if (claim !== null && stored !== undefined) return this.#storeOverExpiredClaim(event, recording, claim, payloadJson);
    const conditionKey = claim === null ? [event.org_id, event.id] : [event.org_id, claim.source, claim.providerEventId];
    let reactions: Reaction[] = [];
    const write = (claim === null ? events : inbox).ifNoExists(conditionKey, () => {
      reactions = this.writeWithin(event, recording, payloadJson, claim);
    });
    const written = await settleDurably(root, write, () => reactions, (stored) => stored);
    if (!written) throw duplicateError(this.#duplicateOf(event, claim) ?? event.id);
    return event;
  }

  /**
   * Throws the 409 `store` would answer when the delivery or API id duplicates an event still
   * remembered (once the original is on disk); resolves when it does not. Writes nothing.
   */
  async refuseDuplicate({ event, claim }: Pick<NewEvent, 'event' | 'claim'>): Promise<void> {
    await this.#refuse(this.#duplicateOf(event, claim));
  }

  /**
   * Awaits `check`, a refusal of a delivery known by its claim alone (before its event is made: a
   * schema check, say); when it refuses (an InputError) a delivery the org's source stored already
   * and still remembers, throws that delivery's duplicate_event ConflictError instead. A copy sent
   * again after its schema changed is the duplicate it is, not something never stored.
   */
  async unlessStored<T>(check: Promise<T>, orgId: string, claim: NonNullable<NewEvent['claim']>, atMs: number): Promise<T> {
    try {
      return await check;
    } catch (error) {
      if (error instanceof InputError) await this.#refuse(this.inbox.liveClaim(orgId, claim.source, claim.providerEventId, atMs)?.event_id);
      throw error;
    }
  }

  /** Throws the duplicate_event ConflictError naming `duplicate`, once what is written is on disk; nothing when undefined. */
  async #refuse(duplicate: string | undefined): Promise<void> {
    if (duplicate === undefined) return;
    await this.#ledger.root.flushed;
    throw duplicateError(duplicate);
  }

  /** The event a delivery or API id duplicates, if it is still remembered (or was removed by retention). */
  #duplicateOf(event: StoredEvent, claim: NewEvent['claim']): string | undefined {
    if (claim !== null) return this.inbox.liveClaim(event.org_id, claim.source, claim.providerEventId, event.received_at_ms)?.event_id;
    // Ids are unique across both environments, after retention too: a tombstone of either counts.
    const seen = this.#ledger.events.doesExist([event.org_id, event.id]) || ENVIRONMENTS.some((environment) => this.#tombstones.doesExist([event.org_id, environment, event.id]));
    return seen ? event.id : undefined;
  }

  /**
   * Removes an event, its time index entry and its recording for retention, leaving a tombstone
   * when its id was the caller's (see #tombstones). Call inside a write transaction.
   */
  removeWithin(event: Omit<StoredEvent, 'payload'>, nowMs: number): void {
    const { events, eventsByTime, recordings } = this.#ledger;
    eventsByTime.remove([event.org_id, event.environment, event.received_at_ms, event.id]);
    events.remove([event.org_id, event.id]);
    recordings.remove([event.org_id, event.id]);
    this.#derivedCounts.removedWithin(event);
    this.replays.removeWithin(event);
    if (event.source === API_SOURCE && event.provider_event_id !== null) this.#tombstones.put([event.org_id, event.environment, event.id], nowMs);
  }

  /** Removes the tombstones of one org's environment, at most `limit` (sandbox reset: its ids may be sent again). Call inside a write transaction. */
  removeTombstonesWithin(orgId: string, environment: string, limit?: number): number {
    return removeEnvironmentKeys(this.#tombstones, orgId, environment, limit);
  }

  /** A claim that exists but is past the dedup window is replaced inside one serialized transaction. */
  async #storeOverExpiredClaim(event: StoredEvent, recording: Recording | null, claim: NonNullable<NewEvent['claim']>, payloadJson: string | undefined): Promise<StoredEvent> {
    const { root } = this.#ledger;
    let reactions: Reaction[] = [];
    const write = root.transaction((): string | undefined => {
      const live = this.#duplicateOf(event, claim);
      if (live !== undefined) return live;
      reactions = this.writeWithin(event, recording, payloadJson, claim);
      return undefined;
    });
    const duplicate = await settleDurably(root, write, () => reactions, (live) => live === undefined);
    if (duplicate !== undefined) throw duplicateError(duplicate);
    return event;
  }

  /**
   * Writes a new event (and, through the reactors, its runs) inside the caller's write transaction;
   * returns the reactions to settle once that transaction's fate is known. Derived events are
   * stored this way, in the transaction that completes the step that produced them. Everything is
   * computed before the first write, so a throw leaves nothing queued (see EventReactor).
   */
  writeWithin(event: StoredEvent, recording: Recording | null, payloadJson?: string, claim: NewEvent['claim'] = null): Reaction[] {
    const { events, eventsByTime, recordings } = this.#ledger;
    const record = toEventRecord(event, payloadJson);
    const recordingRecord = recording === null ? null : toRecordingRecord(recording, record.payload_json);
    const reactions = this.#prepareReactions(event);
    try {
      // A keyed replay's claim says its environment (sources and devices have their own).
      if (claim !== null) this.inbox.writeClaim(event.org_id, claim.source, claim.providerEventId, event.id, event.received_at_ms, claim.source === REPLAY_SOURCE ? event.environment : undefined);
      events.put([event.org_id, event.id], record);
      eventsByTime.put([event.org_id, event.environment, event.received_at_ms, event.id], eventTimeEntryOf(event));
      this.replays.writeWithin(event);
      if (recordingRecord !== null) recordings.put([event.org_id, event.id], recordingRecord);
      for (const reaction of reactions) reaction.write();
    } catch (error) {
      // Only a put can throw here (a key or value LMDB refuses). The writes queued before it still
      // commit (ledger.ts), so the reactions are settled as `unflushed`: the stalled-run path picks
      // up from the ledger whatever committed, and gives back what never arrives.
      settleReactions(reactions, 'unflushed');
      throw error;
    }
    return reactions;
  }

  /**
   * One transaction around `body`, for records whose change is an event (a device's connection, a
   * schedule's tick): its `write` stores an event with its runs and answers true, or answers false
   * when an event of that id is stored already (a deterministic id written again after a crash).
   * Resolves with `body`'s result once the transaction is durable.
   */
  writeWithEvents<T>(body: (write: (event: StoredEvent) => boolean) => T): Promise<T> {
    const { root } = this.#ledger;
    let reactions: Reaction[] = [];
    const write = root.transaction(() => {
      reactions = [];
      return body((event) => {
        if (this.has(event.org_id, event.id)) return false;
        reactions.push(...this.writeWithin(event, null, payloadTextOf(event)));
        return true;
      });
    });
    return settleDurably(root, write, () => reactions, () => true);
  }

  /** Every reactor's reaction to the event, computed and not yet written; if one throws, the others are abandoned. */
  #prepareReactions(event: StoredEvent): PreparedReaction[] {
    const prepared: PreparedReaction[] = [];
    try {
      for (const react of this.#reactors) {
        const reaction = react(event);
        if (reaction !== undefined) prepared.push(reaction);
      }
    } catch (error) {
      settleReactions(prepared, 'abandoned');
      throw error;
    }
    return prepared;
  }

  /** How many events custom actions have derived from this root event (a correlation_id), in all generations. */
  derivedCount(orgId: string, rootEventId: string): number {
    return this.#derivedCounts.derivedSoFar(orgId, rootEventId);
  }

  /** Counts one more event derived from the root; call inside the transaction that writes it. */
  countDerivedWithin(orgId: string, rootEventId: string): void {
    this.#derivedCounts.countWithin(orgId, rootEventId);
  }

  /** Roots of the org whose derived count outlived them (derived-counts.ts), for a sandbox reset. */
  derivedCountRootsNotStored(orgId: string): Promise<Set<string>> {
    return this.#derivedCounts.rootsNotStored(orgId);
  }

  /** Forgets a removed root event's count (sandbox reset); call inside a write transaction. */
  forgetDerivedCountWithin(orgId: string, rootEventId: string): void {
    this.#derivedCounts.forgetWithin(orgId, rootEventId);
  }

  get(orgId: string, eventId: string): StoredEvent | undefined {
    const record = this.#ledger.events.get([orgId, eventId]) as EventRecord | undefined;
    return record === undefined ? undefined : fromEventRecord(record);
  }

  /**
   * The event with its payload as the JSON text stored, not parsed: for readers that hand the
   * payload on as text (a step's input), for whom `get` would parse it for nothing.
   */
  getRecord(orgId: string, eventId: string): EventRecord | undefined {
    const record = this.#ledger.events.get([orgId, eventId]) as EventRecord | undefined;
    return record === undefined ? undefined : currentEventRecord(record);
  }

  /** Whether the event exists, without decoding it. */
  has(orgId: string, eventId: string): boolean {
    return this.#ledger.events.doesExist([orgId, eventId]);
  }

  /** The event if it exists in that environment; 404 otherwise (environments never leak into each other). */
  require(orgId: string, eventId: string, environment: Environment): StoredEvent {
    const event = this.get(orgId, eventId);
    if (event === undefined || event.environment !== environment) throw notFound(`Event "${eventId}"`, 'event_id');
    return event;
  }

  recording(orgId: string, eventId: string): Recording | undefined {
    const record = this.#ledger.recordings.get([orgId, eventId]) as RecordingRecord | undefined;
    return record === undefined ? undefined : fromRecordingRecord(record, this.#ledger.events.get([orgId, eventId]) as EventRecord | undefined);
  }

  /** Newest first within one org and environment; `cursor` continues after the last event of a page. */
  list(orgId: string, environment: Environment, options: { type?: string; source?: string; limit: number; cursor?: [number, string] }): EventPage {
    const page = pageByTime(this.#ledger.eventsByTime, [orgId, environment], options.limit, options.cursor, (id, entry) => {
      // Filtered on the index entry first, then on the stored record: only a match's record is read
      // and only its payload parsed.
      if (!entryMayMatch(entry, [options.type, options.source])) return undefined;
      const record = this.#ledger.events.get([orgId, id]) as EventRecord | undefined;
      const matches = record !== undefined && (options.type === undefined || record.type === options.type) && (options.source === undefined || record.source === options.source);
      return matches ? fromEventRecord(record) : undefined;
    }, weighEvent);
    return { events: page.items, nextCursor: page.next };
  }

}
