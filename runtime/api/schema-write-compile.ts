// A source's or device's event type schemas are compiled before the write that stores them, in the
// compile thread, where a write may wait seconds behind other orgs' compiles: the key may be revoked,
// or the plan lose its sandbox, meanwhile. Both are checked again once they are compiled, and a
// create checks them a last time when its write is queued (assertWriterAllowed), after the wait for
// the name's earlier creates and deletes and for the forgetting of a deleted namesake's claims.

import type { RequestHead } from '../http/types.ts';
import type { Environment } from '../sources/source-record.ts';
import { assertSandboxAllowed } from '../tenancy/sandbox-guard.ts';
import type { ApiContext } from './context.ts';

/** Authorizes a developer's write to `environment` (again): its key still valid, the org's plan still allowing the sandbox. */
export function assertWriterAllowed(ctx: ApiContext, request: RequestHead, orgId: string, environment: Environment): void {
  assertSandboxAllowed(ctx.auth.requireOrg(request, orgId, 'developer'), environment);
}

/** Compiles `eventTypes` for a developer's write to `environment`, then authorizes the request again. */
export async function compileSchemasForWrite(ctx: ApiContext, request: RequestHead, orgId: string, environment: Environment, eventTypes: Readonly<Record<string, object>> | undefined): Promise<void> {
  await ctx.schemas.writes.compile(orgId, eventTypes);
  assertWriterAllowed(ctx, request, orgId, environment);
}
