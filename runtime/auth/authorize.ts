// Who is calling and may they do this: bearer token -> principal, then org + role checks.
// A key of org A asking about org B gets the same 404 as for an org that does not exist.

import { AccessError } from '../errors.ts';
import type { RequestHead } from '../http/types.ts';
import { roleCovers, type ApiKeyStore, type Role } from '../tenancy/api-keys.ts';
import type { Organization, OrganizationStore } from '../tenancy/organizations.ts';
import { constantTimeEqual } from './secrets.ts';

export type Principal =
  | { readonly kind: 'platform_admin' }
  | { readonly kind: 'api_key'; readonly orgId: string; readonly role: Role; readonly keyId: string };

export interface Authorizer {
  /** Resolves the caller from `Authorization: Bearer …`; 401 when missing or unknown. */
  authenticate(request: RequestHead): Principal;
  /** Resolves a bearer token (also used for WebSocket tokens); undefined when unknown. */
  principalForToken(token: string): Principal | undefined;
  /** False once the API key behind `principal` has been revoked (the platform admin token always holds). */
  isStillValid(principal: Principal): boolean;
  /** 401/404/403 unless the caller may act on `orgId` with at least `role`; returns the org. */
  requireOrg(request: RequestHead, orgId: string, role: Role): Organization;
  /**
   * 401 unless the caller is the platform admin; a valid API key is 403, or, when the endpoint names
   * `orgId` and the key is another org's, 404 as `requireOrg` answers it (whether the org exists or not).
   */
  requirePlatformAdmin(request: RequestHead, orgId?: string): void;
  /**
   * Whether the (authenticated) caller may read webhook credentials, the header values and URL
   * tokens of webhook steps: only a role that could change them, developer and up, and the platform
   * admin (DESIGN §8; runtime/workflows/viewer-redaction.ts redacts them for the others).
   */
  seesCredentials(request: RequestHead): boolean;
}

export function bearerToken(authorization: string | undefined): string | undefined {
  if (authorization === undefined) return undefined;
  const match = /^Bearer\s+(\S{1,512})\s*$/i.exec(authorization);
  return match?.[1];
}

const orgNotFound = (): AccessError => new AccessError(404, 'not_found', 'Organization was not found.', { field: 'org_id' });

const unauthorized = (): AccessError =>
  new AccessError(401, 'unauthorized', 'A valid API key is required (Authorization: Bearer <key>).');

export function createAuthorizer(adminToken: string, keys: ApiKeyStore, orgs: OrganizationStore): Authorizer {
  const principalForToken = (token: string): Principal | undefined => {
    if (constantTimeEqual(token, adminToken)) return { kind: 'platform_admin' };
    const record = keys.findActive(token);
    return record === undefined ? undefined : { kind: 'api_key', orgId: record.org_id, role: record.role, keyId: record.id };
  };
  /** Who the request's bearer token names, if anyone. */
  const principalOf = (request: RequestHead): Principal | undefined => {
    const token = bearerToken(request.headers.authorization);
    return token === undefined ? undefined : principalForToken(token);
  };
  const authenticate = (request: RequestHead): Principal => {
    const principal = principalOf(request);
    if (principal === undefined) throw unauthorized();
    return principal;
  };
  return {
    authenticate,
    principalForToken,
    isStillValid: (principal) => principal.kind === 'platform_admin' || keys.isActive(principal.orgId, principal.keyId),
    requirePlatformAdmin(request, orgId) {
      const principal = principalOf(request);
      if (principal === undefined) {
        throw new AccessError(401, 'unauthorized', 'The platform admin token is required (Authorization: Bearer <token>; `sluice dev` keeps it in <data-dir>/admin-token).');
      }
      if (principal.kind !== 'platform_admin' && orgId !== undefined && principal.orgId !== orgId) throw orgNotFound();
      // A valid API key is known but not enough: 403, as for a key without the role.
      if (principal.kind !== 'platform_admin') {
        throw new AccessError(403, 'forbidden', 'This endpoint needs the platform admin token; an API key cannot use it.');
      }
    },
    seesCredentials(request) {
      const principal = authenticate(request);
      return principal.kind === 'platform_admin' || roleCovers(principal.role, 'developer');
    },
    requireOrg(request, orgId, role) {
      const principal = authenticate(request);
      const org = orgs.get(orgId);
      const sameOrg = principal.kind === 'platform_admin' || principal.orgId === orgId;
      if (org === undefined || !sameOrg) throw orgNotFound();
      if (principal.kind === 'api_key' && !roleCovers(principal.role, role)) {
        throw new AccessError(403, 'forbidden', `This action needs the ${role} role; the key has ${principal.role}.`);
      }
      return org;
    },
  };
}
