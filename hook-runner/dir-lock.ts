// One process per store directory: a runtime's ledger, or a hook-runner's store. LMDB lets many
// processes share an environment, but a second runtime would run boot recovery over the first
// one's steps in flight (sending them again under a higher fence), and each keeps its own sequence
// counters and caches; a second hook-runner would run a guest the first is running under the same
// invocation key, and each checks fences against its own reading. The lock is a file naming its
// owner (pid, host, boot and the process's start time, so a reused pid or a reboot is seen as
// stale), linked into place whole. A stale one is removed by one process at a time, the one holding
// the takeover file (`owner.pid.takeover`, linked the same way), and only while it is still the
// lock judged stale; then each tries to link its own again, and one gets it. (Renaming the stale
// lock away, unguarded, let a process move a fresh lock aside and a third link its own meanwhile:
// two processes held the directory.) A killed owner still exiting is waited for; once it is a
// zombie (its parent has not reaped it yet, which a supervisor may never do) it holds nothing and
// its lock is stale.

import { randomBytes } from 'node:crypto';
import { linkSync, readFileSync, renameSync, unlinkSync } from 'node:fs';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { createLinked } from './linked-file.ts';

/** Thrown when another running process holds the directory. */
export class DataDirInUseError extends Error {
  override readonly name = 'DataDirInUseError';
}

interface Owner {
  readonly pid: number;
  readonly host?: string;
  readonly boot?: string;
  readonly start?: string;
}

function readOr(path: string, fallback: string): string {
  try {
    return readFileSync(path, 'utf8');
  } catch {
    return fallback;
  }
}

/** The file's text, or undefined when there is no such file (an empty one is ''). */
function readIfThere(path: string): string | undefined {
  try {
    return readFileSync(path, 'utf8');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw error;
  }
}

const bootId = (): string => readOr('/proc/sys/kernel/random/boot_id', '').trim();

/** `/proc/<pid>/stat`'s fields from field 3 (the state) on; empty when there is no such process. */
function statOf(pid: number): string[] {
  const stat = readOr(`/proc/${pid}/stat`, '');
  // The command name (field 2) may hold spaces and parentheses: count fields after its last ')'.
  return stat === '' ? [] : stat.slice(stat.lastIndexOf(')') + 2).split(' ');
}

/** The process's start time in clock ticks since boot (field 22), or undefined. */
const startTimeOf = (pid: number): string | undefined => statOf(pid)[19];

/** The kernel's PF_EXITING flag (field 9): the process was killed or is exiting. */
const PF_EXITING = 0x4;
const EXIT_WAIT_MS = 10_000;

/** Zombie or dead (from its stat fields): it has released its files and memory, whatever its
 * parent does. (Without /proc, as on macOS, a process that answers a signal counts as running.) */
const exitedIn = (stat: readonly string[]): boolean => ['Z', 'X', 'x'].includes(stat[0] ?? '');
const hasExited = (pid: number): boolean => exitedIn(statOf(pid));

/** Blocks for `ms` (taking the lock is synchronous). */
const sleep = (ms: number): void => void Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);

/** Waits (blocking, as taking the lock is) up to EXIT_WAIT_MS for an exiting process to finish. */
function waitWhileExiting(pid: number): void {
  // On the monotonic clock: a wall clock set back meanwhile would stretch the wait by as much.
  const deadline = performance.now() + EXIT_WAIT_MS;
  for (let stat = statOf(pid); performance.now() < deadline && !exitedIn(stat) && (Number(stat[6]) & PF_EXITING) !== 0; stat = statOf(pid)) sleep(20);
}

function isRunning(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    // EPERM: it runs, as another user.
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** Parses a lock's text: this format, or an earlier one holding only the pid. */
function parseOwner(text: string): Owner | undefined {
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    return undefined;
  }
  const owner: Partial<Owner> = typeof parsed === 'number' ? { pid: parsed } : ((parsed ?? {}) as Partial<Owner>);
  return Number.isInteger(owner.pid) && (owner.pid as number) > 0 ? (owner as Owner) : undefined;
}

function self(): Owner {
  const start = startTimeOf(process.pid);
  return { pid: process.pid, host: hostname(), boot: bootId(), ...(start === undefined ? {} : { start }) };
}

/** `held`: a live process owns it; `mine`: this process does; `stale`: nobody does any more. */
function stateOf(owner: Owner | undefined): 'held' | 'mine' | 'stale' {
  if (owner === undefined) return 'stale';
  // Another host (a shared volume): its process cannot be checked from here.
  if (owner.host !== undefined && owner.host !== hostname()) return 'held';
  if (owner.boot !== undefined && owner.boot !== bootId()) return 'stale';
  if (!isRunning(owner.pid)) return 'stale';
  if (owner.start !== undefined && owner.start !== startTimeOf(owner.pid)) return 'stale';
  if (owner.pid === process.pid) return 'mine';
  waitWhileExiting(owner.pid);
  return !isRunning(owner.pid) || hasExited(owner.pid) ? 'stale' : 'held';
}

