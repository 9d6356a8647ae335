// Sandbox reset: removes one org's sandbox events (and retention's tombstones of them), recordings,
// runs, inbox claims (of sandbox sources, sandbox devices and keyed replays of sandbox events),
// projection rows and retained live updates, ends the open connections of sandbox devices (without
// events: their openings are removed too), and starts its next sandbox generation; nothing else
// (workflows, sources, devices and production stay). A re-sent event id then makes new run ids.
//
// In transactions of at most `chunk` records, so other orgs' writes go on between them (one
// transaction held every org's writes for the whole removal: 2 s for 40,000 runs). The first
// transaction advances the generation and marks the org's reset as under way (sandbox-generation.ts);
// the next end the sandbox devices' connections, a few devices each (a device record may hold ~1 MB
// of schemas); then the removal, whose last transaction clears the mark. A reset cut short (a crash, a failed write) is
// finished by the next reset of the org or at the next start, before runs are recovered. The org's
// sandbox events wait while its reset is in flight (`SandboxGenerations.quiet`), and its resets
// run one after the other.

import { DiskSpaceLowError } from '../../hook-runner/disk-floor.ts';
import { RetryableError } from '../errors.ts';
import { durably } from '../ledger/durable-write.ts';
import type { Ledger, LedgerKey } from '../ledger/ledger.ts';
import type { InboxClaim } from '../inbox/inbox.ts';
import type { EventStore } from './event-store.ts';
import type { ProjectionStore } from '../projections/projection-store.ts';
import { isDerivedEventId, REPLAY_SOURCE } from './event-record.ts';
import type { UpdateLog } from '../rooms/update-log.ts';
import { runKeysOf, type RunKeys, type RunStore } from '../runs/run-store.ts';
import type { SourceStore } from '../sources/source-store.ts';
import { deviceSource } from '../triggers/device-record.ts';
import type { DeviceStore } from '../triggers/device-store.ts';
import type { DeletedOrgIds } from '../ledger/org-fence.ts';

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
  readonly forget?: (runs: readonly RunKeys[]) => void;
  /** Records per transaction (RESET_CHUNK). */
  readonly chunk?: number;
  /** Deleted orgs: a reset of one cut short is not finished (its records go with the org, which takes no write). */
  readonly deletedOrgs?: DeletedOrgIds;
}

/** What a reset, or the part of it left to finish, removed. */
export interface SandboxRemoval {
  readonly events: number;
  readonly runs: number;
  readonly inbox_claims: number;
  readonly projection_rows: number;
  /** The seq the reset reserved as its mark in the org's live updates (UpdateLog.removeEnvironment). */
  readonly live_mark: number;
}

export interface SandboxResetResult extends SandboxRemoval {
  /** The sandbox generation the reset started (1 after the first reset). */
  readonly generation: number;
  /** The sandbox device connections the reset ended: their sockets are to be closed. */
  readonly device_connections: string[];
}

/**
 * Resolves after the removal and the new generation are durable. Until then the org is
 * `resetting` (sandbox-generation.ts). A reset that fails part-way leaves the org marked: its next
 * reset, or the next start, finishes it. `mayStart` is asked when the reset starts, after any reset
 * of the org in flight (the caller's key may have been revoked meanwhile): what it throws refuses
 * the reset, nothing written.
 */
export async function resetSandbox(deps: SandboxResetDeps, orgId: string, nowMs: number, mayStart: () => void = () => undefined, began: () => void = () => undefined): Promise<SandboxResetResult> {
  const generations = deps.runs.sandboxGenerations;
  return generations.during(orgId, async () => {
    mayStart();
    let generation;
    try {
      generation = await begin(deps, orgId, nowMs);
    } catch (error) {
      throw error instanceof DiskSpaceLowError ? new SandboxResetRefusedError() : error;
    }
    began();
    try {
      return { generation, ...(await resetBegun(deps, orgId, nowMs)) };
    } catch (error) {
      if (!(error instanceof DiskSpaceLowError)) throw error;
      throw new RetryableError('write_failed', "The sandbox reset was cut short: the server's disk is nearly full. What it removed stays removed, and the org's next reset (or the next start) finishes it; try again later.", 5000, { cause: error });
    }
  });
}

/** The reset's first write was refused below the disk floor: nothing of the reset was written, its sockets stay. */
export class SandboxResetRefusedError extends RetryableError {
  constructor() {
    super('write_failed', "The sandbox reset could not start: the server's disk is nearly full. Nothing was removed; try again later.", 5000);
  }
}

/** The rest of a reset once `begin` is durable: its devices' connections end, then its data goes. */
async function resetBegun(deps: SandboxResetDeps, orgId: string, nowMs: number): Promise<SandboxRemoval & { readonly device_connections: string[] }> {
  const names = await sandboxNames(deps, orgId);
  const ended = await endConnections(deps, orgId, nowMs, names);
  return { device_connections: ended, ...(await removeSandbox(deps, orgId, names)) };
}

/** Sandbox devices whose open connections one of the reset's transactions ends (each read and written whole). */
const DEVICES_ENDED_PER_WRITE = 8;

