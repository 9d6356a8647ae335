// A hook-runner reached over the network serves TLS (--tls-cert, --tls-key) and the runtime checks
// its certificate (--runner-ca): calls go through (no IP sent as the TLS server name), a plaintext
// client, one trusting another CA or reaching a certificate made for another IP is refused, flags
// given half, pointing at no PEM, at the key of another certificate or at a certificate out of its
// validity are refused at start, a key others may read is warned of, a listener that never answers
// the handshake is a call never sent, plaintext beyond loopback is warned of on both sides, and a
// runtime without --runner-ca at a TLS runner is told so. Certificates are made with the system's openssl for 127.0.0.1.

import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { X509Certificate } from 'node:crypto';
import { chmodSync, copyFileSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { loadRuntimeConfig } from '../../runtime/config.ts';
import { HookRunnerClient } from '../../runtime/hook-runner/client.ts';
import { connectRunner } from '../../runtime/hook-runner/connect-runner.ts';
import { readServingPair } from '../../hook-runner/tls-files.ts';
import { RunnerUnavailableError } from '../../runtime/hook-runner/runner-errors.ts';
import { createLogger } from '../../runtime/log.ts';
import { upload } from '../actions/action-fixtures.ts';
import { assembleWat, ECHO_WAT } from '../helpers/hook-runner-wat.ts';
import { spawnRunnerCommand, tempDataDir, type RunnerProcess } from '../helpers/hook-runner.ts';
import { call, createOrg } from '../helpers/http.ts';
import { selfSigned } from '../helpers/self-signed.ts';
import { silentListener } from '../helpers/silent-listener.ts';
import { eventually } from '../helpers/receiver.ts';
import { ADMIN_TOKEN, startRuntime } from '../helpers/runtime.ts';

const dataDir = tempDataDir();
let runner: RunnerProcess;
let address: string;
let token: string;
let own: { cert: string; key: string };
let other: { cert: string; key: string };

before(async () => {
  own = selfSigned(dataDir, 'runner');
  other = selfSigned(dataDir, 'stranger');
  runner = spawnRunnerCommand(['--listen', '127.0.0.1:0', '--data-dir', dataDir, '--tls-cert', own.cert, '--tls-key', own.key]);
  address = await runner.listening;
  token = readFileSync(join(dataDir, 'runner-token'), 'utf8').trim();
});
after(async () => {
  runner.process.kill('SIGTERM');
  await runner.exited;
});

describe('a hook-runner over TLS', () => {
  it('answers a client that trusts its certificate, and no other', async () => {
    const trusting = new HookRunnerClient(address, token, { tlsCa: readFileSync(own.cert), attempts: 1 });
    const plain = new HookRunnerClient(address, token, { attempts: 1 });
    const stranger = new HookRunnerClient(address, token, { tlsCa: readFileSync(other.cert), attempts: 1 });
    const warnings: string[] = [];
    const warned = (warning: Error): void => void warnings.push(`${warning.name}: ${warning.message}`);
    process.on('warning', warned);
    try {
      assert.equal((await trusting.health()).ok, true);
      // The first TLS connection of this process: an IP sent as the server name is warned of once (DEP0123).
      assert.deepEqual(warnings, [], 'no IP as the TLS server name');
      await assert.rejects(plain.health(), 'a plaintext client is not served');
      await assert.rejects(stranger.health(), (error: Error) => /its TLS certificate was not accepted/.test(error.message), 'a client trusting another CA refuses the certificate, and says so');
    } finally {
      process.off('warning', warned);
      for (const client of [trusting, plain, stranger]) client.close();
    }
  });

  it('refuses a certificate that names another IP than the one it is reached at', async () => {
    const dir = tempDataDir();
    const elsewhere = selfSigned(dir, 'elsewhere', '10.9.8.7');
    const misnamed = spawnRunnerCommand(['--listen', '127.0.0.1:0', '--data-dir', dir, '--tls-cert', elsewhere.cert, '--tls-key', elsewhere.key]);
    const client = new HookRunnerClient(await misnamed.listening, token, { tlsCa: readFileSync(elsewhere.cert), attempts: 1 });
    try {
      await assert.rejects(client.health(), (error: Error) => /its TLS certificate was not accepted/.test(error.message) && /IP: 127\.0\.0\.1 is not in the cert's list: 10\.9\.8\.7/.test(String((error.cause as Error | undefined)?.message)), 'checked against 127.0.0.1');
    } finally {
      client.close();
      misnamed.process.kill('SIGTERM');
      await misnamed.exited;
    }
  });

  it('serves a runtime started with --runner-ca: an upload compiles there and a simulation runs', async () => {
    const rt = await startRuntime({ dataDir, args: ['--runner', address, '--runner-ca', own.cert] });
    try {
      const key = await createOrg(rt.url, ADMIN_TOKEN, 'acct-tls');
      const uploaded = await upload(rt.url, '/organizations/acct-tls/custom-actions', key, { name: 'echo', file: await assembleWat('echo', ECHO_WAT) });
      assert.equal(uploaded.status, 201, uploaded.text);
      const id = (uploaded.body as { custom_action: { id: string } }).custom_action.id;
      const simulated = await call(rt.url, 'POST', `/organizations/acct-tls/custom-actions/${id}/simulate`, { token: key, json: { payload: { n: 1 } } });
      assert.equal(simulated.status, 200, simulated.text);
    } finally {
      await rt.close();
    }
  });

  it('warns when it serves, or the runtime reaches it, beyond loopback without TLS', async () => {
    const plaintext = spawnRunnerCommand(['--listen', '0.0.0.0:0', '--data-dir', tempDataDir()]);
    const encrypted = spawnRunnerCommand(['--listen', '0.0.0.0:0', '--data-dir', tempDataDir(), '--tls-cert', own.cert, '--tls-key', own.key]);
    try {
      await Promise.all([plaintext.listening, encrypted.listening]);
      assert.ok(plaintext.output.some((line) => /without TLS: the runner token and secret values cross the network unencrypted/.test(line)), plaintext.output.join('\n'));
      assert.equal(encrypted.output.some((line) => line.includes('without TLS')), false, encrypted.output.join('\n'));
    } finally {
      for (const started of [plaintext, encrypted]) started.process.kill('SIGTERM');
      await Promise.all([plaintext.exited, encrypted.exited]);
    }
    const warned = async (args: string[]): Promise<boolean> => {
      const lines: string[] = [];
      const config = loadRuntimeConfig(['--data-dir', tempDataDir(), ...args], {});
      const connection = await connectRunner(config, createLogger('warn', (line) => void lines.push(line)));
      await connection.close();
      return lines.some((line) => line.includes('without TLS'));
    };
    assert.equal(await warned(['--runner', '10.255.255.1:7878']), true);
    assert.equal(await warned(['--runner', '10.255.255.1:7878', '--runner-ca', own.cert]), false);
    assert.equal(await warned(['--runner', '127.0.0.1:7878']), false, 'loopback stays on this machine');

    // A certificate --runner-ca does not vouch for: the runtime logs why the handshake failed.
    const lines: string[] = [];
    const distrusting = await connectRunner(loadRuntimeConfig(['--data-dir', dataDir, '--runner', address, '--runner-ca', other.cert], {}), createLogger('warn', (line) => void lines.push(line)));
    try {
      await assert.rejects(distrusting.client?.health() ?? assert.fail('no client'), /TLS certificate was not accepted/);
      assert.ok(lines.some((line) => line.includes('the TLS handshake with the hook-runner failed') && /certificate/i.test(JSON.parse(line).reason)), lines.join('\n'));
    } finally {
      await distrusting.close();
    }

    // No --runner-ca at a runner that serves TLS: the calls fail as if it were down, and the line says what is missing.
    const plainLines: string[] = [];
    const plain = await connectRunner(loadRuntimeConfig(['--data-dir', dataDir, '--runner', address], {}), createLogger('warn', (line) => void plainLines.push(line)));
    try {
      await assert.rejects(plain.client?.health() ?? assert.fail('no client'), RunnerUnavailableError);
      await eventually('the line', () => plainLines.filter((line) => line.includes('hook-runner')), (found) => found.length > 0);
      assert.ok(plainLines.some((line) => line.includes('the hook-runner serves TLS and the runtime reaches it without') && line.includes('start Sluice with --runner-ca')), plainLines.join('\n'));
      assert.equal(plainLines.some((line) => line.includes('cannot be reached')), false);
    } finally {
      await plain.close();
    }
  });

  it('gives up on an address whose TLS handshake never completes as on a call never sent, and says so', async () => {
    // A listener that takes the connection and never answers the client's hello.
    const silent = await silentListener();
    const target = `127.0.0.1:${silent.port}`;
    const unreachable: string[] = [];
    const client = new HookRunnerClient(target, token, { tlsCa: readFileSync(own.cert), deadlinesMs: { invoke: 300 }, onUnreachable: (details) => void unreachable.push(details) });
    try {
      await assert.rejects(
        client.invoke({ orgId: 'org_a', actionId: 'act', digest: 'd', permissions: [], payloadJson: '{}', idempotencyKey: 'run_1:step', fence: 1 }),
        (error: unknown) => error instanceof RunnerUnavailableError && !error.mayHaveRun && /could not be reached within 300 ms \(Invoke\): no connection to it opened/.test(error.message),
      );
      assert.equal(unreachable.length, 1, 'one attempt: another would spend the deadline again');
      assert.ok(silent.connections() > 0, 'the connection was taken, its handshake left unanswered');
    } finally {
      client.close();
      await silent.close();
    }
  });

  it('refuses a certificate no client would accept at the time, and warns of a key others may read', async () => {
    const { validFrom, validTo } = new X509Certificate(readFileSync(own.cert));
    const refuse = (message: string): Error => new Error(message);
    assert.throws(() => readServingPair(own.cert, own.key, refuse, Date.parse(validTo) + 1000), /^Error: The TLS certificate .*runner\.crt expired at \d{4}-\d\d-\d\dT[\d:.]+Z: no client accepts it; give a renewed one\.$/);
    assert.throws(() => readServingPair(own.cert, own.key, refuse, Date.parse(validFrom) - 1000), /is not valid before .*: no client accepts it until then \(or this machine's clock is wrong\)\.$/);
    const key = join(tempDataDir(), 'shared.key');
    copyFileSync(own.key, key);
    chmodSync(key, 0o600);
    assert.equal(readServingPair(own.cert, key, refuse).keyReadableByOthers, false);
    chmodSync(key, 0o644);
    const loose = spawnRunnerCommand(['--listen', '127.0.0.1:0', '--data-dir', tempDataDir(), '--tls-cert', own.cert, '--tls-key', key]);
    try {
      await loose.listening;
      assert.ok(loose.output.some((line) => line.includes(`warning: the TLS key ${key} is readable by group or others`)), loose.output.join('\n'));
    } finally {
      loose.process.kill('SIGTERM');
      await loose.exited;
    }
  });

  it('refuses half the flags, a file holding no PEM, and --runner-ca for a runner it starts itself', async () => {
    const half = spawnRunnerCommand(['--listen', '127.0.0.1:0', '--data-dir', tempDataDir(), '--tls-cert', own.cert]);
    assert.equal(await half.exited, 2);
    assert.match(half.output.join('\n'), /--tls-cert and --tls-key go together/);
    const notPem = join(tempDataDir(), 'not.pem');
    writeFileSync(notPem, 'hello');
    const wrong = spawnRunnerCommand(['--listen', '127.0.0.1:0', '--data-dir', tempDataDir(), '--tls-cert', notPem, '--tls-key', own.key]);
    assert.equal(await wrong.exited, 2);
    assert.match(wrong.output.join('\n'), /The TLS certificate .*not\.pem holds no PEM block/);
    const mismatched = spawnRunnerCommand(['--listen', '127.0.0.1:0', '--data-dir', tempDataDir(), '--tls-cert', own.cert, '--tls-key', other.key]);
    assert.equal(await mismatched.exited, 2);
    assert.match(mismatched.output.join('\n'), /The TLS key .*stranger\.key is not the key of the certificate .*runner\.crt: give the key the certificate was made for/);
    const sealed = join(tempDataDir(), 'sealed.key');
    execFileSync('openssl', ['pkcs8', '-topk8', '-in', own.key, '-out', sealed, '-passout', 'pass:secret'], { stdio: 'ignore' });
    const encrypted = spawnRunnerCommand(['--listen', '127.0.0.1:0', '--data-dir', tempDataDir(), '--tls-cert', own.cert, '--tls-key', sealed]);
    assert.equal(await encrypted.exited, 2);
    assert.match(encrypted.output.join('\n'), /The TLS key .*sealed\.key is encrypted with a passphrase; give the key unencrypted/);
    assert.throws(() => loadRuntimeConfig(['--runner', 'child', '--runner-ca', own.cert], {}), /--runner-ca is for a runner reached at host:port/);
    assert.throws(() => loadRuntimeConfig(['--runner', 'unix:/tmp/r.sock', '--runner-ca', own.cert], {}), /a unix socket, reached without TLS/);
    await assert.rejects(startRuntime({ args: ['--runner', address, '--runner-ca', notPem] }), /--runner-ca .*not\.pem holds no PEM block/);
  });
});
