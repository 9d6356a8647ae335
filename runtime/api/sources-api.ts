// REST: create, list, get, update (rotate secrets, schemas, body cap) and delete webhook sources.
// Writes need the developer role; secrets are accepted but never returned. Every request is scoped
// to one environment (`?environment=`), as for workflows and runs.

import { json, noContent, type HttpRequest, type Route } from '../http/types.ts';
import { createBodyParser } from '../validation/body-schema.ts';
import { EVENT_TYPES_BODY_SCHEMA } from '../sources/event-schemas.ts';
import {
  DEFAULT_BODY_LIMIT_BYTES,
  ENVIRONMENTS,
  MAX_ACTIVE_SECRETS,
  MAX_BODY_LIMIT_BYTES,
  SCHEMES,
  SOURCE_NAME_PATTERN,
  assertSecretsFit,
  describeSource,
  isSameSource,
  newSourceId,
  type Environment,
  type Scheme,
  type SourceRecord,
} from '../sources/source-record.ts';
import type { Organization } from '../tenancy/organizations.ts';
import { isoAt, type ApiContext } from './context.ts';
import { namedRecordReads } from './named-record-reads.ts';
import { assertWriterAllowed, compileSchemasForWrite } from './schema-write-compile.ts';
import { ENVIRONMENT_QUERY, namedInEnvironment } from './query-params.ts';
import { assertSandboxAllowed } from '../tenancy/sandbox-guard.ts';
import { parseSchemaWrite } from '../sources/exact-schema-numbers.ts';
import { recordPrecondition, recordTag } from './if-match.ts';
import { nextUpdateStamp } from '../update-stamp.ts';

interface SourceBody {
  name: string;
  scheme?: Scheme;
  secrets: string[];
  environment?: Environment;
  event_types?: Record<string, object>;
  body_limit_bytes?: number;
}
type SourceUpdate = Partial<Omit<SourceBody, 'name' | 'scheme' | 'environment'>>;

const secretsSchema = {
  type: 'array',
  minItems: 1,
  maxItems: MAX_ACTIVE_SECRETS,
  items: { type: 'string', minLength: 8, maxLength: 512 },
};
const bodyLimitSchema = { type: 'integer', minimum: 1024, maximum: MAX_BODY_LIMIT_BYTES };

const parseCreate = createBodyParser<SourceBody>({
  type: 'object',
  additionalProperties: false,
  required: ['name', 'secrets'],
  properties: {
    name: { type: 'string', pattern: SOURCE_NAME_PATTERN },
    scheme: { type: 'string', enum: [...SCHEMES] },
    secrets: secretsSchema,
    environment: { type: 'string', enum: [...ENVIRONMENTS] },
    event_types: EVENT_TYPES_BODY_SCHEMA,
    body_limit_bytes: bodyLimitSchema,
  },
});

const parseUpdate = createBodyParser<SourceUpdate>({
  type: 'object',
  additionalProperties: false,
  // An empty update is refused: written, it moved the ETag, and others' If-Match failed for nothing.
  minProperties: 1,
  properties: { secrets: secretsSchema, event_types: EVENT_TYPES_BODY_SCHEMA, body_limit_bytes: bodyLimitSchema },
});

export function sourceRoutes(ctx: ApiContext): Route[] {
  const base = '/organizations/:org_id/sources';
  /** The source named by the path in the requested environment (`?environment=`, default production). */
  const requireSource = (request: HttpRequest, org: Organization): SourceRecord => namedInEnvironment(request, org, 'Source', (orgId, name) => ctx.sources.require(orgId, name));
  return [
    {
      method: 'POST',
      pattern: base,
      handler: async (request) => {
        const org = ctx.auth.requireOrg(request, request.params.org_id ?? '', 'developer');
        const body = parseCreate(parseSchemaWrite(request));
        assertSandboxAllowed(org, body.environment ?? 'production');
        const scheme = body.scheme ?? 'standard-webhooks';
        assertSecretsFit(scheme, body.secrets);
        await compileSchemasForWrite(ctx, request, org.id, body.environment ?? 'production', body.event_types);
        const now = isoAt(ctx.clock.now());
        const source: SourceRecord = {
          id: newSourceId(),
          org_id: org.id,
          name: body.name,
          scheme,
          secrets: body.secrets,
          environment: body.environment ?? 'production',
          event_types: body.event_types ?? {},
          body_limit_bytes: body.body_limit_bytes ?? DEFAULT_BODY_LIMIT_BYTES,
          created_at: now,
          updated_at: now,
        };
        await ctx.sources.create(source, () => assertWriterAllowed(ctx, request, org.id, source.environment));
        return json(201, { source: describeSource(source) }, recordTag(source));
      },
    },
    ...namedRecordReads(ctx, base, { plural: 'sources', singular: 'source', what: 'Source', listAfter: (orgId, afterName) => ctx.sources.listAfter(orgId, afterName), require: (orgId, name) => ctx.sources.require(orgId, name), describe: describeSource }),
    {
      method: 'PATCH',
      pattern: `${base}/:name`,
      query: ENVIRONMENT_QUERY,
      handler: async (request) => {
        const org = ctx.auth.requireOrg(request, request.params.org_id ?? '', 'developer');
        const current = requireSource(request, org);
        const matches = recordPrecondition(request.headers['if-match'], 'source');
        // Refused now when already stale (before compiling schemas), and again in the write.
        matches(current);
        const update = parseUpdate(parseSchemaWrite(request));
        if (update.secrets !== undefined) assertSecretsFit(current.scheme, update.secrets);
        await compileSchemasForWrite(ctx, request, org.id, current.environment, update.event_types);
        // Merged onto the source as stored when the write runs: a concurrent update is not undone. A
        // source deleted and made again while the schemas compiled is another source: 404, never
        // this request's secrets or schemas on it (its scheme may not even take those secrets). With
        // If-Match, the source stored then must be the one the client read (412 otherwise).
        const next = await ctx.sources.update(org.id, current.name, (stored): SourceRecord | undefined => {
          if (!isSameSource(stored, current)) return undefined;
          matches(stored);
          return {
            ...stored,
            ...(update.secrets === undefined ? {} : { secrets: update.secrets }),
            ...(update.event_types === undefined ? {} : { event_types: update.event_types }),
            ...(update.body_limit_bytes === undefined ? {} : { body_limit_bytes: update.body_limit_bytes }),
            updated_at: nextUpdateStamp(stored.updated_at, ctx.clock.now()),
          };
        });
        return json(200, { source: describeSource(next) }, recordTag(next));
      },
    },
    {
      method: 'DELETE',
      pattern: `${base}/:name`,
      query: ENVIRONMENT_QUERY,
      handler: async (request) => {
        const org = ctx.auth.requireOrg(request, request.params.org_id ?? '', 'developer');
        // One made again under the name (another environment, say) since it was read is not this one: 404.
        const addressed = requireSource(request, org);
        // With If-Match, removed only as that tag names it (RFC 9110: a stale tag is 412 for a DELETE too).
        const matches = recordPrecondition(request.headers['if-match'], 'source');
        matches(addressed);
        await ctx.sources.delete(org.id, addressed.name, (stored) => {
          if (!isSameSource(stored, addressed)) return false;
          matches(stored);
          return true;
        });
        return noContent();
      },
    },
  ];
}
