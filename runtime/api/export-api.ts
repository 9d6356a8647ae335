// REST: GET /organizations/:org_id/export, the whole organization as JSON lines (NDJSON), a page at a
// time: what each line holds is org-export-sections.ts. Each page ends with one more line,
// `{"kind":"more","next_cursor":"..."}` (ask again with ?cursor=) or `{"kind":"end"}`; `sluice
// export` follows them into one file. Needs the admin role (it holds every key's and workflow's
// details an admin sees).

import type { Route } from '../http/types.ts';
import { MAX_PAGE_BYTES } from '../ledger/page-by-time.ts';
import { exportPage, isExportPosition, type ExportPosition, type OrgExport } from '../tenancy/org-export.ts';
import type { ApiContext } from './context.ts';
import { encodeCursor, parseCursorWith, parseLimit } from './query-params.ts';

/** Records a page holds unless `?limit=` says fewer (the API's largest page). */
const DEFAULT_EXPORT_PAGE = 500;
/** Keys a page reads at most, records or not. */
const SCAN_PER_PAGE = 5_000;

export function exportRoutes(ctx: ApiContext, exported: OrgExport): Route[] {
  return [
    {
      method: 'GET',
      pattern: '/organizations/:org_id/export',
      // A page of up to MAX_PAGE_BYTES: built in its org's turn (page-turns.ts).
      answersPages: true,
      handler: (request) => {
        const org = ctx.auth.requireOrg(request, request.params.org_id ?? '', 'admin');
        const items = request.query.has('limit') ? parseLimit(request) : DEFAULT_EXPORT_PAGE;
        const cursor = parseCursorWith(request, (position) => isExportPosition(position, exported.sections));
        const from: ExportPosition = cursor === undefined ? { section: 0, after: null } : { section: cursor[0] as number, after: cursor[1] as ExportPosition['after'] };
        const page = exportPage(exported, org.id, from, { items, bytes: MAX_PAGE_BYTES, scan: SCAN_PER_PAGE });
        const trailer = page.next === null ? { kind: 'end' } : { kind: 'more', next_cursor: encodeCursor(request, [page.next.section, page.next.after]) };
        return { status: 200, text: `${[...page.lines, JSON.stringify(trailer)].join('\n')}\n`, headers: { 'content-type': 'application/x-ndjson' } };
      },
    },
  ];
}
