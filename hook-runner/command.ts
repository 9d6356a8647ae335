// `sluice hook-runner [--listen <addr>] [--data-dir <dir>]`: reads flags and environment, starts the
// server, prints `hook-runner listening on <addr>` once bound, and stops cleanly on SIGTERM/SIGINT.
import { existsSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { setLogger } from '@grpc/grpc-js';
import { MIN_COMPILE_MAX_MEMORY_BYTES, type CompileProcessOptions } from './compile-process.ts';
import { DEFAULT_MIN_FREE_DISK_MIB } from './disk-floor.ts';
import { DiskFullError, diskFullAdvice, isDiskFullError } from './disk-full.ts';
import { guardCommitFailures, heldBackNote, throttledStrays } from './lmdb-commit-failure.ts';
import { DEFAULT_LISTEN, isLoopback, parseListenAddress } from './listen-address.ts';
import { whenOutputCloses } from './output-closed.ts';
import { parseMasterKey, parsePreviousMasterKeys } from './master-key.ts';
import { RunnerConfigError } from './runner-error.ts';
import { loadRunnerToken, runnerTokenPath } from './runner-token.ts';
import { createHookRunnerServer } from './server.ts';
import { isStoreOfEarlierRelease, runnerStoreDir } from './store.ts';
import { chooseThreadPoolSize, parseThreadPoolSize, sandboxSlotsFor } from './thread-pool.ts';
import { readServingPair } from './tls-files.ts';
import { isUnusablePathError, unusablePathAdvice } from './unusable-path.ts';
import { LISTENING_PREFIX } from './wire.ts';

const configError = (message: string): RunnerConfigError => new RunnerConfigError(message);

const DEFAULT_DATA_DIR = './.sluice';

const USAGE = `usage: sluice hook-runner [--listen <host:port|unix:/path>] [--data-dir <dir>] [--min-free-disk-mib <n>] [--tls-cert <pem> --tls-key <pem>]
  --listen    address to serve gRPC on (default ${DEFAULT_LISTEN}; port 0 picks a free port)
  --tls-cert, --tls-key  serve over TLS with this certificate and private key (PEM files), for a runner
              reached over the network: the runtime then takes --runner-ca (SLUICE_RUNNER_TLS_CERT, SLUICE_RUNNER_TLS_KEY)
  --data-dir  data directory; the runner keeps its LMDB in <dir>/hook-runner (SLUICE_DATA_DIR, default ${DEFAULT_DATA_DIR})
  --min-free-disk-mib  free MiB its disk keeps: below it, calls that would write are refused
              (UNAVAILABLE hook_runner_disk_full, retried by callers) (SLUICE_MIN_FREE_DISK_MIB, default ${DEFAULT_MIN_FREE_DISK_MIB}; 0: off)
environment:
  SLUICE_RUNNER_TOKEN  shared token callers must send (default, or blank: <data-dir>/runner-token, generated, 0600)
  SLUICE_MASTER_KEY    vault key, 64 hex chars or base64 of 32 bytes (default: <data-dir>/hook-runner/master.key)
  SLUICE_PREVIOUS_MASTER_KEYS  earlier vault keys, comma separated: secrets they sealed are sealed again
                       under the current key at start (key rotation)
  SLUICE_COMPILE_TIMEOUT_S      wall-clock limit of one module compile, 1 to 600 (default 20): past it the
                       compile process is killed and the module refused (code_too_large)
  SLUICE_COMPILE_MAX_MEMORY_MIB memory one compile may take, 256 to 65536 (default 1024, or a quarter
                       of the container's memory limit when less, at least 256)
  UV_THREADPOOL_SIZE   libuv pool size; must be set before the process starts`;

export interface HookRunnerFlags {
  readonly listen: string;
  readonly dataDir: string;
  /** Whether --data-dir named it (else SLUICE_DATA_DIR or the default). */
  readonly dataDirFlag: boolean;
  readonly minFreeDiskMib: number;
  /** The TLS certificate and key files to serve with; absent: plaintext. */
  readonly tls?: { readonly certFile: string; readonly keyFile: string };
  readonly help: boolean;
}

/** An environment variable's value; a blank one counts as not set, as for the runtime (runtime/config.ts), except the master keys. */
const setting = (env: NodeJS.ProcessEnv, name: string): string | undefined => {
  const value = env[name];
  return value === undefined || value.trim() === '' ? undefined : value;
};

/** The flags, over SLUICE_DATA_DIR (the data directory the runtime reads too), over the defaults. */
export function parseHookRunnerFlags(args: readonly string[], env: NodeJS.ProcessEnv = {}): HookRunnerFlags {
  let listen = DEFAULT_LISTEN;
  let dataDir = setting(env, 'SLUICE_DATA_DIR') ?? DEFAULT_DATA_DIR;
  let dataDirFlag = false;
  let minFreeDisk = setting(env, 'SLUICE_MIN_FREE_DISK_MIB');
  let minFreeDiskFrom = 'SLUICE_MIN_FREE_DISK_MIB';
  let certFile = setting(env, 'SLUICE_RUNNER_TLS_CERT');
  let keyFile = setting(env, 'SLUICE_RUNNER_TLS_KEY');
  let help = false;
  const given = new Set<string>();
  for (let index = 0; index < args.length; index += 1) {
    const arg = args[index] ?? '';
    const [flag, inline] = arg.startsWith('--') && arg.includes('=') ? [arg.slice(0, arg.indexOf('=')), arg.slice(arg.indexOf('=') + 1)] : [arg, undefined];
    if (flag === '--help' || flag === '-h') {
      help = true;
      continue;
    }
    if (!['--listen', '--data-dir', '--min-free-disk-mib', '--tls-cert', '--tls-key'].includes(flag)) throw new RunnerConfigError(`Unknown argument ${arg}.\n${USAGE}`);
    // Given twice, neither is picked (the runtime's commands refuse it too).
    if (given.has(flag)) throw new RunnerConfigError(`${flag} is given more than once; give it once.`);
    given.add(flag);
    const value = inline ?? args[(index += 1)];
    if (value === undefined || value.length === 0) throw new RunnerConfigError(`${flag} needs a value.\n${USAGE}`);
    if (flag === '--listen') listen = value;
    else if (flag === '--tls-cert') certFile = value;
    else if (flag === '--tls-key') keyFile = value;
    else if (flag === '--min-free-disk-mib') [minFreeDisk, minFreeDiskFrom] = [value, flag];
    else [dataDir, dataDirFlag] = [value, true];
  }
  const address = parseListenAddress(listen);
  if ((certFile === undefined) !== (keyFile === undefined)) throw new RunnerConfigError(`--tls-cert and --tls-key go together: give both, or neither.\n${USAGE}`);
  if (certFile !== undefined && address.kind === 'unix') throw new RunnerConfigError('--tls-cert and --tls-key serve a host:port; a unix socket is reached only on this machine, without TLS.');
  const tls = certFile === undefined || keyFile === undefined ? {} : { tls: { certFile: resolve(certFile), keyFile: resolve(keyFile) } };
  return { listen, dataDir: resolve(dataDir), dataDirFlag, minFreeDiskMib: parseMinFreeDiskMib(minFreeDisk, minFreeDiskFrom), ...tls, help };
}

/** A whole number of MiB, 0 (off) to 1,048,576; unset, the default. */
function parseMinFreeDiskMib(value: string | undefined, from: string): number {
  return value === undefined ? DEFAULT_MIN_FREE_DISK_MIB : wholeNumber(value, from, 0, 1_048_576, 'MiB');
}

/** `value` (from flag or variable `from`) as a whole number from `min` to `max`, else a RunnerConfigError naming `from`. */
function wholeNumber(value: string, from: string, min: number, max: number, unit: string): number {
  if (!/^\d{1,7}$/.test(value) || Number(value) < min || Number(value) > max) {
    throw new RunnerConfigError(`${from} must be a whole number of ${unit} from ${min} to ${max}; got "${value}".`);
  }
  return Number(value);
}

/** The compile process's limits from SLUICE_COMPILE_TIMEOUT_S and SLUICE_COMPILE_MAX_MEMORY_MIB (unset: its defaults). */
export function parseCompileLimits(env: NodeJS.ProcessEnv): CompileProcessOptions {
  const timeout = wholeNumberSetting(env, 'SLUICE_COMPILE_TIMEOUT_S', 1, 600, 'seconds');
  const memory = wholeNumberSetting(env, 'SLUICE_COMPILE_MAX_MEMORY_MIB', MIN_COMPILE_MAX_MEMORY_BYTES / 1024 ** 2, 65_536, 'MiB');
  return {
    ...(timeout === undefined ? {} : { timeoutMs: timeout * 1000 }),
    ...(memory === undefined ? {} : { maxMemoryBytes: memory * 1024 * 1024 }),
  };
}

function wholeNumberSetting(env: NodeJS.ProcessEnv, name: string, min: number, max: number, unit: string): number | undefined {
  const value = setting(env, name);
  return value === undefined ? undefined : wholeNumber(value.trim(), name, min, max, unit);
}

/** Where a runtime keeps its ledger in a data dir (runtime/ledger/open-ledger.ts; the runner imports no runtime code). */
const RUNTIME_LEDGER_DIR = 'runtime';

/**
 * Before the runner read SLUICE_DATA_DIR, one started without --data-dir kept its store (vault,
 * master key, modules) in ./.sluice whatever the variable said. Starting afresh in the variable's
 * directory would leave those secrets behind without a word: refused, saying what to do, before
 * anything is created there. A store with a runtime's ledger beside it may also be `sluice dev`'s
 * (its child runner keeps its store there): the refusal then says both, and how to go on.
 */
function refuseStoreLeftBehind(dataDir: string): void {
  const earlier = runnerStoreDir(resolve(DEFAULT_DATA_DIR));
  const wanted = runnerStoreDir(dataDir);
  // Not left behind: a store this release (or a later one) opened there.
  if (wanted === earlier || existsSync(wanted) || !isStoreOfEarlierRelease(earlier)) return;
  if (existsSync(join(resolve(DEFAULT_DATA_DIR), RUNTIME_LEDGER_DIR))) {
    throw new RunnerConfigError(
      `SLUICE_DATA_DIR is ${dataDir}, which holds no hook-runner store yet, and ${earlier} holds one of an earlier release: sluice dev's (a runtime's data is beside it), or this runner's own from before it read SLUICE_DATA_DIR. ` +
        `If it is sluice dev's, pass --data-dir ${dataDir} (or run sluice dev here once, which marks it as its own); if it is this runner's, move ${earlier} to ${wanted} to keep its secrets.`,
    );
  }
  throw new RunnerConfigError(
    `SLUICE_DATA_DIR is ${dataDir}, which holds no hook-runner store yet, but ${earlier} holds one that a release before the runner read SLUICE_DATA_DIR kept there. ` +
      `Move ${earlier} to ${wanted} to keep its secrets, or pass --data-dir (${DEFAULT_DATA_DIR} to keep using it, or ${dataDir} to start afresh there).`,
  );
}

/**
 * Resolves with the first stop request. Later signals are ignored while the runner drains: under
 * `sluice hook-runner` a terminal's Ctrl-C reaches this process twice (from the terminal, and
 * forwarded by the parent that re-executed it), and the second must not cut the drain short.
 */
function waitForStopSignal(): Promise<string> {
  return new Promise((done) => {
    // `on`, not `once`, and the ignoring listeners added before these are removed: a signal left
    // with no listener, even for a moment, falls back to its default action and kills the process
    // (the second Ctrl-C arrives right after the first).
    const stop = (reason: string) => (): void => {
      process.on('SIGTERM', ignore).on('SIGINT', ignore);
      process.off('SIGTERM', onTerm).off('SIGINT', onInt).off('disconnect', onDisconnect);
      done(reason);
    };
    const ignore = (): void => undefined;
    const onTerm = stop('SIGTERM');
    const onInt = stop('SIGINT');
    // Spawned with an IPC channel (runtime/hook-runner/child.ts): a parent that died, even by
    // SIGKILL, closes the channel, so the runner never outlives the runtime that owns it.
    const onDisconnect = stop('parent disconnected');
    process.on('SIGTERM', onTerm).on('SIGINT', onInt).on('disconnect', onDisconnect);
    // A parent that died while the runner opened its store and port closed the channel before
    // anyone listened ('disconnect' is emitted once): left running, the runner held the store, and
    // every later runtime's runner on the dir was refused as "in use".
    if (process.send !== undefined && !process.connected) onDisconnect();
  });
}

/**
 * The store's disk failed a commit's sync (flush-watch.ts): the runner ends at once, as a crash
 * would, committing nothing more (as the runtime does: runtime/server-command.ts says why), once
 * this turn's answers are on their way; the runtime that started it starts it again.
 */
function exitOnStoreFailure(log: (line: string) => void, cause: string): void {
  log(`hook-runner: exiting at once: its store's disk failed to sync a commit (${cause})`);
  setImmediate(() => process.exit(1));
}

/** A log entry as one line of output, a stack's lines joined by `\n`: the runtime logs its child's output line by line. */
export const logLine = (entry: string): string => `${entry.replaceAll('\n', '\\n')}\n`;

/**
 * grpc-js's own log lines go to `log` marked as its. A failed bind it logs before handing the error
 * to the server, which reports it in one line naming the address: that line is not repeated.
 */
function routeGrpcLog(log: (line: string) => void): void {
  const forward = (level: string) => (...parts: unknown[]): void => {
    const line = parts.map(String).join(' ');
    if (!line.startsWith('No address added')) log(`hook-runner: grpc-js ${level}: ${line}`);
  };
  setLogger({ error: forward('error'), info: forward('info'), debug: forward('debug') });
}

/**
 * Runs the runner's start, turning a data dir it cannot use (a file where a directory goes, no
 * permission, a read-only mount) into a RunnerConfigError: one line and exit code 2, which the
 * runtime does not restart, instead of a stack trace and a restart every few seconds. A full disk
 * is a DiskFullError: one line too, but exit 1, restarted (space may be freed meanwhile).
 */
async function withUsableDataDir<T>(dataDir: string, start: () => Promise<T>): Promise<T> {
  try {
    return await start();
  } catch (error) {
    if (isDiskFullError(error)) throw new DiskFullError(diskFullAdvice(dataDir, error));
    if (!isUnusablePathError(error)) throw error;
    throw new RunnerConfigError(unusablePathAdvice(dataDir, error));
  }
}

/**
 * Runs the hook-runner until SIGTERM/SIGINT (or the parent's IPC channel closes), then resolves
 * after in-flight calls finished and the store closed. Throws RunnerConfigError for bad flags,
 * tokens or keys, before anything is bound.
 */
export async function runHookRunnerCommand(args: readonly string[], env: NodeJS.ProcessEnv): Promise<void> {
  // `2>&1 | head`, a log shipper restarting: the runner goes on, its lines unread.
  whenOutputCloses(process.stdout);
  whenOutputCloses(process.stderr);
  const flags = parseHookRunnerFlags(args, env);
  if (flags.help) {
    process.stdout.write(`${USAGE}\n`);
    return;
  }
  if (!flags.dataDirFlag) refuseStoreLeftBehind(flags.dataDir);
  const log = (line: string): void => void process.stderr.write(logLine(line));
  routeGrpcLog(log);
  // A full disk fails the calls that write, not the runner (lmdb-commit-failure.ts).
  // One line, then at most one every 10 s: a failing disk fails every write.
  const commitFailed = throttledStrays<{ error: Error; cause: string }>(({ error, cause }, heldBack) =>
    log(`hook-runner: a store commit failed: ${error.message}: ${cause}${heldBackNote(heldBack)}`),
  );
  guardCommitFailures((error, cause) => commitFailed({ error, cause }));
  const poolSize = parseThreadPoolSize(env['UV_THREADPOOL_SIZE']);
  // Master keys as given: a blank one is refused (master-key.ts says why), never taken for unset.
  // Without SLUICE_MASTER_KEY the server reads (or creates) the key file, knowing the vault's state.
  const masterKey = env['SLUICE_MASTER_KEY'] === undefined ? undefined : parseMasterKey(env['SLUICE_MASTER_KEY'], 'SLUICE_MASTER_KEY');
  const previousMasterKeys = parsePreviousMasterKeys(env['SLUICE_PREVIOUS_MASTER_KEYS']);
  const tls = flags.tls === undefined ? undefined : readServingPair(flags.tls.certFile, flags.tls.keyFile, configError);
  if (tls?.keyReadableByOthers === true) log(`hook-runner: warning: the TLS key ${flags.tls?.keyFile} is readable by group or others: whoever reads it can pose as this runner to the runtime; run chmod 600 on it.`);
  const server = await withUsableDataDir(flags.dataDir, async () =>
    createHookRunnerServer({
      onStoreFailed: (cause) => exitOnStoreFailure(log, cause),
      listen: flags.listen,
      dataDir: flags.dataDir,
      token: loadRunnerToken(setting(env, 'SLUICE_RUNNER_TOKEN'), flags.dataDir),
      masterKey,
      previousMasterKeys,
      sandboxSlots: sandboxSlotsFor(poolSize),
      log,
      minFreeDiskMib: flags.minFreeDiskMib,
      compile: parseCompileLimits(env),
      ...(tls === undefined ? {} : { tls: { cert: tls.cert, key: tls.key } }),
    }),
  );
  const stopped = waitForStopSignal();
  if (!isLoopback(parseListenAddress(flags.listen)) && flags.tls === undefined) {
    log(`hook-runner: warning: listening on a non-loopback address (${server.address}) without TLS: the runner token and secret values cross the network unencrypted; give --tls-cert and --tls-key (and the runtime --runner-ca).`);
  }
  if (env['SLUICE_RUNNER_TOKEN'] === undefined) log(`hook-runner: runner token in ${runnerTokenPath(flags.dataDir)}`);
  if (poolSize < chooseThreadPoolSize()) log(`hook-runner: UV_THREADPOOL_SIZE=${poolSize}; start with UV_THREADPOOL_SIZE=${chooseThreadPoolSize()} to run more guests in parallel.`);
  process.stdout.write(`${LISTENING_PREFIX}${server.address}\n`);
  const reason = await stopped;
  log(`hook-runner: stopping (${reason})`);
  await server.close();
}
