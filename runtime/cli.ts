// The `sluice` command: `dev` (runtime + local hook-runner), `serve` (runtime only), `hook-runner`,
// and the helpers `sign`, `cron`, `device`, `watch`, and support's `explain`, `replay`, `failed`,
// `resume` and `cancel`.
// Prints where it listens and how to start using it; SIGTERM/SIGINT shut down cleanly.

import { relative } from 'node:path';
import { DEV_DEFAULTS, loadRuntimeConfig, SERVE_DEFAULTS, type RuntimeConfig } from './config.ts';
import { createRuntime, type Runtime } from './create-runtime.ts';
import { guardLedgerCommitFailures } from './ledger/commit-failure-guard.ts';
import { createLogger } from './log.ts';
import { signCommand } from './sign-command.ts';
import { cronCommand } from './cron-command.ts';
import { deviceCommand } from './device-command.ts';
import { watchCommand } from './watch-command.ts';
import { explainCommand } from './explain-command.ts';
import { replayCommand } from './replay-command.ts';
import { failedCommand, runActionCommand } from './triage-command.ts';
import { printable } from './terminal-text.ts';
import { runStandaloneHookRunner } from './hook-runner/run-standalone.ts';
import { whenOutputCloses } from '../hook-runner/output-closed.ts';

const USAGE = `usage: sluice <command> [options]

commands:
  dev           run the runtime with an embedded LMDB and a local hook-runner (npm start)
  serve         run the runtime alone
  hook-runner   run the WebAssembly hook-runner (gRPC)
  sign          print Standard Webhooks headers for a body as curl -H arguments
                (--secret whsec_... or SLUICE_SIGNING_SECRET, --id <message id> --body <json> [--timestamp <s>])
  cron          print the next ticks of a schedule pattern ("<pattern>" [--timezone <zone>] [--count <n>])
  device        act as a device: connect, send messages, print Sluice's answers
                (<ws://host:port/devices/<org>/<name>> --token <device token> or SLUICE_DEVICE_TOKEN [--send <json>]...; else stdin lines)
  watch         print a live room's run updates as JSON lines, resuming after drops
                (<http://host:port> --org <org> --key <API key> or SLUICE_API_KEY [--environment <env>] [--run <id>] [--after-seq <n>])
  explain       say what happened to an event (its origin, runs, replays) or a run (every step and attempt)
                (<http://host:port> --org <org> --key <API key> or SLUICE_API_KEY (--event <id> | --run <id>) [--environment <env>])
  replay        make a business replay of an event: a new event, new runs, new effect keys
                (<http://host:port> --org <org> --key <API key> or SLUICE_API_KEY --event <id> --side-effects skip|run
                [--workflow <id>]... [--again] [--idempotency-key <key>] [--environment <env>])
  failed        list the newest events with failed runs, each run's reason (triage)
                (<http://host:port> --org <org> --key <API key> or SLUICE_API_KEY [--limit <n>] [--environment <env>])
  resume        continue a failed run from its first incomplete step
  cancel        stop a run that has not finished
                (both: <http://host:port> --org <org> --key <API key> or SLUICE_API_KEY --run <id> [--environment <env>])
                a credential in SLUICE_* stays out of ps, which every local user can read; a flag does not

options (dev, serve):
  --port <n>            listen port, 0 = any free port (SLUICE_PORT, default 8787)
  --host <addr>         listen address (SLUICE_HOST, default 127.0.0.1)
  --data-dir <dir>      where LMDB and token files live (SLUICE_DATA_DIR, default ./.sluice)
  --admin-token <tok>   platform admin token (SLUICE_ADMIN_TOKEN, default: generated into <data-dir>/admin-token)
  --dedup-window-ms <n> how long provider event ids are remembered (SLUICE_DEDUP_WINDOW_MS, default 7 days)
  --retention-days <n>  how long events, recordings and finished runs are kept (SLUICE_RETENTION_DAYS,
                        default 30; at least the dedup window)
  --live-retention <n>  live updates kept per org for reconnecting subscribers (SLUICE_LIVE_RETENTION, default 10000)
  --live-sockets-per-org <n>  live-room sockets an org may hold open at once (SLUICE_LIVE_SOCKETS_PER_ORG,
                        default 20000, or half of --websockets when that is less)
  --websockets <n>      live-room and device sockets open at once, every org together (SLUICE_WEBSOCKETS,
                        default three quarters of the open-file limit)
  --log-level <level>   debug|info|warn|error|silent (SLUICE_LOG_LEVEL, default info)
  --runner <where>      child | off | <host:port> | unix:<path> (SLUICE_RUNNER; dev: child, serve: off);
                        a separate runner needs the same token: SLUICE_RUNNER_TOKEN, else <data-dir>/runner-token
  --webhook-connections <n>  connections webhook steps may hold per org and receiver; more requests
                        wait for one (SLUICE_WEBHOOK_CONNECTIONS, default 32)
  --step-input-mib <n>  payload MiB the steps being performed may hold at once (an org an eighth); more wait
                        (SLUICE_STEP_INPUT_MIB, default a sixteenth of the heap limit, at least 16)
  --webhook-targets <p> public: webhook steps reach public addresses only; any: local and private
                        ones too (SLUICE_WEBHOOK_TARGETS; dev: any, serve: public)
  --min-free-disk-mib <n>  free MiB the data dir's disk keeps: below it nothing is written (503
                        write_failed, runs wait) until space is freed (SLUICE_MIN_FREE_DISK_MIB, default 256; 0: off)
  A blank environment variable counts as not set; an empty flag is refused.

options (hook-runner):
  --listen <addr>       gRPC listen address (default 127.0.0.1:7878; unix:<path> allowed)
  --data-dir <dir>      where its LMDB, master key and token live (SLUICE_DATA_DIR, default ./.sluice)
  --min-free-disk-mib <n>  free MiB its disk keeps: below it compiles, secret changes and recorded
                        invocations are refused (SLUICE_MIN_FREE_DISK_MIB, default 256; 0: off)
  sluice hook-runner --help also lists its environment (SLUICE_MASTER_KEY, SLUICE_PREVIOUS_MASTER_KEYS)
`;

