// The composition root: opens the ledger, builds stores and routes, listens, and shuts down cleanly.
// Nothing else wires dependencies (but the prune jobs, in retention-pruning.ts, from the stores made
// here); tests create a runtime through here with their own clock.

import { apiKeyRoutes } from './api/api-keys-api.ts';
import { isoAt, type ApiContext } from './api/context.ts';
import { scheduleRoutes } from './api/schedules-api.ts';
import { ScheduleStore } from './triggers/schedule-store.ts';
import { EventRunsGate, runWeight } from './events/event-runs-gate.ts';
import { EventWriteTurns } from './events/event-write-turns.ts';
import { ScheduleTicker } from './triggers/schedule-ticker.ts';
import { closeSchemaThreads, startSchemaThreads, type SchemaCheckDeadlines } from './sources/schema-checks.ts';
import { deviceRoutes } from './api/devices-api.ts';
import { DeviceStore } from './triggers/device-store.ts';
import { deviceSchemas } from './triggers/device-record.ts';
import { DeviceSockets } from './triggers/device-sockets.ts';
import { deviceUpgradeRequired } from './triggers/device-upgrade.ts';
import { eventRoutes } from './api/events-api.ts';
import { runRoutes } from './api/runs-api.ts';
import { sandboxRoutes } from './api/sandbox-api.ts';
import { replayRoutes } from './api/replay-api.ts';
import { projectionRoutes } from './api/projections-api.ts';
import { customActionRoutes } from './api/custom-actions-api.ts';
import { exportRoutes } from './api/export-api.ts';
import { CustomActionStore } from './actions/custom-action-store.ts';
import { createRestoringInvoker } from './actions/module-restore.ts';
import { createSecretRequiringInvoker } from './actions/required-secrets.ts';
import { SecretNames } from './actions/secret-names.ts';
import { ProjectionStore } from './projections/projection-store.ts';
import { workflowRoutes } from './api/workflows-api.ts';
import { organizationRoutes } from './api/organizations-api.ts';
import { sourceRoutes } from './api/sources-api.ts';
import { systemRoutes } from './api/system-api.ts';
import { loadAdminToken, type AdminToken } from './auth/admin-token.ts';
import { authenticateFirst } from './auth/authenticate-first.ts';
import { createAuthorizer } from './auth/authorize.ts';
import { elapsedSince, systemClock, type Clock } from './clock.ts';
import { claimDatingTime, pruneTime } from './prune-time.ts';
import { LOW_FILE_LIMIT, openFileLimit } from './open-file-limit.ts';
import type { RuntimeConfig } from './config.ts';
import { EventStore } from './events/event-store.ts';
import { HttpServer } from './http/server.ts';
import { WebSocketBudget } from './http/websocket-budget.ts';
import { Inbox } from './inbox/inbox.ts';
import { hookRoutes } from './ingest/hook-routes.ts';
import { IngestQuota } from './ingest/ingest-quota.ts';
import { RunBacklog } from './ingest/run-backlog.ts';
import { openLedger } from './ledger/open-ledger.ts';
import { DiskFloor, statfsProbe, type FreeSpaceProbe } from '../hook-runner/disk-floor.ts';
import { flooredLedger } from './ledger/floored-ledger.ts';
import type { Ledger } from './ledger/ledger.ts';
import type { HookRunnerClientOptions } from './hook-runner/client.ts';
import { connectRunner, type RunnerConnection } from './hook-runner/connect-runner.ts';
import { createLogger, type Logger } from './log.ts';
import { createRuntimeMetrics, observeDeletions, observeDevices, observeDiskFloor, observeEngine, observeRuns, observeStepInputs, observeWebhookConnections, observeWebSockets, upgradeAnswers } from './metrics.ts';
import { LiveRooms } from './rooms/live-rooms.ts';
import { liveUpgradeRequired } from './rooms/live-upgrade.ts';
import { UpdateLog } from './rooms/update-log.ts';
import { finishInterruptedResets } from './events/sandbox-reset.ts';
import { startRetentionPruning } from './retention-pruning.ts';
import { RunEngine } from './runs/run-engine.ts';
import { beginBoot, type BootRecovery } from './runs/boot-record.ts';
import { logFailure } from './ledger/commit-failure-guard.ts';
import { OutboundConnections } from './runs/outbound-connections.ts';
import { ReceiverResolver } from './runs/receiver-lookup.ts';
import { StepInputBudget } from './runs/step-input-budget.ts';
import { RunStore } from './runs/run-store.ts';
import { assertDataFormatKnown } from './ledger/data-format.ts';
import { SourceStore } from './sources/source-store.ts';
import { startStaleSchemaCheck } from './sources/stale-schemas.ts';
import { WorkflowStore } from './workflows/workflow-store.ts';
import { upgradeLayout } from './layout-upgrades.ts';
import { ApiKeyStore } from './tenancy/api-keys.ts';
import { OrganizationStore } from './tenancy/organizations.ts';
import { fenceDeletedOrgs } from './tenancy/deleted-orgs.ts';
import { SecretWrites } from './actions/secret-writes.ts';
import { OrgDeletions } from './tenancy/org-deletion.ts';
import { stopInOrder } from './stop-sequence.ts';
import { exportSections } from './tenancy/org-export-sections.ts';

