// REST: create, list and revoke an org's API keys (admin role). The key text is shown once; a
// revocation is reported to `onRevoked` (the live rooms close the key's sockets) before the answer.

import { json, type Route } from '../http/types.ts';
import { parseJsonRequest } from '../http/parse-json.ts';
import { createBodyParser } from '../validation/body-schema.ts';
import { ROLES, describeApiKey, type Role } from '../tenancy/api-keys.ts';
import { isoAt, type ApiContext } from './context.ts';
import { encodeCursor, isListedId, parseCursorOf, parseLimit } from './query-params.ts';

const parseCreate = createBodyParser<{ role: Role }>({
  type: 'object',
  additionalProperties: false,
  required: ['role'],
  properties: { role: { type: 'string', enum: [...ROLES] } },
});

/** `onRevoked` runs once the revocation is durable, before the 200 is sent. */
export function apiKeyRoutes(ctx: ApiContext, onRevoked: (orgId: string, keyId: string) => void): Route[] {
  const base = '/organizations/:org_id/api-keys';
  return [
    {
      method: 'POST',
      pattern: base,
      handler: async (request) => {
        const org = ctx.auth.requireOrg(request, request.params.org_id ?? '', 'admin');
        const { role } = parseCreate(parseJsonRequest(request));
        const { record, key } = await ctx.apiKeys.create(org.id, role, isoAt(ctx.clock.now()));
        return json(201, { id: record.id, key, role: record.role, prefix: record.prefix, created_at: record.created_at });
      },
    },
    {
      method: 'GET',
      pattern: base,
      handler: (request) => {
        const org = ctx.auth.requireOrg(request, request.params.org_id ?? '', 'admin');
        const limit = parseLimit(request);
        const after = parseCursorOf(request, [isListedId]);
        // One more than asked tells whether another page follows.
        const keys = ctx.apiKeys.list(org.id, { limit: limit + 1, ...(after === undefined ? {} : { afterId: after[0] }) });
        const page = keys.slice(0, limit);
        const last = page.at(-1);
        return json(200, { api_keys: page.map(describeApiKey), next_cursor: keys.length > limit && last !== undefined ? encodeCursor([last.id]) : null });
      },
    },
    {
      method: 'DELETE',
      pattern: `${base}/:key_id`,
      handler: async (request) => {
        const org = ctx.auth.requireOrg(request, request.params.org_id ?? '', 'admin');
        const revoked = await ctx.apiKeys.revoke(org.id, request.params.key_id ?? '', isoAt(ctx.clock.now()));
        onRevoked(org.id, revoked.id);
        return json(200, { api_key: describeApiKey(revoked) });
      },
    },
  ];
}
