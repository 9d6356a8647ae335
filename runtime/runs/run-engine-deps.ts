// What the run engine is built from: the stores it reads and writes, the live rooms it publishes
// to, the outbound pools and the hook-runner its steps use; and the commands it accepts.

import type { PersistedRun } from '../../actors/run-transition.ts';
import type { RunEvent } from '../../actors/run-types.ts';
import type { Clock } from '../clock.ts';
import type { EventStore } from '../events/event-store.ts';
import type { ActionInvoker } from '../hook-runner/client.ts';
import type { Ledger } from '../ledger/ledger.ts';
import type { Logger } from '../log.ts';
import type { ProjectionStore } from '../projections/projection-store.ts';
import type { LiveRooms } from '../rooms/live-rooms.ts';
import type { UpdateLog } from '../rooms/update-log.ts';
import type { OrganizationStore } from '../tenancy/organizations.ts';
import type { WorkflowVersion } from '../workflows/workflow-types.ts';
import type { ActionResolver } from './custom-action-step.ts';
import type { OutboundConnections } from './outbound-connections.ts';
import type { RunStore } from './run-store.ts';
import type { StepInputBudget } from './step-input-budget.ts';
import type { DeletingOrgIds } from '../ledger/org-fence.ts';

/** What the engine reads of workflows (implemented by the workflow store). */
export interface WorkflowLookup {
  matching(orgId: string, environment: string, eventType: string): readonly WorkflowVersion[];
  version(orgId: string, workflowId: string, version: number): WorkflowVersion | undefined;
  signingSecrets(orgId: string, workflowId: string): readonly string[];
}

/** A run event before the engine stamps it with the clock. */
export type RunCommand = RunEvent extends infer E ? (E extends RunEvent ? Omit<E, 'at'> : never) : never;

export interface RunEngineDeps {
  readonly ledger: Ledger;
  readonly runs: RunStore;
  readonly workflows: WorkflowLookup;
  readonly events: EventStore;
  readonly orgs: OrganizationStore;
  /**
   * Orgs deleted (org-deletion.ts): their runs take no command and send nothing more, once the
   * deletion's mark is written; a command that comes while it is being written waits for it.
   */
  readonly deletedOrgs?: DeletingOrgIds;
  readonly updateLog: UpdateLog;
  readonly rooms: LiveRooms;
  readonly clock: Clock;
  readonly logger: Logger;
  /** The runtime's own port, which webhook steps may not call; known once it listens. */
  readonly selfPort: () => number;
  /** The capped keep-alive pools webhook steps send through. */
  readonly connections: OutboundConnections;
  /** Payload bytes the steps being performed may hold at once; a step waits for its share before it reads its event. */
  readonly stepInputs: StepInputBudget;
  readonly projections: ProjectionStore;
  /** Custom actions and the hook-runner (restoring lost modules); a custom_action step fails closed without them. */
  readonly actions: ActionResolver | undefined;
  readonly runner: ActionInvoker | undefined;
  /** Step results a running run may hold and keep its live actor (default RESTING_RESULT_BYTES, held-results.ts); for tests. */
  readonly restingResultBytes?: number;
  /** Told of each run created and each transition written (the metrics count them). */
  readonly observer?: RunObserver;
}

/** What the engine tells of runs as they are written: each new run once, each transition once. */
export interface RunObserver {
  created(run: PersistedRun): void;
  transitioned(previous: PersistedRun, run: PersistedRun, command: RunCommand): void;
}
