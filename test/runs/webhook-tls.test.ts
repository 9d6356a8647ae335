// TLS on webhook attempts against real local receivers: a handshake that fails sends nothing, and
// its refusal says why in one sentence (a certificate no authority vouches for, plain HTTP at an
// https url, no TLS version in common); NODE_EXTRA_CA_CERTS is honoured; a receiver that wants a
// client certificate ends the connection as the request goes out. The rest: webhook-send.test.ts.

import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import type { Server } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import { createServer as createNetServer, type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { createServer as createTlsServer, type Server as TlsServer } from 'node:tls';
import { promisify } from 'node:util';
import type { WebhookOutcome } from '../../runtime/runs/webhook-step.ts';
import { selfSigned } from '../helpers/self-signed.ts';
import { attempt, closedAfterTests, errorOf, serve } from '../helpers/webhook-attempts.ts';

test('a connection whose TLS handshake fails sent nothing (no started_at); one dropped once open may have carried the request', async () => {
  const dropping = createNetServer((socket) => socket.destroy());
  await new Promise<void>((resolve) => dropping.listen(0, '127.0.0.1', resolve));
  try {
    const port = (dropping.address() as AddressInfo).port;
    const tls = await attempt(`https://127.0.0.1:${port}/hook`);
    assert.equal(errorOf(tls)?.code, 'webhook_network_error');
    assert.match(errorOf(tls)?.message ?? '', /^The request was not sent: .*The receiver was not reached\.$/);
    assert.equal('sentAt' in tls, false, 'the handshake never completed: nothing went out');
    const plain = await attempt(`http://127.0.0.1:${port}/hook`);
    assert.equal(errorOf(plain)?.code, 'webhook_network_error');
    assert.equal(typeof (plain as { sentAt?: number }).sentAt, 'number', 'a connection that opened may have carried it');
  } finally {
    await new Promise((resolve) => dropping.close(resolve));
  }
});

/** A self-signed certificate for 127.0.0.1 in a temp dir (removed by the caller), and its PEM contents. */
function receiverCertificate(): { dir: string; pair: { cert: string; key: string }; credentials: { cert: Buffer; key: Buffer } } {
  const dir = mkdtempSync(join(tmpdir(), 'sluice-tls-receiver-'));
  const pair = selfSigned(dir, 'receiver');
  return { dir, pair, credentials: { cert: readFileSync(pair.cert), key: readFileSync(pair.key) } };
}

/** Listens on a free loopback port, closed after the file's tests; answers the port. */
async function listenOnLoopback(server: Server | TlsServer): Promise<number> {
  closedAfterTests(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return (server.address() as AddressInfo).port;
}

test('a TLS handshake refused sent nothing and says why in one sentence with its code: a certificate no authority vouches for, plain HTTP at an https url, no TLS version in common', async () => {
  const { dir, credentials } = receiverCertificate();
  try {
    const selfSignedPort = await listenOnLoopback(createHttpsServer(credentials, (_req, res) => res.end('{}')));
    const plain = await serve((_req, res) => res.writeHead(200).end('{}'));
    const oldTlsPort = await listenOnLoopback(createTlsServer({ ...credentials, minVersion: 'TLSv1', maxVersion: 'TLSv1.1', ciphers: 'DEFAULT@SECLEVEL=0' }));
    const cases = [
      [`https://127.0.0.1:${selfSignedPort}/hook`, 'DEPTH_ZERO_SELF_SIGNED_CERT', /^Nothing was sent: the receiver's TLS certificate was refused \(DEPTH_ZERO_SELF_SIGNED_CERT: self[- ]signed certificate\); Sluice trusts the system's certificate authorities and those in NODE_EXTRA_CA_CERTS\.$/],
      [plain.url.replace('http:', 'https:'), 'ERR_SSL_WRONG_VERSION_NUMBER', /^Nothing was sent: the receiver did not answer in TLS \(is it plain HTTP at this port\? then the url is http:\/\/\) \(ERR_SSL_WRONG_VERSION_NUMBER\)\.$/],
      [`https://127.0.0.1:${oldTlsPort}/hook`, undefined, /^Nothing was sent: (the receiver and Sluice share no TLS version \(Sluice speaks TLS 1\.2 and 1\.3\)|the TLS handshake failed: [a-z0-9 ]+) \(ERR_SSL_[A-Z0-9_]+\)\.$/],
    ] as const;
    for (const [url, code, message] of cases) {
      const outcome = await attempt(url);
      const error = errorOf(outcome);
      assert.equal(error?.code, 'webhook_tls_error', `${url}: ${JSON.stringify(outcome)}`);
      assert.match(error?.message ?? '', message);
      assert.equal(error?.message.includes('\n'), false, 'one line');
      assert.equal(outcome.ok ? undefined : outcome.error.retryable, true, 'retried: a receiver renews its certificate');
      const tlsError = (outcome.evidence as { tls_error?: string }).tls_error;
      if (code === undefined) assert.match(tlsError ?? '', /^ERR_SSL_/);
      else assert.equal(tlsError, code);
      assert.equal('sentAt' in outcome, false, 'the handshake never completed: nothing went out');
    }
    assert.equal(plain.requests.length, 0);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('a receiver whose authority NODE_EXTRA_CA_CERTS names is reached; one that requires a client certificate (TLS 1.3) ends the connection as the request goes out: webhook_tls_error, counted as sent', async () => {
  const { dir, pair, credentials } = receiverCertificate();
  try {
    const trusted = `https://127.0.0.1:${await listenOnLoopback(createHttpsServer(credentials, (_req, res) => res.end('{"ok":true}')))}/hook`;
    const wantsClientCertificate = `https://127.0.0.1:${await listenOnLoopback(createHttpsServer({ ...credentials, ca: [credentials.cert], requestCert: true, rejectUnauthorized: true, minVersion: 'TLSv1.3' }, (_req, res) => res.end('{}')))}/hook`;
    // Node reads NODE_EXTRA_CA_CERTS once, when a process starts: the attempts are made in a child given it.
    const script = `
      import { OutboundConnections } from './runtime/runs/outbound-connections.ts';
      import { sendWebhook } from './runtime/runs/webhook-step.ts';
      const connections = new OutboundConnections(undefined, 'any');
      for (const url of process.argv.slice(1)) {
        const outcome = await sendWebhook({ orgId: 'acct-a', url, headers: {}, timeoutMs: 5000, body: '{}', idempotencyKey: 'run_1:step_1', fence: 1, attempt: 1, signingSecrets: () => [], nowMs: 0 }, { selfPort: 1, connections });
        process.stdout.write(JSON.stringify(outcome) + '\\n');
      }
      connections.close();
    `;
    // Not spawnSync: the receivers answer from this process's event loop.
    const { stdout } = await promisify(execFile)(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script, trusted, wantsClientCertificate], {
      cwd: join(import.meta.dirname, '..', '..'),
      env: { ...process.env, NODE_EXTRA_CA_CERTS: pair.cert },
      timeout: 60_000,
    });
    const [reached, refused] = stdout.trim().split('\n').map((line) => JSON.parse(line) as WebhookOutcome);
    assert.equal(reached?.ok, true, JSON.stringify(reached));
    assert.equal(errorOf(refused!)?.code, 'webhook_tls_error', JSON.stringify(refused));
    assert.equal(errorOf(refused!)?.message, 'The receiver ended the TLS connection as the request went out: the receiver requires a client certificate, which Sluice does not present (ERR_SSL_TLSV13_ALERT_CERTIFICATE_REQUIRED).');
    assert.equal((refused!.evidence as { tls_error?: string }).tls_error, 'ERR_SSL_TLSV13_ALERT_CERTIFICATE_REQUIRED');
    assert.equal(typeof (refused as { sentAt?: number }).sentAt, 'number', 'the request had gone out on the finished handshake');
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
