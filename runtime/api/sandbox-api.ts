// REST: POST /organizations/:org_id/sandbox/reset (developer) wipes the org's sandbox data.
// Starter plans have no sandbox: 402 `sandbox_disabled`. Once the reset is durable, its hooks close
// the org's sandbox live sockets (4409: the runs they show are gone) and the sockets of the device
// connections it ended; a reset that failed (part of it may be done: the org's next reset, or the
// next start, finishes it) closes the sandbox live and device sockets, unless the disk floor refused
// its first write (nothing of it was written).

import type { RunKeys } from '../runs/run-store.ts';
import { OrgDeletedError } from '../ledger/org-fence.ts';
import { assertNoBodyFields } from '../http/parse-json.ts';
import { json, type Route } from '../http/types.ts';
import { resetSandbox, SandboxResetRefusedError, type SandboxResetResult } from '../events/sandbox-reset.ts';
import type { ProjectionStore } from '../projections/projection-store.ts';
import type { UpdateLog } from '../rooms/update-log.ts';
import type { RunEngine } from '../runs/run-engine.ts';
import { assertSandboxAllowed } from '../tenancy/sandbox-guard.ts';
import type { DeviceStore } from '../triggers/device-store.ts';
import type { ApiContext } from './context.ts';

/** What happens around a reset: once it is durable, and when it failed (it may have committed all the same, its flush failing). */
export interface SandboxResetHooks {
  readonly durable: (orgId: string, result: SandboxResetResult) => void;
  readonly unconfirmed: (orgId: string) => void;
}

export function sandboxRoutes(ctx: ApiContext, updateLog: UpdateLog, engine: RunEngine, projections: ProjectionStore, devices: DeviceStore, hooks: SandboxResetHooks): Route[] {
  return [
    {
      method: 'POST',
      pattern: '/organizations/:org_id/sandbox/reset',
      handler: async (request) => {
        const org = ctx.auth.requireOrg(request, request.params.org_id ?? '', 'developer');
        assertSandboxAllowed(org, 'sandbox');
        assertNoBodyFields(request);
        let result: SandboxResetResult;
        let refusedAtStart = false;
        let began = false;
        // A reset waits for one of the org's in flight: its key, and the plan's sandbox, are asked again when it starts.
        const mayStart = (): void => {
          try {
            assertSandboxAllowed(ctx.auth.requireOrg(request, org.id, 'developer'), 'sandbox');
          } catch (error) {
            refusedAtStart = true;
            throw error;
          }
        };
        try {
          const forget = (runs: readonly RunKeys[]): void => engine.forget(runs);
          result = await resetSandbox({ ledger: ctx.ledger, events: ctx.events, runs: ctx.runs, sources: ctx.sources, devices, updateLog, projections, forget }, org.id, ctx.clock.now(), mayStart, () => (began = true));
        } catch (error) {
          // Refused before it began (its key or plan, below the disk floor, or its first write by the
          // fence of the org's deletion, whose mark may yet fail): nothing was written, the sockets stay.
          const refused = error instanceof SandboxResetRefusedError || refusedAtStart || (!began && error instanceof OrgDeletedError);
          if (!refused) hooks.unconfirmed(org.id);
          throw error;
        }
        hooks.durable(org.id, result);
        return json(200, { deleted: { events: result.events, runs: result.runs, inbox_claims: result.inbox_claims, projection_rows: result.projection_rows } });
      },
    },
  ];
}
