// The one place that reads the environment and command-line flags into a typed RuntimeConfig.
// Every setting has a working default so `npm start` runs with nothing configured.

import { join, resolve } from 'node:path';
import { parseCommandArgs } from './cli-parse-args.ts';
import { ADMIN_TOKEN_PATTERN, ADMIN_TOKEN_RULE } from './auth/admin-token.ts';
import { wholeNumberOfDigits } from './decimal-digits.ts';
import { InputError } from './errors.ts';
import { DAY_MS, DEFAULT_RETENTION_DAYS } from './events/history-retention.ts';
import { DEFAULT_DEDUP_WINDOW_MS } from './inbox/inbox.ts';
import { DEFAULT_MIN_FREE_DISK_MIB } from '../hook-runner/disk-floor.ts';
import { parseRunnerToken } from '../hook-runner/runner-token.ts';
import { TIMESTAMP_TOLERANCE_SECONDS } from './ingest/verification.ts';
import { DEFAULT_MAX_QUEUED_RUNS } from './ingest/run-backlog.ts';
import type { LogLevel } from './log.ts';
import { DEFAULT_RETAINED_UPDATES } from './rooms/update-log.ts';
import { DEFAULT_LIVE_SOCKETS_PER_ORG } from './rooms/live-rooms.ts';
import { defaultWebSocketLimit } from './http/websocket-budget.ts';
import { openFileLimit } from './open-file-limit.ts';
import { DEFAULT_WEBHOOK_CONNECTIONS } from './runs/outbound-connections.ts';
import type { SearchEnv } from './runs/search-domains.ts';
import { defaultStepInputBytes } from './runs/step-input-budget.ts';
import { defaultBodyBudgetBytes, MIN_BODY_BUDGET_BYTES } from './http/body-budget.ts';
import { WEBHOOK_TARGETS, type WebhookTargets } from './runs/webhook-address-policy.ts';

export interface RuntimeConfig {
  readonly host: string;
  /** 0 picks any free port; the bound port is printed. */
  readonly port: number;
  readonly dataDir: string;
  /** Explicit admin token, or undefined to use (or create) `<dataDir>/admin-token`. */
  readonly adminToken: string | undefined;
  /** Where the explicit admin token came from (the start banner names it, never prints it). */
  readonly adminTokenFrom: 'flag' | 'env' | undefined;
  readonly adminTokenFile: string;
  readonly dedupWindowMs: number;
  /** Days an event (with its recording and finished runs) is kept; never less than the dedup window. */
  readonly retentionDays: number;
  /** Live updates retained per org for reconnecting subscribers. */
  readonly liveRetention: number;
  readonly logLevel: LogLevel;
  /**
   * Where custom actions run: `child` (start and supervise a local hook-runner, what `dev` does),
   * an address of a running one (`127.0.0.1:7878`, `unix:/path`), or `off` (custom_action steps fail
   * with hook_runner_unavailable and are retried). `caFile` (--runner-ca): reach the runner over TLS,
   * checking its certificate against this CA (PEM).
   */
  readonly runner: 'child' | 'off' | { readonly address: string; readonly caFile?: string };
  /** The shared runner token: SLUICE_RUNNER_TOKEN, else `<dataDir>/runner-token` (0600, generated). */
  readonly runnerToken: string | undefined;
  /** Live-room sockets one org may hold open at once; more upgrades are refused (429). */
  readonly liveSocketsPerOrg: number;
  /** Live-room and device sockets open at once, every org together; more upgrades are refused (503). */
  readonly websockets: number;
  /** Open connections webhook steps may hold per org and receiver origin; more requests wait for one. */
  readonly webhookConnections: number;
  /** Runs an org may have waiting for a concurrency slot; past it, its new events are 429 run_backlog_full. */
  readonly maxQueuedRuns: number;
  /** Payload bytes the steps being performed may hold at once (webhook bodies, custom action input); more steps wait. */
  readonly stepInputBytes: number;
  /** Request body bytes held in memory at once, every request together (an org an eighth); more are 503 server_busy. */
  readonly requestBodyBytes: number;
  /** Which addresses webhook steps may reach: `public` only, or `any` (local receivers too). */
  readonly webhookTargets: WebhookTargets;
  /** Free MiB the data dir's disk keeps: below it the ledger commits nothing (disk-floor.ts); 0 turns that off. */
  readonly minFreeDiskMib: number;
  /** LOCALDOMAIN and RES_OPTIONS, which receivers' names are looked up under as libc does (search-domains.ts). */
  readonly resolverEnv: SearchEnv;
}

