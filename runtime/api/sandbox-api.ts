// REST: POST /organizations/:org_id/sandbox/reset (developer) wipes the org's sandbox data.
// Starter plans have no sandbox: 402 `sandbox_disabled`. Once the reset is durable, `onReset`
// closes the org's sandbox live sockets (4409: the runs they show are gone) and the sockets of the
// device connections it ended.

import { json, type Route } from '../http/types.ts';
import { resetSandbox, type SandboxResetResult } from '../events/sandbox-reset.ts';
import type { ProjectionStore } from '../projections/projection-store.ts';
import type { UpdateLog } from '../rooms/update-log.ts';
import type { RunEngine } from '../runs/run-engine.ts';
import { assertSandboxAllowed } from '../tenancy/sandbox-guard.ts';
import type { DeviceStore } from '../triggers/device-store.ts';
import type { ApiContext } from './context.ts';

export function sandboxRoutes(ctx: ApiContext, updateLog: UpdateLog, engine: RunEngine, projections: ProjectionStore, devices: DeviceStore, onReset: (orgId: string, result: SandboxResetResult) => void): Route[] {
  return [
    {
      method: 'POST',
      pattern: '/organizations/:org_id/sandbox/reset',
      handler: async (request) => {
        const org = ctx.auth.requireOrg(request, request.params.org_id ?? '', 'developer');
        assertSandboxAllowed(org, 'sandbox');
        const result = await resetSandbox({ ledger: ctx.ledger, events: ctx.events, runs: ctx.runs, sources: ctx.sources, devices, updateLog, projections }, org.id, ctx.clock.now());
        engine.forget(result.runs);
        onReset(org.id, result);
        return json(200, { deleted: { events: result.events, runs: result.runs.length, inbox_claims: result.inbox_claims, projection_rows: result.projection_rows } });
      },
    },
  ];
}
