// Read models written by custom actions (DESIGN 6.5 `projection`): upserted by entity, or appended
// per step key, always inside the transaction that completes the step, so a retry never doubles a row.
// Rows with a status are indexed by it too, so a status filter reads only the rows it lists;
// appended rows are indexed by creation time too, for retention (appended-row-retention.ts); and
// each org's rows are counted, for their cap (MAX_PROJECTION_ROWS_PER_ORG). Each row has a small
// meta record (status, creation, revision): writing or removing a row never decodes its data (up
// to 256 KiB of JSON, which may be tens of thousands of values: 1,000 of them decoded at once
// took gigabytes of heap).

import type { LedgerKey, LedgerRoot, LedgerTable } from '../ledger/ledger.ts';
import type { JsonValue } from '../../actors/json.ts';
import { ENTITY_TYPE, PROJECTION_NAME, type ProjectionWrite } from '../actions/output-contract.ts';
import type { Ledger } from '../ledger/ledger.ts';
import { passesOverTable } from '../ledger/passes-over-table.ts';
import { durably } from '../ledger/durable-write.ts';
import { removeEnvironmentKeys } from '../ledger/remove-environment.ts';
import { characterCount } from '../validation/character-count.ts';
import { MAX_PAGE_BYTES, MAX_SCAN_PER_PAGE, textBytes } from '../ledger/page-by-time.ts';

/** The data format (data-format.ts) from which on rows with a status are indexed by it. */
export const PROJECTION_STATUS_FORMAT = 5;
/** The data format from which on appended rows are indexed by creation time, each org's rows counted and each row has its meta record. */
export const PROJECTION_COUNT_FORMAT = 9;

/** Rows one org may hold, over its projections and environments; a step that would add one more fails. */
export const MAX_PROJECTION_ROWS_PER_ORG = 1_000_000;

/** Rows without an entity live under this entity type, keyed by the step key that wrote them. */
const APPENDED = '~step';
/** DESIGN 6.5: an entity_id is 1-200 characters; an appended row's `<runId>:<stepId>` fits too. */
const MAX_ENTITY_ID_LENGTH = 200;

/** Whether a string can name a projection (DESIGN 6.5); any other name has no rows. */
export const isProjectionName = (value: unknown): value is string => typeof value === 'string' && PROJECTION_NAME.test(value);
/** Whether a string can be a row's entity_type. */
export const isEntityType = (value: unknown): value is string => typeof value === 'string' && ENTITY_TYPE.test(value);
/** Whether a string can be a row's entity_id. */
export const isEntityId = (value: unknown): value is string => typeof value === 'string' && value.length >= 1 && characterCount(value) <= MAX_ENTITY_ID_LENGTH;
/** Whether a value can be the entity type half of a list position: an entity_type, or the appended rows' marker. */
export const isRowType = (value: unknown): value is string => value === APPENDED || isEntityType(value);

export interface ProjectionRow {
  readonly name: string;
  readonly environment: string;
  readonly entity_type: string | null;
  readonly entity_id: string | null;
  readonly title: string | null;
  readonly status: string | null;
  readonly data: JsonValue;
  /** How many times this row has been written (1 for a new row). */
  readonly revision: number;
  readonly run_id: string;
  readonly step_id: string;
  readonly event_id: string;
  readonly created_at: string;
  readonly updated_at: string;
}

export interface ProjectionSource {
  readonly orgId: string;
  readonly environment: string;
  readonly runId: string;
  readonly stepId: string;
  readonly eventId: string;
  readonly at: number;
}

type RowKey = [orgId: string, environment: string, name: string, entityType: string, entityId: string];
/** An appended row's retention entry: [createdAtMs, orgId, environment, name, entityId] -> null. */
export type AppendedKey = [createdAtMs: number, orgId: string, environment: string, name: string, entityId: string];

const appendedKey = ([orgId, environment, name, , entityId]: RowKey, createdAtMs: number): AppendedKey => [createdAtMs, orgId, environment, name, entityId];

/** A row's meta record, under the row's key: what its writes and removal need of it. */
type RowMeta = [status: string | null, createdAtMs: number, revision: number];

const metaOf = (row: ProjectionRow): RowMeta => [row.status, Date.parse(row.created_at), row.revision];

