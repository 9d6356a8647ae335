// The `sluice` command: `dev` (runtime + local hook-runner), `serve` (runtime only), `hook-runner`,
// and the helpers `sign`, `cron`, `device`, `watch`, `export`, and support's `explain`, `replay`,
// `failed`, `resume` and `cancel`. Each command's module is loaded when that command runs: a client
// command does not load the runtime (it starts in about half the time).

import { inspect } from 'node:util';
import { printable } from './terminal-text.ts';
import { onInterrupt } from './interrupt-signals.ts';
import { InputError } from './errors.ts';
import { EXIT_FAILED, EXIT_USAGE } from './cli-exit-codes.ts';
import { usageErrorText } from './cli-usage-error.ts';
import { whenOutputCloses } from '../hook-runner/output-closed.ts';
import { commitFailureCause, isLedgerCommitFailure } from '../hook-runner/lmdb-commit-failure.ts';

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
  export        write an organization's whole export as JSON lines to stdout (admin key)
                (<http://host:port> --org <org> --key <API key> or SLUICE_API_KEY [--cursor <c>]) > org.ndjson
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
                        default three quarters of the open-file limit less 64)
  --log-level <level>   debug|info|warn|error|silent (SLUICE_LOG_LEVEL, default info)
  --runner <where>      child | off | <host:port> | unix:<path> (SLUICE_RUNNER; dev: child, serve: off);
                        a separate runner needs the same token: SLUICE_RUNNER_TOKEN, else <data-dir>/runner-token
  --runner-ca <pem>     reach a <host:port> runner over TLS, checking its certificate against this CA
                        (SLUICE_RUNNER_CA; the runner serves with --tls-cert and --tls-key)
  --webhook-connections <n>  connections webhook steps may hold per org and receiver; more requests
                        wait for one (SLUICE_WEBHOOK_CONNECTIONS, default 32)
  --max-queued-runs <n>  runs an org may have waiting for a concurrency slot; past it its new events are
                        429 run_backlog_full (SLUICE_MAX_QUEUED_RUNS, default 100000)
  --step-input-mib <n>  payload MiB the steps being performed may hold at once (an org an eighth); more wait
                        (SLUICE_STEP_INPUT_MIB, default a sixteenth of the heap limit, at least 16)
  --request-bodies-mib <n>  request body MiB held in memory at once (an org an eighth); more are 503
                        server_busy (SLUICE_REQUEST_BODIES_MIB, default a quarter of the heap limit, 72-256)
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

/** Commands whose --help is the whole usage: their options are listed there (the hook-runner prints its own). */
const WHOLE_USAGE: ReadonlySet<string | undefined> = new Set([undefined, 'dev', 'serve', 'help']);

/**
 * `sluice <command> --help`: the usage's lines about that command (its line and the lines indented
 * under it; resume's arguments are cancel's, "both:"), or the whole usage for dev, serve and a
 * command it does not know.
 */
function helpFor(command: string | undefined): string {
  if (WHOLE_USAGE.has(command) || command!.startsWith('-')) return USAGE;
  const lines = USAGE.split('\n');
  const at = lines.findIndex((line) => line.startsWith(`  ${command} `));
  if (at < 0) return USAGE;
  const under = (index: number): boolean => lines[index]?.startsWith(' '.repeat(16)) === true;
  let end = at + 1;
  while (under(end)) end += 1;
  const block = lines.slice(at, end);
  if (block.length === 1 && lines[end + 1]?.trimStart().startsWith('(both:')) block.push(lines[end + 1]!);
  return `usage: sluice ${command} [options]\n\n${block.join('\n').replace('(both: ', '(')}\n\nsluice --help lists every command.\n`;
}

/** The part of the usage naming `command`'s options: dev and serve share a block, and the hook-runner has its own. */
function optionsHelpFor(command: string | undefined): string {
  const block = (title: string): string => USAGE.slice(USAGE.indexOf(title)).split('\n\n')[0]!;
  if (command === 'dev' || command === 'serve') return block('options (dev, serve):');
  if (command === 'hook-runner') return block('options (hook-runner):');
  return helpFor(command);
}

/** A command's module that failed to load: a fault of the installation or of the code, not of the input. */
class ModuleLoadFailure extends Error {}

/** Loads a command's module; a failure is shown whole (file, line, stack), as Node shows one at start-up. */
const load = <T>(loading: Promise<T>): Promise<T> =>
  loading.catch((error: unknown) => {
    throw new ModuleLoadFailure('a module of this command could not be loaded', { cause: error });
  });

/** What the one-shot client commands (explain, replay, failed, resume, cancel) write to and read their key from. */
const processIo = { stdout: process.stdout, stderr: process.stderr, env: process.env };

/**
 * Commands that handle their output closing themselves: those that run until stopped
 * (server-command.ts, watch below), and export, which stops asking for pages and says where a
 * failed write leaves the file.
 */
const OWN_OUTPUT: ReadonlySet<string | undefined> = new Set(['dev', 'serve', 'hook-runner', 'watch', 'export']);

