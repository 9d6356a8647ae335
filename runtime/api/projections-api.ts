// REST: read models written by custom actions. List one projection (filter by entity_type and
// status, paged) or get one row by entity; every read is scoped to one environment.

import { notFound } from '../errors.ts';
import { json, type HttpRequest, type Route } from '../http/types.ts';
import type { ProjectionStore } from '../projections/projection-store.ts';
import type { ApiContext } from './context.ts';
import { encodeCursor, environmentOf, parseCursorOf, parseLimit } from './query-params.ts';

const parseAfter = (request: HttpRequest): [string, string] | undefined =>
  parseCursorOf<[string, string]>(request, (v): v is [string, string] => typeof v[0] === 'string' && typeof v[1] === 'string');

export function projectionRoutes(ctx: ApiContext, projections: ProjectionStore): Route[] {
  const base = '/organizations/:org_id/projections/:name';
  return [
    {
      method: 'GET',
      pattern: base,
      handler: (request) => {
        const org = ctx.auth.requireOrg(request, request.params.org_id ?? '', 'viewer');
        const entityType = request.query.get('entity_type') ?? undefined;
        const status = request.query.get('status') ?? undefined;
        const after = parseAfter(request);
        const page = projections.list(org.id, environmentOf(request, org), request.params.name ?? '', {
          limit: parseLimit(request),
          ...(entityType === undefined ? {} : { entityType }),
          ...(status === undefined ? {} : { status }),
          ...(after === undefined ? {} : { after }),
        });
        return json(200, { rows: page.rows, next_cursor: page.next === null ? null : encodeCursor(page.next) });
      },
    },
    {
      method: 'GET',
      pattern: `${base}/:entity_type/:entity_id`,
      handler: (request) => {
        const org = ctx.auth.requireOrg(request, request.params.org_id ?? '', 'viewer');
        const { name = '', entity_type: type = '', entity_id: id = '' } = request.params;
        const row = projections.get(org.id, environmentOf(request, org), name, type, id);
        if (row === undefined) throw notFound(`Projection row ${name}/${type}/${id}`);
        return json(200, { row });
      },
    },
  ];
}
