// REST: read models written by custom actions. List one projection (filter by entity_type and
// status, paged), get or delete one row by entity, delete a whole projection, or list the names of
// those holding rows; every request is scoped to one environment.

import { InputError, notFound, RetryableError } from '../errors.ts';
import { json, noContent, type HttpRequest, type Route } from '../http/types.ts';
import { failedWriteError } from '../ledger/commit-failure-guard.ts';
import { durably } from '../ledger/durable-write.ts';
import type { Ledger } from '../ledger/ledger.ts';
import { isEntityId, isEntityType, isProjectionName, isRowType, type ProjectionStore } from '../projections/projection-store.ts';
import { characterCount } from '../validation/character-count.ts';
import type { ApiContext } from './context.ts';
import { encodeCursor, ENVIRONMENT_QUERY, environmentOf, parseCursorOf, parseLimit } from './query-params.ts';

/** DESIGN 6.5: a row's status is at most 40 characters. */
const MAX_STATUS_LENGTH = 40;

/** Rows a projection's delete removes per durable transaction: other writes go on between them. */
export const DELETE_CHUNK = 1_000;

const parseAfter = (request: HttpRequest): [string, string] | undefined => parseCursorOf(request, [isRowType, isEntityId]);

/** The projection named by the path; a name that cannot name one (DESIGN 6.5) is a 404, like any unknown id. */
function projectionName(request: HttpRequest): string {
  const name = request.params.name ?? '';
  if (!isProjectionName(name)) throw notFound('Projection', 'name');
  return name;
}

function parseEntityTypeFilter(request: HttpRequest): string | undefined {
  const value = request.query.get('entity_type') ?? undefined;
  if (value !== undefined && !isEntityType(value)) {
    throw new InputError(400, 'invalid_entity_type', 'entity_type must match [a-z0-9_.-]{1,64}.', { field: 'entity_type' });
  }
  return value;
}

function parseStatusFilter(request: HttpRequest): string | undefined {
  const value = request.query.get('status') ?? undefined;
  if (value !== undefined && characterCount(value) > MAX_STATUS_LENGTH) {
    throw new InputError(400, 'invalid_status', `status must be at most ${MAX_STATUS_LENGTH} characters.`, { field: 'status' });
  }
  return value;
}

/** The row the path names: a type or id that cannot name one is a 404, like any unknown id. */
function rowAddress(request: HttpRequest): { name: string; type: string; id: string } {
  const name = projectionName(request);
  const { entity_type: type = '', entity_id: id = '' } = request.params;
  if (!isEntityType(type)) throw notFound('Projection row', 'entity_type');
  if (!isEntityId(id)) throw notFound('Projection row', 'entity_id');
  return { name, type, id };
}

/**
 * Removes every row of one projection in one environment, DELETE_CHUNK per durable transaction,
 * until a chunk finds fewer (rows steps write meanwhile may be removed too, or stay); resolves with
 * how many. A write that fails part-way says what was removed: that stays removed. So does a stop
 * (`stopping` aborted), which ends it after the chunk under way: a million rows take seconds.
 */
export async function removeProjectionRows(ledger: Ledger, projections: ProjectionStore, orgId: string, environment: string, name: string, stopping?: AbortSignal): Promise<number> {
  const { root } = ledger;
  let removed = 0;
  for (;;) {
    if (removed > 0 && stopping?.aborted === true) {
      throw new RetryableError('stopping', `Sluice is stopping: the projection's delete was cut short after ${removed} rows, which stay removed; send the DELETE again in a few seconds for the rest.`, 2000);
    }
    let chunk;
    try {
      chunk = await durably(root, root.transaction(() => projections.removeProjection(orgId, environment, name, DELETE_CHUNK)));
    } catch (error) {
      // Any write the ledger could not complete, an unconfirmed flush too: the generic answer for a
      // stored request ("look for it before sending it again") means nothing here, where sending it
      // again is always safe.
      if (failedWriteError('projection delete', error) === undefined) throw error;
      const done = removed === 0 ? 'Nothing was removed' : `It was cut short after ${removed} rows, which stay removed`;
      throw new RetryableError('write_failed', `The projection's rows could not all be deleted: a write failed (the disk may be full). ${done}; send the DELETE again later for the rest.`, 5000, { cause: error });
    }
    removed += chunk;
    if (chunk < DELETE_CHUNK) return removed;
  }
}