/** What `dev` and `serve` differ in: dev runs a local hook-runner and may call local receivers. */
export interface CommandDefaults {
  readonly runner: 'child' | 'off';
  readonly webhookTargets: WebhookTargets;
}

export const SERVE_DEFAULTS: CommandDefaults = { runner: 'off', webhookTargets: 'public' };
export const DEV_DEFAULTS: CommandDefaults = { runner: 'child', webhookTargets: 'any' };

export const DEFAULT_PORT = 8787;

/** A setting's text and the name it came by, for messages: the flag when given, else its environment variable. */
interface Setting {
  readonly name: string;
  readonly raw: string | undefined;
}

function setting(flag: string, flagValue: string | undefined, envName: string, env: NodeJS.ProcessEnv): Setting {
  return { name: flagValue !== undefined ? flag : envName, raw: text(flag, flagValue, env[envName]) };
}

/** A whole-number setting in decimal digits (no sign, hex or exponent); `raw` comes through `text()`. */
function integer({ name, raw }: Setting, fallback: number, min: number, max: number): number {
  if (raw === undefined) return fallback;
  const value = wholeNumberOfDigits(raw);
  if (!Number.isInteger(value) || value < min || value > max) {
    throw new InputError(400, 'invalid_config', `${name} must be an integer from ${min} to ${max}; got "${raw}".`);
  }
  return value;
}

/**
 * A text setting: the flag when given (an empty one is refused), else the environment variable
 * unless it is blank (`SLUICE_HOST=` in a compose file means "not set", not "every interface").
 */
function text(flag: string, flagValue: string | undefined, envValue: string | undefined): string | undefined {
  if (flagValue !== undefined) {
    if (flagValue.trim() === '') throw new InputError(400, 'invalid_config', `${flag} must not be empty.`);
    return flagValue;
  }
  return envValue === undefined || envValue.trim() === '' ? undefined : envValue;
}

/** SLUICE_RUNNER_TOKEN checked with the other settings, before the data dir is touched (it was checked only as the runner started); unread under `--runner off`. */
function runnerToken(value: string | undefined): string | undefined {
  if (value === undefined) return undefined;
  try {
    return parseRunnerToken(value, 'SLUICE_RUNNER_TOKEN');
  } catch (error) {
    throw new InputError(400, 'invalid_config', error instanceof Error ? error.message : String(error));
  }
}

/** An explicit admin token must be one a bearer header can carry, and not guessable by length. */
function adminToken(value: string | undefined): string | undefined {
  if (value !== undefined && !ADMIN_TOKEN_PATTERN.test(value)) {
    throw new InputError(400, 'invalid_config', `--admin-token (SLUICE_ADMIN_TOKEN) must be ${ADMIN_TOKEN_RULE}.`);
  }
  return value;
}

/** The shortest dedup window: as long as a delivery's signature can verify (see loadRuntimeConfig). */
export const MIN_DEDUP_WINDOW_MS = (2 * TIMESTAMP_TOLERANCE_SECONDS + 1) * 1000;

