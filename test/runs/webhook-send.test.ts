// One webhook attempt against real local HTTP servers: answers and their evidence, the body cap,
// redirects not followed, Retry-After, refused and cut-off connections, the deadline (a body still
// arriving at it is cut off; on mocked timers, no real wait), keep-alive reuse of one connection,
// and the per-org connection cap.

import assert from 'node:assert/strict';
import { execFile, spawnSync } from 'node:child_process';
import diagnostics from 'node:diagnostics_channel';
import { Agent, createServer, type AgentOptions, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { createServer as createNetServer, type AddressInfo, type Socket } from 'node:net';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer as createHttpsServer } from 'node:https';
import { networkInterfaces, tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { createServer as createTlsServer, type Server as TlsServer } from 'node:tls';
import { after, mock, test } from 'node:test';
import { OutboundConnections, type OutboundPool } from '../../runtime/runs/outbound-connections.ts';
import { postOnce, PostTimeoutError } from '../../runtime/runs/outbound-post.ts';
import { eventually } from '../helpers/receiver.ts';
import { selfSigned } from '../helpers/self-signed.ts';
import { EVIDENCE_BODY_CAP, sendWebhook, targetsSelf, type WebhookOutcome, type WebhookRequest } from '../../runtime/runs/webhook-step.ts';

const servers: Server[] = [];
const pools: OutboundConnections[] = [];
after(() => {
  for (const pool of pools) pool.close();
  return Promise.all(servers.map((server) => new Promise((resolve) => server.close(resolve))));
});

function connectionPool(perReceiver?: number): OutboundConnections {
  // The receivers here are local: allowed under `any` (the `public` policy has its own tests).
  const pool = new OutboundConnections(perReceiver, 'any');
  pools.push(pool);
  return pool;
}
const defaultPool = connectionPool();

interface Local {
  readonly url: string;
  readonly requests: string[];
  connections: number;
}

async function serve(handle: (req: IncomingMessage, res: ServerResponse) => void): Promise<Local> {
  const requests: string[] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      requests.push(Buffer.concat(chunks).toString('utf8'));
      handle(req, res);
    });
  });
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const local: Local = { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`, requests, connections: 0 };
  server.on('connection', () => {
    local.connections += 1;
  });
  return local;
}

const attempt = (url: string, overrides: Partial<WebhookRequest> = {}, connections = defaultPool): Promise<WebhookOutcome> =>
  sendWebhook(
    { orgId: 'acct-a', url, headers: {}, timeoutMs: 5000, body: '{"n":1}', idempotencyKey: 'run_1:step_1', fence: 1, attempt: 1, signingSecrets: [], nowMs: Date.UTC(2026, 10, 30), ...overrides },
    { selfPort: 1, connections },
  );

/** Moves the mocked clock by `ms` and tells whether `pending` settled meanwhile. */
async function settlesWithin(pending: Promise<unknown>, ms: number): Promise<boolean> {
  let settled = false;
  void pending.then(() => {
    settled = true;
  });
  mock.timers.tick(ms);
  await new Promise((resolve) => setImmediate(resolve));
  return settled;
}

const errorOf = (outcome: WebhookOutcome) => {
  assert.equal(outcome.ok, false);
  return outcome.ok ? undefined : outcome.error;
};

test('a 2xx answer succeeds with its status and body; the request carries the body and step key', async () => {
  const local = await serve((_req, res) => res.writeHead(201).end('{"crm":"ok"}'));
  let stillSending = 0;
  const outcome = await attempt(local.url, { stillSending: () => void (stillSending += 1) });
  assert.equal(outcome.ok, true);
  assert.equal(stillSending, 0, 'a receiver that read the body before answering holds nothing past the step');
  assert.deepEqual(outcome.ok ? outcome.result : null, { status: 201, body: '{"crm":"ok"}' });
  assert.equal((outcome.evidence as Record<string, unknown>)['body_bytes'], 12);
  assert.deepEqual(local.requests, ['{"n":1}']);
});

test('the User-Agent is Sluice-Webhooks/1 unless the step sets its own', async () => {
  const agents: (string | undefined)[] = [];
  const local = await serve((req, res) => {
    agents.push(req.headers['user-agent']);
    res.writeHead(204).end();
  });
  assert.equal((await attempt(local.url)).ok, true);
  assert.equal((await attempt(local.url, { headers: { 'User-Agent': 'acme-app/2.0' } })).ok, true);
  assert.deepEqual(agents, ['Sluice-Webhooks/1', 'acme-app/2.0']);
});

test('the evidence keeps the first 4 KiB of a large answer and marks it truncated', async () => {
  const local = await serve((_req, res) => res.writeHead(200).end('x'.repeat(100_000)));
  const outcome = await attempt(local.url);
  assert.equal(outcome.ok, true);
  const evidence = outcome.evidence as Record<string, unknown>;
  assert.equal((evidence['body'] as string).length, EVIDENCE_BODY_CAP);
  assert.equal(evidence['body_truncated'], true);
  assert.ok((evidence['body_bytes'] as number) > EVIDENCE_BODY_CAP);
});

test('a cut through a character leaves that character out, rather than ending the evidence in U+FFFD', async () => {
  // 'é' is two bytes: the 4 KiB cut falls between them; '€' (three) ends a body the receiver cut off.
  const large = await serve((_req, res) => res.writeHead(200).end(`${'x'.repeat(EVIDENCE_BODY_CAP - 1)}é and more`));
  const cutOff = await serve((_req, res) => {
    res.writeHead(200, { 'content-length': '1000' });
    res.write(Buffer.from('price: €').subarray(0, 9));
    setImmediate(() => res.destroy());
  });
  const kept = async (url: string): Promise<unknown> => ((await attempt(url)).evidence as Record<string, unknown>)['body'];
  assert.equal(await kept(large.url), 'x'.repeat(EVIDENCE_BODY_CAP - 1));
  assert.equal(await kept(cutOff.url), 'price: ');
});

test('a redirect is not followed and fails the attempt for good', async () => {
  const target = await serve((_req, res) => res.writeHead(200).end());
  const local = await serve((_req, res) => res.writeHead(302, { location: target.url }).end());
  const error = errorOf(await attempt(local.url));
  assert.equal(error?.code, 'webhook_http_302');
  assert.equal(error?.retryable, false);
  assert.equal(target.requests.length, 0);
});

test('503 with Retry-After is retryable after that many seconds', async () => {
  const local = await serve((_req, res) => res.writeHead(503, { 'retry-after': '7' }).end());
  const error = errorOf(await attempt(local.url));
  assert.deepEqual(error, { code: 'webhook_http_503', message: 'The receiver answered 503.', retryable: true, retryAfterMs: 7000 });
});

test('a Retry-After date counts from the answer, not from when the attempt started', async () => {
  const startedAt = Date.UTC(2026, 10, 30);
  // The receiver asks for a retry 10 s after the attempt's start, and answers 300 ms into it.
  const local = await serve((_req, res) => {
    setTimeout(() => res.writeHead(503, { 'retry-after': new Date(startedAt + 10_000).toUTCString() }).end(), 300);
  });
  const error = errorOf(await attempt(local.url, { nowMs: startedAt }));
  const wait = error?.retryAfterMs ?? Number.NaN;
  assert.ok(wait <= 9_700 && wait > 5_000, `about 10 s less the 300 ms the answer took, got ${wait}`);
});

/** A raw TCP receiver whose connections `onConnection` handles; resolves with its hook URL. */
async function tcpReceiver(onConnection: (socket: Socket) => void): Promise<string> {
  const server = createNetServer(onConnection);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  servers.push(server as unknown as Server);
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`;
}

