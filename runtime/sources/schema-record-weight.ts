// How much of a record cache's room a record that declares event schemas (a source, a device)
// takes: the JSON length of its schemas. Decoded, a schema takes about 7 times its JSON length in
// heap (a record with ~1 MiB of schemas held 7.3 MiB), so each store caches at most 8 Mi characters
// of them (~60 MiB of heap); a record above that is read from the ledger each time.

import type { RecordWeight } from '../ledger/record-cache.ts';

export const SCHEMA_RECORD_WEIGHT: RecordWeight<{ readonly event_types: Readonly<Record<string, object>> }> = {
  // Records stored before schemas existed have no event_types.
  weigh: (record) => JSON.stringify(record.event_types ?? {}).length,
  max: 8 * 1024 * 1024,
};
