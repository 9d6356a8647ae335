// Prometheus metrics of the runtime (prom-client), one registry per runtime instance.
// Served as text at GET /metrics; names are prefixed `sluice_`.

import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import type { PersistedRun } from '../actors/run-transition.ts';
import { REPLAY_SKIP_REASON } from '../actors/run-progress.ts';
import type { RunObserver } from './runs/run-engine-deps.ts';

export interface RuntimeMetrics {
  readonly registry: Registry;
  readonly httpRequestSeconds: Histogram<'route' | 'method' | 'status'>;
  readonly ingestTotal: Counter<'outcome'>;
  readonly ledgerCommitSeconds: Histogram<'operation'>;
  /** Hourly housekeeping passes that failed, by job (inbox, live_updates, history). */
  readonly pruneFailures: Counter<'job'>;
}

export function createRuntimeMetrics(): RuntimeMetrics {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry, prefix: 'sluice_' });
  const fastBuckets = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5];
  const metrics: RuntimeMetrics = {
    registry,
    httpRequestSeconds: new Histogram({
      name: 'sluice_http_request_duration_seconds',
      help: 'HTTP request latency from first byte handled to reply written.',
      labelNames: ['route', 'method', 'status'],
      buckets: fastBuckets,
      registers: [registry],
    }),
    ingestTotal: new Counter({
      name: 'sluice_ingest_total',
      help: 'Events stored and webhook deliveries refused: accepted (webhook deliveries), accepted_api, accepted_replay, accepted_schedule, accepted_device (device messages; not the device.connected and device.disconnected events of their connections, nor derived events), or the error code a webhook delivery was refused with (duplicate_event, invalid_signature, ...).',
      labelNames: ['outcome'],
      registers: [registry],
    }),
    ledgerCommitSeconds: new Histogram({
      name: 'sluice_ledger_commit_duration_seconds',
      help: 'Time from issuing a webhook delivery\'s ledger transaction to it being flushed to disk (operation="ingest"; successful commits only).',
      labelNames: ['operation'],
      buckets: fastBuckets,
      registers: [registry],
    }),
    pruneFailures: new Counter({
      name: 'sluice_prune_failures_total',
      help: 'Hourly pruning passes that failed, by job; their data keeps growing until one succeeds.',
      labelNames: ['job'],
      registers: [registry],
    }),
  };
  // A series an operator alerts on is there from the start, at 0: a counter's series otherwise
  // appears at its first increment, at 1, which `increase()` and `rate()` cannot see.
  metrics.ingestTotal.inc({ outcome: 'write_failed' }, 0);
  return metrics;
}

/** A gauge read at each scrape. */
function scrapedGauge(metrics: RuntimeMetrics, name: string, help: string, read: () => number | Promise<number>): Gauge {
  return new Gauge({
    name,
    help,
    registers: [metrics.registry],
    async collect() {
      this.set(await read());
    },
  });
}

/** What a /metrics scrape learns of the hook-runner: whether it can run guests, whether its disk is below its floor, and whether its pruning fails. */
export interface RunnerHealth { readonly up: boolean; readonly diskLow: boolean; readonly pruneFailing: boolean }

/** The states a run ends in (a failed one may be resumed, and ends again). */
const FINISHED: ReadonlySet<string> = new Set(['completed', 'failed', 'cancelled']);
/** A run's state once it is finished, or undefined while it is not. */
const finishedState = (run: PersistedRun): string | undefined => (FINISHED.has(run.value) ? run.value : undefined);

/**
 * The attempts a replay without side effects closed as skipped in `run` and not in `previous`, as
 * their step types, leaving out `reported` (the step id and fence of an attempt a report closed,
 * counted as reported). It closes them inside a transition (run-progress.ts, skipReplayed): no
 * report tells of them.
 */
function replaySkipsBetween(previous: PersistedRun | undefined, run: PersistedRun, reported?: { readonly stepId: string; readonly fence: number }): string[] {
  const types: string[] = [];
  if (!run.context.skipSideEffects) return types;
  run.context.steps.forEach((step, index) => {
    const before = previous?.context.steps[index]?.attempts.length ?? 0;
    for (const attempt of step.attempts.slice(before)) {
      const byReplay = attempt.outcome === 'skipped' && (attempt.evidence as { reason?: unknown } | null)?.reason === REPLAY_SKIP_REASON;
      if (byReplay && !(reported?.stepId === step.id && reported.fence === attempt.fence)) types.push(step.type);
    }
  });
  return types;
}

/**
 * Counters of runs and their step attempts, told by the run engine (RunObserver): runs created and
 * finished (by state and environment), and step attempts by step type and outcome. A run picked up
 * again after a restart is not created again; its attempts and its end count once, as written.
 * A run may be admitted, and a replay without side effects may skip its webhook steps and finish,
 * in the write that creates it: those count as it is created.
 */