export interface RuntimeDeps {
  readonly clock?: Clock;
  readonly logger?: Logger;
  /** Storage; default: the LMDB ledger in the data dir (tests also run the runtime on the memory twin). */
  readonly ledger?: Ledger;
  /** How the free space of the data dir's disk is read (disk-floor.ts); default statfs (tests inject theirs). */
  readonly freeDiskSpace?: FreeSpaceProbe;
  /** How long a schema check or compile may take (schema-checks.ts); default 1 s and 20 s. */
  readonly schemaDeadlines?: SchemaCheckDeadlines;
  /** How webhook steps look up receivers' names (receiver-lookup.ts); default the hosts file, then the DNS servers of /etc/resolv.conf. */
  readonly receiverResolver?: ReceiverResolver;
  /** Aborted when the process is told to stop while it starts: a hook-runner child still starting (up to 30 s) is stopped at once. */
  readonly stopStarting?: AbortSignal;
  /** Projection rows one org may hold; default MAX_PROJECTION_ROWS_PER_ORG (tests set a small one). */
  readonly projectionRowCap?: number;
  /** Step results a running run may hold and keep its live actor; default RESTING_RESULT_BYTES (tests set a small one). */
  readonly restingResultBytes?: number;
  /** Milliseconds, for what a refused device frame's reading cost (device-messages.ts, REFUSAL_MS); default performance.now (tests give theirs). */
  readonly deviceReadingClock?: () => number;
  /** The budget of runs the event writes in flight may build together (event-runs-gate.ts). */
  readonly eventRuns?: EventRunsGate;
  /** Bytes every live socket together may hold queued, unread (live-queue.ts); default LIVE_QUEUE_BYTES (tests set a small one). */
  readonly liveQueueBytes?: number;
  /** Deadlines of hook-runner calls (client.ts defaults: 30 s, 10 s for secrets; tests set short ones). */
  readonly runnerDeadlinesMs?: HookRunnerClientOptions['deadlinesMs'];
  /**
   * Told once, with LMDB's reason, when the data dir's disk failed a commit's own sync (flush-watch.ts):
   * from then on no write is answered as stored. `sluice dev`/`serve` exit at once (exit 1) so that a
   * restart reopens the store; without it the runtime stays up and answers every write 503 write_unconfirmed.
   */
  readonly onStoreFailed?: (cause: string) => void;
}

