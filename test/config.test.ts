// The runtime's configuration: defaults, flags over environment variables, and a clear 400-style
// error naming the setting for a value out of range.

import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { test } from 'node:test';
import { DEV_DEFAULTS, loadRuntimeConfig } from '../runtime/config.ts';
import { InputError } from '../runtime/errors.ts';
import { ResolvConf } from '../runtime/runs/search-domains.ts';

test('webhook connections: 32 by default, the environment sets it, a flag wins over the environment', () => {
  assert.equal(loadRuntimeConfig([], {}).webhookConnections, 32);
  assert.equal(loadRuntimeConfig([], { SLUICE_WEBHOOK_CONNECTIONS: '8' }).webhookConnections, 8);
  assert.equal(loadRuntimeConfig(['--webhook-connections', '4'], { SLUICE_WEBHOOK_CONNECTIONS: '8' }).webhookConnections, 4);
});

test('max queued runs per org: 100,000 by default, set by the environment or a flag; 0 or a fraction refused', () => {
  assert.equal(loadRuntimeConfig([], {}).maxQueuedRuns, 100_000);
  assert.equal(loadRuntimeConfig([], { SLUICE_MAX_QUEUED_RUNS: '500' }).maxQueuedRuns, 500);
  assert.equal(loadRuntimeConfig(['--max-queued-runs', '7'], { SLUICE_MAX_QUEUED_RUNS: '500' }).maxQueuedRuns, 7);
  for (const bad of ['0', '2.5', '100000001']) {
    assert.throws(() => loadRuntimeConfig(['--max-queued-runs', bad], {}), (error: unknown) => error instanceof InputError && error.message.includes('--max-queued-runs'));
  }
});

test('webhook connections outside 1-1000 or not an integer are refused, naming the flag', () => {
  for (const bad of ['0', '1001', '2.5', 'many']) {
    assert.throws(
      () => loadRuntimeConfig(['--webhook-connections', bad], {}),
      (error: unknown) => error instanceof InputError && error.code === 'invalid_config' && error.message.includes('--webhook-connections') && error.message.includes(`"${bad}"`),
    );
  }
});

test('a bad value from the environment is refused naming the variable, one from a flag naming the flag', () => {
  const refusal = (args: string[], env: NodeJS.ProcessEnv): string => {
    try {
      loadRuntimeConfig(args, env);
    } catch (error) {
      assert.ok(error instanceof InputError && error.code === 'invalid_config');
      return error.message;
    }
    return assert.fail('accepted');
  };
  assert.match(refusal([], { SLUICE_PORT: 'abc' }), /^SLUICE_PORT must be an integer/);
  assert.match(refusal(['--port', 'abc'], { SLUICE_PORT: '8787' }), /^--port must be an integer/);
  assert.match(refusal([], { SLUICE_RUNNER: 'bogus' }), /^SLUICE_RUNNER must be "child", "off"/);
  assert.match(refusal(['--runner', 'bogus'], {}), /^--runner must be/);
  for (const address of ['127.0.0.1:99999', '127.0.0.1:0', 'runner.internal:65536']) assert.match(refusal(['--runner', address], {}), /a port from 1 to 65535/, address);
  assert.deepEqual(loadRuntimeConfig(['--runner', 'runner.internal:65535'], {}).runner, { address: 'runner.internal:65535' });
  // A socket path as `sluice hook-runner --listen` takes it: relative to the working directory.
  assert.deepEqual(loadRuntimeConfig(['--runner', 'unix:run/runner.sock'], {}).runner, { address: `unix:${process.cwd()}/run/runner.sock` });
  assert.deepEqual(loadRuntimeConfig(['--runner', 'unix:///run/runner.sock'], {}).runner, { address: 'unix:/run/runner.sock' });
  assert.match(refusal([], { SLUICE_LOG_LEVEL: 'INFO' }), /^SLUICE_LOG_LEVEL must be debug, info/);
  assert.match(refusal(['--log-level', 'loud'], { SLUICE_LOG_LEVEL: 'info' }), /^--log-level must be debug, info/);
  assert.match(refusal([], { SLUICE_WEBHOOK_TARGETS: 'some' }), /^SLUICE_WEBHOOK_TARGETS must be "public" or "any"/);
  assert.match(refusal([], { SLUICE_RETENTION_DAYS: '0' }), /^SLUICE_RETENTION_DAYS must be an integer from 1/);
  assert.match(refusal(['--runner', 'child'], { SLUICE_RUNNER_TOKEN: 'short' }), /^SLUICE_RUNNER_TOKEN must be at least 16 visible ASCII characters/);
  assert.equal(loadRuntimeConfig(['--runner', 'off'], { SLUICE_RUNNER_TOKEN: 'short' }).runnerToken, undefined, 'unread without a runner');
});

