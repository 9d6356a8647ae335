// REST: create, list and revoke an org's API keys (admin role). The key text is shown once; a
// revocation is reported to `onRevoked` (the live rooms close the key's sockets) before the answer.

import { RetryableError, SluiceError } from '../errors.ts';
import { json, type Route } from '../http/types.ts';
import { parseJsonRequest } from '../http/parse-json.ts';
import { createBodyParser } from '../validation/body-schema.ts';
import { ROLES, describeApiKey, revocationMayHaveTakenEffect, type Role } from '../tenancy/api-keys.ts';
import { isoAt, type ApiContext } from './context.ts';
import { refuseIdempotencyKey } from './idempotency-key.ts';
import { encodeCursor, isListedId, parseCursorOf, parseLimit } from './query-params.ts';
import { DiskSpaceLowError } from '../../hook-runner/disk-floor.ts';
import { diskLowWriteError } from '../ledger/commit-failure-guard.ts';

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
        refuseIdempotencyKey(request.headers['idempotency-key'], 'the new key', 'if an answer was lost, list the keys (GET …/api-keys) and revoke the one nobody saw.');
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
        return json(200, { api_keys: page.map(describeApiKey), next_cursor: keys.length > limit && last !== undefined ? encodeCursor(request, [last.id]) : null });
      },
    },
    {
      method: 'DELETE',
      pattern: `${base}/:key_id`,
      handler: async (request) => {
        const org = ctx.auth.requireOrg(request, request.params.org_id ?? '', 'admin');
        const keyId = request.params.key_id ?? '';
        let revoked;
        try {
          revoked = await ctx.apiKeys.revoke(org.id, keyId, isoAt(ctx.clock.now()));
        } catch (error) {
          // Refused below the disk floor: nothing was written, and the key's sockets stay.
          if (error instanceof DiskSpaceLowError) throw diskLowWriteError('revocation');
          // A write whose flush failed may have committed: the key's sockets close all the same (the
          // caller asked for it, and gets a 503 to retry), rather than stream on until a retry.
          if (revocationMayHaveTakenEffect(error)) onRevoked(org.id, keyId);
          if (error instanceof SluiceError) throw error;
          throw new RetryableError('write_failed', 'The revocation could not be saved durably; it may have taken effect. List the keys, then try again if it did not.', undefined, { cause: error });
        }
        onRevoked(org.id, revoked.id);
        return json(200, { api_key: describeApiKey(revoked) });
      },
    },
  ];
}