/**
 * The first transaction of a reset, or of finishing one: a new generation and the mark. Queued at
 * once: a transaction queued after the reset began reads the new generation.
 */
function begin(deps: SandboxResetDeps, orgId: string, nowMs: number): Promise<number> {
  const { root } = deps.ledger;
  return durably(root, root.transaction(() => deps.runs.sandboxGenerations.beginResetWithin(orgId, nowMs)));
}

/** The org's sandbox devices and sources, as the reset found them once begun. */
interface SandboxNames {
  readonly sources: readonly string[];
  readonly devices: readonly string[];
  /** The sandbox devices with a connection open (the id tells one made again under the name since). */
  readonly connected: readonly { readonly name: string; readonly id: string }[];
}

/**
 * Reads the org's sandbox sources and devices one per event-loop turn (a record not cached decodes
 * its schemas, up to ~1 MB: all of them in one transaction held every org's writes for seconds).
 * Once the reset has begun no sandbox connection is recorded (a connect waits out the reset), and
 * one recorded before it was committed before its first transaction.
 */
async function sandboxNames(deps: SandboxResetDeps, orgId: string): Promise<SandboxNames> {
  const sources: string[] = [];
  const devices: string[] = [];
  const connected: { name: string; id: string }[] = [];
  for await (const source of deps.sources.headsInTurns(orgId)) if (source.environment === 'sandbox') sources.push(source.name);
  for await (const device of deps.devices.headsInTurns(orgId)) {
    if (device.environment !== 'sandbox') continue;
    devices.push(device.name);
    if (device.connection !== null) connected.push({ name: device.name, id: device.id });
  }
  return { sources, devices, connected };
}

/**
 * Ends the open connections of the sandbox devices, a few per transaction (each read there, so no
 * older copy is written back; a device deleted and made again since, in production say, is left
 * alone), without events: their `device.connected` goes with the reset, and a sandbox socket that
 * drops meanwhile waits out the reset before it ends its connection (then finds it ended).
 * Resolves with the ended connections' ids.
 */
async function endConnections(deps: SandboxResetDeps, orgId: string, nowMs: number, names: SandboxNames): Promise<string[]> {
  const { root } = deps.ledger;
  const ended: string[] = [];
  for (let from = 0; from < names.connected.length; from += DEVICES_ENDED_PER_WRITE) {
    const chunk = names.connected.slice(from, from + DEVICES_ENDED_PER_WRITE);
    ended.push(...(await deps.devices.writing(orgId, () => durably(root, root.transaction(() => deps.devices.endConnectionsWithin(orgId, chunk, 'sandbox_reset', nowMs))))));
  }
  return ended;
}

/** A reset finished at start: its org, and the mark it reserved in the org's live updates. */
export interface FinishedReset {
  readonly orgId: string;
  readonly liveMark: number;
}

/**
 * At start, before runs are recovered: finishes every reset a crash or a failed write cut short;
 * resolves with their orgs and live marks, which the live rooms must pass over (closing the
 * sandbox sockets opened before it, as after a reset made through the API). Each starts a
 * generation again: after a failed write the process went on, and sandbox events stored meanwhile
 * made runs in the cut-short reset's generation, which this removes (a generation whose runs were
 * deleted is never reused).
 */
export async function finishInterruptedResets(deps: SandboxResetDeps, nowMs: number): Promise<FinishedReset[]> {
  const generations = deps.runs.sandboxGenerations;
  const finished: FinishedReset[] = [];
  for (const orgId of generations.interruptedResets()) {
    if (deps.deletedOrgs?.has(orgId) === true) continue;
    const removal = await generations.during(orgId, async () => {
      // A device may have connected between a failed write and the restart: its connection goes too.
      await begin(deps, orgId, nowMs);
      return resetBegun(deps, orgId, nowMs);
    });
    finished.push({ orgId, liveMark: removal.live_mark });
  }
  return finished;
}

