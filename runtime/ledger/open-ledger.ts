// The LMDB ledger: the runtime's one LMDB environment and its named databases, behind the
// interface in ledger.ts. Keys are ordered arrays; a tenant's records start with the org id, so its
// data is one contiguous range. The exceptions are indexes ordered by time for pruning (the inbox's
// [ms, org, ...]), lookups by a secret's hash (api-keys), and the live log's floor sentinel.

import { join } from 'node:path';
import { open } from 'lmdb';
import { closeAfterFailedCommits, FlushWatch, lmdbFlushSource, SYNCED_RESTORE } from '../../hook-runner/flush-watch.ts';
import { privateDirectory, privateFilesIn } from '../../hook-runner/private-directory.ts';
import { openUnderLock } from '../../hook-runner/dir-lock.ts';
import { assertRoomToOpen } from '../../hook-runner/disk-full.ts';
import { lmdbFilesProblem } from '../../hook-runner/lmdb-files.ts';
import { TopLevelWrites } from './top-level-writes.ts';
import type { Ledger, LedgerRoot, LedgerTable, LedgerWrite } from './ledger.ts';

/**
 * Values are plain msgpack maps (msgpackr's `useRecords: false`, passed through by lmdb-js but not
 * in its typings). msgpackr's default records, without a shared structure table, embed each value's
 * shape in the value and build a decoder for that shape on every read: a measured 6 % of the
 * runtime's allocations. Records written that way by earlier versions still decode.
 */
export const PLAIN_MSGPACK: object = { useRecords: false };

/**
 * Opens `<dataDir>/runtime`, one process per directory: the lock is released by `close`, or at once
 * when opening fails. `onSyncFailed`: told once when a commit's own sync fails (FlushWatch).
 */
export function openLedger(dataDir: string, onSyncFailed?: (cause: string) => void): Ledger {
  const path = join(dataDir, 'runtime');
  privateDirectory(path);
  assertRoomToOpen(path);
  return openUnderLock(path, undefined, (unlock) => openLocked(path, unlock, onSyncFailed));
}

function openLocked(path: string, unlock: () => void, onSyncFailed: ((cause: string) => void) | undefined): Ledger {
  // lmdb-js would take the process down without a word on such files (lmdb-files.ts).
  const problem = lmdbFilesProblem(join(path, 'data.mdb'), join(path, 'lock.mdb'));
  if (problem !== undefined) throw new Error(problem);
  // overlappingSync + separateFlushed: a write's promise resolves at commit and carries a
  // `flushed` promise that resolves once the commit is on disk; see durably() in durable-write.ts.
  // SYNCED_RESTORE: flush-watch.ts says why.
  const root = open({ path, maxDbs: 64, overlappingSync: true, separateFlushed: true, compression: false, ...SYNCED_RESTORE, ...PLAIN_MSGPACK });
  privateFilesIn(path, ''); // LMDB's files and the lock: no key file lives here
  const flushes = new FlushWatch(lmdbFlushSource(root), onSyncFailed);
  // Only the writes that commit on their own are watched (flush-watch.ts): a failed commit's own
  // rejection is settled with theirs, so a full disk fails the requests, not the process, and flush
  // waits learn of it. lmdb-js answers a put inside a group's callback with one shared settled
  // promise; watching each added two promise reactions per record (ingest A/B: about +4 %).
  const writes = new TopLevelWrites((issue) => flushes.watch(issue()));
  const db = (name: string): LedgerTable => writes.table(root.openDB({ name, compression: false, ...PLAIN_MSGPACK }));
  // A transaction's callback runs in an LMDB child transaction, so a throw takes back what it wrote:
  // lmdb-js commits the writes an (async) transaction callback made before it threw.
  const ledgerRoot: LedgerRoot = {
    transaction: <T>(body: () => T): LedgerWrite<T> => writes.write(() => root.transaction(() => root.childTransaction(writes.within(body))) as LedgerWrite<T>),
    batch: (group) => writes.write(() => root.batch(writes.within(group))),
    get flushed() {
      return flushes.flushed();
    },
  };
  return {
    root: ledgerRoot,
    orgs: db('orgs'),
    apiKeys: db('api-keys'),
    apiKeysByOrg: db('api-keys-by-org'),
    sources: db('sources'),
    events: db('events'),
    eventsByTime: db('events-by-time'),
    inbox: db('inbox'),
    inboxByTime: db('inbox-by-time'),
    recordings: db('recordings'),
    openDatabase: db,
    close: async () => {
      await closeAfterFailedCommits(root, flushes);
      unlock();
    },
  };
}