/** A raw TCP receiver that answers any request with `reply` as written. */
const rawReceiver = (reply: string): Promise<string> => tcpReceiver((socket) => socket.once('data', () => socket.write(reply)));

test('a 101 Switching Protocols answer fails the attempt at once and for good, like other answers outside 2xx, 429 and 5xx', async () => {
  const url = await rawReceiver('HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n');
  const error = errorOf(await attempt(url, { timeoutMs: 60_000 }));
  assert.deepEqual([error?.code, error?.retryable], ['webhook_http_101', false]);
  assert.match(error?.message ?? '', /answered 101; not retried/);
});

test('a kept-alive connection the receiver closes before answering fails the attempt as webhook_connection_closed, retried after the shortest wait; nothing is sent twice', async () => {
  // The receiver answers the first request of each connection (keep-alive, no `Connection: close`)
  // and drops the connection when a second request arrives on it: what a receiver closing an idle
  // connection does when the request crosses its close on the wire.
  let connections = 0;
  let requests = 0;
  const url = await tcpReceiver((socket) => {
    connections += 1;
    let answered = false;
    socket.on('data', () => {
      requests += 1;
      if (answered) return socket.destroy();
      answered = true;
      setTimeout(() => socket.write('HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok'), 50);
    });
  });
  const pool = connectionPool();
  assert.equal((await attempt(url, {}, pool)).ok, true);
  const idle = errorOf(await attempt(url, {}, pool));
  assert.deepEqual([idle?.code, idle?.retryable, idle?.retryAfterMs], ['webhook_connection_closed', true, 0]);
  assert.match(idle?.message ?? '', /closed its kept-alive connection before answering/);
  assert.deepEqual({ connections, requests }, { connections: 1, requests: 2 }, 'the attempt sent the request once');

  // A request that waited for the only connection of its pool, then went out on it, is told the same.
  const single = connectionPool(1);
  const [first, queued] = await Promise.all([attempt(url, {}, single), attempt(url, {}, single)]);
  assert.equal(first.ok, true);
  assert.equal(errorOf(queued)?.code, 'webhook_connection_closed');

  // A fresh connection dropped the same way is a plain network error: nothing suggests an idle close.
  const dropping = await tcpReceiver((socket) => socket.once('data', () => socket.destroy()));
  const error = errorOf(await attempt(dropping, {}, pool));
  assert.deepEqual([error?.code, error?.retryable], ['webhook_network_error', true]);
  assert.match(error?.message ?? '', /socket hang up/);
});