async function main(argv: readonly string[]): Promise<void> {
  const [command, ...rest] = argv;
  // `sluice explain … | head`: what nobody reads any more is not written, and the command ends as it would.
  if (!OWN_OUTPUT.has(command)) whenOutputCloses(process.stdout);
  // The hook-runner prints its own usage, with its environment (the vault's master keys).
  if (command !== 'hook-runner' && (rest.includes('--help') || rest.includes('-h'))) {
    process.stdout.write(helpFor(command));
    return;
  }
  switch (command) {
    case 'dev':
    case 'serve':
      return (await load(import('./server-command.ts'))).runServer(command, rest);
    case 'hook-runner':
      return (await load(import('./hook-runner/run-standalone.ts'))).runStandaloneHookRunner(rest);
    case 'sign':
      process.stdout.write(`${(await load(import('./sign-command.ts'))).signCommand(rest, Date.now(), process.env)}\n`);
      return;
    case 'cron':
      process.stdout.write(`${(await load(import('./cron-command.ts'))).cronCommand(rest, Date.now())}\n`);
      return;
    case 'device':
      process.exitCode = await (await load(import('./device-command.ts'))).deviceCommand(rest, { stdin: process.stdin, stdout: process.stdout, stderr: process.stderr, env: process.env });
      return;
    case 'watch': {
      const [{ watchCommand }, { whenOutputCloses }] = await Promise.all([load(import('./watch-command.ts')), load(import('../hook-runner/output-closed.ts'))]);
      const stop = new AbortController();
      // A second signal ends the process at once, as it would have (interrupt-signals.ts).
      onInterrupt(['SIGINT', 'SIGTERM'], () => stop.abort());
      // `sluice watch … | head`: once nobody reads, stop watching, as Ctrl-C would.
      whenOutputCloses(process.stdout, () => stop.abort());
      process.exitCode = await watchCommand(rest, { stdout: process.stdout, stderr: process.stderr, signal: stop.signal, env: process.env });
      return;
    }
    case 'explain':
      process.exitCode = await (await load(import('./explain-command.ts'))).explainCommand(rest, processIo);
      return;
    case 'replay':
      process.exitCode = await (await load(import('./replay-command.ts'))).replayCommand(rest, processIo);
      return;
    case 'failed':
      process.exitCode = await (await load(import('./triage-command.ts'))).failedCommand(rest, processIo);
      return;
    case 'export': {
      const { exportCommand } = await load(import('./export-command.ts'));
      // The page being written is finished, and the cursor to go on from printed, instead of a cut
      // line. A second signal ends the process as it would have (interrupt-signals.ts: a reader that
      // stopped without closing would hold that page's write, and the export, for ever).
      const stop = new AbortController();
      onInterrupt(['SIGINT', 'SIGTERM', 'SIGHUP'], () => stop.abort());
      process.exitCode = await exportCommand(rest, processIo, stop.signal);
      return;
    }
    case 'resume':
    case 'cancel':
      process.exitCode = await (await load(import('./triage-command.ts'))).runActionCommand(command, rest, processIo);
      return;
    case 'help':
    case '--help':
    case '-h':
      process.stdout.write(USAGE);
      return;
    case undefined:
      // Asked for nothing: the usage, on stderr as for any usage error, and a failing exit (a script's
      // `sluice $UNSET_COMMAND` did nothing).
      process.stderr.write(USAGE);
      process.exitCode = EXIT_USAGE;
      return;
    default:
      // One line: the usage is 60 lines, and the mistake would scroll out of sight above it.
      process.stderr.write(`sluice: unknown command "${printable(command)}"; sluice --help lists the commands\n`);
      process.exitCode = EXIT_USAGE;
  }
}

main(process.argv.slice(2)).catch(async (error: unknown) => {
  if (error instanceof ModuleLoadFailure) {
    process.stderr.write(`sluice: ${error.message}: ${inspect(error.cause)}\n`);
    process.exit(1);
  }
  // A start whose writes the store could not commit (its disk full): lmdb-js's own message only
  // says "Commit failed (see commitError for details)".
  if (isLedgerCommitFailure(error)) {
    const cause = await commitFailureCause(error);
    process.stderr.write(`sluice: the data dir's store could not commit a write (${printable(cause)}); if its disk is full, free space and start again (README, Durability)\n`);
    process.exit(1);
  }
  // The message only: a class name (RunnerConfigError for a runtime's own file) would mislead.
  const message = error instanceof Error ? error.message : String(error);
  // Escaped: a message may quote what a server or a file said, or the argument given. Node's own
  // usage errors (parseArgs) are said in the CLI's words, one line (cli-usage-error.ts).
  const command = process.argv[2];
  const usage = usageErrorText(error, command, optionsHelpFor(command));
  process.stderr.write(`sluice: ${printable(usage ?? message)}\n`);
  // 2 for a command line (or configuration) refused before anything was done, as for an unknown
  // command and as the hook-runner exits on its configuration; 1 for a command that failed.
  process.exit(usage !== undefined || error instanceof InputError ? EXIT_USAGE : EXIT_FAILED);
});
