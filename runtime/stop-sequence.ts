// The order a clean stop of the runtime takes: nothing new comes in or goes out, background work
// ends, requests in flight finish, the run engine's transitions become durable, the stop is
// recorded, and the ledger closes last.

import type { DiskFloor } from '../hook-runner/disk-floor.ts';
import type { HttpServer } from './http/server.ts';
import { logFailure } from './ledger/commit-failure-guard.ts';
import type { Ledger } from './ledger/ledger.ts';
import type { Logger } from './log.ts';
import type { LiveRooms } from './rooms/live-rooms.ts';
import type { BootRecovery } from './runs/boot-record.ts';
import type { OutboundConnections } from './runs/outbound-connections.ts';
import type { RunEngine } from './runs/run-engine.ts';
import type { OrgDeletions } from './tenancy/org-deletion.ts';
import type { DeviceSockets } from './triggers/device-sockets.ts';
import type { ScheduleTicker } from './triggers/schedule-ticker.ts';

/** How long requests in flight at a stop may still use the schema threads (checks of 1 s, body reads). */
export const SCHEMA_DRAIN_GRACE_MS = 5_000;

/** What a stop ends, each as the runtime made it. */
export interface StoppingParts {
  /** Aborted first: long request work (a whole-projection delete) ends between its writes. */
  readonly stopping: AbortController;
  readonly server: Pick<HttpServer, 'stopAccepting' | 'close'>;
  readonly connections: Pick<OutboundConnections, 'holdUnsent' | 'close'>;
  readonly stopStaleCheck: () => Promise<void>;
  readonly pruning: { close(): Promise<void> };
  readonly deletions: Pick<OrgDeletions, 'idle'>;
  readonly ticker: Pick<ScheduleTicker, 'close'>;
  /** Ends the schema-check threads: checks still queued or running are refused (503 stopping). */
  readonly closeSchemaChecks: () => Promise<void>;
  readonly rooms: Pick<LiveRooms, 'close'>;
  readonly devices: Pick<DeviceSockets, 'close'>;
  readonly engine: Pick<RunEngine, 'close' | 'attemptsNeverSent'>;
  readonly disk: Pick<DiskFloor, 'disarm' | 'close'>;
  /** This start's boot record, once its recovery opened it. */
  readonly boot: () => BootRecovery | undefined;
  readonly runner: { close(): Promise<unknown> };
  readonly ledger: Pick<Ledger, 'close'>;
  readonly logger: Logger;
}

export async function stopInOrder(p: StoppingParts): Promise<void> {
  p.stopping.abort();
  // Nothing more comes in or goes out (a step's answer is recorded until the engine closes, below).
  p.server.stopAccepting();
  p.connections.holdUnsent();
  await p.stopStaleCheck();
  await p.pruning.close();
  await p.deletions.idle();
  await p.ticker.close();
  // Requests in flight finish their schema checks and body reads; what is still queued or
  // running SCHEMA_DRAIN_GRACE_MS into the stop is refused (503 stopping), so a queue of slow
  // checks cannot hold the stop for one deadline after another.
  const refuseLateChecks = setTimeout(() => void p.closeSchemaChecks(), SCHEMA_DRAIN_GRACE_MS);
  p.rooms.close();
  await p.devices.close();
  await p.server.close();
  clearTimeout(refuseLateChecks);
  await p.closeSchemaChecks();
  await p.engine.close();
  // A clean stop: what the engine leaves out is no step's fault, and what of it never went out
  // is named (boot-record.ts). One small record (under 1 MB), written below the disk floor too
  // (nothing else writes now); a failed write only makes the next start count it as a crash.
  p.disk.disarm();
  // What is out and unsent now never goes out (sealed: a custom action still waiting for
  // memory is not called after the count, nor a webhook whose connection was opening).
  p.connections.close();
  await p.boot()?.cleanStop(p.engine.attemptsNeverSent(true)).catch((error: unknown) => logFailure(p.logger, 'the clean stop could not be recorded', {}, error));
  await p.runner.close();
  await p.ledger.close();
  p.disk.close();
}
