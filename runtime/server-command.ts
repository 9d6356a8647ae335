// The `sluice dev` and `sluice serve` commands: start the runtime from flags and environment,
// print where it listens and how to start using it; SIGTERM/SIGINT shut down cleanly.

import { existsSync } from 'node:fs';
import { relative, resolve, sep } from 'node:path';
import { DEV_DEFAULTS, loadRuntimeConfig, SERVE_DEFAULTS, type RuntimeConfig } from './config.ts';
import { createRuntime, type Runtime } from './create-runtime.ts';
import { guardLedgerCommitFailures } from './ledger/commit-failure-guard.ts';
import { createLogger } from './log.ts';
import { whenOutputCloses } from '../hook-runner/output-closed.ts';
import { diskFullAdvice, isDiskFullError } from '../hook-runner/disk-full.ts';
import { isUnusablePathError, unusablePathAdvice } from '../hook-runner/unusable-path.ts';
import { StartAbortedError } from './hook-runner/child.ts';

function printWelcome(runtime: Runtime, config: RuntimeConfig, command: string): void {
  const file = runtime.adminToken.file;
  const relativeFile = file === undefined ? undefined : relative(process.cwd(), file);
  const tokenFile = relativeFile === undefined || relativeFile.startsWith('..') ? file : relativeFile;
  // The token itself is never printed: the file it is in, the variable, or a placeholder for the
  // flag (which wins over the variable when both are given).
  const tokenExpr = tokenFile !== undefined ? `$(cat ${shellWord(tokenFile)})` : config.adminTokenFrom === 'env' ? '$SLUICE_ADMIN_TOKEN' : '<your --admin-token>';
  // What the walkthrough needs that these settings leave out (serve's defaults): said before a step fails on it.
  const leftOut = [
    ...(config.webhookTargets === 'public' ? ["webhook steps reach public addresses only (the walkthrough's receiver on 127.0.0.1 is refused, webhook_target_forbidden; --webhook-targets any allows it)"] : []),
    ...(config.runner === 'off' ? ['custom actions have no hook-runner (--runner child starts one)'] : []),
  ];
  const lines = [
    `sluice ${command}: data in ${config.dataDir}`,
    `listening on ${runtime.url}`,
    runtime.runner.child !== undefined
      ? `hook-runner: a local child at ${runtime.runner.child.currentAddress ?? '(starting)'}, supervised and restarted if it dies`
      : config.runner === 'off'
        ? 'hook-runner: off (custom actions unavailable; use sluice dev or --runner)'
        : `hook-runner: ${config.runner === 'child' ? 'child' : config.runner.address}`,
    tokenFile === undefined ? 'platform admin token: as given (--admin-token / SLUICE_ADMIN_TOKEN)' : `platform admin token: in ${tokenFile} (mode 0600)`,
    '',
    // A walkthrough done before on this data dir: its step 1 would answer 409 organization_exists.
    ...(runtime.context.orgs.list(undefined, 1).length > 0
      ? [`this data dir holds organizations already: step 1 answers 409 organization_exists for one of them (go on with its key, or start over: Ctrl-C, rm -rf ${shellWord(config.dataDir)}, start again).`, '']
      : []),
    `in a second terminal, in this directory (cd ${shellWord(process.cwd())}: the walkthrough's commands run there),`,
    'step 1 of the walkthrough in README.md: create an organization and keep its admin API key in $KEY',
    '(it is shown only in this answer):',
    `  export KEY=$(curl -s -X POST ${runtime.url}/organizations \\`,
    `    -H "Authorization: Bearer ${tokenExpr}" -H 'content-type: application/json' \\`,
    `    -d '{"id":"acct-lumen","name":"Lumen","plan":"pro"}' | node -pe 'JSON.parse(require("fs").readFileSync(0)).api_key')`,
    '',
    'then go on with step 2 of the walkthrough. What an event or a run did, in words (support\'s view):',
    `  SLUICE_API_KEY=$KEY npm run -s sluice -- explain ${runtime.url} --org acct-lumen --run <run id>`,
    '',
    ...(leftOut.length > 0 ? [`note: here ${leftOut.join(', and ')}; the walkthrough as written runs under npm start (sluice dev).`, ''] : []),
    'Ctrl-C stops.',
    '',
  ];
  process.stdout.write(lines.join('\n'));
}