/**
 * For a lock held from another host: how to free it when that host no longer runs anything on the
 * dir (a container replaced after a kill comes back under a new hostname, and its lock cannot be
 * checked from here).
 */
const elsewhere = (owner: Owner | undefined, path: string): string =>
  owner?.host === undefined || owner.host === hostname() ? '' : ` Its process cannot be checked from this host; if nothing on ${owner.host} uses the directory any more (a container replaced after a kill comes back under another hostname), remove ${path} and start again.`;

const describeOwner = (owner: Owner | undefined): string =>
  owner === undefined ? 'another process' : `process ${owner.pid}${owner.host === undefined || owner.host === hostname() ? '' : ` on ${owner.host}`}`;

/**
 * Opens what lives in `dir` under its lock: `open` is handed the release (for its close), and a
 * failing `open` releases it at once, so the next start finds the directory free.
 */
export function openUnderLock<T>(dir: string, what: string | undefined, open: (unlock: () => void) => T): T {
  const unlock = lockDataDir(dir, what);
  try {
    return open(unlock);
  } catch (error) {
    unlock();
    throw error;
  }
}

/**
 * Takes `dir`'s lock for this process, or throws DataDirInUseError naming the process that holds
 * it (and that `what`, "Sluice runtime" or "hook-runner", runs one per directory). Returns the
 * release (call on close). A second lock of the same directory in the same process is allowed, and
 * released with the first.
 */
export function lockDataDir(dir: string, what = 'Sluice runtime'): () => void {
  const path = join(dir, 'owner.pid');
  const text = `${JSON.stringify(self())}\n`;
  for (let attempt = 0; attempt < TAKEOVER_ATTEMPTS; attempt++) {
    // The lock never exists half-written.
    if (createLinked(path, text)) {
      return () => {
        if (readOr(path, '') === text) unlinkSync(path);
      };
    }
    const found = readIfThere(path);
    // Gone since the link failed (released, or taken away): no stale lock, try again. Judged stale,
    // an absent file matched whatever lock was linked next, and its takeover removed that.
    if (found === undefined) continue;
    const owner = parseOwner(found);
    const state = stateOf(owner);
    if (state === 'mine') return () => undefined;
    if (state === 'held') throw new DataDirInUseError(`${dir} is in use by ${describeOwner(owner)}: run one ${what} per data directory.${elsewhere(owner, path)}`);
    // Another process is taking a stale lock away: it is given a moment.
    if (!removeStale(dir, path, found, text)) sleep(TAKEOVER_PAUSE_MS);
  }
  throw new DataDirInUseError(`${dir}: could not take its lock (another ${what} is starting on it; if none is, as when one on another host died taking a stale lock over, remove ${path}.takeover and start again).`);
}

/** Tries to take a stale lock away, pausing between tries while another process does. */
const TAKEOVER_ATTEMPTS = 100;
const TAKEOVER_PAUSE_MS = 10;

/**
 * Removes the stale lock `found` from `path` if it is still there, holding the takeover file while
 * it does; false when another process holds that file (a takeover file whose holder is gone is
 * cleared, and the caller tries again).
 */
function removeStale(dir: string, path: string, found: string, text: string): boolean {
  const takeover = `${path}.takeover`;
  if (!createLinked(takeover, text)) {
    const holder = readIfThere(takeover);
    // Gone since (its holder is done): try again. Left by a holder that died: cleared.
    if (holder !== undefined && stateOf(parseOwner(holder)) === 'stale') removeIfStill(dir, takeover, holder);
    return false;
  }
  try {
    // Only a lock still holding that text: no other process unlinks it meanwhile (none holds the
    // takeover file), and none links its own while it is there.
    if (readIfThere(path) === found) unlinkQuietly(path);
  } finally {
    unlinkQuietly(takeover);
  }
  return true;
}

/**
 * Removes `path` if it still holds `found`: moved aside first, and linked back when what was moved
 * is another's. For a takeover file left by a process that died holding it: the rename's window,
 * in which another process could link its own, matters only when that happened and others start at once.
 */
function removeIfStill(dir: string, path: string, found: string): void {
  const aside = join(dir, `.owner.stale.${process.pid}.${randomBytes(6).toString('hex')}`);
  try {
    renameSync(path, aside);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return;
    throw error;
  }
  if (readOr(aside, '') !== found) {
    try {
      linkSync(aside, path);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
    }
  }
  unlinkSync(aside);
}

/** Removes `path` when it exists. */
function unlinkQuietly(path: string): void {
  try {
    unlinkSync(path);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
  }
}
