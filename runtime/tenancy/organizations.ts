// Organizations (tenants): creation, lookup and plan limits, stored under [orgId].
// Creation is conditional so two concurrent creates of one id cannot both succeed. Reads are cached:
// one store per ledger, the table's only writer.

import { ConflictError } from '../errors.ts';
import { durably } from '../ledger/durable-write.ts';
import type { Ledger } from '../ledger/ledger.ts';
import { RecordCache } from '../ledger/record-cache.ts';
import { changeRecord } from '../ledger/change-record.ts';

export type Plan = 'starter' | 'pro' | 'enterprise';
export const PLANS: readonly Plan[] = ['starter', 'pro', 'enterprise'];
export const DEFAULT_MAX_CONCURRENT_RUNS = 4;

/** Default ingest quota by plan: starter orgs are capped, paid plans are unlimited until set. */
export const defaultIngestRate = (plan: Plan): number | null => (plan === 'starter' ? 100 : null);
/** Org ids are URL path segments and key prefixes: lower-case ASCII, digits, `-` and `_`. */
export const ORG_ID_PATTERN = '^[a-z0-9][a-z0-9_-]{0,63}$';

export interface Organization {
  readonly id: string;
  readonly name: string;
  readonly plan: Plan;
  readonly max_concurrent_runs: number;
  /** Events per second this org may ingest (webhooks + API); null means unlimited. */
  readonly ingest_rate_per_second?: number | null;
  /** Payload bytes per second this org may ingest (webhooks + API); null (and absent, in orgs stored before it) means unlimited. */
  readonly ingest_bytes_per_second?: number | null;
  readonly created_at: string;
  /** Its last write (update-stamp.ts); an org stored before the field reads its `created_at`. */
  readonly updated_at: string;
}

/**
 * An org as this version reads it: one stored before the ingest quota has its plan's default rate
 * (starter's 100/s, not unlimited), one stored before the byte quota has none (null), and one stored
 * before `updated_at` was last written when it was made.
 */
const withCurrentFields = (org: Organization | undefined): Organization | undefined =>
  org === undefined || (org.ingest_rate_per_second !== undefined && org.ingest_bytes_per_second !== undefined && org.updated_at !== undefined)
    ? org
    : {
        ...org,
        ingest_rate_per_second: org.ingest_rate_per_second === undefined ? defaultIngestRate(org.plan) : org.ingest_rate_per_second,
        ingest_bytes_per_second: org.ingest_bytes_per_second ?? null,
        updated_at: org.updated_at ?? org.created_at,
      };

export class OrganizationStore {
  readonly #ledger: Ledger;
  /** Every request reads its org (auth, quota, ingest); this store is the table's only writer. */
  readonly #cache = new RecordCache<Organization>();
  /** Ids of deleted orgs (deleted-orgs.ts): never given out again. */
  readonly #isDeleted: (orgId: string) => boolean;
  constructor(ledger: Ledger, isDeleted: (orgId: string) => boolean = () => false) {
    this.#ledger = ledger;
    this.#isDeleted = isDeleted;
  }

  /** Frozen: readers share one copy. */
  get(orgId: string): Organization | undefined {
    return this.#cache.read(orgId, '', () => withCurrentFields(this.#ledger.orgs.get([orgId]) as Organization | undefined));
  }

  /** Up to `limit` orgs in id order after `afterId` (the platform admin's list). */
  list(afterId: string | undefined, limit: number): Organization[] {
    const start = afterId === undefined ? undefined : [`${afterId}\u0000`];
    const entries = this.#ledger.orgs.getRange({ ...(start === undefined ? {} : { start }), limit });
    return [...entries].map(({ value }) => withCurrentFields(value as Organization) as Organization);
  }

  /** Stores a new org together with its first records; resolves after the write is durable. Throws 409 if the id is taken. */
  async create(org: Organization, alsoWrite: () => void): Promise<Organization> {
    const { orgs, root } = this.#ledger;
    if (this.#isDeleted(org.id)) {
      throw new ConflictError('organization_id_retired', `The id "${org.id}" belonged to an organization that was deleted; an id is never used again (its runs' ids and effect keys were made from it).`, { field: 'id' });
    }
    const created = await this.#cache.writing(org.id, () =>
      durably(
        root,
        root.transaction(() => {
          if (orgs.get([org.id]) !== undefined) return false;
          orgs.put([org.id], org);
          alsoWrite();
          return true;
        }),
      ),
    );
    if (!created) throw new ConflictError('organization_exists', `An organization with id "${org.id}" already exists.`, { field: 'id' });
    return org;
  }

  /** Runs `write`, which removes the org's record (org-deletion.ts), with the cache let go of the org. */
  deleting<T>(orgId: string, write: () => Promise<T>): Promise<T> {
    return this.#cache.writing(orgId, write);
  }

  /**
   * Applies `change` to the organization as stored when the write runs (not as read earlier), so
   * two concurrent updates both land; resolves with the new record, or undefined if it is gone.
   */
  async update(orgId: string, change: (current: Organization) => Organization): Promise<Organization | undefined> {
    // Changed as this version reads it, so a record stored before a field was added gains it.
    return this.#cache.writing(orgId, () => changeRecord(this.#ledger.root, this.#ledger.orgs, [orgId], (stored: Organization) => change(withCurrentFields(stored) ?? stored)));
  }
}