test('a kept-alive connection the receiver drops well after it read the request (a crash while handling it) is a plain network error, retried after the backoff', async () => {
  // The second request on a connection is read, then the connection is reset 1.5 s later.
  const url = await tcpReceiver((socket) => {
    let answered = false;
    socket.on('data', () => {
      if (answered) return void setTimeout(() => socket.resetAndDestroy(), 1500);
      answered = true;
      socket.write('HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok');
    });
  });
  const pool = connectionPool();
  assert.equal((await attempt(url, {}, pool)).ok, true);
  const crashed = errorOf(await attempt(url, {}, pool));
  assert.deepEqual([crashed?.code, crashed?.retryable, crashed?.retryAfterMs], ['webhook_network_error', true, undefined]);
});

test('a status past 599 is not retried: only 5xx and 429 are', async () => {
  const url = await rawReceiver('HTTP/1.1 999 Weird\r\nContent-Length: 0\r\n\r\n');
  const error = errorOf(await attempt(url));
  assert.deepEqual([error?.code, error?.retryable], ['webhook_http_999', false]);
});

test('a refused connection is a retryable network error', async () => {
  const closed = await serve(() => undefined);
  const port = new URL(closed.url).port;
  await new Promise((resolve) => servers.pop()?.close(resolve));
  const outcome = await attempt(`http://127.0.0.1:${port}/hook`);
  const refused = errorOf(outcome);
  assert.equal(refused?.code, 'webhook_network_error');
  assert.match(refused?.message ?? '', /ECONNREFUSED.*receiver was not reached/);
  assert.equal(refused?.retryable, true);
  assert.equal('sentAt' in outcome, false, 'no connection: the attempt never started');
});

test('a connection reset after the request went out may have reached the receiver: the attempt started', async () => {
  const reset = await serve((req) => req.socket.destroy());
  const outcome = await attempt(reset.url);
  assert.equal(errorOf(outcome)?.code, 'webhook_network_error');
  assert.equal(reset.requests.length, 1, 'the receiver read the request');
  assert.equal(outcome.sentAt, Date.UTC(2026, 10, 30));
});

test('a 2xx whose body is cut off still counts: the receiver accepted, the cut is in the evidence', async () => {
  const cut = await serve((_req, res) => {
    res.writeHead(200, { 'content-length': '1000' });
    res.write('partial');
    setImmediate(() => res.destroy());
  });
  const outcome = await attempt(cut.url);
  assert.equal(outcome.ok, true);
  const evidence = outcome.evidence as Record<string, unknown>;
  assert.equal(evidence['body'], 'partial');
  assert.equal(evidence['body_cut_off'], true);
  assert.equal(evidence['body_truncated'], true);
  // The same cut after a 503 is still a retryable 503.
  const cut503 = await serve((_req, res) => {
    res.writeHead(503, { 'content-length': '1000' });
    res.write('partial');
    setImmediate(() => res.destroy());
  });
  assert.equal(errorOf(await attempt(cut503.url))?.code, 'webhook_http_503');
});

/** A receiver that keeps every response open (after `begin` wrote to it) until `release`; `reached` resolves at the first request. */
async function holding(begin: (res: ServerResponse) => void = () => undefined): Promise<{ local: Local; reached: Promise<void>; release: () => void }> {
  let arrived: () => void = () => undefined;
  const reached = new Promise<void>((resolve) => {
    arrived = resolve;
  });
  const held: ServerResponse[] = [];
  const local = await serve((_req, res) => {
    begin(res);
    held.push(res);
    arrived();
  });
  return { local, reached, release: () => held.forEach((res) => res.destroy()) };
}