export function observeRuns(metrics: RuntimeMetrics): RunObserver {
  const created = new Counter({ name: 'sluice_runs_created_total', help: 'Runs created (one per listening workflow of each event), by environment.', labelNames: ['environment'], registers: [metrics.registry] });
  const finished = new Counter({ name: 'sluice_runs_finished_total', help: 'Runs that finished, by state (completed, failed, cancelled) and environment; a failed run resumed and finished again counts again.', labelNames: ['state', 'environment'], registers: [metrics.registry] });
  const attempts = new Counter({ name: 'sluice_step_attempts_total', help: 'Step attempts that reported, by step type (webhook, custom_action) and outcome (succeeded, failed, skipped); a failed one may be retried.', labelNames: ['type', 'outcome'], registers: [metrics.registry] });
  // Alerted on from the start, at 0 (see ingestTotal).
  for (const environment of ['production', 'sandbox']) finished.inc({ state: 'failed', environment }, 0);
  const OUTCOMES = { 'step.succeeded': 'succeeded', 'step.failed': 'failed', 'step.skipped': 'skipped' } as const;
  const countChange = (previous: PersistedRun | undefined, run: PersistedRun, reported?: { readonly stepId: string; readonly fence: number }): void => {
    const state = finishedState(run);
    if (state !== undefined && (previous === undefined || finishedState(previous) === undefined)) finished.inc({ state, environment: run.context.environment });
    for (const type of replaySkipsBetween(previous, run, reported)) attempts.inc({ type, outcome: 'skipped' });
  };
  return {
    created: (run) => {
      created.inc({ environment: run.context.environment });
      countChange(undefined, run);
    },
    transitioned: (previous, run, command) => {
      const reported = command.type === 'step.succeeded' || command.type === 'step.failed' || command.type === 'step.skipped' ? command : undefined;
      countChange(previous, run, reported);
      if (reported === undefined) return;
      const type = run.context.steps.find((step) => step.id === reported.stepId)?.type;
      if (type !== undefined) attempts.inc({ type, outcome: OUTCOMES[reported.type] });
    },
  };
}

/** Gauges an operator alerts on: runs whose last write failed, runs resting on disk, runs running and queued, and the local hook-runner's health. */
export function observeEngine(
  metrics: RuntimeMetrics,
  read: {
    /** Runs holding a concurrency slot and runs waiting for one, over every org. */
    readonly admission: () => { readonly running: number; readonly queued: number };
    readonly stalledRuns: () => number;
    /** Running runs whose step results rest on disk between their transitions (held-results.ts). */
    readonly restingRuns: () => number;
    /** Whether boot recovery is still picking up the runs the previous process left unfinished. */
    readonly recovering: () => boolean;
    /** The configured hook-runner, if any: its health now (asked once per scrape), and (a supervised child) its restarts. */
    readonly runner: { readonly health: () => Promise<RunnerHealth>; readonly restarts: (() => number) | undefined } | undefined;
  },
): void {
  scrapedGauge(metrics, 'sluice_runs_running', 'Runs holding one of their org\'s concurrency slots (max_concurrent_runs), over every org.', () => read.admission().running);
  scrapedGauge(metrics, 'sluice_runs_queued', 'Runs waiting for one of their org\'s concurrency slots, over every org (each org and environment holds at most --max-queued-runs).', () => read.admission().queued);
  scrapedGauge(metrics, 'sluice_runs_stalled', 'Runs whose last transition could not be written, waiting to be picked up again (a full or failing disk).', read.stalledRuns);
  scrapedGauge(metrics, 'sluice_recovering', '1 while boot recovery picks up the runs the previous process left unfinished (the port is open, API requests wait): sluice_runs_running and sluice_runs_queued count only the runs picked up so far; else 0.', () => (read.recovering() ? 1 : 0));
  scrapedGauge(metrics, 'sluice_runs_resting', 'Running runs holding more than 256 KiB of step results: they keep no live actor in memory, and each transition reads the run back from disk.', read.restingRuns);
  const { runner } = read;
  if (runner === undefined) return;
  // A scrape collects every gauge at once: the two runner gauges share the one health call in flight.
  let asking: Promise<RunnerHealth> | undefined;
  const health = (): Promise<RunnerHealth> =>
    (asking ??= runner.health().finally(() => {
      asking = undefined;
    }));
  scrapedGauge(metrics, 'sluice_hook_runner_up', '1 when the hook-runner answered a health check at this scrape (within 1 s) that it can run guests, else 0: down, restarting, wedged, without a sandbox or refusing the runner token of the runtime (custom_action steps fail or wait meanwhile).', async () => ((await health()).up ? 1 : 0));
  scrapedGauge(metrics, 'sluice_hook_runner_disk_low', '1 when the hook-runner answered at this scrape that its disk is below its floor (its --min-free-disk-mib): it refuses compiles, secret changes and custom_action steps (retried) until space is freed; else 0.', async () => ((await health()).diskLow ? 1 : 0));
  scrapedGauge(metrics, 'sluice_hook_runner_prune_failing', '1 when the hook-runner answered at this scrape that its last pass pruning old invocation records and fences failed (its log says why; they keep growing until a pass works, hourly); else 0.', async () => ((await health()).pruneFailing ? 1 : 0));
  const { restarts } = runner;
  if (restarts !== undefined) scrapedGauge(metrics, 'sluice_hook_runner_restarts', 'Times the supervised hook-runner child was restarted since the runtime started.', restarts);
}

