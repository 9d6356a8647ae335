// Which business replays each event has had, newest first: written in the transaction that stores a
// replay, removed with it (retention, sandbox reset). The event view lists them (an original leads
// to its replays), and an unkeyed replay repeated with the same choice within minutes is refused
// (replay-api.ts), so a double click does not charge twice under two sets of keys.

import type { Ledger, LedgerRange, LedgerRoot, LedgerTable } from '../ledger/ledger.ts';
import { passesOverTable } from '../ledger/passes-over-table.ts';
import { removeEnvironmentKeys } from '../ledger/remove-environment.ts';
import { withCurrentFields, type EventRecord } from './event-codec.ts';
import { REPLAY_SOURCE, type StoredEvent } from './event-record.ts';

/** One replay of an event, as the person chose it. */
export interface ReplayEntry {
  readonly event_id: string;
  readonly received_at: string;
  readonly received_at_ms: number;
  readonly side_effects: 'skip' | 'run';
  readonly workflow_ids: readonly string[] | null;
}

/** Stored per entry: the choice (the time and id are in the key). */
interface ReplayChoiceRecord {
  readonly skip: boolean;
  readonly workflow_ids: readonly string[] | null;
}

type ReplayKey = [orgId: string, environment: string, originalId: string, receivedAtMs: number, replayId: string];

/** What the index reads of an event: whether it is a replay, its key, the choice. */
type ReplayFields = Pick<StoredEvent, 'id' | 'org_id' | 'environment' | 'source' | 'received_at_ms' | 'causation_id' | 'replay_skip_side_effects' | 'replay_workflow_ids'>;

/** The data format (data-format.ts) from which on every stored replay is indexed. */
export const REPLAY_INDEX_FORMAT = 4;

/** The table's name (tests and upgrades open it). */
export const REPLAY_INDEX = 'event-replays';

const keyOf = (replay: ReplayFields): ReplayKey => [replay.org_id, replay.environment, replay.causation_id!, replay.received_at_ms, replay.id];

const isReplay = (event: ReplayFields): boolean => event.source === REPLAY_SOURCE && event.causation_id !== null;

export class ReplayIndex {
  /** [orgId, environment, original event id, replay received-at ms, replay event id] -> ReplayChoiceRecord */
  readonly #table: LedgerTable;
  readonly #root: LedgerRoot;

  constructor(ledger: Ledger) {
    this.#table = ledger.openDatabase(REPLAY_INDEX);
    this.#root = ledger.root;
  }

  /** Indexes `event` if it is a business replay; call inside the write that stores it. */
  writeWithin(event: ReplayFields): void {
    if (!isReplay(event)) return;
    const record: ReplayChoiceRecord = { skip: event.replay_skip_side_effects, workflow_ids: event.replay_workflow_ids };
    this.#table.put(keyOf(event), record);
  }

  /**
   * Forgets `event` as a replay, and the replays listed under it (it is being removed: its view is
   * gone, and a replay that outlives it, failed runs keeping it, would hold its entry for ever).
   * Call inside a write transaction.
   */
  removeWithin(event: Omit<StoredEvent, 'payload'>): void {
    if (isReplay(event)) this.#table.remove(keyOf(event));
    // Read in full before removing (lmdb-js and the memory twin both see the transaction's own
    // writes here; ledger.ts leaves range reads in a writing transaction unspecified, and sandbox
    // reset's removeEnvironmentKeys relies on the same).
    const listed = [...this.#table.getKeys({ start: [event.org_id, event.environment, event.id], end: [event.org_id, event.environment, event.id, '\uffff'] })];
    for (const key of listed) this.#table.remove(key);
  }

  /** Removes one org's environment's entries, at most `limit` (sandbox reset). Call inside a write transaction. */
  removeEnvironmentWithin(orgId: string, environment: string, limit?: number): number {
    return removeEnvironmentKeys(this.#table, orgId, environment, limit);
  }

  /** The newest `limit` replays of the event, newest first (a replay removed since is not listed). */
  newest(orgId: string, environment: string, originalId: string, limit: number): ReplayEntry[] {
    return this.#entries({ start: [orgId, environment, originalId, Number.MAX_SAFE_INTEGER], end: [orgId, environment, originalId, -1], reverse: true, limit });
  }

  /** The newest `limit` replays of the event received from `fromMs` up to (not including) `toMs`, newest first. */
  within(orgId: string, environment: string, originalId: string, fromMs: number, toMs: number, limit: number): ReplayEntry[] {
    return this.#entries({ start: [orgId, environment, originalId, toMs], end: [orgId, environment, originalId, fromMs], reverse: true, limit });
  }

  #entries(range: LedgerRange): ReplayEntry[] {
    return [...this.#table.getRange(range)].map(({ key, value }) => {
      const [, , , receivedAtMs, replayId] = key as ReplayKey;
      const choice = value as ReplayChoiceRecord;
      return { event_id: replayId, received_at: new Date(receivedAtMs).toISOString(), received_at_ms: receivedAtMs, side_effects: choice.skip ? 'skip' : 'run', workflow_ids: choice.workflow_ids };
    });
  }

  /**
   * Indexes every stored replay (data written before the index existed); resolves with how many
   * events it read, once durable. Idempotent. Boot calls it for a dir stamped below REPLAY_INDEX_FORMAT.
   * Events are read one at a time and only a replay's few fields are kept, so a pass holds at most
   * one event's payload however large the events are.
   */
  async indexStored(events: LedgerTable, passSize = 1000): Promise<number> {
    return passesOverTable(this.#root, events, passSize, (_key, value) => {
      // Old layouts keep these fields as today's does.
      const record = withCurrentFields(value as EventRecord);
      if (!isReplay(record)) return undefined;
      // Only the fields the index needs: the record (its payload) is not held past this step.
      const { id, org_id, environment, source, received_at_ms, causation_id, replay_skip_side_effects, replay_workflow_ids } = record;
      return { id, org_id, environment, source, received_at_ms, causation_id, replay_skip_side_effects, replay_workflow_ids } satisfies ReplayFields;
    }, (replay) => this.writeWithin(replay));
  }
}
