// The two reads every org's named, environment-scoped record has (sources, schedules, devices):
// GET <base> lists those of the requested environment by name, a page at a time (`limit`, `cursor`,
// and at most MAX_PAGE_BYTES of answer: a device or source can carry a megabyte of schemas),
// GET <base>/:name answers one (404 for a record of the other environment) with its ETag, for the
// If-Match of a PATCH (if-match.ts). Reads need the viewer role.

import { rawJson, type Route } from '../http/types.ts';
import type { ApiContext } from './context.ts';
import { byteCappedPage } from './byte-capped-page.ts';
import { recordTag, type StampedRecord } from './if-match.ts';
import { encodeCursor, ENVIRONMENT_QUERY, environmentOf, namedInEnvironment, parseCursorOf, parseLimit } from './query-params.ts';

interface NamedRecord extends StampedRecord {
  readonly name: string;
  readonly environment: string;
}

/** Names in a cursor: every record name here is at most 64 characters. */
const isRecordName = (value: unknown): value is string => typeof value === 'string' && value.length > 0 && value.length <= 128;

export interface NamedRecords<T extends NamedRecord> {
  /** The answers' keys: `{[plural]: [...]}` and `{[singular]: {...}}`; `what` names one in a 404. */
  readonly plural: string;
  readonly singular: string;
  readonly what: string;
  /** The org's records in name order after `afterName`, read lazily. */
  readonly listAfter: (orgId: string, afterName: string | undefined) => Iterable<T>;
  readonly require: (orgId: string, name: string) => T;
  /** The API view of one record. */
  readonly describe: (record: T) => unknown;
}

function* inEnvironment<T extends NamedRecord>(records: Iterable<T>, environment: string): Generator<T> {
  for (const record of records) if (record.environment === environment) yield record;
}

export function namedRecordReads<T extends NamedRecord>(ctx: ApiContext, base: string, records: NamedRecords<T>): Route[] {
  return [
    {
      method: 'GET',
      pattern: base,
      // A page of up to MAX_PAGE_BYTES: built in its org's turn (page-turns.ts).
      answersPages: true,
      handler: (request) => {
        const org = ctx.auth.requireOrg(request, request.params.org_id ?? '', 'viewer');
        const environment = environmentOf(request, org);
        const limit = parseLimit(request);
        const after = parseCursorOf(request, [isRecordName]);
        const page = byteCappedPage(inEnvironment(records.listAfter(org.id, after?.[0]), environment), limit, records.describe, (last) => encodeCursor(request, [last.name]));
        return rawJson(200, { [records.plural]: page.views, next_cursor: page.nextCursor });
      },
    },
    {
      method: 'GET',
      pattern: `${base}/:name`,
      query: ENVIRONMENT_QUERY,
      handler: (request) => {
        const org = ctx.auth.requireOrg(request, request.params.org_id ?? '', 'viewer');
        const record = namedInEnvironment(request, org, records.what, records.require);
        return rawJson(200, { [records.singular]: records.describe(record) }, recordTag(record));
      },
    },
  ];
}
