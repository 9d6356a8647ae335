// Authenticated routes check their caller before anything else of the request: before the server
// reads a body (so an org's share of the body budget, runtime/http/server.ts, is spent only by its
// own callers), and before it checks query parameters or a DELETE's lack of a body (no key is a 401,
// as the README says, not a 400 about the request's shape). A route naming an org needs a key that
// may act on that org, any other the platform admin token.

import type { Route } from '../http/types.ts';
import type { Authorizer } from './authorize.ts';

/** Gives every route without a check of its own one that authorizes the caller (401, 404). */
export function authenticateFirst(auth: Authorizer, routes: readonly Route[]): Route[] {
  return routes.map((route) => {
    if (route.beforeBody !== undefined) return route;
    const namesOrg = route.pattern.includes(':org_id');
    return {
      ...route,
      // The handler checks the role; `viewer` here only proves the key belongs to the org.
      beforeBody: (head) => (namesOrg ? void auth.requireOrg(head, head.params.org_id ?? '', 'viewer') : auth.requirePlatformAdmin(head)),
    };
  });
}
