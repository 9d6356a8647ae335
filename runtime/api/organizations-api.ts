// REST: organizations. Create, list, update and delete them (platform admin token), read one (its
// keys). Creating an org also issues its first admin API key in the same durable transaction.
// Deleting one answers once it is fenced off (org-deletion.ts); its removal goes on in the background.

import { notFound, SluiceError } from '../errors.ts';
import { json, type RequestHead, type Route } from '../http/types.ts';
import { parseJsonRequest } from '../http/parse-json.ts';
import { readDisplayName } from '../validation/display-name.ts';
import { createBodyParser } from '../validation/body-schema.ts';
import { DEFAULT_MAX_CONCURRENT_RUNS, defaultIngestRate, ORG_ID_PATTERN, PLANS, type Organization, type Plan } from '../tenancy/organizations.ts';
import { describeApiKey } from '../tenancy/api-keys.ts';
import type { DeletionRecord } from '../tenancy/deleted-orgs.ts';
import type { OrgDeletions } from '../tenancy/org-deletion.ts';
import { isoAt, type ApiContext } from './context.ts';
import { encodeCursor, parseCursorOf, parseLimit } from './query-params.ts';
import { recordPrecondition, recordTag } from './if-match.ts';
import { refuseIdempotencyKey } from './idempotency-key.ts';
import { nextUpdateStamp } from '../update-stamp.ts';

const ORG_ID = new RegExp(ORG_ID_PATTERN);
const isOrgId = (value: unknown): value is string => typeof value === 'string' && ORG_ID.test(value);

interface CreateOrganizationBody {
  id: string;
  name: string;
  plan?: Plan;
  max_concurrent_runs?: number;
  ingest_rate_per_second?: number | null;
  ingest_bytes_per_second?: number | null;
}

/**
 * Payload bytes per second: from 1 MiB (a payload over a second's bytes leaves the org waiting until
 * the debt is paid: at most 7 s for an 8 MiB body at this rate) to 1 TiB.
 */
const BYTE_RATE_SCHEMA = { type: ['integer', 'null'], minimum: 1_048_576, maximum: 2 ** 40 };

/** An organization's name: at most 200 characters once trimmed (readDisplayName, as workflow names). */
const MAX_ORG_NAME = 200;

/** A display name: not only spaces, no control characters; its length is checked once trimmed. */
const NAME_SCHEMA = {
  type: 'string',
  minLength: 1,
  pattern: '^[^\\u0000-\\u001f\\u007f]*[^\\u0000-\\u001f\\u007f\\s][^\\u0000-\\u001f\\u007f]*$',
  description: 'text that is not only white space, without control characters (tabs, line breaks)',
};

const parseCreate = createBodyParser<CreateOrganizationBody>({
  type: 'object',
  additionalProperties: false,
  required: ['id', 'name'],
  properties: {
    id: { type: 'string', pattern: ORG_ID_PATTERN },
    name: NAME_SCHEMA,
    plan: { type: 'string', enum: [...PLANS] },
    max_concurrent_runs: { type: 'integer', minimum: 1, maximum: 1000 },
    ingest_rate_per_second: { type: ['integer', 'null'], minimum: 1, maximum: 1_000_000 },
    ingest_bytes_per_second: BYTE_RATE_SCHEMA,
  },
});

const parseUpdate = createBodyParser<Partial<Omit<CreateOrganizationBody, 'id'>>>({
  type: 'object',
  additionalProperties: false,
  minProperties: 1,
  properties: {
    name: NAME_SCHEMA,
    plan: { type: 'string', enum: [...PLANS] },
    max_concurrent_runs: { type: 'integer', minimum: 1, maximum: 1000 },
    ingest_rate_per_second: { type: ['integer', 'null'], minimum: 1, maximum: 1_000_000 },
    ingest_bytes_per_second: BYTE_RATE_SCHEMA,
  },
});

/** A deletion as the API shows it: 202 while its removal is under way, 200 once it is done. */
function deletionAnswer(record: DeletionRecord) {
  const { organization_id, state, requested_at, removed_at } = record;
  const recordsRemoved = Object.values(record.removed).reduce((sum, count) => sum + count, 0);
  return json(state === 'removed' ? 200 : 202, {
    deletion: { organization_id, state, requested_at, removed_at, records_removed: recordsRemoved, hook_runner_secrets_pending: record.actions_with_secrets.length > 0 },
  });
}