test('a blank environment variable means "not set": SLUICE_HOST= stays on loopback, SLUICE_DATA_DIR= on ./.sluice', () => {
  const config = loadRuntimeConfig([], { SLUICE_HOST: '', SLUICE_DATA_DIR: ' ', SLUICE_LOG_LEVEL: '', SLUICE_RUNNER: '', SLUICE_RUNNER_TOKEN: '' });
  assert.equal(config.host, '127.0.0.1');
  assert.equal(config.runnerToken, undefined, 'the token file is used');
  assert.equal(config.dataDir, resolve('./.sluice'));
  assert.equal(config.logLevel, 'info');
  assert.equal(config.runner, 'off');
  assert.equal(loadRuntimeConfig([], { SLUICE_HOST: '0.0.0.0' }).host, '0.0.0.0');
});

test('an empty flag is refused, naming it', () => {
  for (const flag of ['--host', '--data-dir', '--admin-token', '--runner']) {
    assert.throws(
      () => loadRuntimeConfig([flag, ''], {}),
      (error: unknown) => error instanceof InputError && error.code === 'invalid_config' && error.message === `${flag} must not be empty.`,
    );
  }
});

test('an explicit admin token must be 16-512 visible ASCII characters (a bearer header carries it as it is)', () => {
  const good = 'a'.repeat(16);
  assert.equal(loadRuntimeConfig(['--admin-token', good], {}).adminToken, good);
  assert.equal(loadRuntimeConfig([], { SLUICE_ADMIN_TOKEN: good }).adminToken, good);
  assert.equal(loadRuntimeConfig([], { SLUICE_ADMIN_TOKEN: '' }).adminToken, undefined, 'blank: the token file is used');
  for (const bad of ['x', 'a'.repeat(15), `${'a'.repeat(10)} ${'a'.repeat(10)}`, 'a'.repeat(513), 'é'.repeat(17), `${'a'.repeat(16)}\u0001`]) {
    assert.throws(
      () => loadRuntimeConfig(['--admin-token', bad], {}),
      (error: unknown) => error instanceof InputError && error.message.includes('16-512 visible ASCII characters (no spaces)'),
    );
  }
});

test('numeric settings: blank environment values count as not set, empty flags and anything but decimal digits are refused', () => {
  const blank = loadRuntimeConfig([], { SLUICE_PORT: ' ', SLUICE_DEDUP_WINDOW_MS: '', SLUICE_LIVE_RETENTION: ' ', SLUICE_WEBHOOK_CONNECTIONS: '' });
  assert.deepEqual([blank.port, blank.liveRetention, blank.webhookConnections], [8787, 10_000, 32]);
  for (const flag of ['--port', '--dedup-window-ms', '--retention-days', '--live-retention', '--webhook-connections']) {
    assert.throws(() => loadRuntimeConfig([flag, ''], {}), (error: unknown) => error instanceof InputError && error.message === `${flag} must not be empty.`);
  }
  for (const bad of ['0x1f90', '8e3', '+80', '80.0', ' 80']) {
    assert.throws(() => loadRuntimeConfig([], { SLUICE_PORT: bad }), (error: unknown) => error instanceof InputError && error.message.includes('SLUICE_PORT'), bad);
  }
  assert.equal(loadRuntimeConfig([], { SLUICE_PORT: '8080' }).port, 8080);
});

