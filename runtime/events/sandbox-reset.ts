// Sandbox reset: removes one org's sandbox events (and retention's tombstones of them), recordings,
// runs, inbox claims (of sandbox sources, sandbox devices and keyed replays of sandbox events),
// projection rows and retained live updates, ends the open connections of sandbox devices (without
// events: their openings are removed too), and starts its next sandbox generation; nothing else
// (workflows, sources, devices and production stay). A re-sent event id then makes new run ids.
//
// In transactions of at most `chunk` records, so other orgs' writes go on between them (one
// transaction held every org's writes for the whole removal: 2 s for 40,000 runs). The first
// transaction advances the generation and marks the org's reset as under way (sandbox-generation.ts);
// the last clears the mark. A reset cut short (a crash, a failed write) is finished by the next
// reset of the org or at the next start, before runs are recovered. The org's sandbox events wait
// while its reset is in flight (`SandboxGenerations.quiet`), so no new sandbox data arrives meanwhile.

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

/** Records removed per transaction by default: each takes the write lock, and the main thread, for ~10-20 ms. */
export const RESET_CHUNK = 1_000;

export interface SandboxResetDeps {
  readonly ledger: Ledger;
  readonly events: EventStore;
  readonly runs: RunStore;
  readonly sources: SourceStore;
  readonly devices: DeviceStore;
  readonly updateLog: UpdateLog;
  readonly projections: ProjectionStore;
  /** Told of each batch of removed runs once its removal is durable: their actors and timers go. */
  readonly forget?: (runs: readonly PersistedRun[]) => void;
  /** Records per transaction (RESET_CHUNK). */
  readonly chunk?: number;
}

/** What a reset, or the part of it left to finish, removed. */
export interface SandboxRemoval {
  readonly events: number;
  readonly runs: number;
  readonly inbox_claims: number;
  readonly projection_rows: number;
  /** The seq the reset reserved as its mark in the org's live updates (UpdateLog.removeEnvironment). */
  readonly live_mark: number;
  /** The sandbox device connections the reset ended: their sockets are to be closed. */
  readonly device_connections: string[];
}

export interface SandboxResetResult extends SandboxRemoval {
  /** The sandbox generation the reset started (1 after the first reset). */
  readonly generation: number;
}

/**
 * Resolves after the removal and the new generation are durable. Until then the org is
 * `resetting` (sandbox-generation.ts). A reset that fails part-way leaves the org marked: its next
 * reset, or the next start, finishes it.
 */
export async function resetSandbox(deps: SandboxResetDeps, orgId: string, nowMs: number): Promise<SandboxResetResult> {
  const { root } = deps.ledger;
  const generations = deps.runs.sandboxGenerations;
  return generations.during(orgId, async () => {
    const generation = await durably(root, root.transaction(() => generations.beginResetWithin(orgId, nowMs)));
    return { generation, ...(await removeSandbox(deps, orgId, nowMs)) };
  });
}

/** At start, before runs are recovered: finishes every reset a crash or a failed write cut short; resolves with their orgs. */
export async function finishInterruptedResets(deps: SandboxResetDeps, nowMs: number): Promise<string[]> {
  const generations = deps.runs.sandboxGenerations;
  const orgs = generations.interruptedResets();
  for (const orgId of orgs) await generations.during(orgId, () => removeSandbox(deps, orgId, nowMs));
  return orgs;
}

