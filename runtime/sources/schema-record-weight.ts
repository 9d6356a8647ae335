// How much of a record cache's room a record that declares event schemas (a source, a device)
// takes: its stored bytes, read without decoding them. Decoded, schemas take several times their
// stored size in heap (a record with ~1 MiB of schemas held 7.3 MiB), so each store caches at most
// 8 MiB of such records (~60 MiB of heap); a record above that is decoded from the ledger each time.

import type { LedgerTable } from '../ledger/ledger.ts';
import type { RecordWeight } from '../ledger/record-cache.ts';

const SCHEMA_RECORDS_CACHED_BYTES = 8 * 1024 * 1024;

/** The weight of the records `table` holds under [orgId, name]. */
export const schemaRecordWeight = (table: LedgerTable): RecordWeight => ({
  weigh: (orgId, name) => table.getBinaryFast([orgId, name])?.length ?? 0, // `length`: lmdb-js's buffer has the shared buffer's byteLength
  max: SCHEMA_RECORDS_CACHED_BYTES,
});
