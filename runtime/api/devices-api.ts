// REST: register, list, get, change the event schemas of, rotate the token of, and delete devices (socket triggers). Writes need
// the developer role, reads viewer; each request is scoped to one environment (`?environment=`),
// as for sources and schedules. A device's token is shown once, when it is made or rotated.

import { randomBytes } from 'node:crypto';
import { generateToken, hashToken } from '../auth/secrets.ts';
import { assertNoBodyFields } from '../http/parse-json.ts';
import { noContent, rawJson, type HttpRequest, type Route } from '../http/types.ts';
import { EVENT_TYPES_BODY_SCHEMA } from '../sources/event-schemas.ts';
import { ENVIRONMENTS, SOURCE_NAME_PATTERN, type Environment } from '../sources/source-record.ts';
import type { Organization } from '../tenancy/organizations.ts';
import { assertSandboxAllowed } from '../tenancy/sandbox-guard.ts';
import { describeDevice, type DeviceRecord } from '../triggers/device-record.ts';
import type { DeviceSockets } from '../triggers/device-sockets.ts';
import type { DeviceStore } from '../triggers/device-store.ts';
import { createBodyParser } from '../validation/body-schema.ts';
import { refuseIdempotencyKey } from './idempotency-key.ts';
import { isoAt, type ApiContext } from './context.ts';
import { namedRecordReads } from './named-record-reads.ts';
import { assertWriterAllowed, compileSchemasForWrite } from './schema-write-compile.ts';
import { ENVIRONMENT_QUERY, namedInEnvironment } from './query-params.ts';
import { parseSchemaWrite } from '../sources/exact-schema-numbers.ts';
import { recordPrecondition, recordTag } from './if-match.ts';
import { nextUpdateStamp } from '../update-stamp.ts';

const parseCreate = createBodyParser<{ name: string; environment?: Environment; event_types?: Record<string, object> }>({
  type: 'object',
  additionalProperties: false,
  required: ['name'],
  properties: { name: { type: 'string', pattern: SOURCE_NAME_PATTERN }, environment: { type: 'string', enum: [...ENVIRONMENTS] }, event_types: EVENT_TYPES_BODY_SCHEMA },
});

// An empty update is refused: written, it moved the ETag, and others' If-Match failed for nothing.
const parseUpdate = createBodyParser<{ event_types?: Record<string, object> }>({ type: 'object', additionalProperties: false, minProperties: 1, properties: { event_types: EVENT_TYPES_BODY_SCHEMA } });

/** A new device token and what is stored of it. */
function newToken(): { token: string; hash: string; prefix: string } {
  const token = generateToken('sdt_');
  return { token, hash: hashToken(token), prefix: token.slice(0, 12) };
}

