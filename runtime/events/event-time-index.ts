// What the events-by-time index holds per entry: the event's type and source, so that a filtered
// event list skips events that do not match without reading their records (an event's record holds
// its payload, up to the ingest body cap; decoding 20,000 of them to find none stalled every tenant).
// Entries written before the index held them are null: those events are read to be filtered
// (entryMayMatch in ledger/page-by-time.ts).

import type { StoredEvent } from './event-record.ts';

/** [type, source]. */
export type EventTimeEntry = readonly [string, string];

export const eventTimeEntryOf = (event: Pick<StoredEvent, 'type' | 'source'>): EventTimeEntry => [event.type, event.source];
