// The `sluice` command line as a user runs it: help for every command, and config refusals that
// name the setting and exit non-zero before anything listens.

import assert from 'node:assert/strict';
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { existsSync, readFileSync, rmSync } from 'node:fs';
import { createServer, type AddressInfo } from 'node:net';
import { dirname, join } from 'node:path';
import { createInterface } from 'node:readline';
import { test } from 'node:test';
import { holdRunnerStore } from './helpers/hook-runner.ts';
import { call } from './helpers/http.ts';
import { eventually } from './helpers/receiver.ts';
import { ADMIN_TOKEN, spawnRuntime, tempDir, type ChildRuntime } from './helpers/runtime.ts';

const ROOT = join(import.meta.dirname, '..');
const sluice = (...args: string[]) =>
  spawnSync(process.execPath, ['--import', 'tsx', join(ROOT, 'runtime/cli.ts'), ...args], { cwd: ROOT, encoding: 'utf8' });

test('--help prints the usage, which lists every runtime flag (after dev and serve too); another command prints its own lines of it; the hook-runner prints its own, with its environment', () => {
  for (const args of [['--help'], ['dev', '--help'], ['serve', '-h']]) {
    const result = sluice(...args);
    assert.equal(result.status, 0, `${args.join(' ')}: ${result.stderr}`);
    assert.match(result.stdout, /^usage: sluice <command>/);
  }
  const runner = sluice('hook-runner', '--help');
  assert.equal(runner.status, 0, runner.stderr);
  assert.match(runner.stdout, /^usage: sluice hook-runner/);
  for (const name of ['SLUICE_RUNNER_TOKEN', 'SLUICE_MASTER_KEY', 'SLUICE_PREVIOUS_MASTER_KEYS']) assert.ok(runner.stdout.includes(name), `names ${name}`);
  // Any other command's --help is its own lines of the usage.
  for (const [command, argument] of [['device', '--token <device token>'], ['resume', '--run <id>'], ['cancel', '--run <id>'], ['export', '--cursor <c>']] as const) {
    const help = sluice(command, '--help');
    assert.equal(help.status, 0, help.stderr);
    assert.ok(help.stdout.startsWith(`usage: sluice ${command} [options]\n\n  ${command} `), help.stdout);
    assert.ok(help.stdout.includes(argument) && !help.stdout.includes('(both:'), help.stdout);
    assert.ok(!help.stdout.includes('options (dev, serve)') && help.stdout.endsWith('sluice --help lists every command.\n'), help.stdout);
  }
  const usage = sluice('help').stdout;
  for (const flag of ['--port', '--host', '--data-dir', '--admin-token', '--dedup-window-ms', '--retention-days', '--live-retention', '--log-level', '--runner', '--webhook-connections']) {
    assert.ok(usage.includes(flag), `usage names ${flag}`);
  }
});

test('no command prints the usage on stderr, and an unknown one a line naming it; both exit 2', () => {
  const none = sluice();
  assert.equal(none.status, 2);
  assert.equal(none.stdout, '');
  assert.match(none.stderr, /^usage: sluice <command>/);
  const unknown = sluice('wacth');
  assert.equal(unknown.status, 2);
  assert.equal(unknown.stderr, 'sluice: unknown command "wacth"; sluice --help lists the commands\n');
});