test('history retention: 30 days by default, set by flag or environment, never shorter than the dedup window', () => {
  assert.equal(loadRuntimeConfig([], {}).retentionDays, 30);
  assert.equal(loadRuntimeConfig(['--retention-days', '90'], {}).retentionDays, 90);
  assert.equal(loadRuntimeConfig([], { SLUICE_RETENTION_DAYS: '7' }).retentionDays, 7, 'exactly the default 7-day window');
  assert.throws(() => loadRuntimeConfig(['--retention-days', '6'], {}), (error: unknown) => error instanceof InputError && error.message === '--retention-days (6) must cover the dedup window (its default, 604800000 ms, 7 days): give it 7 or more.');
  // Each setting named as it was given, the window in rounded days.
  assert.throws(() => loadRuntimeConfig([], { SLUICE_DEDUP_WINDOW_MS: '864000000', SLUICE_RETENTION_DAYS: '5' }), (error: unknown) => error instanceof InputError && error.message === 'SLUICE_RETENTION_DAYS (5) must cover the dedup window, SLUICE_DEDUP_WINDOW_MS (864000000 ms, about 10 days): give it 10 or more.');
  assert.throws(() => loadRuntimeConfig(['--dedup-window-ms', '100000000', '--retention-days', '1'], {}), (error: unknown) => error instanceof InputError && error.message === '--retention-days (1) must cover the dedup window, --dedup-window-ms (100000000 ms, about 1.16 days): give it 2 or more.');
  assert.equal(loadRuntimeConfig(['--retention-days', '1', '--dedup-window-ms', '3600000'], {}).retentionDays, 1);
  // Never shorter than a signature verifies (±300 s around its timestamp, whole seconds: 601 s): a replay would pass as new.
  assert.throws(() => loadRuntimeConfig(['--dedup-window-ms', '600999'], {}), (error: unknown) => error instanceof InputError && /--dedup-window-ms must be an integer from 601000/.test(error.message));
  assert.equal(loadRuntimeConfig(['--dedup-window-ms', '601000'], {}).dedupWindowMs, 601_000);
  assert.equal(loadRuntimeConfig([], { SLUICE_DEDUP_WINDOW_MS: String(45 * 86_400_000) }).retentionDays, 45, 'unset, it covers a longer window');
  assert.throws(() => loadRuntimeConfig(['--retention-days', '0'], {}), (error: unknown) => error instanceof InputError && error.message.includes('from 1 to 3650'));
});

test('webhook targets: public under serve, any under dev, either by flag or environment, nothing else', () => {
  assert.equal(loadRuntimeConfig([], {}).webhookTargets, 'public');
  assert.equal(loadRuntimeConfig([], {}, DEV_DEFAULTS).webhookTargets, 'any');
  assert.equal(loadRuntimeConfig(['--webhook-targets', 'any'], {}).webhookTargets, 'any');
  assert.equal(loadRuntimeConfig([], { SLUICE_WEBHOOK_TARGETS: 'public' }, DEV_DEFAULTS).webhookTargets, 'public');
  assert.throws(() => loadRuntimeConfig(['--webhook-targets', 'private'], {}), (error: unknown) => error instanceof InputError && error.message.includes('"public" or "any"'));
});

test('the resolver\'s environment (LOCALDOMAIN, RES_OPTIONS) is read with the rest of the configuration, and only there', () => {
  assert.deepEqual(loadRuntimeConfig([], { LOCALDOMAIN: 'corp.example', RES_OPTIONS: 'ndots:3' }).resolverEnv, { LOCALDOMAIN: 'corp.example', RES_OPTIONS: 'ndots:3' });
  assert.deepEqual(loadRuntimeConfig([], {}).resolverEnv, { LOCALDOMAIN: undefined, RES_OPTIONS: undefined });
  // A resolver made without it follows resolv.conf alone, whatever this process's environment says.
  const saved = process.env['LOCALDOMAIN'];
  process.env['LOCALDOMAIN'] = 'from-process.example';
  try {
    const dir = mkdtempSync(join(tmpdir(), 'sluice-resolv-'));
    writeFileSync(join(dir, 'resolv.conf'), 'search file.example\n');
    assert.deepEqual(new ResolvConf(join(dir, 'resolv.conf')).candidates('svc'), ['svc.file.example', 'svc']);
    rmSync(dir, { recursive: true, force: true });
  } finally {
    if (saved === undefined) delete process.env['LOCALDOMAIN'];
    else process.env['LOCALDOMAIN'] = saved;
  }
});
