// Authenticated routes that take a body check the caller's key before the server reads the body:
// without a valid key nobody can hold a share of the server's body budget (runtime/http/server.ts).

import type { Route } from '../http/types.ts';
import type { Authorizer } from './authorize.ts';

/** Gives every route with a body and no check of its own one that authenticates the caller (401 otherwise). */
export function authenticateFirst(auth: Authorizer, routes: readonly Route[]): Route[] {
  return routes.map((route) =>
    route.beforeBody !== undefined || route.method === 'GET' || route.method === 'DELETE' ? route : { ...route, beforeBody: (head) => void auth.authenticate(head) },
  );
}
