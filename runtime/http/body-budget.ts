// How many bytes of request bodies the server holds at once: a total, and a share of it per tenant
// (the org a path names), so one tenant's slow or hostile senders cannot spend the budget of all.

/** What one request holds; released once, when its reply is written. */
export interface BodyReservation {
  /** Counts `bytes` more; false (and nothing counted) when the total or the tenant's share is spent. */
  take(bytes: number): boolean;
  release(): void;
}

export class BodyBudget {
  readonly #total: number;
  readonly #perTenant: number;
  #held = 0;
  readonly #heldByTenant = new Map<string, number>();

  /** `perTenant` defaults to an eighth of the total; requests that name no org share '' as theirs. */
  constructor(total: number, perTenant = Math.floor(total / 8)) {
    this.#total = total;
    this.#perTenant = perTenant;
  }

  /** Bytes held now, across all requests. */
  get held(): number {
    return this.#held;
  }

  open(tenant: string): BodyReservation {
    let mine = 0;
    return {
      take: (bytes) => {
        const tenantHeld = this.#heldByTenant.get(tenant) ?? 0;
        if (this.#held + bytes > this.#total || tenantHeld + bytes > this.#perTenant) return false;
        this.#held += bytes;
        this.#heldByTenant.set(tenant, tenantHeld + bytes);
        mine += bytes;
        return true;
      },
      release: () => {
        if (mine === 0) return;
        this.#held -= mine;
        const left = (this.#heldByTenant.get(tenant) ?? mine) - mine;
        if (left === 0) this.#heldByTenant.delete(tenant);
        else this.#heldByTenant.set(tenant, left);
        mine = 0;
      },
    };
  }
}
