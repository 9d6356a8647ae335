// Organizations the runtime deleted (ForgetOrg): their secrets, records of calls, fences and the
// modules no other org uses leave the runner's store, and nothing of them runs or is stored from
// then on. Table `forgotten-orgs`.

import { setImmediate as nextTurn } from 'node:timers/promises';
import type { Database, Key as LmdbKey } from 'lmdb';
import type { RunnerStore } from './store.ts';

/** Keys read, and removed in one durable transaction, per turn. */
const CHUNK = 1_000;

type Key = LmdbKey[];

export interface ForgottenOrgsOptions {
  /** Keys read, and removed in one durable transaction, per turn. */
  readonly chunk?: number;
  /** Told of each module whose bytes were removed (its last user forgotten), once that is durable: its compiled form goes too. */
  readonly dropCompiled?: (digest: string) => void;
}

/** What a chunked removal does besides removing its keys (#removeModuleUses). */
interface RemovalHooks {
  readonly inWrite?: (key: Key) => void;
  readonly afterWrite?: () => void;
}

export interface ForgottenMark {
  readonly at: number;
  /** Every record of the org was removed. */
  readonly done: boolean;
}

/**
 * Org -> { at, done }, the ids held in memory as well (every call and secret write asks). An id
 * joins them before anything is removed. A recorded call decides whether to write in the turn it
 * queues its batch (invocation-ledger.ts): one decided before the mark was queued commits before it,
 * and the removal reads the tables only once the mark is durable, so it goes with the rest; one
 * decided after writes nothing. A secret write asks inside its own write transaction (vault.ts),
 * which lmdb-js may run after later single writes, as does an upload (module-registry.ts). Module
 * bytes are stored by digest, shared by every org that uploads or calls the module: the org's uses
 * of them (module-users) go last, each module with its last use, in the same write. A removal cut
 * short (a stop, a crash) is done by the next ForgetOrg; once `done`, a ForgetOrg answers at once.
 */
export class ForgottenOrgs {
  readonly #store: RunnerStore;
  readonly #chunk: number;
  readonly #dropCompiled: (digest: string) => void;
  readonly #ids = new Set<string>();
  /** The removals under way, per org: a second ForgetOrg joins the first. */
  readonly #removing = new Map<string, Promise<number>>();

  constructor(store: RunnerStore, options: ForgottenOrgsOptions = {}) {
    this.#store = store;
    this.#chunk = options.chunk ?? CHUNK;
    this.#dropCompiled = options.dropCompiled ?? (() => undefined);
    for (const key of store.forgottenOrgs.getKeys({})) this.#ids.add(String(key));
  }

  has(orgId: string): boolean {
    return this.#ids.has(orgId);
  }

  /** Whether every record of the org was removed: a ForgetOrg then answers at once, writing nothing. */
  done(orgId: string): boolean {
    return this.#store.forgottenOrgs.get(orgId)?.done === true;
  }

  /** Forgets the org; resolves with how many records this call removed, once their removal is durable. */
  forget(orgId: string, nowMs: number): Promise<number> {
    const running = this.#removing.get(orgId);
    if (running !== undefined) return running.then(() => 0);
    const removal = this.#forget(orgId, nowMs).finally(() => this.#removing.delete(orgId));
    this.#removing.set(orgId, removal);
    return removal;
  }

  async #forget(orgId: string, nowMs: number): Promise<number> {
    this.#ids.add(orgId);
    const store = this.#store;
    const mark = store.forgottenOrgs.get(orgId);
    if (mark?.done === true) return 0;
    const at = mark?.at ?? nowMs;
    if (mark === undefined) await store.durable(store.forgottenOrgs.put(orgId, { at, done: false }));
    let removed = 0;
    // Where the org leads the key: its range. Where time leads it (the pruning indexes): the whole table.
    for (const table of [store.secrets, store.secretRevisions, store.fences, store.invocations] as Database[]) removed += await this.#remove(table, orgId, 0);
    for (const table of [store.fencesByTime, store.invocationsByTime] as Database[]) removed += await this.#remove(table, orgId, 1);
    removed += await this.#removeModuleUses(orgId);
    await store.durable(store.forgottenOrgs.put(orgId, { at, done: true }));
    return removed;
  }

  /**
   * Removes the org's uses of modules (read whole: the digest leads the key), and in the same write
   * the bytes of each module no one else uses (the user '' of modules older than uses keeps them).
   */
  async #removeModuleUses(orgId: string): Promise<number> {
    const store = this.#store;
    const unused: string[] = [];
    let bytesRemoved = 0;
    const removed = await this.#remove(store.moduleUsers as Database, orgId, 1, {
      inWrite: (key) => {
        const digest = String(key[0]);
        if (hasUser(store, digest)) return;
        store.modules.removeSync(digest);
        unused.push(digest);
      },
      // Each chunk's modules leave memory once their removal is durable, not at the end of the scan.
      afterWrite: () => {
        for (const digest of unused.splice(0)) {
          this.#dropCompiled(digest);
          bytesRemoved += 1;
        }
      },
    });
    return removed + bytesRemoved;
  }

  /**
   * Removes the keys of `table` whose part `at` is the org, a chunk at a time, each durable before
   * the next read; `inWrite` runs in that write after each key's removal, `afterWrite` once it is durable.
   */
  async #remove(table: Database, orgId: string, at: 0 | 1, hooks: RemovalHooks = {}): Promise<number> {
    let removed = 0;
    let after: Key | undefined;
    for (;;) {
      const range = at === 0 ? { start: after ?? [orgId], end: [orgId, '\uffff'] } : after === undefined ? {} : { start: after };
      const limit = this.#chunk + (after === undefined ? 0 : 1);
      const keys = [...table.getKeys({ ...range, limit })] as Key[];
      const mine = keys.filter((key) => key[at] === orgId && !(after !== undefined && sameKey(key, after)));
      if (mine.length > 0) {
        await this.#store.durable(
          table.transaction(() => {
            for (const key of mine) {
              table.removeSync(key);
              hooks.inWrite?.(key);
            }
          }),
        );
        hooks.afterWrite?.();
        removed += mine.length;
      }
      if (keys.length < limit) return removed;
      after = keys.at(-1);
      await nextTurn();
    }
  }
}

/** Whether any org (or the unknown user '') is recorded as using the module. */
function hasUser(store: RunnerStore, digest: string): boolean {
  for (const _ of store.moduleUsers.getKeys({ start: [digest], end: [digest, '\uffff'], limit: 1 })) return true;
  return false;
}

const sameKey = (a: Key, b: Key): boolean => a.length === b.length && a.every((part, i) => part === b[i]);
