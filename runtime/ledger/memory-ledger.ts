// The in-memory ledger: the interface of ledger.ts without LMDB, for tests and as the proof that the
// interface stands on its own. Keys are ordered exactly as LMDB orders them (ordered-binary) and
// values are msgpack copies (msgpackr, as the LMDB ledger stores them), so a value read back is
// never the object that was written. Writes commit in order on a queue, after the code that made
// them (as LMDB commits on its write thread), and a transaction before any batch of a later turn
// (LMDB may commit such a batch first when its write thread is busy: ledger.ts says not to rely on it).
// Nothing survives the process; a committed write counts as flushed.

import { Packr } from 'msgpackr';
import { fromBufferKey, toBufferKey } from 'ordered-binary';
import type { Ledger, LedgerKey, LedgerRange, LedgerRoot, LedgerTable, LedgerWrite } from './ledger.ts';

/** `copyBuffers`, as lmdb-js sets it: a binary value read back is a copy, not a view of the stored bytes. */
const packr = new Packr({ useRecords: false, copyBuffers: true });

/** Replaced, never changed, on a write: a range read keeps the values it started with, as LMDB's. */
interface Entry {
  readonly bytes: Buffer;
  readonly value: Buffer;
}

/** lmdb-js refuses longer keys (its default build's maximum key size). */
const MAX_KEY_BYTES = 1978;

/** Shared by all tables: the commit queue, and where a write goes while a callback runs. */
interface WriteScope {
  /** Writes held until the callback returns (batch, ifNoExists). */
  pending: Array<() => void> | undefined;
  /** A transaction body is running (on the queue): its writes apply at once, so it reads them back. */
  inTransaction: boolean;
  /** While a transaction body runs: how to take back each write it made, should it throw. */
  undo: Array<() => void> | undefined;
  /** Every commit waits for the one before it. */
  queue: Promise<unknown>;
}

/** A commit's promise with its `flushed`: here a commit is on "disk" once it ran, failed or not. */
const withFlush = <T>(result: Promise<T>): LedgerWrite<T> => Object.assign(result, { flushed: result.then(() => undefined, () => undefined) });

/**
 * Queues `work` as the next commit; resolves with its result once it ran. Inside a transaction
 * body the work is part of that transaction and runs at once, as LMDB applies it.
 */
function commitLater<T>(scope: WriteScope, work: () => T): LedgerWrite<T> {
  if (scope.inTransaction) return withFlush(Promise.resolve(work()));
  const result = scope.queue.then(work);
  scope.queue = result.catch(() => undefined);
  return withFlush(result);
}

function keyBytes(key: LedgerKey): Buffer {
  const bytes = Buffer.from(toBufferKey(key));
  if (bytes.length > MAX_KEY_BYTES) throw new Error(`Key size is larger than the maximum key size (${MAX_KEY_BYTES})`);
  return bytes;
}
/** A fresh key each time, as LMDB returns: a caller may keep or change it. */
const keyOf = (entry: Entry): LedgerKey => fromBufferKey(entry.bytes) as LedgerKey;

class MemoryTable implements LedgerTable {
  readonly #entries: Entry[] = [];
  readonly #scope: WriteScope;

  constructor(scope: WriteScope) {
    this.#scope = scope;
  }

  get(key: LedgerKey): unknown {
    const found = this.#find(keyBytes(key));
    return found.entry === undefined ? undefined : packr.unpack(found.entry.value);
  }

  /** A copy: LMDB's is a buffer reused by the next read, and changing it never changes what is stored. */
  getBinaryFast(key: LedgerKey): Uint8Array | undefined {
    const value = this.#find(keyBytes(key)).entry?.value;
    return value === undefined ? undefined : Uint8Array.prototype.slice.call(value);
  }

  doesExist(key: LedgerKey): boolean {
    return this.#find(keyBytes(key)).entry !== undefined;
  }

  *getRange(range: LedgerRange): Iterable<{ key: LedgerKey; value: unknown }> {
    for (const entry of this.#select(range)) yield { key: keyOf(entry), value: packr.unpack(entry.value) };
  }

  *getKeys(range: LedgerRange): Iterable<LedgerKey> {
    for (const entry of this.#select(range)) yield keyOf(entry);
  }

  getKeysCount(range: LedgerRange): number {
    // As lmdb-js: the count ignores `limit`.
    const { limit: _ignored, ...unlimited } = range;
    return this.#select(unlimited).length;
  }

  put(key: LedgerKey, value: unknown): LedgerWrite<boolean> {
    const bytes = keyBytes(key);
    const packed = Buffer.from(packr.pack(value));
    return this.#write(() => this.#set(bytes, packed));
  }

  remove(key: LedgerKey): LedgerWrite<boolean> {
    const bytes = keyBytes(key);
    return this.#write(() => this.#delete(bytes));
  }

  ifNoExists(key: LedgerKey, writes: () => void): LedgerWrite<boolean> {
    // The condition is checked when the write commits, as LMDB checks it on its write thread.
    return holdWrites(this.#scope, writes, (held) =>
      commitLater(this.#scope, () => {
        if (this.doesExist(key)) return false;
        applyAll(held);
        return true;
      }),
    );
  }

  #write(change: () => void): LedgerWrite<boolean> {
    const scope = this.#scope;
    if (scope.pending !== undefined) {
      scope.pending.push(change);
      // The callback's own commit is what callers await.
      return withFlush(Promise.resolve(true));
    }
    return commitLater(scope, () => {
      change();
      return true;
    });
  }

