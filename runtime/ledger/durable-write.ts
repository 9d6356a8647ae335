// The one durability rule of the ledger: a write counts only once it is flushed to disk.
// Group commit comes from lmdb-js batching all writes of an event turn into one transaction.

import type { LedgerRoot, LedgerWrite } from './ledger.ts';

/**
 * Resolves with the write's result after its transaction is committed AND flushed to disk.
 * A write queued with `separateFlushed` carries the flush of its own batch: waiting for that one,
 * not for `root.flushed` read after the commit (by then possibly a later batch), keeps each caller
 * to one fsync cycle. Writes without it (transactions) wait for `root.flushed`, which includes
 * theirs. Many concurrent callers share one fsync: the group commit that makes ingest fast.
 */
export async function durably<T>(root: LedgerRoot, write: LedgerWrite<T>): Promise<T> {
  const ownFlush = write.flushed;
  const result = await write;
  await (ownFlush ?? root.flushed);
  return result;
}