test('a 2xx whose connection is reset mid-body (a proxy\'s RST) still counts once: the reset only cuts the body', async () => {
  // The reset comes once the client has read the status line and the first bytes (node:http tells
  // its diagnostics channel), as from a proxy; Node then fails the request, not only the response.
  let answering: ServerResponse | undefined;
  const resetAfterRead = (): void => void setImmediate(() => answering?.socket?.resetAndDestroy());
  diagnostics.subscribe('http.client.response.finish', resetAfterRead);
  try {
    for (const status of [200, 503]) {
      let requests = 0;
      const reset = await serve((_req, res) => {
        requests += 1;
        answering = res;
        res.writeHead(status, { 'content-length': '100' });
        res.write('partial');
      });
      const outcome = await attempt(reset.url);
      assert.equal(requests, 1);
      if (status === 503) {
        assert.equal(errorOf(outcome)?.code, 'webhook_http_503', 'a reset after a 503 is still a retryable 503');
        continue;
      }
      assert.equal(outcome.ok, true, JSON.stringify(outcome));
      assert.equal((outcome.evidence as { body?: string }).body, 'partial');
      assert.equal((outcome.evidence as { body_cut_off?: boolean }).body_cut_off, true);
    }
  } finally {
    diagnostics.unsubscribe('http.client.response.finish', resetAfterRead);
  }
});

test('a receiver that never answers times out at the step deadline', async () => {
  const { local, reached, release } = await holding();
  mock.timers.enable({ apis: ['setTimeout'] });
  try {
    const pending = attempt(local.url, { timeoutMs: 2500 });
    await reached;
    assert.equal(await settlesWithin(pending, 2499), false, 'no answer before the deadline');
    mock.timers.tick(1);
    const error = errorOf(await pending);
    assert.equal(error?.code, 'webhook_timeout');
    assert.equal(error?.message, 'The receiver did not answer within 2500 ms.');
  } finally {
    mock.timers.reset();
    release();
  }
});

for (const host of ['127.0.0.1', 'localhost']) {
  test(`a deadline that passes before the connection opens (a TLS handshake the receiver never answers) sent nothing: webhook_connect_timeout, no started_at (${host}: a name resolved before the request hears of its socket is not reported as one that did not resolve)`, async () => {
    const sockets: Socket[] = [];
    let connected: () => void = () => undefined;
    const reached = new Promise<void>((resolve) => (connected = resolve));
    const silent = createNetServer((socket) => {
      sockets.push(socket);
      connected();
    });
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    mock.timers.enable({ apis: ['setTimeout'] });
    try {
      const pending = attempt(`https://${host}:${(silent.address() as AddressInfo).port}/hook`, { timeoutMs: 2500 });
      await reached;
      mock.timers.tick(2500);
      const outcome = await pending;
      assert.equal(errorOf(outcome)?.code, 'webhook_connect_timeout');
      assert.equal(errorOf(outcome)?.message, 'No connection to the receiver opened within 2500 ms. Nothing was sent; the receiver was not reached.');
      assert.equal(outcome.ok ? undefined : outcome.error.retryable, true);
      assert.equal('sentAt' in outcome, false, 'the attempt never started');
    } finally {
      mock.timers.reset();
      for (const socket of sockets) socket.destroy();
      await new Promise((resolve) => silent.close(resolve));
    }
  });
}

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
  servers.push(server as Server);
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
        const outcome = await sendWebhook({ orgId: 'acct-a', url, headers: {}, timeoutMs: 5000, body: '{}', idempotencyKey: 'run_1:step_1', fence: 1, attempt: 1, signingSecrets: [], nowMs: 0 }, { selfPort: 1, connections });
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

test('a deadline that passes while the receiver\'s name is being resolved says so (phase lookup); one past an open connection is the receiver\'s (phase answer)', async () => {
  const hangingLookup = (): void => undefined;
  const pool = (agent: Agent): OutboundPool => ({ requestOptions: { agent, poolOrg: 'acct-a' }, untilClosed: () => () => undefined, isQueued: () => false, drop: () => undefined });
  const post = (url: string, agent: Agent) =>
    postOnce(new URL(url), { headers: {}, body: '{}', timeoutMs: 200, keepBytes: 10, readLimitBytes: 100, pool: pool(agent) }).then(
      () => assert.fail('expected a timeout'),
      (error: unknown) => (error instanceof PostTimeoutError ? error.phase : String(error)),
    );
  assert.equal(await post('http://receiver.example/hook', new Agent({ lookup: hangingLookup } as AgentOptions)), 'lookup');
  const { local, release } = await holding();
  try {
    assert.equal(await post(local.url, new Agent()), 'answer');
  } finally {
    release();
  }
});

