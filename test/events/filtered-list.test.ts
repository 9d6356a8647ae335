// A filtered event list reads only the records of events that match: the events-by-time index
// holds each event's type and source, so events of other types are skipped without decoding their
// records (each holds its payload, up to the body cap). Entries from before the index held them
// are read and filtered as before. On both ledgers, through the real EventStore.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { generateEventId, type StoredEvent } from '../../runtime/events/event-record.ts';
import { EventStore } from '../../runtime/events/event-store.ts';
import { Inbox } from '../../runtime/inbox/inbox.ts';
import type { Ledger } from '../../runtime/ledger/ledger.ts';
import { LEDGER_KINDS } from '../helpers/ledgers.ts';

const AT = Date.UTC(2026, 11, 2, 12);

const eventOf = (type: string, source: string, n: number): StoredEvent => {
  const id = generateEventId(AT + n);
  return {
    id, org_id: 'org_a', type, payload: { n, blob: 'x'.repeat(4096) }, environment: 'production', source, provider_event_id: id,
    received_at: new Date(AT + n).toISOString(), received_at_ms: AT + n, correlation_id: id, causation_id: null, depth: 0, replay_skip_side_effects: false, replay_workflow_ids: null,
  };
};

/** Counts reads of event records while `body` runs. */
function countingRecordReads<T>(ledger: Ledger, body: () => T): { result: T; reads: number } {
  const table = ledger.events as { get(key: unknown): unknown };
  const original = table.get;
  let reads = 0;
  table.get = function (this: unknown, key: unknown) {
    reads++;
    return original.call(this, key);
  };
  try {
    return { result: body(), reads };
  } finally {
    table.get = original;
  }
}

for (const kind of LEDGER_KINDS) {
  test(`${kind.name}: a type or source filter reads only matching events' records, and older index entries are still filtered`, async () => {
    const { ledger, close } = kind.open();
    try {
      const store = new EventStore(ledger, new Inbox(ledger, 60_000));
      const written: StoredEvent[] = [];
      for (let n = 0; n < 60; n++) {
        const event = n % 20 === 7 ? eventOf('order.refunded', 'shop', n) : eventOf('order.paid', n % 2 === 0 ? 'shop' : 'till', n);
        await store.store({ event, recording: null, claim: null });
        written.push(event);
      }
      // Two events stored before the index held type and source: their entries are null.
      for (const n of [100, 101]) {
        const event = eventOf(n === 100 ? 'order.refunded' : 'order.paid', 'shop', n);
        await store.store({ event, recording: null, claim: null });
        await ledger.eventsByTime.put(['org_a', 'production', event.received_at_ms, event.id], null);
        written.push(event);
      }
      const newestFirst = [...written].reverse();

      const refunds = countingRecordReads(ledger, () => store.list('org_a', 'production', { type: 'order.refunded', limit: 100 }));
      const expectedRefunds = newestFirst.filter((event) => event.type === 'order.refunded');
      assert.deepEqual(refunds.result.events.map((event) => event.id), expectedRefunds.map((event) => event.id));
      assert.equal(refunds.result.nextCursor, null);
      // The 3 newer refunds are read, and the 2 older entries, which cannot be told apart without their record.
      assert.equal(refunds.reads, 3 + 2, 'records read for a type filter');

      const till = countingRecordReads(ledger, () => store.list('org_a', 'production', { source: 'till', limit: 100 }));
      assert.deepEqual(till.result.events.map((event) => event.id), newestFirst.filter((event) => event.source === 'till').map((event) => event.id));
      assert.equal(till.reads, 27 + 2, 'records read for a source filter');

      const none = countingRecordReads(ledger, () => store.list('org_a', 'production', { type: 'order.shipped', limit: 100 }));
      assert.deepEqual(none.result.events, []);
      assert.equal(none.reads, 2, 'only the older entries are read when nothing matches');

      const all = store.list('org_a', 'production', { limit: 100 });
      assert.deepEqual(all.events.map((event) => event.id), newestFirst.map((event) => event.id));
    } finally {
      await close();
    }
  });
}