/** Removes the org's sandbox data in bounded transactions, then clears its reset mark. */
async function removeSandbox(deps: SandboxResetDeps, orgId: string, nowMs: number): Promise<SandboxRemoval> {
  const { ledger } = deps;
  const chunk = deps.chunk ?? RESET_CHUNK;
  const inChunks = (removeUpTo: (limit: number) => number, afterEach?: () => void): Promise<number> => removeInChunks(ledger, chunk, removeUpTo, afterEach);

  // Runs first: a run still there may go on and derive sandbox events, which the sweeps below then
  // find. A removed run's next write finds it gone (transition-write.ts) and stops there.
  let removedRuns: PersistedRun[] = [];
  const runs = await inChunks(
    (limit) => {
      removedRuns = [];
      for (const run of deps.runs.allIn(orgId, 'sandbox')) {
        if (removedRuns.length === limit) break;
        deps.runs.remove(run);
        removedRuns.push(run);
      }
      return removedRuns.length;
    },
    () => deps.forget?.(removedRuns),
  );

  // Keyed replays claim under REPLAY_SOURCE whatever their environment: the claims of replays that
  // are sandbox events go (a claim whose event is gone already, from a reset cut short, goes too).
  // Before the events, whose environment tells which claims those are.
  let claims = 0;
  claims += await inChunks((limit) => {
    let removed = 0;
    for (const { key, claim } of deps.events.inbox.claimsOf(orgId, REPLAY_SOURCE)) {
      const event = deps.events.getRecord(orgId, claim.event_id);
      if (event !== undefined && event.environment !== 'sandbox') continue;
      if (removed === limit) break;
      ledger.inbox.remove(key);
      removed++;
    }
    return removed;
  });

  let events = 0;
  await inChunks((limit) => {
    let seen = 0;
    for (const key of ledger.eventsByTime.getKeys({ start: [orgId, 'sandbox'], end: [orgId, 'sandbox', Number.MAX_SAFE_INTEGER], limit })) {
      seen++;
      const eventId = (key as [string, string, number, string])[3];
      ledger.eventsByTime.remove(key);
      if (!ledger.events.doesExist([orgId, eventId])) continue;
      ledger.events.remove([orgId, eventId]);
      ledger.recordings.remove([orgId, eventId]);
      deps.events.forgetDerivedCountWithin(orgId, eventId);
      events++;
    }
    return seen;
  });

  const sandboxDevices = deps.devices.list(orgId).filter((d) => d.environment === 'sandbox');
  // Sandbox sources claim deliveries under their names, sandbox devices messages under their event source.
  const claimSources = [
    ...deps.sources.list(orgId).filter((s) => s.environment === 'sandbox').map((s) => s.name),
    ...sandboxDevices.map((d) => deviceSource(d.name)),
  ];
  for (const source of claimSources) claims += await inChunks((limit) => deps.events.inbox.removeSourceClaimsWithin(orgId, source, limit));
  // Ids retention removed may be sent again too: the new generation gives their runs new ids.
  await inChunks((limit) => deps.events.removeTombstonesWithin(orgId, 'sandbox', limit));
  const projectionRows = await inChunks((limit) => deps.projections.removeEnvironment(orgId, 'sandbox', limit));

  // The org's retained live updates are capped (--live-retention); its sandbox devices are few.
  const { root } = ledger;
  const last = await durably(
    root,
    root.transaction(() => {
      const liveMark = deps.updateLog.removeEnvironment(orgId, 'sandbox');
      const deviceConnections = deps.devices.endConnectionsWithin(sandboxDevices, 'sandbox_reset', nowMs);
      deps.runs.sandboxGenerations.endResetWithin(orgId);
      return { liveMark, deviceConnections };
    }),
  );
  return { events, runs, inbox_claims: claims, projection_rows: projectionRows, live_mark: last.liveMark, device_connections: last.deviceConnections };
}

/**
 * Calls `removeUpTo(limit)` in a durable transaction of its own, then `afterEach`, until one
 * removes fewer than `limit`; resolves with the total removed.
 */
async function removeInChunks(ledger: Ledger, limit: number, removeUpTo: (limit: number) => number, afterEach?: () => void): Promise<number> {
  let total = 0;
  for (;;) {
    const removed = await durably(ledger.root, ledger.root.transaction(() => removeUpTo(limit)));
    afterEach?.();
    total += removed;
    if (removed < limit) return total;
  }
}
