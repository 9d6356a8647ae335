// Durable storage of webhook sources under [orgId, sourceName].
// Reads are synchronous (LMDB is memory-mapped), so ingest can pick the body cap before reading a byte.
// Reads are cached: one store per ledger, the table's only writer. Whole records are cached up to a
// room in bytes (their schemas can be large); their heads (no schemas) apart, by count, so the
// checks made before a delivery's signature never decode schemas however many sources an org holds.
// The schemas are stored as JSON text (StoredSource, source-record.ts): a head read (a delivery up to
// its signature check, a sandbox reset) decodes one string; a whole read parses the text once.

import { ConflictError, notFound } from '../errors.ts';
import { changeRecord, removeRecord } from '../ledger/change-record.ts';
import { insertCapped } from '../ledger/insert-capped.ts';
import type { Inbox } from '../inbox/inbox.ts';
import type { Ledger } from '../ledger/ledger.ts';
import { RecordCache } from '../ledger/record-cache.ts';
import { schemaRecordWeight } from './schema-record-weight.ts';
import { headOfStoredSource, sourceFromStored, storedSource, type SourceHead, type SourceRecord, type StoredSource } from './source-record.ts';
import { everyRecord, orgRecords, orgRecordsInTurns } from '../ledger/org-records.ts';

const deletingKey = (orgId: string, name: string): string => `${orgId}\u0000${name}`;

/** Each source may hold 200 schemas of 64 KiB: the cap keeps one org's configuration bounded. */
export const MAX_SOURCES_PER_ORG = 200;

export class SourceStore {
  /** Its `sources` table holds [orgId, name] -> StoredSource (schemas as JSON text: source-record.ts). */
  readonly #ledger: Ledger;
  /** Every webhook reads its source twice (body cap, then verification); this store is the table's only writer. */
  readonly #cache: RecordCache<SourceRecord>;
  /** Each source without its schemas (SourceHead), filled from whole records and forgotten with them. */
  readonly #heads = new RecordCache<SourceHead>();
  readonly #inbox: Inbox;
  /**
   * Sources whose delete is under way read as gone at once: a delivery checked before the delete
   * queued its claim ahead of it, one checked after is a 404, so no claim is written after the
   * delete (a source made again under the name forgets those before it, Inbox.createFresh).
   */
  readonly #deleting = new Set<string>();
  constructor(ledger: Ledger, inbox: Inbox) {
    this.#ledger = ledger;
    this.#cache = new RecordCache<SourceRecord>(undefined, schemaRecordWeight(ledger.sources));
    this.#inbox = inbox;
  }

  /** Whether a delete of the source is being written: it reads as gone meanwhile, and stays should the write fail. */
  isDeleting(orgId: string, name: string): boolean {
    return this.#deleting.size > 0 && this.#deleting.has(deletingKey(orgId, name));
  }

