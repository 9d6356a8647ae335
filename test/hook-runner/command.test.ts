// The runner as a command (hook-runner/main.ts): generated 0600 token and master-key files, unix
// socket listening, clean exit on SIGTERM, and clear refusals of bad flags, keys and key files.
import assert from 'node:assert/strict';
import { chmodSync, existsSync, mkdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { HookRunnerClient } from '../../runtime/hook-runner/client.ts';
import { logLine, parseCompileLimits, parseHookRunnerFlags } from '../../hook-runner/command.ts';
import { parseListenAddress } from '../../hook-runner/listen-address.ts';
import { RunnerConfigError } from '../../hook-runner/runner-error.ts';
import { spawnRunnerCommand as spawnRunner, tempDataDir } from '../helpers/hook-runner.ts';

describe('hook-runner command', () => {
  it('generates a 0600 token file and master key, serves with them, and stops on SIGTERM', async () => {
    const dataDir = tempDataDir();
    const runner = spawnRunner(['--listen', '127.0.0.1:0', '--data-dir', dataDir]);
    const address = await runner.listening;
    assert.match(address, /^127\.0\.0\.1:\d+$/);
    for (const file of [join(dataDir, 'runner-token'), join(dataDir, 'hook-runner', 'master.key')]) {
      assert.equal(statSync(file).mode & 0o777, 0o600, file);
    }
    const client = new HookRunnerClient(address, readFileSync(join(dataDir, 'runner-token'), 'utf8').trim());
    assert.equal((await client.health()).ok, true);
    client.close();
    runner.process.kill('SIGTERM');
    assert.equal(await runner.exited, 0);
    assert.ok(runner.output.some((line) => line.includes('stopping (SIGTERM)')), runner.output.join('\n'));
  });

  it('takes its data directory from SLUICE_DATA_DIR, as the runtime does, so both find the same token file; a blank SLUICE_RUNNER_TOKEN counts as not set', async () => {
    const dataDir = tempDataDir();
    const runner = spawnRunner(['--listen', '127.0.0.1:0'], { SLUICE_DATA_DIR: dataDir, SLUICE_RUNNER_TOKEN: ' ' }, tempDataDir());
    const address = await runner.listening;
    const client = new HookRunnerClient(address, readFileSync(join(dataDir, 'runner-token'), 'utf8').trim());
    assert.equal((await client.health()).ok, true);
    client.close();
    assert.equal(statSync(join(dataDir, 'hook-runner', 'master.key')).mode & 0o777, 0o600, 'its vault key is there too');
    runner.process.kill('SIGTERM');
    assert.equal(await runner.exited, 0);
  });

  it('refuses to start afresh in SLUICE_DATA_DIR while ./.sluice holds the store it used before reading the variable; --data-dir decides', async () => {
    const workDir = tempDataDir();
    const earlier = spawnRunner(['--listen', '127.0.0.1:0', '--data-dir', join(workDir, '.sluice')]);
    await earlier.listening;
    earlier.process.kill('SIGTERM');
    assert.equal(await earlier.exited, 0);
    // A store this release opened (as `sluice dev`'s child does) was not left behind: the runner starts.
    const devStore = spawnRunner(['--listen', '127.0.0.1:0'], { SLUICE_DATA_DIR: tempDataDir() }, workDir);
    await devStore.listening;
    devStore.process.kill('SIGTERM');
    assert.equal(await devStore.exited, 0);
    // An unmarked store beside a runtime's data may be an earlier `sluice dev`'s or this runner's own:
    // refused before anything is created in SLUICE_DATA_DIR, saying both and how to go on.
    rmSync(join(workDir, '.sluice', 'hook-runner', 'reads-sluice-data-dir'));
    mkdirSync(join(workDir, '.sluice', 'runtime'));
    const unsure = tempDataDir();
    const olderDev = spawnRunner(['--listen', '127.0.0.1:0'], { SLUICE_DATA_DIR: unsure }, workDir);
    const outcome = await Promise.race([olderDev.exited, olderDev.listening.then(() => 'listening', () => 'no listen line')]);
    if (outcome === 'listening') olderDev.process.kill('SIGTERM');
    assert.equal(outcome === 'listening' ? 'listening' : await olderDev.exited, 2);
    assert.match(olderDev.output.join('\n'), /holds one of an earlier release: sluice dev's .* or this runner's own .* pass --data-dir .* move /);
    assert.equal(existsSync(join(unsure, 'hook-runner')), false, 'nothing was created where the store would be moved to');
    // One kept there alone by a release before the runner read SLUICE_DATA_DIR has neither.
    rmSync(join(workDir, '.sluice', 'runtime'), { recursive: true });
    const dataDir = tempDataDir();
    const refused = spawnRunner(['--listen', '127.0.0.1:0'], { SLUICE_DATA_DIR: dataDir }, workDir);
    assert.equal(await refused.exited, 2);
    assert.match(refused.output.join('\n'), /holds no hook-runner store yet, but .*\.sluice\/hook-runner holds one that a release before/);
    const chosen = spawnRunner(['--listen', '127.0.0.1:0', '--data-dir', dataDir], { SLUICE_DATA_DIR: dataDir }, workDir);
    await chosen.listening;
    chosen.process.kill('SIGTERM');
    assert.equal(await chosen.exited, 0);
  });

  it('listens on a unix socket, and reclaims it after a crash', async () => {
    const dataDir = tempDataDir();
    const socket = join(dataDir, 'runner.sock');
    const env = { SLUICE_RUNNER_TOKEN: 'unix-socket-token-0123456789' };
    const first = spawnRunner(['--listen', `unix:${socket}`, '--data-dir', dataDir], env);
    assert.equal(await first.listening, `unix:${socket}`);
    first.process.kill('SIGKILL');
    await first.exited;
    const second = spawnRunner(['--listen', `unix:${socket}`, '--data-dir', dataDir], env);
    const client = new HookRunnerClient(await second.listening, env.SLUICE_RUNNER_TOKEN);
    assert.equal((await client.health()).ok, true);
    client.close();
    second.process.kill('SIGINT');
    assert.equal(await second.exited, 0);
  });

  it('refuses a bad master key, a group-readable token file and unknown flags with exit code 2', async () => {
    const badKey = spawnRunner(['--listen', '127.0.0.1:0', '--data-dir', tempDataDir()], { SLUICE_MASTER_KEY: 'deadbeef' });
    assert.equal(await badKey.exited, 2);
    assert.match(badKey.output.join('\n'), /SLUICE_MASTER_KEY must be 64 hex characters or the base64 encoding of exactly 32 bytes/);
    assert.doesNotMatch(badKey.output.join('\n'), /deadbeef/);

    const dataDir = tempDataDir();
    const ok = spawnRunner(['--listen', '127.0.0.1:0', '--data-dir', dataDir]);
    await ok.listening;
    ok.process.kill('SIGTERM');
    await ok.exited;
    chmodSync(join(dataDir, 'runner-token'), 0o644);
    const exposed = spawnRunner(['--listen', '127.0.0.1:0', '--data-dir', dataDir]);
    assert.equal(await exposed.exited, 2);
    assert.match(exposed.output.join('\n'), /runner-token is readable by group or others/);

    const unknown = spawnRunner(['--port', '1']);
    assert.equal(await unknown.exited, 2);
    assert.match(unknown.output.join('\n'), /Unknown argument --port/);
  });
});

describe('flag and address parsing', () => {
  it('reads --listen and --data-dir in both forms, with defaults', () => {
    assert.deepEqual(parseHookRunnerFlags([]), { listen: '127.0.0.1:7878', dataDir: join(process.cwd(), '.sluice'), dataDirFlag: false, minFreeDiskMib: 256, help: false });
    assert.deepEqual(parseHookRunnerFlags(['--listen=[::1]:0', '--data-dir', '/tmp/x']), { listen: '[::1]:0', dataDir: '/tmp/x', dataDirFlag: true, minFreeDiskMib: 256, help: false });
    assert.equal(parseHookRunnerFlags([], { SLUICE_DATA_DIR: '/tmp/from-env' }).dataDir, '/tmp/from-env');
    assert.equal(parseHookRunnerFlags(['--data-dir', '/tmp/x'], { SLUICE_DATA_DIR: '/tmp/from-env' }).dataDir, '/tmp/x', 'the flag wins');
    assert.equal(parseHookRunnerFlags([], { SLUICE_DATA_DIR: ' ' }).dataDir, join(process.cwd(), '.sluice'), 'blank is not set');
    assert.throws(() => parseHookRunnerFlags(['--listen']), RunnerConfigError);
    assert.throws(() => parseHookRunnerFlags(['--listen', 'nonsense']), RunnerConfigError);
    assert.throws(() => parseHookRunnerFlags(['--data-dir', '/tmp/x', '--data-dir=/tmp/y']), /--data-dir is given more than once; give it once\./);
    assert.deepEqual(parseHookRunnerFlags(['--tls-cert', '/tmp/c.pem', '--tls-key=/tmp/k.pem']).tls, { certFile: '/tmp/c.pem', keyFile: '/tmp/k.pem' });
    assert.deepEqual(parseHookRunnerFlags(['--tls-key', '/tmp/k.pem'], { SLUICE_RUNNER_TLS_CERT: '/tmp/env.pem' }).tls, { certFile: '/tmp/env.pem', keyFile: '/tmp/k.pem' });
    assert.throws(() => parseHookRunnerFlags(['--listen', 'unix:/tmp/r.sock', '--tls-cert', '/tmp/c.pem', '--tls-key', '/tmp/k.pem']), /a unix socket is reached only on this machine/);
  });

  it('writes each log entry as one line, a stack joined', () => {
    assert.equal(logLine('hook-runner: error: x failed: Error: boom\n    at f (a.ts:1:1)\n  caused by: y'), 'hook-runner: error: x failed: Error: boom\\n    at f (a.ts:1:1)\\n  caused by: y\n');
  });

  it('reads the compile limits from the environment, refusing values out of range by name', () => {
    assert.deepEqual(parseCompileLimits({}), {});
    assert.deepEqual(parseCompileLimits({ SLUICE_COMPILE_TIMEOUT_S: '5', SLUICE_COMPILE_MAX_MEMORY_MIB: '512' }), { timeoutMs: 5000, maxMemoryBytes: 512 * 1024 * 1024 });
    assert.deepEqual(parseCompileLimits({ SLUICE_COMPILE_TIMEOUT_S: ' ' }), {}, 'blank is not set');
    for (const [name, value] of [['SLUICE_COMPILE_TIMEOUT_S', '0'], ['SLUICE_COMPILE_TIMEOUT_S', '601'], ['SLUICE_COMPILE_TIMEOUT_S', '2.5'], ['SLUICE_COMPILE_MAX_MEMORY_MIB', '255'], ['SLUICE_COMPILE_MAX_MEMORY_MIB', 'lots']] as const) {
      assert.throws(() => parseCompileLimits({ [name]: value }), (error: Error) => error instanceof RunnerConfigError && error.message.startsWith(`${name} must be a whole number`), `${name}=${value}`);
    }
  });

  it('parses tcp and unix addresses', () => {
    assert.deepEqual(parseListenAddress('127.0.0.1:0'), { kind: 'tcp', host: '127.0.0.1', port: 0 });
    assert.deepEqual(parseListenAddress('[::1]:7878'), { kind: 'tcp', host: '::1', port: 7878 });
    assert.deepEqual(parseListenAddress('unix:///run/sluice.sock'), { kind: 'unix', path: '/run/sluice.sock' });
    for (const bad of ['127.0.0.1', ':80', 'host:65536', 'unix:', 'a b:1']) assert.throws(() => parseListenAddress(bad), RunnerConfigError, bad);
  });
});
