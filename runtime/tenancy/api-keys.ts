// API keys: issued once in plain text, stored only as a SHA-256 hash, scoped to one org and one role.
// Lookup is by hash of the presented key; listing is by [orgId, keyId]. Revocation is a durable flag.
// The cap on active keys is checked against an index of the active ones (`api-keys-active`), not by
// reading every key the org ever had (two lookups a key, inside the write transaction that every
// writer of the ledger waits for). Revoked keys stay listed as a record of who had access, the latest
// MAX_REVOKED_API_KEYS of them: a new key drops the records of the oldest revocations past that
// (`api-keys-revoked`, in revocation order), so creating and revoking keys cannot grow an org without end.
// A key is refused from the moment its revocation is asked, not only once that is on disk: a write of
// the key checked while the revocation was committing went in after it, and its answer came after
// the revocation's 200.

import { randomBytes } from 'node:crypto';
import { ConflictError, notFound, SluiceError } from '../errors.ts';
import { DiskSpaceLowError } from '../../hook-runner/disk-floor.ts';
import { generateToken, hashToken } from '../auth/secrets.ts';
import { durably } from '../ledger/durable-write.ts';
import { OrgDeletedError } from '../ledger/org-fence.ts';
import type { Ledger, LedgerKey, LedgerTable } from '../ledger/ledger.ts';

export type Role = 'viewer' | 'developer' | 'admin';

/** Active (not revoked) keys per org. */
export const MAX_ACTIVE_API_KEYS = 100;
/** Revoked keys kept listed per org (the latest revocations). */
export const MAX_REVOKED_API_KEYS = 1_000;
export const ROLES: readonly Role[] = ['viewer', 'developer', 'admin'];
const RANK: Record<Role, number> = { viewer: 1, developer: 2, admin: 3 };

/** True when `held` is at least `needed` (viewer < developer < admin). */
export const roleCovers = (held: Role, needed: Role): boolean => RANK[held] >= RANK[needed];

/**
 * Whether a revocation that threw `error` may have been written all the same: a flush that failed
 * may have committed; a write the disk floor refused, a refusal (4xx) or the fence of an org being
 * deleted (a 503 while its mark is written) wrote nothing.
 */
export const revocationMayHaveTakenEffect = (error: unknown): boolean =>
  !(error instanceof DiskSpaceLowError) && !(error instanceof OrgDeletedError) && !(error instanceof SluiceError && error.status < 500);

export interface ApiKeyRecord {
  readonly id: string;
  readonly org_id: string;
  readonly role: Role;
  readonly hash: string;
  /** The first characters of the key, so a person can tell keys apart in a list. */
  readonly prefix: string;
  readonly created_at: string;
  readonly revoked_at?: string;
}

export type ApiKeyView = Omit<ApiKeyRecord, 'hash' | 'org_id'>;

export const describeApiKey = ({ hash: _hash, org_id: _org, ...view }: ApiKeyRecord): ApiKeyView => view;

/** In `api-keys-active`, under [orgId, INDEXED]: the org's active keys are all indexed (keys from before the index are not). */
const INDEXED = '';
/** The range of an org's indexed keys (key ids start with `key_`; the marker sorts before them). */
const activeRange = (orgId: string) => ({ start: [orgId, 'key_'], end: [orgId, 'key_\uffff'] });
/** The range of an org's revocations, [orgId, revokedAt, keyId] (ISO times start with a digit; the marker, '', sorts before them). */
const revokedRange = (orgId: string) => ({ start: [orgId, '0'], end: [orgId, '\uffff'] });