  /** The source, its schemas parsed (frozen when cached: readers share one copy). */
  get(orgId: string, name: string): SourceRecord | undefined {
    if (this.isDeleting(orgId, name)) return undefined;
    return this.#cache.read(orgId, name, () => {
      const stored = this.#stored(orgId, name);
      return stored === undefined ? undefined : sourceFromStored(stored);
    });
  }

  /** The source without its schemas (their text is read, not parsed; a record from before data format 8 decodes them). */
  head(orgId: string, name: string): SourceHead | undefined {
    if (this.isDeleting(orgId, name)) return undefined;
    // Read from the ledger, not through the whole-record cache: a head needs no frozen copy of the schemas.
    return this.#heads.read(orgId, name, () => {
      const stored = this.#stored(orgId, name);
      return stored === undefined ? undefined : headOfStoredSource(stored);
    });
  }

  /** The source as stored, decoded and not kept in the cache: for a walk over every source of an org (the export). */
  uncached(orgId: string, name: string): SourceRecord | undefined {
    const stored = this.#stored(orgId, name);
    return stored === undefined ? undefined : sourceFromStored(stored);
  }

  #stored(orgId: string, name: string): StoredSource | undefined {
    return this.#ledger.sources.get([orgId, name]) as StoredSource | undefined;
  }

  require(orgId: string, name: string): SourceRecord {
    const source = this.get(orgId, name);
    if (source === undefined) throw notFound(`Source "${name}"`, 'name');
    return source;
  }

  /** Runs `write`, which changes sources of `orgId`: both caches forget the org's entries until it settles. */
  #writing<T>(orgId: string, write: () => Promise<T>): Promise<T> {
    return this.#heads.writing(orgId, () => this.#cache.writing(orgId, write));
  }

  /** Every org's sources, read as stored one at a time as iterated (keys first: iterating across awaits holds no LMDB snapshot). */
  *all(): Generator<SourceRecord> {
    for (const stored of everyRecord<StoredSource>(this.#ledger.sources)) yield sourceFromStored(stored);
  }

  /**
   * The org's sources without their schemas, one per event-loop turn (a record from before data
   * format 8 decodes its schemas, ~30 ms for ~1 MB of them, and an org may hold 200 sources).
   */
  headsInTurns(orgId: string): AsyncGenerator<SourceHead> {
    return orgRecordsInTurns(this.#ledger.sources, orgId, (name) => this.head(orgId, name));
  }

  /** The org's sources in name order after `afterName`, read as iterated (list pages). */
  *listAfter(orgId: string, afterName: string | undefined): Iterable<SourceRecord> {
    for (const stored of orgRecords<StoredSource>(this.#ledger.sources, orgId, afterName)) yield sourceFromStored(stored);
  }

  /**
   * Resolves after the source is durable; 409 if the name is taken in this org, or the org holds
   * MAX_SOURCES_PER_ORG. `allowed` runs as the write is queued, after the waits before it: a refusal
   * it throws (a key revoked meanwhile) writes nothing.
   */
  async create(source: SourceRecord, allowed: () => void = () => undefined): Promise<void> {
    const { root, sources } = this.#ledger;
    // A source made under the name of a deleted one starts with no dedup memory (Inbox.createFresh).
    const exists = (): boolean => sources.get([source.org_id, source.name]) !== undefined;
    const outcome = await this.#inbox.createFresh(source.org_id, source.name, exists, () => {
      allowed();
      return this.#writing(source.org_id, () => insertCapped(root, sources, source.org_id, source.name, storedSource(source), MAX_SOURCES_PER_ORG));
    });
    if (outcome === 'exists') throw new ConflictError('source_exists', `A source named "${source.name}" already exists.`, { field: 'name' });
    if (outcome === 'full') throw new ConflictError('source_limit_reached', `An organization can hold at most ${MAX_SOURCES_PER_ORG} sources; delete one first.`);
  }

  /**
   * Applies `change` to the source as stored when the write runs (not as read earlier), so two
   * concurrent updates both land and none brings back a deleted source; 404 if it is gone, or if
   * `change` answers undefined (the source stored is not the one meant). A record from before data
   * format 8 is stored in the new form (schemas as text) by the write.
   */
  async update(orgId: string, name: string, change: (current: SourceRecord) => SourceRecord | undefined): Promise<SourceRecord> {
    let updated: SourceRecord | undefined;
    await this.#writing(orgId, () =>
      changeRecord<StoredSource>(this.#ledger.root, this.#ledger.sources, [orgId, name], (stored) => {
        updated = change(sourceFromStored(stored));
        return updated === undefined ? undefined : storedSource(updated);
      }),
    );
    if (updated === undefined) throw notFound(`Source "${name}"`, 'name');
    return updated;
  }

  /**
   * Removes the source; 404 if it is gone or `meant` says the stored one is another (made again
   * under the name since the caller read it). Its dedup claims stay until the prune, or a source made
   * again under the name (create).
   */
  async delete(orgId: string, name: string, meant: (stored: SourceHead) => boolean): Promise<void> {
    const { root, sources } = this.#ledger;
    const key = deletingKey(orgId, name);
    const first = !this.#deleting.has(key);
    this.#deleting.add(key);
    let removed: boolean;
    try {
      removed = await this.#inbox.deleting(orgId, name, () => this.#writing(orgId, () => removeRecord<StoredSource>(root, sources, [orgId, name], (stored) => meant(headOfStoredSource(stored)))));
    } finally {
      // Of deletes of one name at once, the first one's write removes the source: its mark is the one needed.
      if (first) this.#deleting.delete(key);
    }
    if (!removed) throw notFound(`Source "${name}"`, 'name');
  }
}