/** `stopping`: aborted when the runtime begins to stop (a whole-projection delete ends between chunks). */
export function projectionRoutes(ctx: ApiContext, projections: ProjectionStore, stopping?: AbortSignal): Route[] {
  const base = '/organizations/:org_id/projections/:name';
  return [
    {
      method: 'GET',
      pattern: '/organizations/:org_id/projections',
      // A page of up to MAX_PAGE_BYTES: built in its org's turn (page-turns.ts).
      answersPages: true,
      query: ['environment', 'limit', 'cursor'],
      handler: (request) => {
        const org = ctx.auth.requireOrg(request, request.params.org_id ?? '', 'viewer');
        const after = parseCursorOf(request, [isProjectionName])?.[0];
        const page = projections.names(org.id, environmentOf(request, org), { limit: parseLimit(request), ...(after === undefined ? {} : { after }) });
        return json(200, { projections: page.names.map((name) => ({ name })), next_cursor: page.next === null ? null : encodeCursor(request, [page.next]) });
      },
    },
    {
      method: 'DELETE',
      pattern: base,
      query: ENVIRONMENT_QUERY,
      handler: async (request) => {
        const org = ctx.auth.requireOrg(request, request.params.org_id ?? '', 'developer');
        const name = projectionName(request);
        const removed = await removeProjectionRows(ctx.ledger, projections, org.id, environmentOf(request, org), name, stopping);
        return json(200, { removed });
      },
    },
    {
      method: 'DELETE',
      pattern: `${base}/:entity_type/:entity_id`,
      query: ENVIRONMENT_QUERY,
      handler: async (request) => {
        const org = ctx.auth.requireOrg(request, request.params.org_id ?? '', 'developer');
        const { name, type, id } = rowAddress(request);
        const environment = environmentOf(request, org);
        const { root } = ctx.ledger;
        const removed = await durably(root, root.transaction(() => projections.removeRow(org.id, environment, name, type, id)));
        if (!removed) throw notFound(`Projection row ${name}/${type}/${id}`);
        return noContent();
      },
    },
    {
      method: 'GET',
      pattern: base,
      // A page of up to MAX_PAGE_BYTES: built in its org's turn (page-turns.ts).
      answersPages: true,
      handler: (request) => {
        const org = ctx.auth.requireOrg(request, request.params.org_id ?? '', 'viewer');
        const name = projectionName(request);
        const entityType = parseEntityTypeFilter(request);
        const status = parseStatusFilter(request);
        const after = parseAfter(request);
        const page = projections.list(org.id, environmentOf(request, org), name, {
          limit: parseLimit(request),
          ...(entityType === undefined ? {} : { entityType }),
          ...(status === undefined ? {} : { status }),
          ...(after === undefined ? {} : { after }),
        });
        return json(200, { rows: page.rows, next_cursor: page.next === null ? null : encodeCursor(request, page.next) });
      },
    },
    {
      method: 'GET',
      pattern: `${base}/:entity_type/:entity_id`,
      query: ENVIRONMENT_QUERY,
      handler: (request) => {
        const org = ctx.auth.requireOrg(request, request.params.org_id ?? '', 'viewer');
        const { name, type, id } = rowAddress(request);
        const row = projections.get(org.id, environmentOf(request, org), name, type, id);
        if (row === undefined) throw notFound(`Projection row ${name}/${type}/${id}`);
        return json(200, { row });
      },
    },
  ];
}
