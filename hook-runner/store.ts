// The hook-runner's LMDB environment (<dataDir>/hook-runner/runner.mdb) and its databases.
// Durability rule: every write path awaits `durable()`, i.e. commit *and* fsync, before it answers.
import { existsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { open, type Database, type RootDatabase } from 'lmdb';
import { closeAfterFailedCommits, FlushWatch, lmdbFlushSource, SYNCED_RESTORE } from './flush-watch.ts';
import type { ForgottenMark } from './forgotten-orgs.ts';
import type { InvocationOutcome } from './invocation-outcome.ts';
import { privateDirectory, privateFilesIn } from './private-directory.ts';
import { openUnderLock } from './dir-lock.ts';
import { assertRoomToOpen } from './disk-full.ts';
import { lmdbFilesProblem } from './lmdb-files.ts';
import { RunnerConfigError } from './runner-error.ts';
import { assertRunnerStoreFormatKnown, openStoreFormatTable } from './store-format.ts';

/**
 * A completed invocation, kept so that the same idempotency key replays instead of re-running. Only a
 * successful output is written; earlier releases also wrote traps and rejections, which readers ignore.
 */
export interface InvocationRecord {
  readonly actionId: string;
  readonly digest: string;
  /**
   * What else the guest was given besides the run's payload (its permissions and the revision of
   * the secrets they name; invocation-ledger.ts): another value runs the guest again. Absent in
   * records of earlier releases, which then match on the digest alone.
   */
  readonly inputs?: string;
  /** Decimal uint64: the fence of the attempt that executed. */
  readonly fence: string;
  readonly outcome: InvocationOutcome;
  readonly fuelUsed: number;
  readonly completedAtMs: number;
}

export type FenceKey = [org: string, runId: string];
export type InvocationKey = [org: string, idempotencyKey: string];
/** When a record was written, first, so pruning walks the oldest ones in key order. */
export type FenceTimeKey = [atMs: number, org: string, runId: string];
export type InvocationTimeKey = [atMs: number, org: string, idempotencyKey: string];
export type SecretRecordKey = [org: string, actionId: string, key: string];
/** A module and an org that uploaded or called it ('' for uploads that named no org, and for every module stored before users were recorded). */
export type ModuleUserKey = [digest: string, org: string];

export interface RunnerStore {
  /** digest -> raw module bytes; content-addressed, shared by all tenants. */
  readonly modules: Database<Buffer, string>;
  /**
   * (digest, org) -> null: the orgs that uploaded or called each module (module-registry.ts), so
   * that forgetting an org (forgotten-orgs.ts) removes the bytes no other org uses.
   */
  readonly moduleUsers: Database<null, ModuleUserKey>;
  /** (org, action, key) -> sealed secret (see vault.ts); never plaintext. */
  readonly secrets: Database<Buffer, SecretRecordKey>;
  /**
   * (org, action, key) -> the mark of the secret's value in invocation records (vault.ts revision):
   * the sha256 of the sealed value it belongs to, then random bytes per write, so sealing it again
   * under a new master key keeps it. A secret written by an earlier release has none (or one that no
   * longer belongs) until a rotation gives it its sealed bytes as they were.
   */
  readonly secretRevisions: Database<Buffer, SecretRecordKey>;
  /** (org, run) -> highest fence seen, as a decimal string (uint64 does not fit a JS number). */
  readonly fences: Database<string, FenceKey>;
  /** (org, idempotency key) -> completed invocation (its output). */
  readonly invocations: Database<InvocationRecord, InvocationKey>;
  /**
   * (written at, org, run) -> the fence written then, as a decimal string; for pruning. This table and
   * the next start with the time, not the org (DESIGN 7): the prune reads what is old across every
   * org in one range; forgetting an org (forgotten-orgs.ts) walks them whole instead.
   */
  readonly fencesByTime: Database<string, FenceTimeKey>;
  /** (completed at, org, idempotency key) -> null; for pruning (time first, as the fences'). */
  readonly invocationsByTime: Database<null, InvocationTimeKey>;
  /** org -> when it was forgotten, and whether its records are all removed (forgotten-orgs.ts): a deleted org, whose calls are refused for good. */
  readonly forgottenOrgs: Database<ForgottenMark, string>;
  /** 'version' -> the layout the store was last stamped with (store-format.ts). */
  readonly dataFormat: Database<number, string>;
  /** Resolves once `write` has committed and that commit is flushed to disk. */
  durable<T>(write: Promise<T>): Promise<T>;
  /** Resolves once every write committed so far is flushed (a read of committed data is then durable too). */
  flushed(): Promise<void>;
  close(): Promise<void>;
}

export const runnerStoreDir = (dataDir: string): string => join(dataDir, 'hook-runner');

/**
 * A file every store opened by a release that reads SLUICE_DATA_DIR holds: a store without it in
 * ./.sluice was kept there by an earlier standalone runner that ignored the variable (command.ts).
 */
const READS_DATA_DIR_MARK = 'reads-sluice-data-dir';

/** Whether `dir` holds a runner store no release reading SLUICE_DATA_DIR has opened. */
export const isStoreOfEarlierRelease = (dir: string): boolean => existsSync(dir) && !existsSync(join(dir, READS_DATA_DIR_MARK));

/**
 * Opens the store, one process per directory: the lock is taken before anything is written (a
 * refused second runner leaves the store as it found it) and released by `close`, or at once when
 * opening fails. A store in a newer layout than this release knows is refused (RunnerConfigError,
 * store-format.ts) before anything is read or written; the caller stamps its own layout once open.
 * `onSyncFailed`: told once when a commit's own sync fails (flush-watch.ts).
 */
export function openRunnerStore(dataDir: string, onSyncFailed?: (cause: string) => void): RunnerStore {
  const dir = runnerStoreDir(dataDir);
  privateDirectory(dir);
  assertRoomToOpen(dir);
  return openUnderLock(dir, 'hook-runner', (unlock) => openLocked(dir, unlock, onSyncFailed));
}

function openLocked(dir: string, unlock: () => void, onSyncFailed: ((cause: string) => void) | undefined): RunnerStore {
  // Before the environment is made: a crash in between must not leave a new store looking like an
  // earlier release's (command.ts). A store a newer release wrote has it already.
  if (!existsSync(join(dir, READS_DATA_DIR_MARK))) writeFileSync(join(dir, READS_DATA_DIR_MARK), '', { mode: 0o600 });
  // lmdb-js would take the process down without a word on such files; no restart fixes them.
  const problem = lmdbFilesProblem(join(dir, 'runner.mdb'), join(dir, 'runner.mdb-lock'));
  if (problem !== undefined) throw new RunnerConfigError(problem);
  // As the runtime's ledger: commits resolve early and carry their own batch's flush, which
  // `durable` waits for, so concurrent invocations share one fsync (group commit, DESIGN.md §7).
  // SYNCED_RESTORE: flush-watch.ts says why.
  const root: RootDatabase = open({ path: join(dir, 'runner.mdb'), maxDbs: 16, overlappingSync: true, separateFlushed: true, ...SYNCED_RESTORE });
  try {
    // First, before a database is opened (opening creates it): a refused store is left as the
    // newer release wrote it.
    assertRunnerStoreFormatKnown(root, dir);
  } catch (error) {
    // Nothing was written: the environment closes at once (openUnderLock then gives the lock back).
    void root.close();
    throw error;
  }
  privateFilesIn(dir, 'runner.mdb');
  const modules = root.openDB<Buffer, string>({ name: 'modules', encoding: 'binary' });
  const moduleUsers = root.openDB<null, ModuleUserKey>({ name: 'module-users', encoding: 'msgpack' });
  const secrets = root.openDB<Buffer, SecretRecordKey>({ name: 'secrets', encoding: 'binary' });
  const secretRevisions = root.openDB<Buffer, SecretRecordKey>({ name: 'secret-revisions', encoding: 'binary' });
  const fences = root.openDB<string, FenceKey>({ name: 'fences', encoding: 'string' });
  const invocations = root.openDB<InvocationRecord, InvocationKey>({ name: 'invocations', encoding: 'msgpack' });
  const fencesByTime = root.openDB<string, FenceTimeKey>({ name: 'fences-by-time', encoding: 'string' });
  const invocationsByTime = root.openDB<null, InvocationTimeKey>({ name: 'invocations-by-time', encoding: 'msgpack' });
  const forgottenOrgs = root.openDB<ForgottenMark, string>({ name: 'forgotten-orgs', encoding: 'msgpack' });
  const dataFormat = openStoreFormatTable(root);
  // Every write goes through `durable`, which shows it to this watch (flush-watch.ts: a failed commit's flush never settles).
  const flushes = new FlushWatch(lmdbFlushSource(root), onSyncFailed);

  return {
    modules,
    moduleUsers,
    secrets,
    secretRevisions,
    fences,
    invocations,
    fencesByTime,
    invocationsByTime,
    forgottenOrgs,
    dataFormat,
    // The runtime's ledger keeps the same rule (runtime/ledger/durable-write.ts); the runner does not
    // import runtime code, so the four lines live on both sides of the process boundary.
    async durable<T>(write: Promise<T>): Promise<T> {
      // Watched (flush-watch.ts): a failed commit's own rejection is settled with the write's, and
      // the write's own flush is waited for so that a failed commit cannot leave it hanging.
      const watched = flushes.watch(write);
      const ownFlush = (watched as Promise<T> & { flushed?: PromiseLike<unknown> }).flushed;
      const result = await watched;
      await (ownFlush ?? flushes.flushed());
      return result;
    },
    async flushed(): Promise<void> {
      await flushes.flushed();
    },
    async close(): Promise<void> {
      await closeAfterFailedCommits(root, flushes);
      unlock();
    },
  };
}