/** Removes the org's sandbox data in bounded transactions, then clears its reset mark. */
async function removeSandbox(deps: SandboxResetDeps, orgId: string, names: SandboxNames): Promise<SandboxRemoval> {
  const { ledger } = deps;
  const chunk = deps.chunk ?? RESET_CHUNK;
  const inChunks = (removeUpTo: (limit: number) => number, afterEach?: () => void): Promise<number> => removeInChunks(ledger, chunk, removeUpTo, afterEach);

  // Runs first: a run still there may go on and derive sandbox events, which the sweeps below then
  // find. A removed run's next write finds it gone (transition-write.ts) and stops there.
  let removedRuns: RunKeys[] = [];
  const forgetRemoved = (): void => {
    if (removedRuns.length > 0) deps.forget?.(removedRuns);
  };
  const runs = await inChunks(
    (limit) => {
      removedRuns = [];
      for (const run of deps.runs.allIn(orgId, 'sandbox')) {
        if (removedRuns.length === limit) break;
        deps.runs.remove(run);
        removedRuns.push(runKeysOf(run));
      }
      return removedRuns.length;
    },
    forgetRemoved,
  );

  // An event goes with its runs: one a writer stored after the runs above went (none should: the
  // org's sandbox events wait for the reset) leaves no run behind without its event.
  let events = 0;
  let runsOfEvents = 0;
  // Chains whose root retention pruned keep their count while a descendant is stored: the sweep
  // takes that count with the chain. Only a derived event's record is read for its root (payload
  // and all), and only while such chains exist; otherwise existence is enough. (Reading every
  // event's held the write lock and the event loop ~1 s per chunk of 1 MiB payloads.)
  const rootsGone = await deps.events.derivedCountRootsNotStored(orgId);
  await inChunks(
    (limit) => {
      let seen = 0;
      removedRuns = [];
      for (const key of ledger.eventsByTime.getKeys({ start: [orgId, 'sandbox'], end: [orgId, 'sandbox', Number.MAX_SAFE_INTEGER], limit })) {
        seen++;
        const eventId = (key as [string, string, number, string])[3];
        ledger.eventsByTime.remove(key);
        if (!ledger.events.doesExist([orgId, eventId])) continue;
        const root = rootsGone.size === 0 || !isDerivedEventId(eventId) ? undefined : (ledger.events.get([orgId, eventId]) as { readonly correlation_id: string }).correlation_id;
        ledger.events.remove([orgId, eventId]);
        ledger.recordings.remove([orgId, eventId]);
        deps.events.forgetDerivedCountWithin(orgId, eventId);
        // A chain lives in one environment and goes whole: its root's count goes too (the id may be
        // sent again, then starting from 0).
        if (root !== undefined && rootsGone.has(root)) deps.events.forgetDerivedCountWithin(orgId, root);
        events++;
        for (const run of deps.runs.keysForEvent(orgId, eventId).runs) {
          deps.runs.remove(run);
          removedRuns.push(run);
        }
      }
      runsOfEvents += removedRuns.length;
      return seen;
    },
    forgetRemoved,
  );

  // Keyed replays claim under REPLAY_SOURCE whatever their environment: a sandbox one goes (its event
  // removed above, or by an earlier reset cut short). A claim from before claims said their
  // environment goes when its event is gone, as a sandbox one's is (a production one's event is
  // kept for as long as its claim lives, unless the clock was set back past the retention). Bounded
  // by the claims looked at, each pass going on after the last one's; never an event's payload read.
  let claims = 0;
  let after: LedgerKey | undefined;
  await inChunks((limit) => {
    let seen = 0;
    const end = [orgId, REPLAY_SOURCE, '\uffff'];
    for (const { key, value } of ledger.inbox.getRange({ start: after ?? [orgId, REPLAY_SOURCE], end, limit: limit + 1 })) {
      if (after !== undefined && sameKey(key, after)) continue;
      if (seen === limit) break;
      seen++;
      after = key;
      const claim = value as InboxClaim;
      const isSandboxClaim = claim.environment === undefined ? !ledger.events.doesExist([orgId, claim.event_id]) : claim.environment === 'sandbox';
      if (!isSandboxClaim) continue;
      ledger.inbox.remove(key);
      claims++;
    }
    return seen;
  });

  // Sandbox sources claim deliveries under their names, sandbox devices messages under their event
  // source. A name made again in production since the names were read claims under the same key:
  // its claims stay (read in each transaction, as the removal is).
  const claimSources = [
    ...names.sources.map((name) => ({ source: name, production: () => deps.sources.head(orgId, name)?.environment === 'production' })),
    ...names.devices.map((name) => ({ source: deviceSource(name), production: () => deps.devices.head(orgId, name)?.environment === 'production' })),
  ];
  for (const { source, production } of claimSources) claims += await inChunks((limit) => (production() ? 0 : deps.events.inbox.removeSourceClaimsWithin(orgId, source, limit)));
  // Ids retention removed may be sent again too: the new generation gives their runs new ids.
  await inChunks((limit) => deps.events.removeTombstonesWithin(orgId, 'sandbox', limit));
  // The replays listed under sandbox events went with their events.
  await inChunks((limit) => deps.events.replays.removeEnvironmentWithin(orgId, 'sandbox', limit));
  const projectionRows = await inChunks((limit) => deps.projections.removeEnvironment(orgId, 'sandbox', limit));

  // The org's retained live updates (up to --live-retention of them, both environments) are swept
  // in bounded steps too; the last write only marks the reset and removes what came in since.
  let fromSeq = 0;
  await inChunks((limit) => {
    const { looked, next } = deps.updateLog.sweepEnvironmentWithin(orgId, 'sandbox', fromSeq, limit);
    fromSeq = next;
    return looked;
  });
  const { root } = ledger;
  const liveMark = await durably(
    root,
    root.transaction(() => {
      deps.runs.sandboxGenerations.endResetWithin(orgId);
      return deps.updateLog.removeEnvironment(orgId, 'sandbox', fromSeq);
    }),
  );
  return { events, runs: runs + runsOfEvents, inbox_claims: claims, projection_rows: projectionRows, live_mark: liveMark };
}

const sameKey = (a: LedgerKey, b: LedgerKey): boolean => JSON.stringify(a) === JSON.stringify(b);

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
