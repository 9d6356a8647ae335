// The two reads every org's named, environment-scoped record has (sources, schedules, devices):
// GET <base> lists those of the requested environment, GET <base>/:name answers one (404 for a
// record of the other environment). Reads need the viewer role.

import { rawJson, type Route } from '../http/types.ts';
import type { ApiContext } from './context.ts';
import { environmentOf, namedInEnvironment } from './query-params.ts';

export interface NamedRecords<T extends { readonly environment: string }> {
  /** The answers' keys: `{[plural]: [...]}` and `{[singular]: {...}}`; `what` names one in a 404. */
  readonly plural: string;
  readonly singular: string;
  readonly what: string;
  readonly list: (orgId: string) => readonly T[];
  readonly require: (orgId: string, name: string) => T;
  /** The API view of one record. */
  readonly describe: (record: T) => unknown;
}

export function namedRecordReads<T extends { readonly environment: string }>(ctx: ApiContext, base: string, records: NamedRecords<T>): Route[] {
  return [
    {
      method: 'GET',
      pattern: base,
      handler: (request) => {
        const org = ctx.auth.requireOrg(request, request.params.org_id ?? '', 'viewer');
        const environment = environmentOf(request, org);
        return rawJson(200, { [records.plural]: records.list(org.id).filter((record) => record.environment === environment).map(records.describe) });
      },
    },
    {
      method: 'GET',
      pattern: `${base}/:name`,
      handler: (request) => {
        const org = ctx.auth.requireOrg(request, request.params.org_id ?? '', 'viewer');
        return rawJson(200, { [records.singular]: records.describe(namedInEnvironment(request, org, records.what, records.require)) });
      },
    },
  ];
}