export class ApiKeyStore {
  readonly #ledger: Ledger;
  /** [orgId, keyId] -> true while the key is active; [orgId, INDEXED] once the org's keys are all in. */
  readonly #active: LedgerTable;
  /** [orgId, revokedAt, keyId] -> null per revoked key kept; [orgId, INDEXED] once the org's revoked keys are all in. */
  readonly #revoked: LedgerTable;
  readonly #maxRevoked: number;
  /**
   * Hashes of keys whose revocation was asked and is not yet known on disk: refused meanwhile. One
   * whose revocation may have been written but could not be confirmed stays refused until the
   * process ends; one whose revocation was refused (the disk floor) holds again.
   */
  readonly #revoking = new Set<string>();
  constructor(ledger: Ledger, maxRevoked = MAX_REVOKED_API_KEYS) {
    this.#ledger = ledger;
    this.#active = ledger.openDatabase('api-keys-active');
    this.#revoked = ledger.openDatabase('api-keys-revoked');
    this.#maxRevoked = maxRevoked;
  }

  /** Builds a new key; `write` puts it into the current transaction (call inside one). */
  issue(orgId: string, role: Role, nowIso: string): { record: ApiKeyRecord; key: string; write: () => void } {
    const key = generateToken('sk_');
    const record: ApiKeyRecord = {
      id: `key_${randomBytes(9).toString('base64url')}`,
      org_id: orgId,
      role,
      hash: hashToken(key),
      prefix: key.slice(0, 10),
      created_at: nowIso,
    };
    const write = (): void => {
      this.#ledger.apiKeys.put([record.hash], record);
      this.#ledger.apiKeysByOrg.put([orgId, record.id], record.hash);
      this.#active.put([orgId, record.id], true);
    };
    return { record, key, write };
  }

