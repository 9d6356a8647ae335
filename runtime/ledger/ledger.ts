// The ledger's interface: everything the runtime asks of its storage, small enough for a second
// implementation to pass the same contract tests (test/ledger). LMDB implements it in
// open-ledger.ts, memory in memory-ledger.ts; a PostgreSQL one would start from here.
//
// Semantics both honour (test/ledger/ledger-contract.test.ts):
// - Keys are ordered arrays (lmdb-js/ordered-binary order), at most 1978 bytes encoded. Ranges
//   include `start` and exclude `end` (swapped with `reverse`). `getKeysCount` ignores `limit`, and
//   lmdb-js writes into the range object it is given: pass a fresh one.
// - Reads are synchronous, see committed writes and return copies; a range read outside a
//   transaction is a snapshot. A range read inside a transaction that writes to it is unspecified.
// - `batch` and `ifNoExists` run their callback at once and commit its writes together
//   (`ifNoExists` only when the key is absent at commit). `transaction` runs its callback later,
//   one at a time, after the writes and batches made in the same event turn (even after it), and
//   resolves with the callback's result; writes made inside it belong to it. A batch made in a
//   later turn may commit before a transaction still waiting for its turn (LMDB does so when its
//   write thread is busy; the memory ledger never does): code must not rely on either order.
// - A throw inside a `transaction` callback rejects it and takes back every write it made. A throw
//   inside a `batch` or `ifNoExists` callback does not take back the writes made before it, so
//   those callbacks must not throw after writing. Whether a write is visible before its promise
//   resolves is unspecified.
// - A `batch`, `ifNoExists` or `transaction` callback makes puts and removes only, never another
//   group: lmdb-js would commit that one on its own, unwatched for failure (open-ledger.ts) and
//   unchecked against the disk floor (floored-ledger.ts).
// - A write counts only once durable (see durable-write.ts).

/** One part of an ordered key; every runtime key is an array of these starting with the org id. */
export type LedgerKeyPart = string | number | boolean;
export type LedgerKey = LedgerKeyPart | LedgerKeyPart[];

export interface LedgerRange {
  readonly start?: LedgerKey;
  readonly end?: LedgerKey;
  readonly reverse?: boolean;
  readonly limit?: number;
}

/** A write's promise: resolves at commit; `flushed`, when present, once that commit is on disk. */
export type LedgerWrite<T> = Promise<T> & { readonly flushed?: PromiseLike<unknown> };

/** One named table of ordered keys to structured values (plain objects, arrays, strings, numbers, null). */
export interface LedgerTable {
  /** The value as stored, or undefined; each store narrows it to its record type. */
  get(key: LedgerKey): unknown;
  doesExist(key: LedgerKey): boolean;
  /**
   * The value's stored bytes, or undefined, without decoding them (valid only until the next read):
   * what a list weighs a record by before deciding to read it whole. Its size is `length`: under
   * lmdb-js, `byteLength` is that of the shared buffer the bytes sit in.
   */
  getBinaryFast(key: LedgerKey): Uint8Array | undefined;
  getRange(range: LedgerRange): Iterable<{ key: LedgerKey; value: unknown }>;
  getKeys(range: LedgerRange): Iterable<LedgerKey>;
  getKeysCount(range: LedgerRange): number;
  put(key: LedgerKey, value: unknown): LedgerWrite<boolean>;
  remove(key: LedgerKey): LedgerWrite<boolean>;
  /** Runs `writes` now; they commit only if `key` is still absent then. Resolves whether they did. */
  ifNoExists(key: LedgerKey, writes: () => void): LedgerWrite<boolean>;
}

/** The environment all tables share: atomic groups of writes and the flush to wait for. */
export interface LedgerRoot {
  transaction<T>(body: () => T): LedgerWrite<T>;
  batch(writes: () => void): LedgerWrite<boolean>;
  /** Resolves once every write committed so far is on disk. */
  readonly flushed: PromiseLike<unknown>;
}

/** The runtime's tables. Keys and values per table are documented where each is declared. */
export interface Ledger {
  readonly root: LedgerRoot;
  /** [orgId] -> Organization */
  readonly orgs: LedgerTable;
  /** [keyHash] -> ApiKeyRecord (lookup by presented key) and [orgId, keyId] -> keyHash (listing) */
  readonly apiKeys: LedgerTable;
  readonly apiKeysByOrg: LedgerTable;
  /** [orgId, sourceName] -> SourceRecord */
  readonly sources: LedgerTable;
  /** [orgId, eventId] -> StoredEvent */
  readonly events: LedgerTable;
  /** [orgId, environment, receivedAtMs, eventId] -> [type, source] (time-ordered paging; event-time-index.ts) */
  readonly eventsByTime: LedgerTable;
  /** [orgId, sourceName, providerEventId] -> InboxClaim */
  readonly inbox: LedgerTable;
  /** [claimedAtMs, orgId, sourceName, providerEventId] -> null (pruning order) */
  readonly inboxByTime: LedgerTable;
  /** [orgId, eventId] -> Recording */
  readonly recordings: LedgerTable;
  /** Opens a further named table (runs, workflows, ... add theirs here). */
  openDatabase(name: string): LedgerTable;
  close(): Promise<void>;
}
