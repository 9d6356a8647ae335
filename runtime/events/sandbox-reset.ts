// Sandbox reset: removes one org's sandbox events (and retention's tombstones of them), recordings,
// runs, inbox claims (of sandbox sources and devices), projection rows and retained live updates,
// ends the open connections of sandbox devices (without events: their openings are removed too),
// and starts its next sandbox generation, in one durable transaction, and nothing else (workflows,
// sources, devices and production stay). A re-sent event id then makes runs with new ids.

import type { PersistedRun } from '../../actors/run-transition.ts';
import { durably } from '../ledger/durable-write.ts';
import type { Ledger } from '../ledger/ledger.ts';
import type { EventStore } from './event-store.ts';
import type { ProjectionStore } from '../projections/projection-store.ts';
import { REPLAY_SOURCE } from '../replay/business-replay.ts';
import type { UpdateLog } from '../rooms/update-log.ts';
import type { RunStore } from '../runs/run-store.ts';
import type { SourceStore } from '../sources/source-store.ts';
import { deviceSource } from '../triggers/device-record.ts';
import type { DeviceStore } from '../triggers/device-store.ts';

export interface SandboxResetDeps {
  readonly ledger: Ledger;
  readonly events: EventStore;
  readonly runs: RunStore;
  readonly sources: SourceStore;
  readonly devices: DeviceStore;
  readonly updateLog: UpdateLog;
  readonly projections: ProjectionStore;
}

export interface SandboxResetResult {
  /** The sandbox generation the reset started (1 after the first reset). */
  readonly generation: number;
  readonly events: number;
  readonly runs: PersistedRun[];
  readonly inbox_claims: number;
  readonly projection_rows: number;
  /** The seq the reset reserved as its mark in the org's live updates (UpdateLog.removeEnvironment). */
  readonly live_mark: number;
  /** The sandbox device connections the reset ended: their sockets are to be closed. */
  readonly device_connections: string[];
}

/**
 * Resolves after the removal and the new generation are durable; the caller then forgets the
 * removed runs in memory. Until then the org is `resetting` (sandbox-generation.ts).
 */
export async function resetSandbox(deps: SandboxResetDeps, orgId: string, nowMs: number): Promise<SandboxResetResult> {
  const { ledger } = deps;
  const generations = deps.runs.sandboxGenerations;
  return generations.during(orgId, () =>
    durably(
      ledger.root,
      ledger.root.transaction(() => {
        const generation = generations.advanceWithin(orgId);
        const removedEvents = new Set<string>();
        for (const key of ledger.eventsByTime.getKeys({ start: [orgId, 'sandbox'], end: [orgId, 'sandbox', Number.MAX_SAFE_INTEGER] })) {
          const eventId = (key as [string, string, number, string])[3];
          ledger.eventsByTime.remove(key);
          if (!ledger.events.doesExist([orgId, eventId])) continue;
          ledger.events.remove([orgId, eventId]);
          ledger.recordings.remove([orgId, eventId]);
          deps.events.forgetDerivedCountWithin(orgId, eventId);
          removedEvents.add(eventId);
        }
        const events = removedEvents.size;
        const runs = [...deps.runs.allIn(orgId, 'sandbox')];
        for (const run of runs) deps.runs.remove(run);
        let claims = 0;
        const sandboxDevices = deps.devices.list(orgId).filter((d) => d.environment === 'sandbox');
        // Sandbox sources claim deliveries under their names, sandbox devices messages under their event source.
        const claimSources = [
          ...deps.sources.list(orgId).filter((s) => s.environment === 'sandbox').map((s) => s.name),
          ...sandboxDevices.map((d) => deviceSource(d.name)),
        ];
        for (const source of claimSources) claims += deps.events.inbox.removeSourceClaimsWithin(orgId, source);
        // Business replays keyed by an Idempotency-Key claim under REPLAY_SOURCE, whatever their
        // environment: the claims of the replays removed here go with them.
        for (const { key, claim } of deps.events.inbox.claimsOf(orgId, REPLAY_SOURCE)) {
          if (!removedEvents.has(claim.event_id)) continue;
          ledger.inbox.remove(key);
          claims++;
        }
        const liveMark = deps.updateLog.removeEnvironment(orgId, 'sandbox');
        // Ids retention removed may be sent again too: the new generation gives their runs new ids.
        deps.events.removeTombstonesWithin(orgId, 'sandbox');
        const projectionRows = deps.projections.removeEnvironment(orgId, 'sandbox');
        const deviceConnections = deps.devices.endConnectionsWithin(sandboxDevices, 'sandbox_reset', nowMs);
        return { generation, events, runs, inbox_claims: claims, projection_rows: projectionRows, live_mark: liveMark, device_connections: deviceConnections };
      }),
    ),
  );
}