/** Parses `args` (after the sub-command) over `env`; flags win over environment variables. */
export function loadRuntimeConfig(args: readonly string[], env: NodeJS.ProcessEnv, defaults: CommandDefaults = SERVE_DEFAULTS): RuntimeConfig {
  const { values } = parseCommandArgs({
    args: [...args],
    strict: true,
    options: {
      port: { type: 'string' },
      host: { type: 'string' },
      'data-dir': { type: 'string' },
      'admin-token': { type: 'string' },
      'dedup-window-ms': { type: 'string' },
      'retention-days': { type: 'string' },
      'live-retention': { type: 'string' },
      'live-sockets-per-org': { type: 'string' },
      websockets: { type: 'string' },
      'log-level': { type: 'string' },
      runner: { type: 'string' },
      'runner-ca': { type: 'string' },
      'webhook-connections': { type: 'string' },
      'max-queued-runs': { type: 'string' },
      'webhook-targets': { type: 'string' },
      'step-input-mib': { type: 'string' },
      'request-bodies-mib': { type: 'string' },
      'min-free-disk-mib': { type: 'string' },
    },
  });
  const dataDir = resolve(text('--data-dir', values['data-dir'], env.SLUICE_DATA_DIR) ?? './.sluice');
  const logLevelSetting = setting('--log-level', values['log-level'], 'SLUICE_LOG_LEVEL', env);
  const logLevel = (logLevelSetting.raw ?? 'info') as LogLevel;
  if (!['debug', 'info', 'warn', 'error', 'silent'].includes(logLevel)) {
    throw new InputError(400, 'invalid_config', `${logLevelSetting.name} must be debug, info, warn, error or silent; got "${logLevel}".`);
  }
  // At least as long as a signature stays fresh: its timestamp is taken from 300 s before now to 300 s
  // after, so one delivery verifies for 601 s of server time (whole seconds). A shorter window let
  // a replayed delivery, its signature still fresh, through as a new event once its id was forgotten.
  const dedupWindow = setting('--dedup-window-ms', values['dedup-window-ms'], 'SLUICE_DEDUP_WINDOW_MS', env);
  const dedupWindowMs = integer(dedupWindow, DEFAULT_DEDUP_WINDOW_MS, MIN_DEDUP_WINDOW_MS, 365 * DAY_MS);
  // Unset, it grows to cover a longer dedup window instead of refusing to start.
  const coveringDays = Math.ceil(dedupWindowMs / DAY_MS);
  const retentionFallback = Math.max(DEFAULT_RETENTION_DAYS, coveringDays);
  const retention = setting('--retention-days', values['retention-days'], 'SLUICE_RETENTION_DAYS', env);
  const retentionDays = integer(retention, retentionFallback, 1, 3650);
  if (retentionDays * DAY_MS < dedupWindowMs) {
    // A duplicate inside the window is answered with its original event: that event must still exist.
    // Each named as it was given (flag or variable); the window in days as a person would set them.
    const windowDays = Number((dedupWindowMs / DAY_MS).toFixed(2));
    const window = dedupWindow.raw === undefined ? `the dedup window (its default, ${dedupWindowMs} ms, ${windowDays} days)` : `the dedup window, ${dedupWindow.name} (${dedupWindowMs} ms, about ${windowDays} days)`;
    throw new InputError(400, 'invalid_config', `${retention.name} (${retentionDays}) must cover ${window}: give it ${coveringDays} or more.`);
  }
  const websockets = integer(setting('--websockets', values.websockets, 'SLUICE_WEBSOCKETS', env), defaultWebSocketLimit(openFileLimit()), 1, 10_000_000);
  // Unset, one org may hold at most half of the total: another org's live room still opens.
  const liveSocketsFallback = Math.max(1, Math.min(DEFAULT_LIVE_SOCKETS_PER_ORG, Math.floor(websockets / 2)));
  const givenAdminToken = text('--admin-token', values['admin-token'], env.SLUICE_ADMIN_TOKEN);
  const runner = withRunnerCa(parseRunner(setting('--runner', values.runner, 'SLUICE_RUNNER', env), defaults.runner), setting('--runner-ca', values['runner-ca'], 'SLUICE_RUNNER_CA', env));
  return {
    host: text('--host', values.host, env.SLUICE_HOST) ?? '127.0.0.1',
    port: integer(setting('--port', values.port, 'SLUICE_PORT', env), DEFAULT_PORT, 0, 65535),
    dataDir,
    adminToken: adminToken(givenAdminToken),
    adminTokenFrom: givenAdminToken === undefined ? undefined : values['admin-token'] !== undefined ? 'flag' : 'env',
    adminTokenFile: join(dataDir, 'admin-token'),
    dedupWindowMs,
    retentionDays,
    liveRetention: integer(setting('--live-retention', values['live-retention'], 'SLUICE_LIVE_RETENTION', env), DEFAULT_RETAINED_UPDATES, 1, 10_000_000),
    liveSocketsPerOrg: integer(setting('--live-sockets-per-org', values['live-sockets-per-org'], 'SLUICE_LIVE_SOCKETS_PER_ORG', env), liveSocketsFallback, 1, 1_000_000),
    websockets,
    logLevel,
    runner,
    runnerToken: runner === 'off' ? undefined : runnerToken(text('SLUICE_RUNNER_TOKEN', undefined, env.SLUICE_RUNNER_TOKEN)),
    webhookConnections: integer(setting('--webhook-connections', values['webhook-connections'], 'SLUICE_WEBHOOK_CONNECTIONS', env), DEFAULT_WEBHOOK_CONNECTIONS, 1, 1000),
    maxQueuedRuns: integer(setting('--max-queued-runs', values['max-queued-runs'], 'SLUICE_MAX_QUEUED_RUNS', env), DEFAULT_MAX_QUEUED_RUNS, 1, 100_000_000),
    stepInputBytes: stepInputBytes(setting('--step-input-mib', values['step-input-mib'], 'SLUICE_STEP_INPUT_MIB', env)),
    requestBodyBytes: requestBodyBytes(setting('--request-bodies-mib', values['request-bodies-mib'], 'SLUICE_REQUEST_BODIES_MIB', env)),
    webhookTargets: parseWebhookTargets(setting('--webhook-targets', values['webhook-targets'], 'SLUICE_WEBHOOK_TARGETS', env), defaults.webhookTargets),
    minFreeDiskMib: integer(setting('--min-free-disk-mib', values['min-free-disk-mib'], 'SLUICE_MIN_FREE_DISK_MIB', env), DEFAULT_MIN_FREE_DISK_MIB, 0, 1_048_576),
    resolverEnv: { LOCALDOMAIN: env['LOCALDOMAIN'], RES_OPTIONS: env['RES_OPTIONS'] },
  };
}

