// Authenticated routes that take a body check their caller before the server reads the body: a
// route naming an org needs a key that may act on that org (so the org's share of the body budget,
// runtime/http/server.ts, is spent only by its own callers), any other the platform admin token.

import type { Route } from '../http/types.ts';
import type { Authorizer } from './authorize.ts';

/** Gives every route with a body and no check of its own one that authorizes the caller (401, 404). */
export function authenticateFirst(auth: Authorizer, routes: readonly Route[]): Route[] {
  return routes.map((route) => {
    if (route.beforeBody !== undefined || route.method === 'GET' || route.method === 'DELETE') return route;
    const namesOrg = route.pattern.includes(':org_id');
    return {
      ...route,
      // The handler checks the role; `viewer` here only proves the key belongs to the org.
      beforeBody: (head) => (namesOrg ? void auth.requireOrg(head, head.params.org_id ?? '', 'viewer') : auth.requirePlatformAdmin(head)),
    };
  });
}