export function deviceRoutes(ctx: ApiContext, devices: DeviceStore, sockets: DeviceSockets): Route[] {
  const base = '/organizations/:org_id/devices';
  /** The device named by the path in the requested environment (`?environment=`, default production). */
  const requireDevice = (request: HttpRequest, org: Organization): DeviceRecord => namedInEnvironment(request, org, 'Device', (orgId, name) => devices.require(orgId, name));
  return [
    {
      method: 'POST',
      pattern: base,
      handler: async (request) => {
        const org = ctx.auth.requireOrg(request, request.params.org_id ?? '', 'developer');
        refuseIdempotencyKey(request.headers['idempotency-key'], 'the device\'s token', 'if an answer was lost, the device answers 409 device_exists: rotate its token (POST …/devices/:name/token, with ?environment=sandbox for a sandbox device) for one you hold.');
        const body = parseCreate(parseSchemaWrite(request));
        const environment = body.environment ?? 'production';
        assertSandboxAllowed(org, environment);
        await compileSchemasForWrite(ctx, request, org.id, environment, body.event_types);
        const { token, hash, prefix } = newToken();
        const now = isoAt(ctx.clock.now());
        const device: DeviceRecord = {
          id: `dev_${randomBytes(12).toString('hex')}`,
          org_id: org.id,
          name: body.name,
          environment,
          token_hash: hash,
          token_prefix: prefix,
          event_types: body.event_types ?? {},
          created_at: now,
          updated_at: now,
          connection: null,
          last_disconnected_at: null,
          last_disconnect_reason: null,
        };
        await devices.create(device, () => assertWriterAllowed(ctx, request, org.id, environment));
        return rawJson(201, { device: describeDevice(device), token }, recordTag(device));
      },
    },
    ...namedRecordReads(ctx, base, { plural: 'devices', singular: 'device', what: 'Device', listAfter: (orgId, afterName) => devices.listAfter(orgId, afterName), require: (orgId, name) => devices.require(orgId, name), describe: describeDevice }),
    {
      // A new schema applies to the next message, on an open socket too.
      method: 'PATCH',
      pattern: `${base}/:name`,
      query: ENVIRONMENT_QUERY,
      handler: async (request) => {
        const org = ctx.auth.requireOrg(request, request.params.org_id ?? '', 'developer');
        const addressed = requireDevice(request, org);
        const matches = recordPrecondition(request.headers['if-match'], 'device');
        // Refused now when already stale (before compiling schemas), and again in the write.
        matches(addressed);
        const update = parseUpdate(parseSchemaWrite(request));
        await compileSchemasForWrite(ctx, request, org.id, addressed.environment, update.event_types);
        // A device deleted and made again while the schemas compiled is another device: 404. With
        // If-Match, the device stored then must be the one the client read (412 otherwise).
        const device = await devices.update(org.id, addressed.name, (current) => {
          if (current.id !== addressed.id) return undefined;
          matches(current);
          return {
            ...current,
            ...(update.event_types === undefined ? {} : { event_types: update.event_types }),
            updated_at: nextUpdateStamp(current.updated_at, ctx.clock.now()),
          };
        });
        return rawJson(200, { device: describeDevice(device) }, recordTag(device));
      },
    },
    {
      // The socket opened with the old token closes (4401); the device reconnects with the new one.
      method: 'POST',
      pattern: `${base}/:name/token`,
      query: ENVIRONMENT_QUERY,
      handler: async (request) => {
        const org = ctx.auth.requireOrg(request, request.params.org_id ?? '', 'developer');
        // By id: a device made again under the name since it was read (another environment, say) is 404.
        const { name, id, environment } = requireDevice(request, org);
        assertNoBodyFields(request);
        refuseIdempotencyKey(request.headers['idempotency-key'], 'the new token', 'if an answer was lost, rotate again: the device connects with the token of the last answer.');
        const { token, hash, prefix } = newToken();
        const rotated = await sockets.rotateToken(org.id, name, async () => {
          // Checked again once the device's turn came (its messages and earlier changes go first): a
          // key revoked, or a plan that lost the sandbox, meanwhile gets no token.
          assertSandboxAllowed(ctx.auth.requireOrg(request, org.id, 'developer'), environment);
          return devices.rotateToken(org.id, name, id, hash, prefix, ctx.clock.now());
        });
        // As it is now: the connection the rotation closed has ended (unless its ending could not be
        // written yet). Unless another rotation came since: this answer's device is the one its token opens.
        const now = devices.get(org.id, name);
        const answered = now?.id === rotated.id && now.token_hash === rotated.token_hash ? now : rotated;
        return rawJson(200, { device: describeDevice(answered), token }, recordTag(answered));
      },
    },
    {
      method: 'DELETE',
      pattern: `${base}/:name`,
      query: ENVIRONMENT_QUERY,
      handler: async (request) => {
        const org = ctx.auth.requireOrg(request, request.params.org_id ?? '', 'developer');
        const addressed = requireDevice(request, org);
        const { name, id } = addressed;
        // With If-Match, removed only as that tag names it (RFC 9110: a stale tag is 412 for a DELETE too).
        const matches = recordPrecondition(request.headers['if-match'], 'device');
        matches(addressed);
        // The key is checked again once the device's turn comes: revoked meanwhile, nothing is deleted.
        await sockets.deleteDevice(org.id, name, id, () => ctx.auth.requireOrg(request, org.id, 'developer'), matches);
        return noContent();
      },
    },
  ];
}
