// The names (never the values) of the secrets set for each custom action through this runtime. The
// values live only in the hook-runner's vault; a runner that lost its data lost them silently (its
// vault skips a missing key), so the runtime keeps the names to notice, before a call, that secrets
// the action had are gone (required-secrets.ts). Names set before this record existed are unknown.
// A delete is two writes in two stores (the runner's value, then this name): the name is marked as
// being deleted first, so a stop between them leaves a name no call requires (a name left as set
// held every call of the action back as secrets_missing_on_runner until the DELETE was sent again).

import { durably } from '../ledger/durable-write.ts';
import type { Ledger, LedgerTable } from '../ledger/ledger.ts';

/** The value of a name whose delete is under way. */
const DELETING = 'deleting';

export class SecretNames {
  readonly #root: Ledger['root'];
  /** [orgId, actionId, key] -> null (set), or DELETING while its delete is under way */
  readonly #table: LedgerTable;

  constructor(ledger: Ledger) {
    this.#root = ledger.root;
    this.#table = ledger.openDatabase('custom-action-secret-names');
  }

  /** The keys set for the action (in key order), not those being deleted: what its calls require. */
  of(orgId: string, actionId: string): string[] {
    return this.#entries(orgId, actionId).filter(({ value }) => value !== DELETING).map(({ key }) => key);
  }

  /** Every key named for the action, those whose delete was cut short too. */
  named(orgId: string, actionId: string): string[] {
    return this.#entries(orgId, actionId).map(({ key }) => key);
  }

  #entries(orgId: string, actionId: string): Array<{ key: string; value: unknown }> {
    return [...this.#table.getRange({ start: [orgId, actionId], end: [orgId, actionId, '\uffff'] })].map(({ key, value }) => ({ key: (key as [string, string, string])[2], value }));
  }

  /** Records that `key` is being deleted (before the runner deletes its value); resolves once durable. */
  async markDeleting(orgId: string, actionId: string, key: string): Promise<void> {
    await durably(this.#root, this.#root.transaction(() => this.#table.put([orgId, actionId, key], DELETING)));
  }

  /** Records that `key` was set; resolves once durable. */
  async set(orgId: string, actionId: string, key: string): Promise<void> {
    await durably(this.#root, this.#root.transaction(() => this.#table.put([orgId, actionId, key], null)));
  }

  /** Records that `key` was deleted; resolves once durable. */
  async delete(orgId: string, actionId: string, key: string): Promise<void> {
    await durably(this.#root, this.#root.transaction(() => this.#table.remove([orgId, actionId, key])));
  }
}
