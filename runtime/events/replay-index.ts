// Which business replays each event has had, newest first: written in the transaction that stores a
// replay, removed with it (retention, sandbox reset). The event view lists them (an original leads
// to its replays), and an unkeyed replay repeated with the same choice within minutes is refused
// (replay-api.ts), so a double click does not charge twice under two sets of keys.

import { durably } from '../ledger/durable-write.ts';
import type { Ledger, LedgerKey, LedgerRoot, LedgerTable } from '../ledger/ledger.ts';
import { removeEnvironmentKeys } from '../ledger/remove-environment.ts';
import { currentEventRecord, type EventRecord } from './event-codec.ts';
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

/** The table's name (tests and upgrades open it). */
export const REPLAY_INDEX = 'event-replays';

const keyOf = (replay: StoredEvent): ReplayKey => [replay.org_id, replay.environment, replay.causation_id!, replay.received_at_ms, replay.id];

const isReplay = (event: StoredEvent): boolean => event.source === REPLAY_SOURCE && event.causation_id !== null;

export class ReplayIndex {
  /** [orgId, environment, original event id, replay received-at ms, replay event id] -> ReplayChoiceRecord */
  readonly #table: LedgerTable;
  readonly #root: LedgerRoot;

  constructor(ledger: Ledger) {
    this.#table = ledger.openDatabase(REPLAY_INDEX);
    this.#root = ledger.root;
  }

  /** Indexes `event` if it is a business replay; call inside the write that stores it. */
  writeWithin(event: StoredEvent): void {
    if (!isReplay(event)) return;
    const record: ReplayChoiceRecord = { skip: event.replay_skip_side_effects, workflow_ids: event.replay_workflow_ids };
    this.#table.put(keyOf(event), record);
  }

  /** Forgets `event` as a replay (it is being removed); call inside a write transaction. */
  removeWithin(event: StoredEvent): void {
    if (isReplay(event)) this.#table.remove(keyOf(event));
  }

  /** Removes one org's environment's entries, at most `limit` (sandbox reset). Call inside a write transaction. */
  removeEnvironmentWithin(orgId: string, environment: string, limit?: number): number {
    return removeEnvironmentKeys(this.#table, orgId, environment, limit);
  }

  /** The newest `limit` replays of the event, newest first (a replay removed since is not listed). */
  newest(orgId: string, environment: string, originalId: string, limit: number): ReplayEntry[] {
    const range = { start: [orgId, environment, originalId, Number.MAX_SAFE_INTEGER], end: [orgId, environment, originalId, -1], reverse: true, limit };
    return [...this.#table.getRange(range)].map(({ key, value }) => {
      const [, , , receivedAtMs, replayId] = key as ReplayKey;
      const choice = value as ReplayChoiceRecord;
      return { event_id: replayId, received_at: new Date(receivedAtMs).toISOString(), received_at_ms: receivedAtMs, side_effects: choice.skip ? 'skip' : 'run', workflow_ids: choice.workflow_ids };
    });
  }

  /**
   * Indexes every stored replay (data written before the index existed); resolves with how many
   * events it read, once durable. Idempotent. Boot calls it for a dir stamped below REPLAY_INDEX_FORMAT.
   */
  async indexStored(events: LedgerTable, passSize = 1000): Promise<number> {
    let read = 0;
    let start: LedgerKey = [];
    for (;;) {
      // Read outside the transaction (ledger.ts). writeWithin reads no payload: the record stands in for the event.
      const entries = [...events.getRange({ start, limit: passSize })] as Array<{ key: [string, string]; value: EventRecord }>;
      if (entries.length === 0) return read;
      await durably(this.#root, this.#root.transaction(() => {
        for (const { value } of entries) this.writeWithin(currentEventRecord(value) as unknown as StoredEvent);
      }));
      read += entries.length;
      const last = entries.at(-1)!.key;
      start = [last[0], `${last[1]}\u0000`];
    }
  }
}

/** The data format (data-format.ts) from which on every stored replay is indexed. */
export const REPLAY_INDEX_FORMAT = 4;