test('a command whose module fails to load says so with the whole error (file, line, stack), exit 1', () => {
  // A loader hook hands the CLI a sign-command.ts that throws while it is evaluated.
  const hook = `export async function load(url, context, next) {
    if (url.endsWith('/runtime/sign-command.ts')) return { format: 'module', source: 'null.boom;', shortCircuit: true };
    return next(url, context);
  }`;
  const register = `import { register } from 'node:module'; register(${JSON.stringify(`data:text/javascript,${encodeURIComponent(hook)}`)});`;
  const result = spawnSync(process.execPath, ['--import', `data:text/javascript,${encodeURIComponent(register)}`, '--import', 'tsx', join(ROOT, 'runtime/cli.ts'), 'sign', '--secret', 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw', '--id', 'm1', '--body', '{}'], { cwd: ROOT, encoding: 'utf8' });
  assert.equal(result.status, 1, result.stderr);
  assert.match(result.stderr, /^sluice: a module of this command could not be loaded: TypeError: Cannot read properties of null/);
  assert.match(result.stderr, /sign-command\.ts:\d+/, 'names the file and line');
  assert.ok(sluice('cron', '0 9 * * *', '--count', '1').status === 0, 'the other commands still load');
});

test("Node's own usage errors are said in one line of the CLI's words: an unknown option names the one likeliest meant (or the command's options), a value starting with '-' how to give it; what the user typed escaped; exit 2", () => {
  const ambiguous = sluice('watch', 'http://127.0.0.1:1', '--org', 'a', '--key', 'b', '--after-seq', '-1');
  assert.equal(ambiguous.status, 2);
  assert.equal(ambiguous.stderr, "sluice: Option '--after-seq' is followed by a word starting with '-': to give that as its value, join them with '=' (--after-seq=-5, say)\n");
  const abbreviated = sluice('cron', '0 9 * * *', '--tz', 'Europe/Berlin');
  assert.equal(abbreviated.status, 2);
  assert.equal(abbreviated.stderr, "sluice: Unknown option '--tz' for sluice cron: did you mean --timezone? (sluice cron --help lists its options)\n");
  const swapped = sluice('serve', '--prot', '0');
  assert.equal(swapped.status, 2);
  assert.equal(swapped.stderr, "sluice: Unknown option '--prot' for sluice serve: did you mean --port? (sluice serve --help lists its options)\n");
  const unlike = sluice('cron', '0 9 * * *', '--bogus');
  assert.equal(unlike.stderr, "sluice: Unknown option '--bogus' for sluice cron; its options: --timezone, --count (sluice cron --help says more)\n");
  const escaped = sluice('watch', 'http://127.0.0.1:1', '--org', 'a', '--key', 'b', '--bogus\u001b[2J');
  assert.equal(escaped.status, 2);
  assert.match(escaped.stderr, /--bogus\\u001b\[2J/, 'a control character the user typed is shown, not obeyed');
  assert.equal(escaped.stderr.split('\n').length, 2, 'one line');
});

test('exit 2 for a command line refused before anything was done (a missing or invalid value); 1 for a command that failed doing it', async () => {
  const missingOrg = sluice('failed', 'http://127.0.0.1:1', '--key', 'sk_any');
  assert.equal(missingOrg.status, 2, missingOrg.stderr);
  assert.match(missingOrg.stderr, /^sluice: --org and an API key \(--key, or SLUICE_API_KEY\) are required/);
  const badCount = sluice('cron', '0 9 * * *', '--count', '0');
  assert.equal(badCount.status, 2, badCount.stderr);
  // Nothing listens on a free port: the one attempt of a cancel is refused at once.
  const port = await freePort();
  const unreachable = sluice('cancel', `http://127.0.0.1:${port}`, '--org', 'acct-any', '--key', 'sk_any', '--run', 'run_any');
  assert.equal(unreachable.status, 1, unreachable.stderr);
  assert.match(unreachable.stderr, /ECONNREFUSED.* Nothing answered at http:\/\/127\.0\.0\.1:\d+: is Sluice running there\?/);
});

test('an empty --host or a short --admin-token stops the start with a message naming it (exit 2, as a refused command line)', () => {
  const emptyHost = sluice('serve', '--host', '');
  assert.equal(emptyHost.status, 2);
  assert.match(emptyHost.stderr, /--host must not be empty/);
  const shortToken = sluice('serve', '--admin-token', 'short');
  assert.equal(shortToken.status, 2);
  assert.match(shortToken.stderr, /--admin-token \(SLUICE_ADMIN_TOKEN\) must be 16-512 visible ASCII characters/);
});

test('an option given twice is refused (it was the last one, silently), a list option may repeat; a short SLUICE_RUNNER_TOKEN stops dev before its data dir is made', () => {
  const twice = sluice('cron', '0 9 * * *', '--count', '1', '--count', '2');
  assert.equal(twice.status, 2, twice.stderr);
  assert.equal(twice.stderr, "sluice: Option '--count' is given more than once; give it once.\n");
  const twoOrgs = sluice('failed', 'http://127.0.0.1:1', '--org', 'a', '--org', 'b', '--key', 'sk_any');
  assert.equal(twoOrgs.status, 2, twoOrgs.stderr);
  assert.match(twoOrgs.stderr, /'--org' is given more than once/);
  const emptyWorkflow = sluice('replay', 'http://127.0.0.1:1', '--org', 'a', '--key', 'sk_any', '--event', 'evt_1', '--side-effects', 'skip', '--workflow', 'wf_1', '--workflow', '');
  assert.equal(emptyWorkflow.status, 2, emptyWorkflow.stderr);
  assert.match(emptyWorkflow.stderr, /^sluice: --workflow is empty: give it a workflow id/);
  const dataDir = join(tempDir(), 'never-made');
  try {
    const shortRunnerToken = spawnSync(process.execPath, ['--import', 'tsx', join(ROOT, 'runtime/cli.ts'), 'dev', '--data-dir', dataDir, '--port', '0'], { cwd: ROOT, encoding: 'utf8', env: { ...process.env, SLUICE_RUNNER_TOKEN: 'short' } });
    assert.equal(shortRunnerToken.status, 2, shortRunnerToken.stderr);
    assert.equal(shortRunnerToken.stderr, 'sluice: SLUICE_RUNNER_TOKEN must be at least 16 visible ASCII characters (no spaces).\n');
    assert.equal(existsSync(dataDir), false, 'nothing was written');
  } finally {
    rmSync(dirname(dataDir), { recursive: true, force: true });
  }
});

test('the welcome of a runtime started with --admin-token shows where the token goes, never the token', async () => {
  const dataDir = tempDir();
  try {
    const runtime = await spawnRuntime(dataDir, 'serve');
    runtime.child.kill('SIGTERM');
    assert.equal(await runtime.exited, 0);
    const welcome = runtime.output.join('\n');
    assert.match(welcome, /Authorization: Bearer <your --admin-token>/);
    assert.ok(!welcome.includes(ADMIN_TOKEN), 'the token is not printed');
    // Started with --webhook-targets any (the helper's) and serve's runner off: the walkthrough's custom action would fail.
    assert.ok(welcome.includes('note: here custom actions have no hook-runner (--runner child starts one); the walkthrough as written runs under npm start (sluice dev).'), welcome);
    // A second terminal opens in $HOME: the walkthrough's npm run and paths work only in the checkout.
    assert.ok(welcome.includes(`in a second terminal, in this directory (cd ${ROOT}: the walkthrough's commands run there),`), welcome);
  } finally {
    rmSync(dataDir, { recursive: true, force: true });
  }
});

test("serve's welcome says what of the walkthrough its defaults leave out (local receivers, a hook-runner); dev's says nothing of it", async () => {
  const dataDir = tempDir();
  try {
    for (const [command, extra] of [['serve', ['--webhook-targets', 'public']], ['dev', []]] as const) {
      const runtime = await spawnRuntime(join(dataDir, command), command, [...extra]);
      await eventually('the whole welcome', () => runtime.output, (lines) => lines.some((line) => line.includes('Ctrl-C stops')));
      runtime.child.kill('SIGTERM');
      assert.equal(await runtime.exited, 0);
      const notes = runtime.output.filter((line) => line.startsWith('note: '));
      if (command === 'dev') assert.deepEqual(notes, []);
      else assert.deepEqual(notes, ["note: here webhook steps reach public addresses only (the walkthrough's receiver on 127.0.0.1 is refused, webhook_target_forbidden; --webhook-targets any allows it), and custom actions have no hook-runner (--runner child starts one); the walkthrough as written runs under npm start (sluice dev)."]);
    }
  } finally {
    rmSync(dataDir, { recursive: true, force: true });
  }
});

test("the welcome's first command, run in bash as printed, creates an org and leaves its working key exported in $KEY, whatever the data dir is called", async () => {
  for (const name of ['plain', "my data's home"]) await welcomeWorksIn(name);
});

async function welcomeWorksIn(name: string): Promise<void> {
  const parent = tempDir();
  const dataDir = join(parent, name);
  let runtime: Awaited<ReturnType<typeof spawnRuntime>> | undefined;
  try {
    const server = await spawnRuntime(dataDir, 'serve', [], 'file');
    runtime = server;
    await eventually('the whole welcome', () => server.output, (lines) => lines.some((line) => line.includes('Ctrl-C stops')));
    const start = server.output.findIndex((line) => line.startsWith('  export KEY=$(curl'));
    assert.ok(start >= 0, `the welcome prints the command:\n${server.output.join('\n')}`);
    const end = server.output.indexOf('', start);
    const command = server.output.slice(start, end).map((line) => line.trim()).join('\n');
    // Exported, as the live-room snippet reads it from the environment.
    const check = `curl -s -o /dev/null -w '%{http_code}' ${server.url}/organizations/acct-lumen -H "Authorization: Bearer $KEY"; node -e 'process.stdout.write(process.env.KEY ? " exported" : " not exported")'`;
    const result = spawnSync('bash', ['-c', `${command}\n${check}`], { cwd: ROOT, encoding: 'utf8' });
    server.child.kill('SIGTERM');
    assert.equal(await server.exited, 0);
    assert.equal(result.stdout, '200 exported', `${name}: ${result.stderr}`);
    assert.equal(server.output.some((line) => line.includes('holds organizations already')), false, 'a new data dir is not said to hold any');
    // Started again on it: the welcome says step 1 will meet the org made then.
    const again = await spawnRuntime(dataDir, 'serve', [], 'file');
    runtime = again;
    await eventually('the whole welcome', () => again.output, (lines) => lines.some((line) => line.includes('Ctrl-C stops')));
    assert.ok(again.output.some((line) => line.startsWith('this data dir holds organizations already: step 1 answers 409 organization_exists')), again.output.join('\n'));
    again.child.kill('SIGTERM');
    assert.equal(await again.exited, 0);
  } finally {
    // A failed assertion must not leave the server running: the test file would never end.
    if (runtime?.child.exitCode === null) runtime.child.kill('SIGKILL');
    rmSync(parent, { recursive: true, force: true });
  }
}

test('a runtime whose output nobody reads any more (| head) still shuts down cleanly on SIGTERM: exit 0, lock released', async () => {
  const dataDir = tempDir();
  try {
    const runtime = await spawnRuntime(dataDir, 'serve');
    // The reader goes away, as `head` does after its lines: the shutdown notice then meets EPIPE.
    runtime.child.stdout?.destroy();
    runtime.child.kill('SIGTERM');
    assert.equal(await runtime.exited, 0, runtime.output.join('\n'));
    assert.equal(existsSync(join(dataDir, 'runtime', 'owner.pid')), false, 'the data dir lock was released by a clean close');
  } finally {
    rmSync(dataDir, { recursive: true, force: true });
  }
});

test('a runtime whose logs nobody reads any more (stderr closed) keeps serving when it logs next, and still shuts down cleanly', async () => {
  const dataDir = tempDir();
  try {
    const runtime = await spawnRuntime(dataDir, 'dev');
    runtime.child.stderr?.destroy();
    // The supervised hook-runner dies: the runtime logs a warning about it, to the closed stderr.
    const runner = Number(execFileSync('pgrep', ['-P', String(runtime.child.pid), '-f', 'hook-runner'], { encoding: 'utf8' }).trim().split('\n')[0]);
    process.kill(runner, 'SIGKILL');
    await eventually('the hook-runner restarted', async () => (await call(runtime.url, 'GET', '/metrics').catch(() => undefined))?.text ?? '', (metrics) => /^sluice_hook_runner_restarts 1$/m.test(metrics));
    assert.equal(runtime.child.exitCode, null, 'still running after logging to a closed stderr');
    assert.equal((await call(runtime.url, 'GET', '/healthz')).status, 200);
    runtime.child.kill('SIGTERM');
    assert.equal(await runtime.exited, 0);
    assert.equal(existsSync(join(dataDir, 'runtime', 'owner.pid')), false, 'the data dir lock was released by a clean close');
  } finally {
    rmSync(dataDir, { recursive: true, force: true });
  }
});

test('a Ctrl-C that arrives again while the runtime shuts down (npm and tsx forward it too) does not cut the shutdown short', async () => {
  const dataDir = tempDir();
  try {
    const runtime = await spawnRuntime(dataDir, 'dev');
    runtime.child.kill('SIGINT');
    await eventually('the shutdown to begin', () => runtime.output.some((line) => line.startsWith('received SIGINT')), (begun) => begun);
    runtime.child.kill('SIGINT');
    assert.equal(await runtime.exited, 0, runtime.output.join('\n'));
    assert.equal(runtime.output.filter((line) => line.startsWith('received')).length, 1, 'one shutdown');
    assert.equal(existsSync(join(dataDir, 'runtime', 'owner.pid')), false, 'the data dir lock was released by a clean close');
  } finally {
    rmSync(dataDir, { recursive: true, force: true });
  }
});

test('SIGTERM while the hook-runner child cannot come up (it crashes at each start) stops the start at once: exit 0, the child stopped, the lock released', async () => {
  const dataDir = tempDir();
  // The runner dies at each start (its store is held here), and the supervisor keeps restarting it (for up to 30 s).
  const release = holdRunnerStore(dataDir);
  try {
    const child = spawn(process.execPath, ['--import', 'tsx', join(ROOT, 'runtime/cli.ts'), 'dev', '--port', '0', '--data-dir', dataDir, '--admin-token', ADMIN_TOKEN], { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
    const output: string[] = [];
    for (const stream of [child.stdout, child.stderr]) createInterface({ input: stream }).on('line', (line) => output.push(line));
    const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
    await eventually('the child to fail at least once', () => output.some((line) => line.includes('exited unexpectedly')), Boolean, 20_000);
    child.kill('SIGTERM');
    // (Before, the start ran on to its 30 s timeout and the process exited 1, "shutdown failed".)
    assert.equal(await exited, 0, output.join('\n'));
    assert.ok(!output.some((line) => line.includes('shutdown failed')), output.join('\n'));
    assert.equal(existsSync(join(dataDir, 'runtime', 'owner.pid')), false, 'the data dir lock was released');
    assert.throws(() => execFileSync('pgrep', ['-f', `${dataDir}.*hook-runner|hook-runner.*${dataDir}`]), 'no hook-runner left running');
  } finally {
    release();
    rmSync(dataDir, { recursive: true, force: true });
  }
});

test("a --host that is none of this machine's addresses exits 1 saying so and what to give instead", () => {
  const dataDir = tempDir();
  try {
    // 192.0.2.1 is TEST-NET-1 (RFC 5737): no machine has it.
    const refused = spawnSync(process.execPath, ['--import', 'tsx', join(ROOT, 'runtime/cli.ts'), 'serve', '--host', '192.0.2.1', '--port', '0', '--data-dir', dataDir, '--admin-token', ADMIN_TOKEN], { cwd: ROOT, encoding: 'utf8', timeout: 20_000 });
    assert.equal(refused.status, 1, refused.stdout);
    assert.match(refused.stderr, /^sluice: could not listen on 192\.0\.2\.1:0 \(EADDRNOTAVAIL: the address is not one of this machine's: choose another with --host or SLUICE_HOST/);
  } finally {
    rmSync(dataDir, { recursive: true, force: true });
  }
});

test('a second runtime on a port another one holds exits 1 saying so (the port in use, and how to choose another), instead of sharing the port (SO_REUSEPORT) with it', async () => {
  const first = tempDir();
  const second = tempDir();
  let runtime: ChildRuntime | undefined;
  try {
    // A fixed port, as `npm start` uses: uSockets shares only explicitly named ports.
    const port = String(await freePort());
    runtime = await spawnRuntime(first, 'serve', ['--port', port]);
    // Bounded: a second runtime that did listen would run until killed.
    const refused = spawnSync(process.execPath, ['--import', 'tsx', join(ROOT, 'runtime/cli.ts'), 'serve', '--port', port, '--data-dir', second, '--admin-token', ADMIN_TOKEN, '--log-level', 'warn'], {
      cwd: ROOT,
      encoding: 'utf8',
      timeout: 20_000,
    });
    assert.equal(refused.status, 1, refused.stdout);
    assert.match(refused.stderr, new RegExp(`could not listen on 127\\.0\\.0\\.1:${port} \\(EADDRINUSE: the port is in use .*choose another port with --port or SLUICE_PORT\\)`));
    const answer = await fetch(`${runtime.url}/healthz`);
    assert.equal(answer.status, 200, 'the first one still answers');
  } finally {
    runtime?.child.kill('SIGTERM');
    if (runtime !== undefined) assert.equal(await runtime.exited, 0);
    rmSync(first, { recursive: true, force: true });
    rmSync(second, { recursive: true, force: true });
  }
});

/** A port nothing listens on right now (the kernel's pick, released at once). */
function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const probe = createServer().listen(0, '127.0.0.1', () => {
      const { port } = probe.address() as AddressInfo;
      probe.close(() => resolve(port));
    });
  });
}

test('SIGTERM to `npm run sluice -- serve` (as a supervisor stops it) reaches the runtime: it drains and releases its lock', async () => {
  const dataDir = tempDir();
  const lock = join(dataDir, 'runtime', 'owner.pid');
  const npm = spawn('npm', ['run', '-s', 'sluice', '--', 'serve', '--port', '0', '--data-dir', dataDir, '--admin-token', ADMIN_TOKEN, '--log-level', 'warn'], { cwd: ROOT, stdio: ['ignore', 'pipe', 'inherit'] });
  const output: string[] = [];
  createInterface({ input: npm.stdout }).on('line', (line) => output.push(line));
  const exited = new Promise<number | null>((done) => npm.once('exit', (code) => done(code)));
  try {
    await eventually('the runtime to listen', () => output, (lines) => lines.some((line) => line.startsWith('listening on')));
    npm.kill('SIGTERM');
    await exited;
    await eventually('the lock to be released', () => existsSync(lock), (held) => !held);
    assert.ok(output.includes('received SIGTERM, shutting down'), output.join('\n'));
  } finally {
    if (npm.exitCode === null) npm.kill('SIGKILL');
    // A runtime the signal never reached would hold the data dir with no parent: end it.
    if (existsSync(lock)) process.kill((JSON.parse(readFileSync(lock, 'utf8')) as { pid: number }).pid, 'SIGKILL');
    rmSync(dataDir, { recursive: true, force: true });
  }
});

test('a one-shot command whose output nobody reads (`| head`, closed before it writes) ends as it would, without an EPIPE stack', async () => {
  for (const args of [['help'], ['cron', '*/5 * * * *']]) {
    const child = spawn(process.execPath, ['--import', 'tsx', join(ROOT, 'runtime/cli.ts'), ...args], { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
    // Closed before the command writes its first line (it takes ~1 s to start).
    child.stdout.destroy();
    let stderr = '';
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString('utf8')));
    const code = await new Promise<number | null>((resolve) => child.on('exit', resolve));
    assert.deepEqual([code, stderr], [0, ''], args.join(' '));
  }
});
