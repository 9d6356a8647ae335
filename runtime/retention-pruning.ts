// The runtime's prune jobs on the prune loop (ledger/prune-loop.ts): what retention lets go (dedup
// claims, live updates, history, appended projection rows, deleted workflows), and org deletions
// left over, each on its own. Ages are measured on prune-time.ts's clock. A job's failures are
// counted (sluice_prune_failures_total, there from the start at 0) and logged; one refused below
// the disk floor is not counted, and logged at debug only (the floor's own line speaks for it).

import { DiskSpaceLowError } from '../hook-runner/disk-floor.ts';
import type { EventStore } from './events/event-store.ts';
import { DAY_MS, pruneHistory } from './events/history-retention.ts';
import type { Inbox } from './inbox/inbox.ts';
import type { Ledger } from './ledger/ledger.ts';
import type { DeletingOrgIds } from './ledger/org-fence.ts';
import { startPruneLoop, type PruneLoop } from './ledger/prune-loop.ts';
import type { Logger } from './log.ts';
import type { RuntimeMetrics } from './metrics.ts';
import { pruneAppendedRows } from './projections/appended-row-retention.ts';
import type { ProjectionStore } from './projections/projection-store.ts';
import type { UpdateLog } from './rooms/update-log.ts';
import type { RunStore } from './runs/run-store.ts';
import type { OrgDeletions } from './tenancy/org-deletion.ts';
import type { WorkflowStore } from './workflows/workflow-store.ts';
import { pruneDeletedWorkflows } from './workflows/prune-deleted-workflows.ts';

/** The longest time between passes; a short dedup window prunes more often (a tenth of it, a second at least). */
const PRUNE_INTERVAL_MS = 60 * 60 * 1000;

export interface RetentionPruningDeps {
  readonly ledger: Ledger;
  readonly inbox: Inbox;
  readonly updateLog: UpdateLog;
  readonly events: EventStore;
  readonly runs: RunStore;
  readonly projections: ProjectionStore;
  readonly workflows: WorkflowStore;
  readonly deletedOrgs: DeletingOrgIds;
  readonly deletions: OrgDeletions;
  readonly metrics: RuntimeMetrics;
  readonly logger: Logger;
  /** The time ages are measured against (prune-time.ts). */
  readonly pruneNow: () => number;
  readonly retentionDays: number;
  readonly dedupWindowMs: number;
}

export function startRetentionPruning(d: RetentionPruningDeps): PruneLoop {
  const { ledger, inbox, updateLog, events, runs, projections, workflows, deletedOrgs, deletions, metrics, logger, pruneNow } = d;
  const retentionMs = d.retentionDays * DAY_MS;
  const jobs = {
    inbox: (stop: AbortSignal) => inbox.prune(pruneNow(), undefined, stop),
    live_updates: () => updateLog.trim(),
    history: (stop: AbortSignal) => pruneHistory({ ledger, events, runs }, pruneNow(), retentionMs, undefined, stop),
    appended_projection_rows: (stop: AbortSignal) => pruneAppendedRows(ledger.root, projections, pruneNow(), retentionMs, undefined, stop, deletedOrgs),
    deleted_workflows: (stop: AbortSignal) => pruneDeletedWorkflows({ deleted: workflows.deleted, runs, deletedOrgs }, pruneNow(), retentionMs, stop),
    // Not retention, but the same rhythm: a deletion cut short (a stop, a hook-runner down) goes on,
    // in the background: a hook-runner that does not answer must not hold the other jobs up.
    organization_deletions: async () => deletions.resumeLeftOver(),
  };
  // Each job's failure count is there from the start, at 0: a series that first appears at 1 is
  // one `increase()` and `rate()` never see, so an alert on them would miss the first failure.
  for (const job of Object.keys(jobs)) metrics.pruneFailures.inc({ job }, 0);
  return startPruneLoop(jobs, Math.min(PRUNE_INTERVAL_MS, Math.max(1000, Math.floor(d.dedupWindowMs / 10))), (job, error) => {
    // Below the disk floor the floor's own line speaks for it; it is not a pruning fault to alert on.
    if (error instanceof DiskSpaceLowError) return logger.debug('prune refused below the disk floor', { job });
    metrics.pruneFailures.inc({ job });
    logger.error('prune failed', { job, error: String(error) });
  });
}
