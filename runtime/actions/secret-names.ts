// The names (never the values) of the secrets set for each custom action through this runtime. The
// values live only in the hook-runner's vault; a runner that lost its data lost them silently (its
// vault skips a missing key), so the runtime keeps the names to notice, before a call, that secrets
// the action had are gone (required-secrets.ts). Names set before this record existed are unknown.

import { durably } from '../ledger/durable-write.ts';
import type { Ledger, LedgerTable } from '../ledger/ledger.ts';

export class SecretNames {
  readonly #root: Ledger['root'];
  /** [orgId, actionId, key] -> null */
  readonly #table: LedgerTable;

  constructor(ledger: Ledger) {
    this.#root = ledger.root;
    this.#table = ledger.openDatabase('custom-action-secret-names');
  }

  /** The keys set for the action (in key order). */
  of(orgId: string, actionId: string): string[] {
    return [...this.#table.getKeys({ start: [orgId, actionId], end: [orgId, actionId, '\uffff'] })].map((key) => (key as [string, string, string])[2]);
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
