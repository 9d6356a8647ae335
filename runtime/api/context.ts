// What every REST handler module receives: the stores, the authorizer, the clock and the logger.
// Built once by the composition root (runtime/create-runtime.ts).

import type { Authorizer } from '../auth/authorize.ts';
import type { Clock } from '../clock.ts';
import type { Ledger } from '../ledger/ledger.ts';
import type { DiskFloor } from '../../hook-runner/disk-floor.ts';
import type { Logger } from '../log.ts';
import type { RuntimeMetrics } from '../metrics.ts';
import type { EventStore } from '../events/event-store.ts';
import type { EventWriteTurns } from '../events/event-write-turns.ts';
import type { RunStore } from '../runs/run-store.ts';
import type { SchemaThreads } from '../sources/schema-checks.ts';
import type { SourceStore } from '../sources/source-store.ts';
import type { ApiKeyStore } from '../tenancy/api-keys.ts';
import type { OrganizationStore } from '../tenancy/organizations.ts';

export interface ApiContext {
  readonly ledger: Ledger;
  readonly orgs: OrganizationStore;
  readonly apiKeys: ApiKeyStore;
  readonly sources: SourceStore;
  readonly events: EventStore;
  readonly runs: RunStore;
  readonly auth: Authorizer;
  readonly clock: Clock;
  readonly logger: Logger;
  readonly metrics: RuntimeMetrics;
  /** The threads that check payloads and compile written schemas, off the event loop. */
  readonly schemas: SchemaThreads;
  /** The free space kept on the data dir's disk: a write that first changes the hook-runner asks it beforehand. */
  readonly disk: Pick<DiskFloor, 'assertWritable'>;
  /** The turn every event write takes first: after any sandbox reset, within the budget of runs built (event-write-turns.ts). */
  readonly writeTurns: EventWriteTurns;
}

export const isoAt = (ms: number): string => new Date(ms).toISOString();
