// How many bytes of request bodies the server holds at once: a total, and a share of it per tenant
// (the org a path names), so one tenant's slow or hostile senders cannot spend the budget of all.

import { TenantByteShares } from '../tenancy/tenant-byte-shares.ts';

/** What one request holds; released once, when its reply is written. */
export interface BodyReservation {
  /** Counts `bytes` more; false (and nothing counted) when the total or the tenant's share is spent. */
  take(bytes: number): boolean;
  release(): void;
}

export class BodyBudget {
  readonly #shares: TenantByteShares;

  /** `perTenant` defaults to an eighth of the total; requests that name no org share '' as theirs. */
  constructor(total: number, perTenant = Math.floor(total / 8)) {
    this.#shares = new TenantByteShares(total, perTenant);
  }

  /** Bytes held now, across all requests. */
  get held(): number {
    return this.#shares.held;
  }

  open(tenant: string): BodyReservation {
    let mine = 0;
    return {
      take: (bytes) => {
        if (!this.#shares.fits(tenant, bytes)) return false;
        this.#shares.hold(tenant, bytes);
        mine += bytes;
        return true;
      },
      release: () => {
        if (mine === 0) return;
        this.#shares.give(tenant, mine);
        mine = 0;
      },
    };
  }
}