test('a 2xx whose body is still arriving at the deadline succeeds: the body is cut off as evidence, the delivery not sent again', async () => {
  const { local, reached, release } = await holding((res) => {
    res.writeHead(200, { 'content-length': '100' });
    res.write('{"accepted":');
  });
  mock.timers.enable({ apis: ['setTimeout'] });
  try {
    const pending = attempt(local.url, { timeoutMs: 2500 });
    await reached;
    await new Promise((resolve) => setImmediate(resolve));
    assert.equal(await settlesWithin(pending, 2499), false, 'still reading before the deadline');
    mock.timers.tick(1);
    const outcome = await pending;
    assert.equal(outcome.ok, true, JSON.stringify(outcome));
    assert.deepEqual(outcome.ok ? outcome.result : undefined, { status: 200, body: '{"accepted":' });
    assert.equal((outcome.evidence as { body_cut_off?: boolean }).body_cut_off, true);
  } finally {
    mock.timers.reset();
    release();
  }
});

test('consecutive attempts to one receiver reuse a kept-alive connection', async () => {
  const local = await serve((_req, res) => res.writeHead(200).end('{}'));
  for (let i = 0; i < 5; i += 1) assert.equal((await attempt(local.url)).ok, true);
  assert.equal(local.requests.length, 5);
  assert.equal(local.connections, 1);
});

/** A receiver that holds every request until the test answers it; `arrived(n)` waits for n requests. */
async function holdingReceiver() {
  const held = new Map<string, ServerResponse>();
  const order: string[] = [];
  const timestamps = new Map<string, string>();
  let waiter: { count: number; resolve: () => void } | undefined;
  const local = await serve((req, res) => {
    const key = String(req.headers['idempotency-key']);
    timestamps.set(key, String(req.headers['webhook-timestamp']));
    held.set(key, res);
    order.push(key);
    if (waiter !== undefined && order.length >= waiter.count) waiter.resolve();
  });
  return {
    local,
    order,
    timestamps,
    arrived: (count: number) =>
      new Promise<void>((resolve) => {
        if (order.length >= count) resolve();
        else waiter = { count, resolve };
      }),
    answer: (key: string) => held.get(key)?.writeHead(200).end('{}'),
    /** Closes the connection of the request sent under `key` without answering it (a receiver crashing). */
    cut: (key: string) => held.get(key)?.socket?.destroy(),
    drop: () => {
      for (const res of held.values()) res.destroy();
    },
  };
}

/** The pools' sockets open and requests waiting (their limit is the process's, not the test's). */
const openAndWaiting = (pools: OutboundConnections): { open: number; waiting: number } => {
  const { open, waiting } = pools.stats();
  return { open, waiting };
};

// A broken cap or deadline leaves a request that never arrives: the timeout turns that wait into a failure.
const HOLDING_TEST = { timeout: 10_000 };

test('an org holds at most the capped connections per receiver; more requests wait in order, another org has its own', HOLDING_TEST, async () => {
  const receiver = await holdingReceiver();
  const capped = connectionPool(2);
  const send = (orgId: string, key: string) => attempt(receiver.local.url, { orgId, idempotencyKey: key }, capped);
  try {
    const a = [send('acct-a', 'a1'), send('acct-a', 'a2'), send('acct-a', 'a3')];
    const b = send('acct-b', 'b1');
    await receiver.arrived(3);
    assert.deepEqual(receiver.order.slice(0, 3).sort(), ['a1', 'a2', 'b1'], 'acct-a waits at two; acct-b is not queued behind it');
    assert.deepEqual(openAndWaiting(capped), { open: 3, waiting: 1 });
    receiver.answer('a1');
    assert.equal((await a[0])?.ok, true);
    await receiver.arrived(4);
    assert.equal(receiver.order[3], 'a3');
    for (const key of ['a2', 'a3', 'b1']) receiver.answer(key);
    const outcomes = await Promise.all([...a, b]);
    assert.ok(outcomes.every((outcome) => outcome.ok));
    assert.equal(receiver.local.connections, 3, "a3 reused a1's connection");
    assert.deepEqual(openAndWaiting(capped), { open: 3, waiting: 0 }, 'idle, kept alive');
  } finally {
    receiver.drop();
  }
});

