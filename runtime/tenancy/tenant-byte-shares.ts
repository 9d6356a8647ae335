// Bytes held out of a total, with a share of it per tenant that no tenant may pass, so one tenant
// cannot spend what all need: the accounting behind the request-body budget (http/body-budget.ts)
// and the step input budget (runs/step-input-budget.ts), which differ in what they do when bytes
// do not fit (refuse at once, or wait).

import { KeyedCounts } from '../../actors/keyed-counts.ts';

export class TenantByteShares {
  readonly #total: number;
  readonly #perTenant: number;
  #held = 0;
  readonly #heldBy = new KeyedCounts();

  constructor(total: number, perTenant: number) {
    this.#total = total;
    this.#perTenant = perTenant;
  }

  /** Bytes held now, over every tenant. */
  get held(): number {
    return this.#held;
  }

  /**
   * Whether `bytes` more fit the total and `tenant`'s share. `overall` is what they count against the
   * total when that differs from what they count against the share (a cost capped at the share).
   */
  fits(tenant: string, bytes: number, overall = bytes): boolean {
    return this.#held + overall <= this.#total && this.#heldBy.get(tenant) + bytes <= this.#perTenant;
  }

  /** Counts `bytes` more for `tenant`, `overall` for the total (after `fits` with the same). */
  hold(tenant: string, bytes: number, overall = bytes): void {
    this.#held += overall;
    this.#heldBy.add(tenant, bytes);
  }

  /** Gives back what `hold` counted for `tenant`. */
  give(tenant: string, bytes: number, overall = bytes): void {
    this.#held -= overall;
    this.#heldBy.subtract(tenant, bytes);
  }
}