/** A path as one bash word: as is when it holds only plain characters, else single-quoted. */
const shellWord = (path: string): string => (/^[\w./@%+=:,-]+$/.test(path) ? path : `'${path.replace(/'/g, `'\\''`)}'`);

/**
 * The data dir's disk failed a commit's sync (flush-watch.ts): the process ends at once, as a crash
 * would, so that it commits nothing more (a later sync may report success over pages the disk lost,
 * and a commit synced so could carry them into the snapshot the next start opens; one LMDB's write
 * thread made before this was told can still do so). The answers already made are written first
 * (the turn ends); what was acknowledged had been synced, and the next start reopens the store at
 * its newest synced commit.
 */
function exitOnStoreFailure(cause: string): void {
  process.stderr.write(`sluice: the data dir's disk failed to sync a commit (${cause}); exiting at once, so that no write is answered as stored on a disk that may not keep it. Check the disk (and free space), then start again (README, Durability).\n`);
  setImmediate(() => process.exit(1));
}

/**
 * A start's failure said in a line that tells what to do: a full disk, or a data dir this process
 * cannot use (a file where a directory goes, no permission, a read-only mount); any other as it is.
 */
function inOwnWords(dataDir: string, error: unknown): unknown {
  if (isDiskFullError(error)) return new Error(diskFullAdvice(dataDir, error));
  const root = resolve(dataDir);
  // ENOENT too when the data dir itself is not there once its parents were made (a symlink to
  // nowhere, /proc); a file missing inside a data dir that exists is another fault, said as it is.
  const unusable = isUnusablePathError(error) || (error instanceof Error && (error as NodeJS.ErrnoException).code === 'ENOENT' && !existsSync(root));
  const path = unusable ? (error as NodeJS.ErrnoException).path : undefined;
  const inDataDir = unusable && (path === undefined || resolve(path) === root || resolve(path).startsWith(`${root}${sep}`));
  return inDataDir ? new Error(unusablePathAdvice(dataDir, error as NodeJS.ErrnoException)) : error;
}

/** `sluice dev` / `sluice serve`: starts the runtime, prints the welcome, and shuts down cleanly on SIGTERM/SIGINT. */
export async function runServer(command: 'dev' | 'serve', args: readonly string[]): Promise<void> {
  const config = loadRuntimeConfig(args, process.env, command === 'dev' ? DEV_DEFAULTS : SERVE_DEFAULTS);
  guardLedgerCommitFailures(createLogger(config.logLevel));
  const stopStarting = new AbortController();
  const starting = createRuntime(config, { stopStarting: stopStarting.signal, onStoreFailed: exitOnStoreFailure });
  // The runtime keeps running when its output or its logs (stderr) are no longer read.
  whenOutputCloses(process.stdout);
  whenOutputCloses(process.stderr);
  let stopping = false;
  // Handlers first: a signal that arrives while starting (or right after the welcome) still shuts down cleanly.
  const stop = (signal: string): void => {
    if (stopping) return;
    stopping = true;
    process.stdout.write(`received ${signal}, shutting down\n`);
    // A start still under way (a hook-runner child that does not come up) is given up at once.
    stopStarting.abort();
    starting
      .then((runtime) => runtime.close(), (error: unknown) => {
        // Stopped before it started: what it opened was closed again, and that is a clean stop.
        if (!(error instanceof StartAbortedError)) throw error;
      })
      .then(
        () => process.exit(0),
        (error: unknown) => {
          process.stderr.write(`shutdown failed: ${error instanceof Error ? error.message : String(error)}\n`);
          process.exit(1);
        },
      );
  };
  // `on`, not `once`: under `npm start` one Ctrl-C arrives more than once (from the terminal, and
  // forwarded by npm and tsx), and a signal left without a listener would kill the shutdown.
  process.on('SIGTERM', () => stop('SIGTERM'));
  process.on('SIGINT', () => stop('SIGINT'));
  let runtime: Runtime;
  try {
    runtime = await starting;
  } catch (error) {
    // Told to stop while starting: stop() ends the process (0 for a start it gave up, else 1).
    if (stopping) return;
    throw inOwnWords(config.dataDir, error);
  }
  // Stopped while starting: no welcome that ends "Ctrl-C stops" after "shutting down".
  if (!stopping) printWelcome(runtime, config, command);
}
