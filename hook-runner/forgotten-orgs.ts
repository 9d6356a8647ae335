// Organizations the runtime deleted (ForgetOrg): their secrets, records of calls and fences leave the
// runner's store, and nothing of them runs or is stored from then on. Table `forgotten-orgs`:
// org -> when; the ids are held in memory as well, since every recorded call and secret write asks.
//
// The id joins them before anything is removed: a call or secret write decided after that stores
// nothing (invocation-ledger.ts, vault.ts), and one committed before it is removed with the rest,
// since the removal reads the tables only once the mark is durable, after every write queued before
// it. Module bytes stay: stored by digest, they are shared by every org that uploads the module.

import { setImmediate as nextTurn } from 'node:timers/promises';
import type { Database, Key as LmdbKey } from 'lmdb';
import type { RunnerStore } from './store.ts';

/** Keys read, and removed in one durable transaction, per turn. */
const CHUNK = 1_000;

type Key = LmdbKey[];

export class ForgottenOrgs {
  readonly #store: RunnerStore;
  readonly #ids = new Set<string>();
  /** The removals under way, per org: a second ForgetOrg joins the first. */
  readonly #removing = new Map<string, Promise<number>>();

  constructor(store: RunnerStore) {
    this.#store = store;
    for (const key of store.forgottenOrgs.getKeys({})) this.#ids.add(String(key));
  }

  has(orgId: string): boolean {
    return this.#ids.has(orgId);
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
    if (store.forgottenOrgs.get(orgId) === undefined) await store.durable(store.forgottenOrgs.put(orgId, nowMs));
    let removed = 0;
    // Where the org leads the key: its range. Where time leads it (the pruning indexes): the whole table.
    for (const table of [store.secrets, store.secretRevisions, store.fences, store.invocations] as Database[]) removed += await this.#remove(table, orgId, 0);
    for (const table of [store.fencesByTime, store.invocationsByTime] as Database[]) removed += await this.#remove(table, orgId, 1);
    return removed;
  }

  /** Removes the keys of `table` whose part `at` is the org, CHUNK at a time, each chunk durable before the next read. */
  async #remove(table: Database, orgId: string, at: 0 | 1): Promise<number> {
    let removed = 0;
    let after: Key | undefined;
    for (;;) {
      const range = at === 0 ? { start: after ?? [orgId], end: [orgId, '\uffff'] } : after === undefined ? {} : { start: after };
      const keys = [...table.getKeys({ ...range, limit: CHUNK + (after === undefined ? 0 : 1) })] as Key[];
      const page = after === undefined ? keys : keys.filter((key) => !sameKey(key, after as Key));
      const mine = page.filter((key) => key[at] === orgId);
      if (mine.length > 0) {
        await this.#store.durable(
          table.transaction(() => {
            for (const key of mine) table.removeSync(key);
          }),
        );
        removed += mine.length;
      }
      if (keys.length < CHUNK + (after === undefined ? 0 : 1)) return removed;
      after = keys.at(-1);
      await nextTurn();
    }
  }
}

const sameKey = (a: Key, b: Key): boolean => a.length === b.length && a.every((part, i) => part === b[i]);