  #set(bytes: Buffer, value: Buffer): void {
    const found = this.#find(bytes);
    this.#keepUndo(bytes, found.entry);
    if (found.entry !== undefined) this.#entries[found.index] = { bytes, value };
    else this.#entries.splice(found.index, 0, { bytes, value });
  }

  #delete(bytes: Buffer): void {
    const found = this.#find(bytes);
    this.#keepUndo(bytes, found.entry);
    if (found.entry !== undefined) this.#entries.splice(found.index, 1);
  }

  /** Inside a transaction body: remembers how to put back what `bytes` held before this write. */
  #keepUndo(bytes: Buffer, previous: Entry | undefined): void {
    this.#scope.undo?.push(() => (previous === undefined ? this.#delete(bytes) : this.#set(bytes, previous.value)));
  }

  /** The entry with exactly these key bytes, or where it would be inserted. */
  #find(bytes: Buffer): { index: number; entry: Entry | undefined } {
    let low = 0;
    let high = this.#entries.length;
    while (low < high) {
      const middle = (low + high) >>> 1;
      if (Buffer.compare((this.#entries[middle] as Entry).bytes, bytes) < 0) low = middle + 1;
      else high = middle;
    }
    const entry = this.#entries[low];
    return { index: low, entry: entry !== undefined && entry.bytes.equals(bytes) ? entry : undefined };
  }

  /**
   * `start` included, `end` excluded; with `reverse`, `start` is the upper bound. A snapshot: keys
   * and values as they were when the read began (LMDB's outside a transaction; inside one, LMDB
   * would see the transaction's later writes, which the contract leaves unspecified).
   */
  #select(range: LedgerRange): Entry[] {
    // Index bounds by binary search: each bound key is encoded once.
    const firstAtOrAbove = (bound: LedgerKey): number => this.#find(keyBytes(bound)).index;
    const firstAbove = (bound: LedgerKey): number => {
      const found = this.#find(keyBytes(bound));
      return found.entry === undefined ? found.index : found.index + 1;
    };
    const { start, end } = range;
    const selected = range.reverse === true
      ? this.#entries.slice(end === undefined ? 0 : firstAbove(end), start === undefined ? undefined : firstAbove(start)).reverse()
      : this.#entries.slice(start === undefined ? 0 : firstAtOrAbove(start), end === undefined ? undefined : firstAtOrAbove(end));
    return range.limit === undefined ? selected : selected.slice(0, range.limit);
  }

}

/**
 * Runs `writes` with every table write held back, then hands the held writes to `commit` and
 * returns what it returns. As with LMDB's batches, a throw does not take back what the callback
 * wrote before it: those writes still commit, and the throw goes on.
 */
function holdWrites<T>(scope: WriteScope, writes: () => void, commit: (held: ReadonlyArray<() => void>) => T): T {
  const outer = scope.pending;
  const held: Array<() => void> = [];
  scope.pending = held;
  let committed: T;
  try {
    writes();
  } finally {
    scope.pending = outer;
    committed = commit(held);
  }
  return committed;
}

const applyAll = (held: ReadonlyArray<() => void>): void => {
  for (const write of held) write();
};

function createRoot(scope: WriteScope): LedgerRoot {
  return {
    transaction<T>(body: () => T): LedgerWrite<T> {
      // Later and one at a time, as LMDB runs transaction callbacks: after the writes and batches
      // of the current event turn, even those made after this call (lmdb-js commits those first).
      const turnEnded = new Promise<void>((resolve) => setImmediate(resolve));
      // A throw takes back the body's writes, newest first, as LMDB's child transaction does.
      const run = (): T => {
        scope.inTransaction = true;
        const undo: Array<() => void> = [];
        scope.undo = undo;
        try {
          return body();
        } catch (error) {
          scope.undo = undefined;
          for (const takeBack of undo.reverse()) takeBack();
          throw error;
        } finally {
          scope.inTransaction = false;
          scope.undo = undefined;
        }
      };
      return withFlush(turnEnded.then(() => commitLater(scope, run)));
    },
    batch(writes: () => void): LedgerWrite<boolean> {
      return holdWrites(scope, writes, (held) =>
        commitLater(scope, () => {
          applyAll(held);
          return true;
        }),
      );
    },
    /** Everything queued so far has committed. */
    get flushed(): PromiseLike<unknown> {
      return scope.queue;
    },
  };
}

export function openMemoryLedger(): Ledger {
  const scope: WriteScope = { pending: undefined, inTransaction: false, undo: undefined, queue: Promise.resolve() };
  const tables = new Map<string, MemoryTable>();
  const table = (name: string): LedgerTable => {
    let found = tables.get(name);
    if (found === undefined) {
      found = new MemoryTable(scope);
      tables.set(name, found);
    }
    return found;
  };
  return {
    root: createRoot(scope),
    orgs: table('orgs'),
    apiKeys: table('api-keys'),
    apiKeysByOrg: table('api-keys-by-org'),
    sources: table('sources'),
    events: table('events'),
    eventsByTime: table('events-by-time'),
    inbox: table('inbox'),
    inboxByTime: table('inbox-by-time'),
    recordings: table('recordings'),
    openDatabase: table,
    close: async () => undefined,
  };
}
