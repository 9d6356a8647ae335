// The one durability rule of the ledger: a write counts only once it is flushed to disk.
// Group commit comes from lmdb-js batching all writes of an event turn into one transaction.

import type { RootDatabase } from 'lmdb';

/**
 * Resolves with the write's result after its transaction is committed AND flushed to disk.
 * `root.flushed` resolves when the latest commit is synced, which includes this one; many
 * concurrent callers share that one fsync, which is the group commit that makes ingest fast.
 */
export async function durably<T>(root: RootDatabase, write: Promise<T>): Promise<T> {
  const result = await write;
  await root.flushed;
  return result;
}
