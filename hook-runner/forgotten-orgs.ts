// Organizations the runtime deleted (ForgetOrg): their secrets, records of calls and fences leave the
// runner's store, and nothing of them runs or is stored from then on. Table `forgotten-orgs`.

import { setImmediate as nextTurn } from 'node:timers/promises';
import type { Database, Key as LmdbKey } from 'lmdb';
import type { RunnerStore } from './store.ts';

/** Keys read, and removed in one durable transaction, per turn. */
const CHUNK = 1_000;

type Key = LmdbKey[];

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
 * which lmdb-js may run after later single writes. Module bytes stay: stored by digest, they are
 * shared by every org that uploads the module. A removal cut short (a stop, a crash) is done by the
 * next ForgetOrg; once `done`, a ForgetOrg answers at once.
 */
export class ForgottenOrgs {
  readonly #store: RunnerStore;
  readonly #chunk: number;
  readonly #ids = new Set<string>();
  /** The removals under way, per org: a second ForgetOrg joins the first. */
  readonly #removing = new Map<string, Promise<number>>();

  constructor(store: RunnerStore, chunk = CHUNK) {
    this.#store = store;
    this.#chunk = chunk;
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
    await store.durable(store.forgottenOrgs.put(orgId, { at, done: true }));
    return removed;
  }

  /** Removes the keys of `table` whose part `at` is the org, a chunk at a time, each durable before the next read. */
  async #remove(table: Database, orgId: string, at: 0 | 1): Promise<number> {
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
            for (const key of mine) table.removeSync(key);
          }),
        );
        removed += mine.length;
      }
      if (keys.length < limit) return removed;
      after = keys.at(-1);
      await nextTurn();
    }
  }
}

const sameKey = (a: Key, b: Key): boolean => a.length === b.length && a.every((part, i) => part === b[i]);
