// REST: read models written by custom actions. List one projection (filter by entity_type and
// status, paged) or get one row by entity; every read is scoped to one environment.

import { InputError, notFound } from '../errors.ts';
import { json, type HttpRequest, type Route } from '../http/types.ts';
import { isEntityId, isEntityType, isProjectionName, isRowType, type ProjectionStore } from '../projections/projection-store.ts';
import { characterCount } from '../validation/character-count.ts';
import type { ApiContext } from './context.ts';
import { encodeCursor, ENVIRONMENT_QUERY, environmentOf, parseCursorOf, parseLimit } from './query-params.ts';

/** DESIGN 6.5: a row's status is at most 40 characters. */
const MAX_STATUS_LENGTH = 40;

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

export function projectionRoutes(ctx: ApiContext, projections: ProjectionStore): Route[] {
  const base = '/organizations/:org_id/projections/:name';
  return [
    {
      method: 'GET',
      pattern: base,
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
        const name = projectionName(request);
        const { entity_type: type = '', entity_id: id = '' } = request.params;
        if (!isEntityType(type)) throw notFound('Projection row', 'entity_type');
        if (!isEntityId(id)) throw notFound('Projection row', 'entity_id');
        const row = projections.get(org.id, environmentOf(request, org), name, type, id);
        if (row === undefined) throw notFound(`Projection row ${name}/${type}/${id}`);
        return json(200, { row });
      },
    },
  ];
}
