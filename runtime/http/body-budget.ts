// How many bytes of request bodies the server holds at once: a total, and a share of it per tenant
// (the org a path names), so one tenant's slow or hostile senders cannot spend the budget of all.

import { getHeapStatistics } from 'node:v8';
import { TenantByteShares } from '../tenancy/tenant-byte-shares.ts';

const MIB = 1024 * 1024;
/** The most bodies held at once by default (on a machine with room to spare). */
export const MAX_DEFAULT_BODY_BUDGET_BYTES = 256 * MIB;
/** The least: an org's eighth must take the largest body a route accepts (an 8 MiB module upload and its form). */
export const MIN_BODY_BUDGET_BYTES = 72 * MIB;

/**
 * The default: a quarter of V8's heap limit, from 72 to 256 MiB. Node sizes that limit to a
 * container's memory (about 259 MiB of heap in a 400 MiB cgroup: 72 MiB of bodies there), and a
 * body costs two to four times its size again while it is checked and stored, so a fixed 256 MiB
 * let one org's burst of large webhooks take a small container's process past its memory limit.
 */
export function defaultBodyBudgetBytes(): number {
  return Math.min(MAX_DEFAULT_BODY_BUDGET_BYTES, Math.max(MIN_BODY_BUDGET_BYTES, Math.floor(getHeapStatistics().heap_size_limit / 4)));
}

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