/** `--step-input-mib` in bytes; unset, a share of the heap limit (step-input-budget.ts). */
function stepInputBytes(given: Setting): number {
  return given.raw === undefined ? defaultStepInputBytes() : integer(given, 0, 1, 65_536) * 1024 * 1024;
}

/** `--request-bodies-mib` in bytes; unset, a share of the heap limit (body-budget.ts). */
function requestBodyBytes(given: Setting): number {
  return given.raw === undefined ? defaultBodyBudgetBytes() : integer(given, 0, MIN_BODY_BUDGET_BYTES / (1024 * 1024), 65_536) * 1024 * 1024;
}

function parseWebhookTargets({ name, raw }: Setting, fallback: WebhookTargets): WebhookTargets {
  const value = raw ?? fallback;
  if ((WEBHOOK_TARGETS as readonly string[]).includes(value)) return value as WebhookTargets;
  throw new InputError(400, 'invalid_config', `${name} must be "public" or "any"; got "${value}".`);
}

/** A runner address reached over TLS when `--runner-ca` names a CA file; refused for a child, off or a unix socket. */
function withRunnerCa(runner: RuntimeConfig['runner'], { name, raw }: Setting): RuntimeConfig['runner'] {
  if (raw === undefined) return runner;
  if (typeof runner !== 'object' || runner.address.startsWith('unix:')) {
    throw new InputError(400, 'invalid_config', `${name} is for a runner reached at host:port (--runner 10.0.0.5:7878); the runner here is ${typeof runner === 'object' ? 'a unix socket' : `"${runner}"`}, reached without TLS.`);
  }
  return { ...runner, caFile: resolve(raw) };
}

function parseRunner({ name, raw }: Setting, fallback: RuntimeConfig['runner']): RuntimeConfig['runner'] {
  if (raw === undefined) return fallback;
  if (raw === 'child' || raw === 'off') return raw;
  // A relative socket path is taken from the working directory, as `sluice hook-runner --listen` takes it.
  const socketPath = /^unix:(.+)$/.exec(raw)?.[1];
  if (socketPath !== undefined) return { address: `unix:${resolve(socketPath.replace(/^\/\/(?=\/)/, ''))}` };
  const port = /^[A-Za-z0-9.\-[\]:]+:(\d{1,5})$/.exec(raw)?.[1];
  if (port !== undefined && Number(port) >= 1 && Number(port) <= 65535) return { address: raw };
  throw new InputError(400, 'invalid_config', `${name} must be "child", "off" or an address like 127.0.0.1:7878 (a port from 1 to 65535) or unix:/path; got "${raw}".`);
}