test('a request waiting for a connection starts its deadline when it gets one, and its evidence says how long it waited', HOLDING_TEST, async () => {
  const receiver = await holdingReceiver();
  const single = connectionPool(1);
  mock.timers.enable({ apis: ['setTimeout', 'Date'], now: 0 });
  try {
    const send = (key: string) => attempt(receiver.local.url, { idempotencyKey: key, timeoutMs: 2500 }, single);
    const first = send('first');
    await receiver.arrived(1);
    const second = send('second');
    const third = send('third');
    await new Promise((resolve) => setImmediate(resolve)); // both attempts reach the pool's queue
    mock.timers.tick(2500);
    const firstError = await first;
    assert.equal(errorOf(firstError)?.code, 'webhook_timeout');
    assert.equal((firstError.evidence as Record<string, unknown>)['queued_ms'], undefined, 'the first had a connection at once');
    await receiver.arrived(2);
    assert.equal(receiver.order[1], 'second');
    assert.equal(await settlesWithin(second, 2499), false, 'the wait for the connection did not count against the deadline');
    mock.timers.tick(1);
    const secondOutcome = await second;
    assert.equal(errorOf(secondOutcome)?.code, 'webhook_timeout', 'the deadline runs from the connection');
    assert.equal((secondOutcome.evidence as Record<string, unknown>)['queued_ms'], 2500);
    await receiver.arrived(3);
    receiver.answer('third');
    const thirdOutcome = await third;
    assert.equal(thirdOutcome.ok, true);
    assert.equal((thirdOutcome.evidence as Record<string, unknown>)['queued_ms'], 5000);
    // Signed when sent: each timestamp is the attempt's clock plus its wait for the connection.
    const at = Math.floor(Date.UTC(2026, 10, 30) / 1000);
    assert.deepEqual(['first', 'second', 'third'].map((key) => receiver.timestamps.get(key)), [String(at), String(at + 2), String(at + 5)]);
  } finally {
    mock.timers.reset();
    receiver.drop();
  }
});

test('closing the pools fails the requests in flight and the queued ones, and opens no connection', HOLDING_TEST, async () => {
  const receiver = await holdingReceiver();
  const closing = new OutboundConnections(2, 'any');
  const send = (key: string) => attempt(receiver.local.url, { idempotencyKey: key }, closing);
  try {
    // Two busy sockets: each one closing used to hand the head of the queue a second error.
    const outcomes = ['a', 'b', 'c', 'd', 'e'].map(send);
    await receiver.arrived(2);
    closing.close();
    const errors = (await Promise.all(outcomes)).map(errorOf);
    assert.deepEqual(errors.map((error) => error?.code), Array(5).fill('webhook_network_error'));
    assert.deepEqual(
      errors.map((error) => (/before the receiver answered/.test(error?.message ?? '') ? 'in flight' : /not sent/.test(error?.message ?? '') ? 'not sent' : error?.message)),
      ['in flight', 'in flight', 'not sent', 'not sent', 'not sent'],
    );
    assert.equal(errorOf(await send('after'))?.code, 'webhook_network_error', 'a request after close is refused too');
    await new Promise((resolve) => setImmediate(resolve));
    assert.deepEqual(receiver.order, ['a', 'b']);
    assert.equal(receiver.local.connections, 2);
  } finally {
    receiver.drop();
  }
});

test('a request no longer wanted when it gets its connection (its run was cancelled) is dropped unsent', HOLDING_TEST, async () => {
  const receiver = await holdingReceiver();
  const single = connectionPool(1);
  let wanted = true;
  try {
    const first = attempt(receiver.local.url, { idempotencyKey: 'w1' }, single);
    await receiver.arrived(1);
    const second = attempt(receiver.local.url, { idempotencyKey: 'w2', stillWanted: () => wanted }, single);
    while (single.stats().waiting === 0) await new Promise((resolve) => setImmediate(resolve));
    assert.deepEqual(openAndWaiting(single), { open: 1, waiting: 1 });
    wanted = false;
    receiver.answer('w1');
    assert.equal((await first).ok, true);
    const withdrawn = await second;
    assert.deepEqual([errorOf(withdrawn)?.code, errorOf(withdrawn)?.retryable], ['webhook_withdrawn', false]);
    assert.equal('sentAt' in withdrawn, false, 'it never started');
    assert.equal(typeof (withdrawn.evidence as { queued_ms?: number }).queued_ms, 'number');
    const third = attempt(receiver.local.url, { idempotencyKey: 'w3', stillWanted: () => true }, single);
    await receiver.arrived(2);
    receiver.answer('w3');
    assert.equal((await third).ok, true);
    assert.deepEqual(receiver.order, ['w1', 'w3'], 'w2 never reached the receiver');
  } finally {
    receiver.drop();
  }
});