  /** Issues and durably stores a key; 409 when the org already holds MAX_ACTIVE_API_KEYS active keys. */
  async create(orgId: string, role: Role, nowIso: string): Promise<{ record: ApiKeyRecord; key: string }> {
    const issued = this.issue(orgId, role, nowIso);
    const stored = await durably(
      this.#ledger.root,
      this.#ledger.root.transaction(() => {
        if (this.#activeCountWithin(orgId) >= MAX_ACTIVE_API_KEYS) return false;
        issued.write();
        this.#forgetOldRevocationsWithin(orgId);
        return true;
      }),
    );
    if (!stored) throw new ConflictError('too_many_api_keys', `An organization holds at most ${MAX_ACTIVE_API_KEYS} active API keys; revoke one first.`);
    return { record: issued.record, key: issued.key };
  }

  /** The active key record for a presented key, or undefined. The hash lookup is the comparison. */
  findActive(presentedKey: string): ApiKeyRecord | undefined {
    const record = this.#ledger.apiKeys.get([hashToken(presentedKey)]) as ApiKeyRecord | undefined;
    return record === undefined || !this.#holds(record) ? undefined : record;
  }

  /** Every key of the org, revoked ones included, in key id order; `page` reads at most `limit` after `afterId`. */
  list(orgId: string, page: { readonly limit?: number; readonly afterId?: string } = {}): ApiKeyRecord[] {
    const records: ApiKeyRecord[] = [];
    const start = page.afterId === undefined ? [orgId] : [orgId, `${page.afterId}\u0000`];
    for (const { value } of this.#ledger.apiKeysByOrg.getRange({ start, end: [orgId, '\uffff'], ...(page.limit === undefined ? {} : { limit: page.limit }) })) {
      const record = this.#ledger.apiKeys.get([value as string]) as ApiKeyRecord | undefined;
      if (record !== undefined) records.push(record);
    }
    return records;
  }

  /** True while the key exists and is not revoked (long-lived connections recheck the key they opened with). */
  isActive(orgId: string, keyId: string): boolean {
    const record = this.get(orgId, keyId);
    return record !== undefined && this.#holds(record);
  }

  /** Neither revoked on disk nor being revoked. */
  #holds(record: ApiKeyRecord): boolean {
    return record.revoked_at === undefined && !this.#revoking.has(record.hash);
  }

  /** Resolves once the revocation is durable; revoking a revoked key returns it unchanged. */
  async revoke(orgId: string, keyId: string, nowIso: string): Promise<ApiKeyRecord> {
    const record = this.get(orgId, keyId);
    if (record === undefined) throw notFound('API key', 'key_id');
    if (record.revoked_at !== undefined) return record;
    const revoked: ApiKeyRecord = { ...record, revoked_at: nowIso };
    // Refused from here on: every check of the key made after this line fails, so no write of it
    // can be queued behind the revocation's own.
    this.#revoking.add(record.hash);
    let stored: ApiKeyRecord | undefined;
    try {
      // Checked again in the write: of two revokes at once, the second finds the first's and keeps it
      // (one revocation time, one entry in the revocation order).
      stored = await durably(
        this.#ledger.root,
        this.#ledger.root.transaction((): ApiKeyRecord | undefined => {
          const current = this.#ledger.apiKeys.get([record.hash]) as ApiKeyRecord | undefined;
          if (current === undefined || current.revoked_at !== undefined) return current;
          this.#ledger.apiKeys.put([record.hash], revoked);
          this.#active.remove([orgId, keyId]);
          this.#revoked.put([orgId, nowIso, keyId], null);
          return revoked;
        }),
      );
    } catch (error) {
      // Nothing written: the key holds again, as its sockets do.
      if (!revocationMayHaveTakenEffect(error)) this.#revoking.delete(record.hash);
      throw error;
    }
    // On disk now (revoked, or gone with its org's records): the mark has done its part.
    this.#revoking.delete(record.hash);
    if (stored === undefined) throw notFound('API key', 'key_id');
    return stored;
  }

  /**
   * How many active keys the org holds; call inside a write transaction. The first call for an org
   * whose keys predate the index fills it from the full list, once.
   */
  #activeCountWithin(orgId: string): number {
    this.#indexOnce(this.#active, orgId, true, (record) => (record.revoked_at === undefined ? [orgId, record.id] : undefined));
    return this.#active.getKeysCount(activeRange(orgId));
  }

  /**
   * Fills `index` from the org's keys the first time it is asked for that org (keys from before the
   * index), then marks the org indexed: `entryOf` gives a key's entry (stored with `value`), or
   * undefined for none. Call inside a write transaction.
   */
  #indexOnce(index: LedgerTable, orgId: string, value: true | null, entryOf: (record: ApiKeyRecord) => LedgerKey | undefined): void {
    if (index.doesExist([orgId, INDEXED])) return;
    for (const record of this.list(orgId)) {
      const entry = entryOf(record);
      if (entry !== undefined) index.put(entry, value);
    }
    index.put([orgId, INDEXED], value);
  }

  /**
   * Drops the records of the org's oldest revocations past the cap (MAX_REVOKED_API_KEYS; a presented key
   * that was revoked is refused the same with or without its record); call inside a write
   * transaction. The first call for an org whose revocations predate the index fills it, once.
   */
  #forgetOldRevocationsWithin(orgId: string): void {
    this.#indexOnce(this.#revoked, orgId, null, (record) => (record.revoked_at === undefined ? undefined : [orgId, record.revoked_at, record.id]));
    const excess = this.#revoked.getKeysCount(revokedRange(orgId)) - this.#maxRevoked;
    if (excess <= 0) return;
    const oldest = [...this.#revoked.getKeys({ ...revokedRange(orgId), limit: excess })] as Array<[string, string, string]>;
    for (const entry of oldest) {
      const keyId = entry[2];
      const hash = this.#ledger.apiKeysByOrg.get([orgId, keyId]) as string | undefined;
      if (hash !== undefined) this.#ledger.apiKeys.remove([hash]);
      this.#ledger.apiKeysByOrg.remove([orgId, keyId]);
      this.#revoked.remove(entry);
    }
  }

  /** The org's key of that id, revoked or not. */
  get(orgId: string, keyId: string): ApiKeyRecord | undefined {
    const hash = this.#ledger.apiKeysByOrg.get([orgId, keyId]) as string | undefined;
    return hash === undefined ? undefined : (this.#ledger.apiKeys.get([hash]) as ApiKeyRecord | undefined);
  }
}