function printWelcome(runtime: Runtime, config: RuntimeConfig, command: string): void {
  const file = runtime.adminToken.file;
  const relativeFile = file === undefined ? undefined : relative(process.cwd(), file);
  const tokenFile = relativeFile === undefined || relativeFile.startsWith('..') ? file : relativeFile;
  // The token itself is never printed: the file it is in, the variable, or a placeholder for the
  // flag (which wins over the variable when both are given).
  const tokenExpr = tokenFile !== undefined ? `$(cat ${shellWord(tokenFile)})` : config.adminTokenFrom === 'env' ? '$SLUICE_ADMIN_TOKEN' : '<your --admin-token>';
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
    'in a second terminal, step 1 of the walkthrough in README.md: create an organization and keep its',
    'admin API key in $KEY (it is shown only in this answer):',
    `  export KEY=$(curl -s -X POST ${runtime.url}/organizations \\`,
    `    -H "Authorization: Bearer ${tokenExpr}" -H 'content-type: application/json' \\`,
    `    -d '{"id":"acct-lumen","name":"Lumen","plan":"pro"}' | node -pe 'JSON.parse(require("fs").readFileSync(0)).api_key')`,
    '',
    'then go on with step 2 of the walkthrough. What an event or a run did, in words (support\'s view):',
    `  SLUICE_API_KEY=$KEY npm run -s sluice -- explain ${runtime.url} --org acct-lumen --run <run id>`,
    '',
    'Ctrl-C stops.',
    '',
  ];
  process.stdout.write(lines.join('\n'));
}