export interface Runtime {
  readonly port: number;
  readonly url: string;
  readonly adminToken: AdminToken;
  readonly ledger: Ledger;
  readonly context: ApiContext;
  readonly inbox: Inbox;
  readonly updateLog: UpdateLog;
  readonly rooms: LiveRooms;
  readonly engine: RunEngine;
  /** The runtime's one workflow store: its match cache assumes no other writer (use this one, never a second). */
  readonly workflows: WorkflowStore;
  /** Sends schedules' ticks (tests fire its timers on a manual clock). */
  readonly ticker: ScheduleTicker;
  /** Devices' sockets: their messages and connection changes become events. */
  readonly devices: DeviceSockets;
  /** The runtime's one device store: its record cache assumes no other writer (use this one, never a second). */
  readonly deviceStore: DeviceStore;
  /** The hook-runner connection (client and, under `sluice dev`, the supervised child). */
  readonly runner: RunnerConnection;
  /** Organization deletions (tests wait for a removal with `idle`). */
  readonly deletions: OrgDeletions;
  /** The free space the ledger keeps on the data dir's disk (tests read it again with probeNow). */
  readonly disk: DiskFloor;
  /** Runs a pass of the prune loop now, resolving once it has ended (tests; the loop runs on its own). */
  prune(): Promise<void>;
  /** Stops accepting, waits for in-flight requests, flushes and closes the ledger. */
  close(): Promise<void>;
}

/** How long a /metrics scrape waits for the hook-runner's health answer (sluice_hook_runner_up, _disk_low). */
const RUNNER_HEALTH_DEADLINE_MS = 1000;

export async function createRuntime(config: RuntimeConfig, deps: RuntimeDeps = {}): Promise<Runtime> {
  const clock = deps.clock ?? systemClock;
  const logger = deps.logger ?? createLogger(config.logLevel);
  // Armed before requests are let in: start-up's writes go ahead below the floor (disk-floor.ts).
  const disk = new DiskFloor(config.minFreeDiskMib, deps.freeDiskSpace ?? statfsProbe(config.dataDir), logger);
  const storeFailed = (cause: string): void => {
    logger.error('the data dir\'s disk failed to sync a commit: no write is answered as stored from now on (503 write_unconfirmed); check the disk, then restart', { cause });
    deps.onStoreFailed?.(cause);
  };
  const ledger = flooredLedger(deps.ledger ?? openLedger(config.dataDir, storeFailed), disk);
  disk.start();
  // What has been opened so far, closed again (newest first) if starting fails part way.
  const opened: Array<() => unknown> = [() => ledger.close(), () => disk.close()];
  try {
    await disk.probeNow();
    return await startOn(ledger, disk, opened, config, clock, logger, deps);
  } catch (error) {
    for (const close of opened.reverse()) await Promise.resolve().then(close).catch(() => undefined);
    throw error;
  }
}

