// Durable storage of schedules under [orgId, name]. Few and small, so reads go to LMDB directly;
// a schedule's tick fields are written in the transaction that stores the tick's event (recordTick).

import { ConflictError, notFound } from '../errors.ts';
import type { StoredEvent } from '../events/event-record.ts';
import type { EventStore } from '../events/event-store.ts';
import { changeRecord, removeRecord } from '../ledger/change-record.ts';
import { insertCapped } from '../ledger/insert-capped.ts';
import type { Ledger, LedgerRoot, LedgerTable } from '../ledger/ledger.ts';
import type { ScheduleRecord } from './schedule-record.ts';
import { everyRecord, orgRecords } from '../ledger/org-records.ts';

/** An org's schedules are all armed in memory; the cap keeps that bounded. */
export const MAX_SCHEDULES_PER_ORG = 100;

export class ScheduleStore {
  readonly #root: LedgerRoot;
  /** [orgId, name] -> ScheduleRecord */
  readonly #table: LedgerTable;
  readonly #events: EventStore;

  constructor(ledger: Ledger, events: EventStore) {
    this.#root = ledger.root;
    this.#table = ledger.openDatabase('schedules');
    this.#events = events;
  }

  get(orgId: string, name: string): ScheduleRecord | undefined {
    return this.#table.get([orgId, name]) as ScheduleRecord | undefined;
  }

  require(orgId: string, name: string): ScheduleRecord {
    const schedule = this.get(orgId, name);
    if (schedule === undefined) throw notFound(`Schedule "${name}"`, 'name');
    return schedule;
  }

  list(orgId: string): ScheduleRecord[] {
    return [...orgRecords<ScheduleRecord>(this.#table, orgId)];
  }

  /** The org's schedules in name order after `afterName`, read as iterated (list pages). */
  listAfter(orgId: string, afterName: string | undefined): Iterable<ScheduleRecord> {
    return orgRecords<ScheduleRecord>(this.#table, orgId, afterName);
  }

  /**
   * Every org's schedules, read one at a time as iterated (keys first: iterating across awaits holds
   * no LMDB snapshot, and no more than one schedule's payload, up to 64 KiB, is held at once).
   */
  all(): Generator<ScheduleRecord> {
    return everyRecord<ScheduleRecord>(this.#table);
  }

  /** Resolves once the schedule is durable; 409 if the name is taken in this org, or the org holds MAX_SCHEDULES_PER_ORG. */
  async create(schedule: ScheduleRecord): Promise<void> {
    const outcome = await insertCapped(this.#root, this.#table, schedule.org_id, schedule.name, schedule, MAX_SCHEDULES_PER_ORG);
    if (outcome === 'exists') throw new ConflictError('schedule_exists', `A schedule named "${schedule.name}" already exists.`, { field: 'name' });
    if (outcome === 'full') throw new ConflictError('schedule_limit_reached', `An organization can hold at most ${MAX_SCHEDULES_PER_ORG} schedules; delete one first.`);
  }

  /** Applies `change` to the schedule as stored when the write runs; 404 if it is gone, or `change` answers undefined (not the schedule meant). */
  async update(orgId: string, name: string, change: (current: ScheduleRecord) => ScheduleRecord | undefined): Promise<ScheduleRecord> {
    const updated = await changeRecord(this.#root, this.#table, [orgId, name], change);
    if (updated === undefined) throw notFound(`Schedule "${name}"`, 'name');
    return updated;
  }

  /**
   * A tick's write, in one transaction: `tick` sees the schedule as stored when the write runs and
   * answers its new record, or undefined to leave it; its `write` stores the tick's event with its
   * runs (EventStore.writeWithEvents). Resolves once durable.
   */
  recordTick(orgId: string, name: string, tick: (current: ScheduleRecord | undefined, write: (event: StoredEvent) => boolean) => ScheduleRecord | undefined): Promise<void> {
    return this.#events.writeWithEvents((write) => {
      const updated = tick(this.get(orgId, name), write);
      if (updated !== undefined) this.#table.put([orgId, name], updated);
    });
  }

  /** 404 if it is gone, or another schedule (`id`) holds the name now. */
  /** Removes the schedule of that id; `matches` may refuse the one stored when the write runs by throwing (a stale If-Match). */
  async delete(orgId: string, name: string, id: string, matches: (stored: ScheduleRecord) => void = () => undefined): Promise<void> {
    const removed = await removeRecord<ScheduleRecord>(this.#root, this.#table, [orgId, name], (stored) => {
      if (stored.id !== id) return false;
      matches(stored);
      return true;
    });
    if (!removed) throw notFound(`Schedule "${name}"`, 'name');
  }
}