/** Where a step's row lives: under its entity, or appended under the step key. */
const rowKey = (projection: ProjectionWrite, at: Pick<ProjectionSource, 'orgId' | 'environment' | 'runId' | 'stepId'>): RowKey =>
  [at.orgId, at.environment, projection.name, projection.entity?.type ?? APPENDED, projection.entity?.id ?? `${at.runId}:${at.stepId}`];

/** The status index entry of a row: [orgId, environment, name, status, entityType, entityId] -> null. */
const statusKey = ([orgId, environment, name, entityType, entityId]: RowKey, status: string): LedgerKey => [orgId, environment, name, status, entityType, entityId];

export class ProjectionStore {
  readonly #root: LedgerRoot;
  /** [orgId, environment, name, entityType, entityId] -> ProjectionRow */
  readonly #rows: LedgerTable;
  readonly #byStatus: LedgerTable;
  /** AppendedKey -> null */
  readonly #appended: LedgerTable;
  /** [orgId, environment, name, entityType, entityId] -> RowMeta */
  readonly #meta: LedgerTable;
  /** [orgId] -> how many rows the org holds */
  readonly #counts: LedgerTable;
  /** Rows one org may hold (MAX_PROJECTION_ROWS_PER_ORG unless a test sets a smaller one). */
  readonly maxRowsPerOrg: number;

  constructor(ledger: Ledger, maxRowsPerOrg = MAX_PROJECTION_ROWS_PER_ORG) {
    this.maxRowsPerOrg = maxRowsPerOrg;
    this.#root = ledger.root;
    this.#rows = ledger.openDatabase('projections');
    this.#byStatus = ledger.openDatabase('projections-by-status');
    this.#appended = ledger.openDatabase('projections-appended');
    this.#meta = ledger.openDatabase('projections-meta');
    this.#counts = ledger.openDatabase('projection-counts');
  }