test('a request that waited for a connection and then lost it unanswered says how long it waited, and was sent only once it had one', HOLDING_TEST, async () => {
  const receiver = await holdingReceiver();
  const single = connectionPool(1);
  mock.timers.enable({ apis: ['setTimeout', 'Date'], now: 0 });
  try {
    const nowMs = Date.UTC(2026, 10, 30);
    const first = attempt(receiver.local.url, { idempotencyKey: 'first' }, single);
    await receiver.arrived(1);
    const second = attempt(receiver.local.url, { idempotencyKey: 'second', nowMs }, single);
    await new Promise((resolve) => setImmediate(resolve)); // it reaches the pool's queue
    mock.timers.tick(1200);
    receiver.answer('first');
    assert.equal((await first).ok, true);
    await receiver.arrived(2);
    receiver.cut('second');
    const lost = await second;
    assert.match(errorOf(lost)?.code ?? '', /^webhook_(network_error|connection_closed)$/);
    assert.equal((lost.evidence as Record<string, unknown>)['queued_ms'], 1200);
    assert.equal(lost.sentAt, nowMs + 1200, 'started when it got its connection, not when it was queued');
  } finally {
    mock.timers.reset();
    receiver.drop();
  }
});

test('queued_ms is there exactly when a request waited for a connection, even for 0 ms', HOLDING_TEST, async () => {
  const receiver = await holdingReceiver();
  const single = connectionPool(1);
  mock.timers.enable({ apis: ['Date'], now: 0 });
  try {
    const first = attempt(receiver.local.url, { idempotencyKey: 'first' }, single);
    await receiver.arrived(1);
    const second = attempt(receiver.local.url, { idempotencyKey: 'second' }, single);
    await new Promise((resolve) => setImmediate(resolve)); // the attempt reaches the pool's queue
    receiver.answer('first');
    await receiver.arrived(2);
    receiver.answer('second');
    const [firstOutcome, secondOutcome] = await Promise.all([first, second]);
    assert.equal((firstOutcome.evidence as Record<string, unknown>)['queued_ms'], undefined);
    assert.equal((secondOutcome.evidence as Record<string, unknown>)['queued_ms'], 0);
  } finally {
    mock.timers.reset();
    receiver.drop();
  }
});

test('a URL reaching the runtime\'s own port is self by loopback, IPv4-mapped IPv6, or any of the machine\'s own addresses', async () => {
  const own = Object.values(networkInterfaces()).flat().find((entry) => entry !== undefined && entry.family === 'IPv4' && !entry.internal)?.address;
  const urls = ['http://127.0.0.1:4000/', 'http://127.1:4000/', 'http://[::ffff:127.0.0.1]:4000/', 'http://[::1]:4000/', 'http://localhost:4000/', 'http://0.0.0.0:4000/', ...(own === undefined ? [] : [`http://${own}:4000/`])];
  for (const url of urls) assert.equal(await targetsSelf(new URL(url), 4000), true, url);
  assert.equal(await targetsSelf(new URL('http://127.0.0.1:4001/'), 4000), false, 'another port');
  assert.equal(await targetsSelf(new URL('http://203.0.113.7:4000/'), 4000), false, 'another machine');
});

test('headers Node will not send fail the attempt for good, and never crash the process', async () => {
  const local = await serve((_req, res) => res.end('ok'));
  // Stored before these headers were refused at write time: Expect makes Node send the headers at
  // once, so adding the signature afterwards threw outside any promise.
  for (const headers of [{ Expect: '100-continue' }, { 'X-Note': 'a→b' }]) {
    const outcome = await attempt(local.url, { headers });
    assert.equal(outcome.ok, false, JSON.stringify(headers));
    assert.ok(!outcome.ok && outcome.error.code === 'webhook_request_invalid' && !outcome.error.retryable, JSON.stringify(outcome));
  }
  assert.equal(local.requests.length, 0, 'nothing reached the receiver');
  assert.equal((await attempt(local.url)).ok, true, 'the process and the pool still work');
});

test('a process out of file descriptors fails the attempt as its own shortage (retryable), not as the receiver\'s network error', () => {
  const script = `
    import { openSync } from 'node:fs';
    import { OutboundConnections } from './runtime/runs/outbound-connections.ts';
    import { sendWebhook } from './runtime/runs/webhook-step.ts';
    // Every descriptor taken, as a burst of sockets would: the connect then fails with EMFILE.
    const held = [];
    try { for (;;) held.push(openSync('/dev/null', 'r')); } catch {}
    const outcome = await sendWebhook(
      { orgId: 'acct-a', url: 'http://127.0.0.1:9/hook', headers: {}, timeoutMs: 5000, body: '{}', idempotencyKey: 'run_1:step_1', fence: 1, attempt: 1, signingSecrets: [], nowMs: 0 },
      { selfPort: 1, connections: new OutboundConnections(undefined, 'any') },
    );
    process.stdout.write(JSON.stringify(outcome.ok ? null : { ...outcome.error, sent_at: outcome.sentAt ?? null }));
    process.exit(0);
  `;
  const child = spawnSync('bash', ['-c', `ulimit -n 128; exec "${process.execPath}" --import tsx --input-type=module -e "$SCRIPT"`], {
    cwd: join(import.meta.dirname, '..', '..'), encoding: 'utf8', timeout: 60_000, env: { ...process.env, SCRIPT: script },
  });
  assert.equal(child.status, 0, child.stderr);
  const error = JSON.parse(child.stdout) as { code: string; retryable: boolean; message: string; sent_at: number | null };
  assert.deepEqual([error.code, error.retryable], ['sluice_out_of_file_descriptors', true], child.stdout);
  assert.match(error.message, /EMFILE.*receiver was not reached/);
  assert.equal(error.sent_at, null, 'nothing was sent: the attempt never started');
});