/** `onLimitsChanged` lets the run scheduler pick up a new `max_concurrent_runs` at once, and the live rooms close sandbox sockets a new plan no longer allows. */
export function organizationRoutes(ctx: ApiContext, deletions: OrgDeletions, onLimitsChanged: (orgId: string) => void): Route[] {
  // Platform admin only, and answered for an org already deleted too (the usual org check would 404);
  // another org's key is a 404 all the same, as everywhere.
  const platformAdminFirst = (head: RequestHead): void => ctx.auth.requirePlatformAdmin(head, head.params.org_id ?? '');
  return [
    {
      method: 'POST',
      pattern: '/organizations',
      handler: async (request) => {
        ctx.auth.requirePlatformAdmin(request);
        refuseIdempotencyKey(request.headers['idempotency-key'], 'the org\'s first admin key', 'if an answer was lost, the org answers 409 organization_exists: make an admin key for it (POST /organizations/:org/api-keys, with the platform admin token) and revoke the one nobody saw.');
        const body = parseCreate(parseJsonRequest(request));
        const name = readDisplayName(body.name, 'name', MAX_ORG_NAME);
        const now = isoAt(ctx.clock.now());
        const org: Organization = {
          id: body.id,
          name,
          plan: body.plan ?? 'starter',
          max_concurrent_runs: body.max_concurrent_runs ?? DEFAULT_MAX_CONCURRENT_RUNS,
          ingest_rate_per_second: body.ingest_rate_per_second === undefined ? defaultIngestRate(body.plan ?? 'starter') : body.ingest_rate_per_second,
          ingest_bytes_per_second: body.ingest_bytes_per_second ?? null,
          created_at: now,
          updated_at: now,
        };
        const issued = ctx.apiKeys.issue(org.id, 'admin', now);
        await ctx.orgs.create(org, issued.write);
        return json(201, { organization: org, api_key: issued.key, api_key_info: describeApiKey(issued.record) }, recordTag(org));
      },
    },
    {
      method: 'GET',
      pattern: '/organizations',
      query: ['limit', 'cursor'],
      handler: (request) => {
        ctx.auth.requirePlatformAdmin(request);
        const limit = parseLimit(request);
        const after = parseCursorOf(request, [isOrgId])?.[0];
        // One more than the page: a cursor only when something follows it.
        const orgs = ctx.orgs.list(after, limit + 1);
        const page = orgs.slice(0, limit);
        return json(200, { organizations: page, next_cursor: orgs.length > limit ? encodeCursor(request, [page.at(-1)?.id]) : null });
      },
    },
    {
      method: 'PATCH',
      pattern: '/organizations/:org_id',
      // The platform admin token, as its refusal says: an org's own key never may.
      beforeBody: platformAdminFirst,
      handler: async (request) => {
        ctx.auth.requirePlatformAdmin(request);
        const current = ctx.auth.requireOrg(request, request.params.org_id ?? '', 'admin');
        const matches = recordPrecondition(request.headers['if-match'], 'organization');
        const parsed = parseUpdate(parseJsonRequest(request));
        const update = parsed.name === undefined ? parsed : { ...parsed, name: readDisplayName(parsed.name, 'name', MAX_ORG_NAME, current.name) };
        // Merged onto the organization as stored when the write runs: a concurrent update is not undone
        // (with If-Match, the organization then must be the one the client read: 412 otherwise).
        // A new plan brings its own ingest rate unless the same request sets one.
        let next: Organization | undefined;
        try {
          next = await ctx.orgs.update(current.id, (stored): Organization => {
            matches(stored);
            const planRate = update.plan !== undefined && update.plan !== stored.plan && update.ingest_rate_per_second === undefined ? { ingest_rate_per_second: defaultIngestRate(update.plan) } : {};
            return { ...stored, ...update, ...planRate, updated_at: nextUpdateStamp(stored.updated_at, ctx.clock.now()) };
          });
        } catch (error) {
          // A write whose flush failed may have committed: what hangs on the org's limits follows it
          // as stored (a plan that lost the sandbox closes its sandbox sockets), and the caller gets
          // the 5xx to retry, rather than a sandbox streaming on until a retry.
          if (!(error instanceof SluiceError) || error.status >= 500) onLimitsChanged(current.id);
          throw error;
        }
        if (next === undefined) throw notFound('Organization', 'org_id');
        onLimitsChanged(next.id);
        return json(200, { organization: next }, recordTag(next));
      },
    },
    {
      method: 'DELETE',
      pattern: '/organizations/:org_id',
      beforeBody: platformAdminFirst,
      // A body is refused by the server (400 unexpected_body), as on every DELETE.
      handler: async (request) => {
        // With If-Match, an org not yet deleted is deleted only as that tag names it (412 otherwise:
        // the deletion cannot be undone); one already deleted answers its record, as without.
        const record = await deletions.delete(request.params.org_id ?? '', recordPrecondition(request.headers['if-match'], 'organization'));
        if (record === undefined) throw notFound('Organization', 'org_id');
        return deletionAnswer(record);
      },
    },
    {
      method: 'GET',
      pattern: '/organizations/:org_id/deletion',
      query: [],
      beforeBody: platformAdminFirst,
      handler: (request) => {
        const record = deletions.get(request.params.org_id ?? '');
        if (record === undefined) throw notFound('Deletion of this organization', 'org_id');
        return deletionAnswer(record);
      },
    },
    {
      method: 'GET',
      pattern: '/organizations/:org_id',
      query: [],
      handler: (request) => {
        const org = ctx.auth.requireOrg(request, request.params.org_id ?? '', 'viewer');
        return json(200, { organization: org }, recordTag(org));
      },
    },
  ];
}
