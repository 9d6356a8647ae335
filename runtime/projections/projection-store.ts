// Read models written by custom actions (DESIGN 6.5 `projection`): upserted by entity, or appended
// per step key, always inside the transaction that completes the step, so a retry never doubles a row.

import type { LedgerTable } from '../ledger/ledger.ts';
import type { JsonValue } from '../../actors/json.ts';
import { ENTITY_TYPE, PROJECTION_NAME, type ProjectionWrite } from '../actions/output-contract.ts';
import type { Ledger } from '../ledger/ledger.ts';
import { removeEnvironmentKeys } from '../ledger/remove-environment.ts';
import { MAX_PAGE_BYTES, MAX_SCAN_PER_PAGE } from '../ledger/page-by-time.ts';

/** Rows without an entity live under this entity type, keyed by the step key that wrote them. */
const APPENDED = '~step';
/** DESIGN 6.5: an entity_id is 1-200 characters; an appended row's `<runId>:<stepId>` fits too. */
const MAX_ENTITY_ID_LENGTH = 200;

/** Whether a string can name a projection (DESIGN 6.5); any other name has no rows. */
export const isProjectionName = (value: unknown): value is string => typeof value === 'string' && PROJECTION_NAME.test(value);
/** Whether a string can be a row's entity_type. */
export const isEntityType = (value: unknown): value is string => typeof value === 'string' && ENTITY_TYPE.test(value);
/** Whether a string can be a row's entity_id. */
export const isEntityId = (value: unknown): value is string => typeof value === 'string' && value.length >= 1 && value.length <= MAX_ENTITY_ID_LENGTH;
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

export class ProjectionStore {
  readonly #rows: LedgerTable;

  constructor(ledger: Ledger) {
    this.#rows = ledger.openDatabase('projections');
  }

  /** Removes the rows of one org's environment, at most `limit` (sandbox reset); returns how many. Call inside a write transaction. */
  removeEnvironment(orgId: string, environment: string, limit?: number): number {
    return removeEnvironmentKeys(this.#rows, orgId, environment, limit);
  }

  /** Upserts (entity) or appends (step key) one row. Call inside the step-completing transaction. */
  write(projection: ProjectionWrite, source: ProjectionSource): ProjectionRow {
    const entityType = projection.entity?.type ?? APPENDED;
    const entityId = projection.entity?.id ?? `${source.runId}:${source.stepId}`;
    const key = [source.orgId, source.environment, projection.name, entityType, entityId];
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
    return row;
  }

  get(orgId: string, environment: string, name: string, entityType: string, entityId: string): ProjectionRow | undefined {
    return this.#rows.get([orgId, environment, name, entityType, entityId]) as ProjectionRow | undefined;
  }

  /** Rows of one projection in key order, filtered by entity type and status; `after` continues a page. */
  list(orgId: string, environment: string, name: string, filter: { entityType?: string; status?: string; limit: number; after?: [string, string] }): { rows: ProjectionRow[]; next: [string, string] | null } {
    const base = [orgId, environment, name];
    const start = filter.after !== undefined ? [...base, ...filter.after] : filter.entityType !== undefined ? [...base, filter.entityType] : base;
    // Entity types ([a-z0-9_.-], or "~step") sort below U+FFFF; entity ids need not (an emoji's
    // UTF-8 sorts above it), so one type's rows end where the type changes, not at a sentinel id.
    const end = [...base, '\uffff'];
    const rows: ProjectionRow[] = [];
    let last: [string, string] | null = null;
    // A status filter may match few rows: the scan is bounded as for events and runs, and a page
    // that hit the bound comes back short, with a cursor to go on from. A row's data can be 256 KiB:
    // the page also ends once its rows pass MAX_PAGE_BYTES, as every list does.
    let scanned = 0;
    let bytes = 0;
    for (const { key, value } of this.#rows.getRange({ start, end })) {
      const [, , , type, id] = key as [string, string, string, string, string];
      if (filter.entityType !== undefined && type !== filter.entityType) break;
      if (filter.after !== undefined && type === filter.after[0] && id === filter.after[1]) continue;
      last = [type, id];
      scanned++;
      const row = value as ProjectionRow;
      if (filter.status === undefined || row.status === filter.status) {
        rows.push(row);
        bytes += JSON.stringify(row).length;
      }
      if (rows.length >= filter.limit || scanned >= MAX_SCAN_PER_PAGE || bytes >= MAX_PAGE_BYTES) break;
    }
    return { rows, next: rows.length >= filter.limit || scanned >= MAX_SCAN_PER_PAGE || bytes >= MAX_PAGE_BYTES ? last : null };
  }
}