async function startOn(ledger: Ledger, disk: DiskFloor, opened: Array<() => unknown>, config: RuntimeConfig, clock: Clock, logger: Logger, { schemaDeadlines, stopStarting, receiverResolver, projectionRowCap, restingResultBytes, runnerDeadlinesMs, deviceReadingClock, liveQueueBytes, eventRuns }: RuntimeDeps): Promise<Runtime> {
  assertDataFormatKnown(ledger, config.dataDir);
  const metrics = createRuntimeMetrics();
  const adminToken = loadAdminToken(config.adminToken, config.adminTokenFile);
  const runner = await connectRunner(config, logger, stopStarting, runnerDeadlinesMs);
  opened.push(() => runner.close());
  // Before any store opens its tables: each is fenced against writes of deleted orgs (org-fence.ts).
  const { deleted: deletedOrgs, tables: orgTables } = fenceDeletedOrgs(ledger);
  const orgs = new OrganizationStore(ledger, (orgId) => deletedOrgs.has(orgId));
  const apiKeys = new ApiKeyStore(ledger);
  // Never ahead of the time passed since the start: a wall clock set forward prunes nothing early,
  // nor takes a claim still live for expired. Claims are dated never behind it: nor does one set back.
  const pruneNow = pruneTime(clock);
  const inbox = new Inbox(ledger, config.dedupWindowMs, { agesNow: pruneNow, datesNow: claimDatingTime(clock) });
  const sources = new SourceStore(ledger, inbox);
  const events = new EventStore(ledger, inbox);
  const runs = new RunStore(ledger);
  const workflows = new WorkflowStore(ledger);
  const projections = new ProjectionStore(ledger, projectionRowCap);
  await upgradeLayout({ ledger, runs, workflows, events, projections, logger, now: clock.now() });
  const auth = createAuthorizer(adminToken.token, apiKeys, orgs);
  const schemas = startSchemaThreads(schemaDeadlines);
  opened.push(() => closeSchemaThreads(schemas));
  // Every path that stores an event takes its turn here first (event-write-turns.ts).
  const writeTurns = new EventWriteTurns(eventRuns ?? new EventRunsGate(), runs.sandboxGenerations, (orgId, environment, type) =>
    workflows.matching(orgId, environment, type).reduce((sum, version) => sum + runWeight(version.definition.steps.length), 0));
  const context: ApiContext = { ledger, orgs, apiKeys, sources, events, runs, auth, clock, logger, metrics, schemas, disk, writeTurns };
  const startedAt = clock.now();
  const uptimeMs = elapsedSince(clock);

  // The engine is made below, before any route that stores an event is added.
  const quota = new IngestQuota(clock, (orgId) => orgs.get(orgId), new RunBacklog(config.maxQueuedRuns, (orgId, environment) => engine.queuedRuns(orgId, environment)));
  let boundPort = 0;
  const updateLog = new UpdateLog(ledger, config.liveRetention);
  await updateLog.adoptRetention(deletedOrgs);
  const server = new HttpServer({ logger, metrics, bodyBudgetBytes: config.requestBodyBytes });
  const websockets = new WebSocketBudget(config.websockets);
  const rooms = new LiveRooms(server.app, auth, orgs, updateLog, clock, { socketsPerOrg: config.liveSocketsPerOrg, websockets, answered: upgradeAnswers(metrics), ...(liveQueueBytes === undefined ? {} : { queuedBytes: liveQueueBytes }) });
  opened.push(() => rooms.close(), () => server.close());
  const actions = new CustomActionStore(ledger);
  // One for runs and simulations alike: concurrent restores of one module are shared.
  const secretNames = new SecretNames(ledger);
  const secretWrites = new SecretWrites();
  const invoker = runner.client === undefined ? undefined : createSecretRequiringInvoker(createRestoringInvoker(runner.client, actions, {
    onRestored: (orgId, digest) => logger.warn('hook-runner lacked a custom action module; sent it again from the ledger (its secrets, if it lost them too, must be set again)', { org: orgId, digest }),
  }), secretNames);
  const connections = new OutboundConnections(config.webhookConnections, config.webhookTargets, {
    selfPort: () => boundPort,
    resolver: receiverResolver ?? new ReceiverResolver({ env: config.resolverEnv }),
  });
  observeWebhookConnections(metrics, () => connections.stats());
  opened.push(() => connections.close());
  const stepInputs = new StepInputBudget(config.stepInputBytes);
  observeStepInputs(metrics, () => stepInputs.stats());
  const engine = new RunEngine({
    ledger, runs, workflows, events, orgs, deletedOrgs, updateLog, rooms, clock, logger, projections,
    selfPort: () => boundPort,
    connections,
    stepInputs,
    actions,
    runner: invoker,
    observer: observeRuns(metrics),
    ...(restingResultBytes === undefined ? {} : { restingResultBytes }),
  });
  opened.push(() => engine.close());
  const schedules = new ScheduleStore(ledger, events);
  const ticker = new ScheduleTicker({
    schedules, orgs, deletedOrgs, clock, logger,
    writeTurns,
    onSent: () => metrics.ingestTotal.inc({ outcome: 'accepted_schedule' }),
  });
  opened.push(() => ticker.close());
  const deviceStore = new DeviceStore(ledger, events);
  const devices = new DeviceSockets(server.app, {
    devices: deviceStore, events, orgs, quota, clock, logger, websockets, deletedOrgs,
    answered: upgradeAnswers(metrics),
    writeTurns,
    schemaChecks: schemas.payloads,
    onStored: () => metrics.ingestTotal.inc({ outcome: 'accepted_device' }),
    ...(deviceReadingClock === undefined ? {} : { readingClock: deviceReadingClock }),
  });
  opened.push(() => devices.close());
  observeDevices(metrics, () => devices.openSockets);
  observeWebSockets(metrics, websockets);
  observeDiskFloor(metrics, disk);
  const { child, client: runnerClient } = runner;
  // Until boot recovery has picked up every unfinished run (/metrics answers meanwhile).
  let recovering = true;
  observeEngine(metrics, {
    admission: () => engine.admissionTotals(),
    stalledRuns: () => engine.stalled.size,
    restingRuns: () => engine.restingRuns,
    recovering: () => recovering,
    runner: runnerClient === undefined ? undefined : {
      health: async () => {
        const answer = child === undefined || child.state === 'running' ? await runnerClient.checkHealth(RUNNER_HEALTH_DEADLINE_MS) : undefined;
        return { up: answer?.ok === true, diskLow: answer?.diskLow === true, pruneFailing: answer?.pruneFailing === true };
      },
      restarts: child === undefined ? undefined : () => child.restarts,
    },
  });
  // Aborted as the stop begins: long request work (a whole-projection delete) ends between its writes.
  const stopping = new AbortController();
  server.addRoutes(...systemRoutes(ledger, metrics, uptimeMs), ...hookRoutes({ orgs, sources, events, clock, metrics, quota, writeTurns, schemaChecks: schemas.payloads, bodyReads: schemas.bodies }), liveUpgradeRequired, deviceUpgradeRequired);
  const deletions = new OrgDeletions({
    ledger, orgs, deleted: deletedOrgs, tables: orgTables, logger,
    actionIds: (orgId) => actions.list(orgId).map((action) => action.id),
    runner: runner.client,
    secretWritesSettled: (orgId) => secretWrites.settled(orgId),
    onFenced: (orgId) => {
      engine.forgetOrg(orgId).catch((error: unknown) => logFailure(logger, "letting go of a deleted organization's runs stopped part way", { org: orgId }, error));
      rooms.closeSocketsOfOrg(orgId);
      devices.closeSocketsOfOrg(orgId);
      ticker.forgetOrg(orgId);
    },
    onRemoved: (orgId) => {
      updateLog.forgetOrg(orgId);
      rooms.forgetOrg(orgId);
      devices.forgetOrg(orgId);
      quota.forgetOrg(orgId);
      server.forgetOrg(orgId);
    },
    now: () => clock.now(),
    stop: stopping.signal,
  });
  observeDeletions(metrics, () => deletedOrgs.unfinishedCount);
  server.addRoutes(...authenticateFirst(auth, [
    ...organizationRoutes(context, deletions, (orgId) => {
      engine.refreshLimit(orgId);
      engine.withdrawSandboxIfDisallowed(orgId);
      rooms.closeSandboxSocketsIfDisallowed(orgId);
      void devices.dropSandboxSocketsIfDisallowed(orgId);
    }),
    ...apiKeyRoutes(context, (orgId, keyId) => rooms.closeSocketsOfKey(orgId, keyId)),
    ...sourceRoutes(context),
    ...scheduleRoutes(context, schedules, ticker),
    ...deviceRoutes(context, deviceStore, devices),
    ...eventRoutes(context, quota),
    ...workflowRoutes(context, workflows, (orgId, actionId) => actions.get(orgId, actionId) !== undefined),
    ...runRoutes(context, runs, engine, (orgId, workflowId, version) => workflows.version(orgId, workflowId, version)),
    ...sandboxRoutes(context, updateLog, engine, projections, deviceStore, {
      durable: (orgId, reset) => {
        rooms.closeSandboxSocketsAfterReset(orgId, reset.live_mark);
        devices.closeConnectionsEndedByReset(orgId, reset.device_connections);
      },
      unconfirmed: (orgId) => {
        rooms.closeSandboxSocketsAfterUnconfirmedReset(orgId);
        devices.closeSandboxSocketsAfterUnconfirmedReset(orgId);
      },
    }),
    ...replayRoutes(context, inbox, workflows, quota),
    ...projectionRoutes(context, projections, stopping.signal),
    ...customActionRoutes(context, actions, secretNames, secretWrites, runner.client, invoker),
    ...exportRoutes(context, { tables: orgTables, sections: exportSections({
      orgs, apiKeys, sources, schedules, scheduleDueAt: (orgId, name) => ticker.dueAt(orgId, name), devices: deviceStore, workflows, actions, secretNames, events, runs, projections, now: () => clock.now(),
    }) }),
  ]));
  let recovered: () => void = () => undefined;
  let boot: BootRecovery | undefined;
  server.holdRequestsUntil(new Promise<void>((resolve) => (recovered = resolve)));
  const port = await server.listen(config.host, config.port);
  boundPort = port;
  try {
    // Before recovery, which would pick up the unfinished sandbox runs such a reset removes.
    const resumed = await finishInterruptedResets({ ledger, events, runs, sources, devices: deviceStore, updateLog, projections, deletedOrgs }, clock.now());
    // Live sockets are taken from the listen on: one opened meanwhile was replayed the runs just
    // removed, and a client joining later must hear a position past the mark (update-log.ts).
    for (const { orgId, liveMark } of resumed) rooms.closeSandboxSocketsAfterReset(orgId, liveMark);
    if (resumed.length > 0) logger.info('sandbox resets cut short were finished', { orgs: resumed.map((reset) => reset.orgId) });
    const recovered = await engine.recover(async (latestClaimedAt) => (boot = await beginBoot(ledger, clock.now(), latestClaimedAt)));
    if (recovered.unfinished + recovered.failed > 0) {
      logger.info('unfinished runs picked up from the previous process', {
        runs: recovered.unfinished,
        interrupted: recovered.interrupted,
        ...(recovered.failed > 0 ? { failed_cut_off_too_often: recovered.failed } : {}),
      });
    }
    // After recovery: a tick owed since the last start, and the endings of device connections the
    // previous process left open, make runs, which the engine must own.
    // The ticker last: a tick owed is due at once, and its timer must not fire mid-start.
    await devices.start();
    // Start-up's own writes are done: from here, and before any request is let in or tick sent, the
    // disk floor refuses writes below it (disk-floor.ts), knowing the free space (its first read was
    // awaited in createRuntime, before anything started: an await there would let due timers fire mid-start).
    disk.arm();
    // In turns (a tick owed may be sent meanwhile, as at any time after the start's own writes).
    await ticker.start();
  } finally {
    recovering = false;
    recovered();
  }
  // Schemas stored before a rule that now refuses them: named now, not first by a sender's 422.
  // Read one record per event-loop turn, as requests go on: a device or source can hold a megabyte of schemas.
  const stopStaleCheck = startStaleSchemaCheck(
    (function* () {
      yield* sources.all();
      for (const device of deviceStore.all()) yield deviceSchemas(device);
    })(),
    logger,
  );
  opened.push(stopStaleCheck);

  const pruning = startRetentionPruning({
    ledger, inbox, updateLog, events, runs, projections, workflows, deletedOrgs, deletions, metrics, logger, pruneNow,
    retentionDays: config.retentionDays,
    dedupWindowMs: config.dedupWindowMs,
  });
  opened.push(() => pruning.close());
  logger.info('runtime started', { port, data_dir: config.dataDir, at: isoAt(startedAt), webhook_targets: config.webhookTargets, retention_days: config.retentionDays });
  const files = openFileLimit();
  if (files !== undefined && files < LOW_FILE_LIMIT) {
    logger.warn(`the open-file limit is ${files}: the default WebSocket total and the webhook connections are cut from what it leaves (README, Limits); raise it for production (ulimit -n, or LimitNOFILE= under systemd)`, { open_file_limit: files, websockets: config.websockets, webhook_connections: connections.stats().limit });
  }

  let closing: Promise<void> | undefined;
  return {
    port,
    // An IPv6 literal is bracketed in a URL (http://[::1]:8787).
    url: `http://${config.host.includes(':') ? `[${config.host}]` : config.host}:${port}`,
    adminToken,
    ledger,
    context,
    inbox,
    updateLog,
    rooms,
    engine,
    workflows,
    ticker,
    devices,
    deviceStore,
    runner,
    disk,
    deletions,
    prune: () => pruning.passNow(),
    close: () =>
      (closing ??= stopInOrder({
        stopping, server, connections, stopStaleCheck, pruning, deletions, ticker, rooms, devices, engine, disk, runner, ledger, logger,
        closeSchemaChecks: () => closeSchemaThreads(schemas),
        boot: () => boot,
      })),
  };
}