  /** How many rows the org holds, over its projections and environments. */
  rowCount(orgId: string): number {
    return (this.#counts.get(orgId) as number | undefined) ?? 0;
  }

  /** Whether a step may write `projection` in this environment: a row it would update always may, a new one while the org is under its cap. */
  hasRoomFor(projection: ProjectionWrite, orgId: string, environment: string, runId: string, stepId: string): boolean {
    return this.#rows.doesExist(rowKey(projection, { orgId, environment, runId, stepId })) || this.rowCount(orgId) < this.maxRowsPerOrg;
  }

  /** Removes the rows of one org's environment, at most `limit` (sandbox reset), with their index entries; returns how many rows. Call inside a write transaction. */
  removeEnvironment(orgId: string, environment: string, limit = Number.POSITIVE_INFINITY): number {
    const removed = this.#removeRange([orgId, environment], limit);
    // Once the rows are gone, so is any status entry left without its row.
    if (removed < limit) removeEnvironmentKeys(this.#byStatus, orgId, environment);
    return removed;
  }

  /** Removes the rows of one projection in one environment, at most `limit`, with their index entries; returns how many. Call inside a write transaction. */
  removeProjection(orgId: string, environment: string, name: string, limit: number): number {
    return this.#removeRange([orgId, environment, name], limit);
  }

  /** Removes one row with its index entries; returns whether there was one. Call inside a write transaction. */
  removeRow(orgId: string, environment: string, name: string, entityType: string, entityId: string): boolean {
    const key: RowKey = [orgId, environment, name, entityType, entityId];
    if (!this.#rows.doesExist(key)) return false;
    this.#remove(key);
    return true;
  }

  /** Up to `limit` retention entries of appended rows created before `cutoffMs`, oldest first (read outside a transaction). */
  appendedBefore(cutoffMs: number, limit: number): AppendedKey[] {
    return [...this.#appended.getKeys({ end: [cutoffMs], limit })] as AppendedKey[];
  }

  /** Removes a retention entry alone (its row goes with its deleted org); call inside a write transaction. */
  removeAppendedEntry(entry: AppendedKey): void {
    this.#appended.remove(entry);
  }

  /** Removes the appended row a retention entry names, with the entry; call inside a write transaction. */
  removeAppended(entry: AppendedKey): void {
    const [createdAtMs, orgId, environment, name, entityId] = entry;
    this.#appended.remove(entry);
    const key: RowKey = [orgId, environment, name, APPENDED, entityId];
    if (this.#rows.doesExist(key) && this.#metaFor(key)[1] === createdAtMs) this.#remove(key);
  }

  /** Keys read first, then removed: a range read inside the transaction that writes to it is unspecified (ledger.ts). */
  #removeRange(prefix: string[], limit: number): number {
    const keys = [...this.#rows.getKeys({ start: prefix, end: [...prefix, '\uffff'], ...(Number.isFinite(limit) ? { limit } : {}) })] as RowKey[];
    for (const key of keys) this.#remove(key);
    return keys.length;
  }

  /** The row's meta record; a row without one (never, once PROJECTION_COUNT_FORMAT's upgrade ran) is read whole for it. */
  #metaFor(key: RowKey): RowMeta {
    return (this.#meta.get(key) as RowMeta | undefined) ?? metaOf(this.#rows.get(key) as ProjectionRow);
  }

  /** Removes a row that exists, with its meta record and index entries, from its org's count. */
  #remove(key: RowKey): void {
    const [status, createdAtMs] = this.#metaFor(key);
    this.#rows.remove(key);
    this.#meta.remove(key);
    if (status !== null) this.#byStatus.remove(statusKey(key, status));
    if (key[3] === APPENDED) this.#appended.remove(appendedKey(key, createdAtMs));
    this.#addToCount(key[0], -1);
  }

  #addToCount(orgId: string, by: number): void {
    const count = this.rowCount(orgId) + by;
    if (count > 0) this.#counts.put(orgId, count);
    else this.#counts.remove(orgId);
  }

  /**
   * Indexes the appended rows by creation time and counts each org's rows, for a data dir older than
   * PROJECTION_COUNT_FORMAT, `passSize` rows per durable transaction; returns how many rows it read.
   * Idempotent (the counts are written whole at the end). Call at boot, before anything writes rows.
   */
  async countRows(passSize = 1000): Promise<number> {
    const counts = new Map<string, number>();
    const read = await passesOverTable(this.#root, this.#rows, passSize, (key, value): [RowKey, RowMeta] => {
      const rowKeyRead = key as RowKey;
      counts.set(rowKeyRead[0], (counts.get(rowKeyRead[0]) ?? 0) + 1);
      return [rowKeyRead, metaOf(value as ProjectionRow)];
    }, ([rowKeyRead, meta]) => {
      this.#meta.put(rowKeyRead, meta);
      if (rowKeyRead[3] === APPENDED) this.#appended.put(appendedKey(rowKeyRead, meta[1]), null);
    });
    if (counts.size > 0) await durably(this.#root, this.#root.transaction(() => counts.forEach((count, orgId) => this.#counts.put(orgId, count))));
    return read;
  }

  /**
   * Indexes by status the rows written before rows were (a data dir older than
   * PROJECTION_STATUS_FORMAT), `passSize` rows per durable transaction; returns how many rows it
   * read. Idempotent. Call at boot, before anything writes rows.
   */
  async indexStatuses(passSize = 1000): Promise<number> {
    return passesOverTable(this.#root, this.#rows, passSize, (key, value) => {
      const { status } = value as ProjectionRow;
      return status === null ? undefined : statusKey(key as RowKey, status);
    }, (entry) => this.#byStatus.put(entry, null));
  }

  /** Upserts (entity) or appends (step key) one row. Call inside the step-completing transaction. */
  write(projection: ProjectionWrite, source: ProjectionSource): ProjectionRow {
    const key = rowKey(projection, source);
    const previous = this.#rows.doesExist(key) ? this.#metaFor(key) : undefined;
    const now = new Date(source.at).toISOString();
    const row: ProjectionRow = {
      name: projection.name,
      environment: source.environment,
      entity_type: projection.entity?.type ?? null,
      entity_id: projection.entity?.id ?? null,
      title: projection.title,
      status: projection.status,
      data: projection.data,
      revision: (previous?.[2] ?? 0) + 1,
      run_id: source.runId,
      step_id: source.stepId,
      event_id: source.eventId,
      created_at: previous === undefined || !Number.isFinite(previous[1]) ? now : new Date(previous[1]).toISOString(),
      updated_at: now,
    };
    this.#rows.put(key, row);
    this.#meta.put(key, metaOf(row));
    if (previous === undefined) {
      this.#addToCount(source.orgId, 1);
      if (row.entity_type === null) this.#appended.put(appendedKey(key, source.at), null);
    }
    // A new row has no status entry yet: as one with a null status.
    const previousStatus = previous?.[0] ?? null;
    if (previousStatus !== row.status) {
      if (previousStatus !== null) this.#byStatus.remove(statusKey(key, previousStatus));
      if (row.status !== null) this.#byStatus.put(statusKey(key, row.status), null);
    }
    return row;
  }

  get(orgId: string, environment: string, name: string, entityType: string, entityId: string): ProjectionRow | undefined {
    return this.#rows.get([orgId, environment, name, entityType, entityId]) as ProjectionRow | undefined;
  }

  /**
   * The names of the org's projections in one environment that hold rows, in order, after `after`:
   * one key read per name (each read starts past the whole of the name before).
   */
  names(orgId: string, environment: string, filter: { limit: number; after?: string }): { names: string[]; next: string | null } {
    const names: string[] = [];
    // Entity types, and "~step", sort below U+FFFF: [.., name, "\uffff"] is past every row of the name.
    let start: string[] = filter.after === undefined ? [orgId, environment] : [orgId, environment, filter.after, '\uffff'];
    for (;;) {
      const [key] = this.#rows.getKeys({ start, end: [orgId, environment, '\uffff'], limit: 1 });
      if (key === undefined) return { names, next: null };
      const name = (key as RowKey)[2];
      if (names.length === filter.limit) return { names, next: names.at(-1) ?? null };
      names.push(name);
      start = [orgId, environment, name, '\uffff'];
    }
  }

  /**
   * Rows of one projection in key order (entity type, then id), filtered by entity type and status;
   * `after` continues a page. A status filter walks that status's index entries, so it reads only
   * the rows it lists.
   */
  list(orgId: string, environment: string, name: string, filter: { entityType?: string; status?: string; limit: number; after?: [string, string] }): { rows: ProjectionRow[]; next: [string, string] | null } {
    const rows: ProjectionRow[] = [];
    let last: [string, string] | null = null;
    // The scan stays bounded as a safeguard (an index entry whose row is gone is passed over), and
    // a row's data can be 256 KiB: the page also ends once its rows pass MAX_PAGE_BYTES, as every list does.
    let scanned = 0;
    let bytes = 0;
    const full = (): boolean => rows.length >= filter.limit || scanned >= MAX_SCAN_PER_PAGE || bytes >= MAX_PAGE_BYTES;
    // A cursor only when something follows the page: a page that is full exactly at the end of the
    // rows ends the list, as every other list does.
    let more = false;
    for (const [type, id, row] of this.#walk([orgId, environment, name], filter)) {
      if (filter.entityType !== undefined && type !== filter.entityType) break;
      if (filter.after !== undefined && type === filter.after[0] && id === filter.after[1]) continue;
      if (full()) {
        more = true;
        break;
      }
      last = [type, id];
      scanned++;
      if (row !== undefined) {
        rows.push(row);
        bytes += textBytes(JSON.stringify(row));
      }
    }
    return { rows, next: more ? last : null };
  }

  /** [entityType, entityId, the row when it passes the status filter] in key order, from the filter's start. */
  *#walk(base: [string, string, string], filter: { entityType?: string; status?: string; after?: [string, string] }): Iterable<[string, string, ProjectionRow | undefined]> {
    const from = filter.after ?? (filter.entityType === undefined ? [] : [filter.entityType]);
    // Entity types ([a-z0-9_.-], or "~step") sort below U+FFFF; entity ids need not (an emoji's
    // UTF-8 sorts above it), so one type's rows end where the type changes, not at a sentinel id.
    if (filter.status === undefined) {
      for (const { key, value } of this.#rows.getRange({ start: [...base, ...from], end: [...base, '\uffff'] })) {
        const [, , , type, id] = key as RowKey;
        yield [type, id, value as ProjectionRow];
      }
      return;
    }
    const scope = [...base, filter.status];
    for (const key of this.#byStatus.getKeys({ start: [...scope, ...from], end: [...scope, '\uffff'] })) {
      const [, , , , type, id] = key as [string, string, string, string, string, string];
      const row = this.#rows.get([...base, type, id]) as ProjectionRow | undefined;
      yield [type, id, row?.status === filter.status ? row : undefined];
    }
  }
}