/**
 * A raw receiver that answers 200 as soon as a request's head is in, then reads the rest of the body
 * only once `readAfterAnswer` says so (never: it keeps the socket open and reads nothing more).
 */
async function answersEarly(readAfterAnswer: (socket: Socket) => void): Promise<{ url: string; sockets: Socket[]; received: number[]; close: () => Promise<void> }> {
  const sockets: Socket[] = [];
  const received: number[] = [];
  const server = createNetServer((socket) => {
    const index = sockets.push(socket) - 1;
    received[index] = 0;
    let head = '';
    const onHead = (chunk: Buffer): void => {
      head += chunk.toString('latin1');
      const end = head.indexOf('\r\n\r\n');
      if (end < 0) return;
      received[index] = Buffer.byteLength(head.slice(end + 4), 'latin1');
      socket.off('data', onHead);
      socket.pause();
      socket.on('data', (more: Buffer) => (received[index]! += more.byteLength));
      socket.write('HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: keep-alive\r\n\r\nok', () => readAfterAnswer(socket));
    };
    socket.on('data', onHead);
    socket.on('error', () => undefined);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`,
    sockets,
    received,
    close: async () => {
      for (const socket of sockets) socket.destroy();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

/** A body larger than what the kernel buffers on both ends: most of it is still unsent when the answer comes. */
const HUGE_BODY = JSON.stringify({ pad: 'x'.repeat(8 * 1024 * 1024) });

test('a receiver that answers before reading the body and then reads it gets all of it; the step succeeds on its answer', async () => {
  const receiver = await answersEarly((socket) => setTimeout(() => socket.resume(), 200));
  try {
    const outcome = await attempt(receiver.url, { body: HUGE_BODY });
    assert.equal(outcome.ok, true);
    await eventually('the whole body to arrive', () => receiver.received[0], (bytes) => bytes === Buffer.byteLength(HUGE_BODY));
  } finally {
    await receiver.close();
  }
});

test('a receiver that answers before reading the body and never reads it gives its connection back after the step\'s timeout', async () => {
  const receiver = await answersEarly(() => undefined);
  const oneConnection = connectionPool(1);
  try {
    // The step's input stays held while its body is still being sent (step-input.ts): told here.
    const stillSending: Promise<void>[] = [];
    const big = await attempt(receiver.url, { body: HUGE_BODY, timeoutMs: 300, stillSending: (ended) => void stillSending.push(ended) }, oneConnection);
    assert.equal(big.ok, true);
    assert.equal(stillSending.length, 1, 'the answer came with the body still being sent');
    await stillSending[0];
    const next = await Promise.race([attempt(receiver.url, {}, oneConnection), new Promise<'stuck'>((resolve) => setTimeout(() => resolve('stuck'), 10_000).unref())]);
    assert.notEqual(next, 'stuck', 'the second request got the connection slot');
    assert.equal(next !== 'stuck' && next.ok, true);
    assert.equal(receiver.sockets.length, 2, 'the first connection, still sending, was closed instead of reused');
  } finally {
    await receiver.close();
  }
});

test('a kept-alive connection to an address (no name to look up) holds no listener of the request that opened it', async () => {
  const local = await serve((_req, res) => res.writeHead(200).end('{}'));
  const connections = connectionPool();
  const pool = connections.pool(new URL(local.url), 'acct-listeners');
  const send = () => postOnce(new URL(local.url), { headers: {}, body: '{"big":"' + 'x'.repeat(1000) + '"}', timeoutMs: 5000, keepBytes: 10, readLimitBytes: 100, pool });
  assert.equal((await send()).status, 200);
  const agent = pool.requestOptions.agent as Agent;
  const idle = await eventually('the connection idle in its pool', () => Object.values(agent.freeSockets).flat() as Socket[], (sockets) => sockets.length === 1);
  assert.equal(idle[0]!.listenerCount('lookup'), 0, 'no lookup listener left behind');
  assert.equal((await send()).status, 200);
  assert.equal(local.connections, 1, 'the same connection carried both');
});
