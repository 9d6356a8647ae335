// Connects the runtime to a hook-runner per config: a supervised local child (`sluice dev`), an
// external address, or none. Returns the client and what must be stopped on shutdown.

import { isLoopback, parseListenAddress } from '../../hook-runner/listen-address.ts';
import { throttledStrays } from '../../hook-runner/lmdb-commit-failure.ts';
import { loadRunnerToken } from '../../hook-runner/runner-token.ts';
import { CERTIFICATE_PEM, readPem } from '../../hook-runner/tls-files.ts';
import { InputError, SluiceError } from '../errors.ts';
import type { RuntimeConfig } from '../config.ts';
import type { Logger } from '../log.ts';
import { createHookRunnerChild, type HookRunnerChild } from './child.ts';
import { HookRunnerClient, type HookRunnerClientOptions } from './client.ts';
import { RunnerUnavailableError } from './runner-errors.ts';
import { answersTls } from './tls-answer-check.ts';

/** Runner lines an operator must see at the default level: warnings, errors, crashes, the key-rotation result. */
const NOTEWORTHY_RUNNER_LINE = /warning:|error:|failed unexpectedly|exited unexpectedly|will not be restarted|master key rotation|its floor|free space|a store commit failed/;

/** The level a line of the child runner's output is logged at: warn for what an operator must see (NOTEWORTHY_RUNNER_LINE), else debug. */
export const runnerLineLevel = (line: string): 'warn' | 'debug' => (NOTEWORTHY_RUNNER_LINE.test(line) ? 'warn' : 'debug');

export interface RunnerConnection {
  readonly client: HookRunnerClient | undefined;
  readonly child: HookRunnerChild | undefined;
  /** An external runner's health check at start (checkAtStart): settles once it has answered or given up. */
  readonly startChecked?: Promise<void>;
  close(): Promise<void>;
}

/** Whether a runner address stays on this machine (loopback or a unix socket): only then is plaintext private. */
function isLoopbackTarget(address: string): boolean {
  try {
    return isLoopback(parseListenAddress(address));
  } catch {
    return false;
  }
}

/** A connection that was never open (nothing listens, no route, no such name): no TLS to ask about. */
const NOTHING_LISTENS = /ECONNREFUSED|ENOTFOUND|EAI_AGAIN|EHOSTUNREACH|ENETUNREACH/;

/** The shortest time between two lines of one kind of runner fault: every call and scrape meets one. */
const FAULT_LOG_INTERVAL_MS = 60_000;

/**
 * The runtime's lines for a runner that refuses its token, fails the TLS handshake, or (at an
 * address) cannot be reached; `plaintext`: reached without --runner-ca, when a runner that cannot be
 * reached is asked whether it serves TLS (then the flag is what is missing).
 */
function faultLogs(logger: Logger, dataDir: string, runner: string, plaintext = false): { onTokenRefused: () => void; onTlsFailed: (details: string) => void; onUnreachable: (details: string) => void } {
  const tokenRefused = throttledStrays<void>(
    () => logger.warn('the hook-runner refused the runner token: custom_action steps retry under their retry policy, then fail (resume them), until the runtime and the runner use the same one (SLUICE_RUNNER_TOKEN, or the runner-token file of the data dir)', { data_dir: dataDir }),
    undefined,
    FAULT_LOG_INTERVAL_MS,
  );
  const tlsFailed = throttledStrays<string>(
    (details) => logger.warn('the TLS handshake with the hook-runner failed: its certificate must be signed by --runner-ca and name the host of --runner, and it must serve TLS (--tls-cert, --tls-key)', { runner, reason: details }),
    undefined,
    FAULT_LOG_INTERVAL_MS,
  );
  // A supervised child's restarts are logged by its supervisor; an external runner's absence only here.
  const say = (details: string, servesTls: boolean): void => {
    if (servesTls) logger.warn('the hook-runner serves TLS and the runtime reaches it without: custom_action steps retry under their retry policy, then fail (resume them); start Sluice with --runner-ca (the CA that signed the runner\'s certificate, or that certificate)', { runner, reason: details });
    else logger.warn('the hook-runner cannot be reached: custom_action steps retry under their retry policy, then fail (resume them); check that it runs and listens at --runner', { runner, reason: details });
  };
  const unreachable = throttledStrays<string>(
    (details) => (plaintext && !NOTHING_LISTENS.test(details) ? void answersTls(runner).then((servesTls) => say(details, servesTls)) : say(details, false)),
    undefined,
    FAULT_LOG_INTERVAL_MS,
  );
  return { onTokenRefused: () => tokenRefused(), onTlsFailed: tlsFailed, onUnreachable: runner === 'child' ? () => undefined : unreachable };
}