/** Gauges of the data dir's free disk space and the floor below which the ledger commits nothing (disk-floor.ts). */
export function observeDiskFloor(metrics: RuntimeMetrics, disk: { readonly freeBytes: number | undefined; readonly floorBytes: number }): void {
  scrapedGauge(metrics, 'sluice_disk_free_bytes', 'Bytes free on the data dir\'s disk at its last read (once a second; NaN before the first; +Inf on a filesystem that reports no size, such as ramfs).', () => disk.freeBytes ?? Number.NaN);
  scrapedGauge(metrics, 'sluice_disk_floor_bytes', 'Below this many free bytes the runtime commits nothing: requests are answered 503 write_failed and runs wait (--min-free-disk-mib; 0: off).', () => disk.floorBytes);
}

/** The gauge of organization deletions not finished yet (org-deletion.ts), read at each scrape. */
export function observeDeletions(metrics: RuntimeMetrics, unfinished: () => number): void {
  scrapedGauge(metrics, 'sluice_organization_deletions_unfinished', 'Organizations deleted whose removal is not finished: under way, cut short (finished at each start and pruning pass), or waiting for the hook-runner to delete their secrets.', unfinished);
}

/** The gauge of open device sockets, read at each scrape. */
export function observeDevices(metrics: RuntimeMetrics, openSockets: () => number): void {
  scrapedGauge(metrics, 'sluice_device_sockets_open', 'Device sockets open now, over every org.', openSockets);
}

/** Tells of one WebSocket upgrade's answer at `route` (its pattern): 101 when taken, else the refusal's status. */
export type UpgradeAnswered = (route: string, status: number, startedMs: number) => void;

/**
 * Upgrades are counted in the request histogram as REST requests are (method GET): uWS answers
 * them outside the HTTP server, and a refusal (a full socket budget, a revoked key) would show nowhere.
 * `startedMs`: performance.now() as the upgrade handler began.
 */
export function upgradeAnswers(metrics: RuntimeMetrics): UpgradeAnswered {
  return (route, status, startedMs) => metrics.httpRequestSeconds.observe({ route, method: 'GET', status: String(status) }, (performance.now() - startedMs) / 1000);
}

/** Gauges of every WebSocket (live rooms and devices) against the process's total (--websockets). */
export function observeWebSockets(metrics: RuntimeMetrics, budget: { readonly open: number; readonly total: number }): void {
  scrapedGauge(metrics, 'sluice_websockets_open', 'Live-room and device WebSockets open now, over every org.', () => budget.open);
  scrapedGauge(metrics, 'sluice_websockets_limit', 'WebSockets the process may hold open at once (--websockets); past it upgrades are refused with 503.', () => budget.total);
}

/** Gauges of the webhook connection pools, read at each scrape from `stats`. */
export function observeWebhookConnections(metrics: RuntimeMetrics, stats: () => { readonly open: number; readonly waiting: number; readonly limit: number }): void {
  scrapedGauge(metrics, 'sluice_webhook_connections_open', 'Sockets webhook steps hold open (busy or idle), over every org and receiver.', () => stats().open);
  scrapedGauge(metrics, 'sluice_webhook_connections_limit', 'Sockets webhook steps may hold open at once, every org together (an eighth of the open-file limit less 64, at least 8); past it new connections wait.', () => stats().limit);
  scrapedGauge(metrics, 'sluice_webhook_requests_waiting', 'Webhook requests waiting for a connection because their org is at its cap for that receiver, at its share of sockets over all its receivers, or the process holds its total.', () => stats().waiting);
}

export function observeStepInputs(metrics: RuntimeMetrics, stats: () => { readonly heldBytes: number; readonly waiting: number }): void {
  scrapedGauge(metrics, 'sluice_step_input_bytes', 'Payload bytes held by the steps being performed (webhook bodies, custom action input).', () => stats().heldBytes);
  scrapedGauge(metrics, 'sluice_steps_waiting_for_memory', 'Steps waiting for their payload to fit the step input budget before they read their event.', () => stats().waiting);
}
