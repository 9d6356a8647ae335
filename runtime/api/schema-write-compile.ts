// A source's or device's event type schemas are compiled before the write that stores them, in the
// compile thread, where a write may wait seconds behind other orgs' compiles: the key may be revoked,
// or the plan lose its sandbox, meanwhile. Both are checked again once they are compiled.

import type { RequestHead } from '../http/types.ts';
import type { Environment } from '../sources/source-record.ts';
import { assertSandboxAllowed } from '../tenancy/sandbox-guard.ts';
import type { ApiContext } from './context.ts';

/** Compiles `eventTypes` for a developer's write to `environment`, then authorizes the request again. */
export async function compileSchemasForWrite(ctx: ApiContext, request: RequestHead, orgId: string, environment: Environment, eventTypes: Readonly<Record<string, object>> | undefined): Promise<void> {
  await ctx.schemas.writes.compile(orgId, eventTypes);
  assertSandboxAllowed(ctx.auth.requireOrg(request, orgId, 'developer'), environment);
}