/** A path as one bash word: as is when it holds only plain characters, else single-quoted. */
const shellWord = (path: string): string => (/^[\w./@%+=:,-]+$/.test(path) ? path : `'${path.replace(/'/g, `'\\''`)}'`);

async function runServer(command: 'dev' | 'serve', args: readonly string[]): Promise<void> {
  const config = loadRuntimeConfig(args, process.env, command === 'dev' ? DEV_DEFAULTS : SERVE_DEFAULTS);
  guardLedgerCommitFailures(createLogger(config.logLevel));
  const starting = createRuntime(config);
  // The runtime keeps running when its output or its logs (stderr) are no longer read.
  whenOutputCloses(process.stdout);
  whenOutputCloses(process.stderr);
  let stopping = false;
  // Handlers first: a signal that arrives while starting (or right after the welcome) still shuts down cleanly.
  const stop = (signal: string): void => {
    if (stopping) return;
    stopping = true;
    process.stdout.write(`received ${signal}, shutting down\n`);
    starting
      .then((runtime) => runtime.close())
      .then(
        () => process.exit(0),
        (error: unknown) => {
          process.stderr.write(`shutdown failed: ${String(error)}\n`);
          process.exit(1);
        },
      );
  };
  // `on`, not `once`: under `npm start` one Ctrl-C arrives more than once (from the terminal, and
  // forwarded by npm and tsx), and a signal left without a listener would kill the shutdown.
  process.on('SIGTERM', () => stop('SIGTERM'));
  process.on('SIGINT', () => stop('SIGINT'));
  const runtime = await starting;
  // Stopped while starting: no welcome that ends "Ctrl-C stops" after "shutting down".
  if (!stopping) printWelcome(runtime, config, command);
}

/** What the one-shot client commands (explain, replay, failed, resume, cancel) write to and read their key from. */
const processIo = { stdout: process.stdout, stderr: process.stderr, env: process.env };

async function main(argv: readonly string[]): Promise<void> {
  const [command, ...rest] = argv;
  // The hook-runner prints its own usage, with its environment (the vault's master keys).
  if (command !== 'hook-runner' && (rest.includes('--help') || rest.includes('-h'))) {
    process.stdout.write(USAGE);
    return;
  }
  switch (command) {
    case 'dev':
    case 'serve':
      return runServer(command, rest);
    case 'hook-runner':
      return runStandaloneHookRunner(rest);
    case 'sign':
      process.stdout.write(`${signCommand(rest, Date.now(), process.env)}\n`);
      return;
    case 'cron':
      process.stdout.write(`${cronCommand(rest, Date.now())}\n`);
      return;
    case 'device':
      process.exitCode = await deviceCommand(rest, { stdin: process.stdin, stdout: process.stdout, stderr: process.stderr, env: process.env });
      return;
    case 'watch': {
      const stop = new AbortController();
      process.on('SIGINT', () => stop.abort());
      process.on('SIGTERM', () => stop.abort());
      // `sluice watch … | head`: once nobody reads, stop watching, as Ctrl-C would.
      whenOutputCloses(process.stdout, () => stop.abort());
      process.exitCode = await watchCommand(rest, { stdout: process.stdout, stderr: process.stderr, signal: stop.signal, env: process.env });
      return;
    }
    case 'explain':
      process.exitCode = await explainCommand(rest, processIo);
      return;
    case 'replay':
      process.exitCode = await replayCommand(rest, processIo);
      return;
    case 'failed':
      process.exitCode = await failedCommand(rest, processIo);
      return;
    case 'resume':
    case 'cancel':
      process.exitCode = await runActionCommand(command, rest, processIo);
      return;
    case 'help':
    case '--help':
    case '-h':
    case undefined:
      process.stdout.write(USAGE);
      return;
    default:
      process.stderr.write(`unknown command "${command}"\n\n${USAGE}`);
      process.exitCode = 2;
  }
}

main(process.argv.slice(2)).catch((error: unknown) => {
  // The message only: a class name (RunnerConfigError for a runtime's own file) would mislead.
  const message = error instanceof Error ? error.message : String(error);
  // Escaped: a message may quote what a server or a file said.
  process.stderr.write(`sluice: ${printable(message)}\n`);
  process.exit(1);
});