/**
 * Asks an external runner for its health once at start, so a runner that is down, refuses the
 * token or cannot run guests is said before the first step meets it. The client's own fault lines
 * say the first three; what else went wrong (a wedged runner, another gRPC server) is said here.
 */
function checkAtStart(client: HookRunnerClient, logger: Logger, runner: string): Promise<void> {
  return client.health().then(
    (health) => {
      if (!health.ok) logger.warn('the hook-runner answered that it cannot run guests (its own log says why): custom_action steps wait or fail until it can', { runner });
    },
    (error: unknown) => {
      if (error instanceof RunnerUnavailableError || (error instanceof SluiceError && error.code === 'hook_runner_unauthenticated')) return;
      logger.warn('the hook-runner did not answer its health check at start', { runner, reason: error instanceof Error ? error.message : String(error) });
    },
  );
}

export async function connectRunner(config: RuntimeConfig, logger: Logger, stopStarting?: AbortSignal, deadlinesMs?: HookRunnerClientOptions['deadlinesMs']): Promise<RunnerConnection> {
  if (config.runner === 'off') return { client: undefined, child: undefined, close: async () => undefined };
  const token = loadRunnerToken(config.runnerToken, config.dataDir);
  const external = typeof config.runner === 'object' ? config.runner : undefined;
  const options = { ...faultLogs(logger, config.dataDir, external?.address ?? 'child', external !== undefined && external.caFile === undefined), ...(deadlinesMs === undefined ? {} : { deadlinesMs }) };
  if (config.runner !== 'child') {
    const { address, caFile } = config.runner;
    const tlsCa = caFile === undefined ? undefined : readPem(caFile, CERTIFICATE_PEM, '--runner-ca', (message) => new InputError(400, 'invalid_config', message));
    if (tlsCa === undefined && !isLoopbackTarget(address)) {
      logger.warn('the hook-runner is reached over the network without TLS: the runner token and secret values cross it unencrypted; serve it with --tls-cert and --tls-key and start Sluice with --runner-ca', { runner: address });
    }
    const clientOptions = { ...options, ...(tlsCa === undefined ? {} : { tlsCa }) };
    const client = new HookRunnerClient(address, token, clientOptions);
    // A channel of its own: one that failed to connect backs off before trying again (up to 1 s),
    // and a runner started just after the runtime would find the calls' channel still waiting.
    const checking = new HookRunnerClient(address, token, clientOptions);
    return {
      client,
      child: undefined,
      startChecked: checkAtStart(checking, logger, address).finally(() => checking.close()),
      close: async () => {
        checking.close();
        client.close();
      },
    };
  }
  const log = (line: string): void => logger[runnerLineLevel(line)]('hook-runner', { line });
  const child = await createHookRunnerChild({ dataDir: config.dataDir, token, log, minFreeDiskMib: config.minFreeDiskMib }, stopStarting);
  const client = new HookRunnerClient((waitMs) => child.address(waitMs), token, options);
  return {
    client,
    child,
    close: async () => {
      client.close();
      await child.stop();
    },
  };
}
