// The upgrades a data dir left by an earlier release needs before the runtime serves from it: the
// layout it was last stamped with (ledger/data-format.ts) picks them, each is idempotent (a start cut
// short runs it again), and the dir is stamped with this release's layout once they are all done.

import type { EventStore } from './events/event-store.ts';
import { REPLAY_INDEX_FORMAT } from './events/replay-index.ts';
import { DATA_FORMAT, stampDataFormat, storedDataFormat } from './ledger/data-format.ts';
import type { Ledger } from './ledger/ledger.ts';
import type { Logger } from './log.ts';
import { PROJECTION_COUNT_FORMAT, PROJECTION_STATUS_FORMAT, type ProjectionStore } from './projections/projection-store.ts';
import { FAILED_INDEX_MOVED_FORMAT, upgradeFailedIndex } from './runs/failed-index-upgrade.ts';
import type { RunStore } from './runs/run-store.ts';
import { DELETED_WORKFLOWS_FORMAT } from './workflows/deleted-workflows.ts';
import { WORKFLOW_ORDER_FORMAT, type WorkflowStore } from './workflows/workflow-store.ts';

export interface UpgradedStores {
  readonly ledger: Ledger;
  readonly runs: RunStore;
  readonly workflows: WorkflowStore;
  readonly events: EventStore;
  readonly projections: ProjectionStore;
  readonly logger: Logger;
  readonly now: number;
}

/** Runs the upgrades the stored layout calls for, in order, then stamps the layout; resolves once durable. Call before anything writes. */
export async function upgradeLayout({ ledger, runs, workflows, events, projections, logger, now }: UpgradedStores): Promise<void> {
  const format = storedDataFormat(ledger);
  // A dir without a stamp is either new or from before the stamp: only the second one had orgs.
  const heldData = format > 1 || [...ledger.orgs.getRange({ limit: 1 })].length > 0;
  // Before anything writes runs: the move assumes it is the index's only writer (failed-index-upgrade.ts).
  const movedFailed = format < FAILED_INDEX_MOVED_FORMAT ? await upgradeFailedIndex(ledger, runs) : 0;
  if (movedFailed > 0) logger.info('failed-event index moved to its arrival order', { entries: movedFailed });
  if (format < WORKFLOW_ORDER_FORMAT) {
    const indexed = await workflows.indexOrder();
    if (indexed > 0) logger.info('workflows indexed by creation for paging', { workflows: indexed });
  }
  if (format < REPLAY_INDEX_FORMAT) {
    const read = await events.replays.indexStored(ledger.events);
    if (read > 0) logger.info('business replays indexed under their events', { events_read: read });
  }
  if (format < PROJECTION_STATUS_FORMAT) {
    const read = await projections.indexStatuses();
    if (read > 0) logger.info('projection rows indexed by status', { rows_read: read });
  }
  if (format < PROJECTION_COUNT_FORMAT) {
    const read = await projections.countRows();
    if (read > 0) logger.info('projection rows counted per org, appended ones indexed for retention', { rows_read: read });
  }
  if (format < DELETED_WORKFLOWS_FORMAT) {
    const listed = await workflows.deleted.listEarlierDeletes(now);
    if (listed > 0) logger.info('deleted workflows listed for their versions to be pruned', { workflows: listed });
  }
  const replaced = await stampDataFormat(ledger);
  // Said once, as it happens: from now on an earlier release refuses the dir.
  if (replaced !== undefined && heldData) {
    logger.info("data dir upgraded to this release's layout; do not start an earlier release on it (to go back, restore a copy taken before this start)", { from_format: replaced, to_format: DATA_FORMAT });
  }
}
