// Read models written by custom actions (DESIGN 6.5 `projection`): upserted by entity, or appended
// per step key, always inside the transaction that completes the step, so a retry never doubles a row.
// Rows with a status are indexed by it too, so a status filter reads only the rows it lists.

import type { LedgerKey, LedgerRoot, LedgerTable } from '../ledger/ledger.ts';
import type { JsonValue } from '../../actors/json.ts';
import { ENTITY_TYPE, PROJECTION_NAME, type ProjectionWrite } from '../actions/output-contract.ts';
import type { Ledger } from '../ledger/ledger.ts';
import { passesOverTable } from '../ledger/passes-over-table.ts';
import { removeEnvironmentKeys } from '../ledger/remove-environment.ts';
import { characterCount } from '../validation/character-count.ts';
import { MAX_PAGE_BYTES, MAX_SCAN_PER_PAGE, textBytes } from '../ledger/page-by-time.ts';

/** The data format (data-format.ts) from which on rows with a status are indexed by it. */
export const PROJECTION_STATUS_FORMAT = 5;

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

/** The status index entry of a row: [orgId, environment, name, status, entityType, entityId] -> null. */
const statusKey = ([orgId, environment, name, entityType, entityId]: RowKey, status: string): LedgerKey => [orgId, environment, name, status, entityType, entityId];

export class ProjectionStore {
  readonly #root: LedgerRoot;
  /** [orgId, environment, name, entityType, entityId] -> ProjectionRow */
  readonly #rows: LedgerTable;
  readonly #byStatus: LedgerTable;

  constructor(ledger: Ledger) {
    this.#root = ledger.root;
    this.#rows = ledger.openDatabase('projections');
    this.#byStatus = ledger.openDatabase('projections-by-status');
  }

  /** Removes the rows of one org's environment, at most `limit` (sandbox reset), and their status entries; returns how many rows. Call inside a write transaction. */
  removeEnvironment(orgId: string, environment: string, limit = Number.POSITIVE_INFINITY): number {
    const removed = removeEnvironmentKeys(this.#rows, orgId, environment, limit);
    // Status entries are at most one per row: once the rows are gone, so are the rest of them.
    removeEnvironmentKeys(this.#byStatus, orgId, environment, removed < limit ? Number.POSITIVE_INFINITY : limit);
    return removed;
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
    const entityType = projection.entity?.type ?? APPENDED;
    const entityId = projection.entity?.id ?? `${source.runId}:${source.stepId}`;
    const key: RowKey = [source.orgId, source.environment, projection.name, entityType, entityId];
    const previous = this.#rows.get(key) as ProjectionRow | undefined;
    const now = new Date(source.at).toISOString();
    const row: ProjectionRow = {
      name: projection.name,
      environment: source.environment,
      entity_type: projection.entity?.type ?? null,
      entity_id: projection.entity?.id ?? null,
      title: projection.title,
      status: projection.status,
      data: projection.data,
      revision: (previous?.revision ?? 0) + 1,
      run_id: source.runId,
      step_id: source.stepId,
      event_id: source.eventId,
      created_at: previous?.created_at ?? now,
      updated_at: now,
    };
    this.#rows.put(key, row);
    if (previous?.status !== row.status) {
      if (previous !== undefined && previous.status !== null) this.#byStatus.remove(statusKey(key, previous.status));
      if (row.status !== null) this.#byStatus.put(statusKey(key, row.status), null);
    }
    return row;
  }

  get(orgId: string, environment: string, name: string, entityType: string, entityId: string): ProjectionRow | undefined {
    return this.#rows.get([orgId, environment, name, entityType, entityId]) as ProjectionRow | undefined;
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
