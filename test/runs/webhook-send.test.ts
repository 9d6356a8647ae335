// One webhook attempt against real local HTTP servers: answers and their evidence, the body cap,
// redirects not followed, Retry-After, refused and cut-off connections, the deadline (a body still
// arriving at it is cut off; on mocked timers, no real wait). Keep-alive reuse and the per-org
// connection cap: webhook-connections.test.ts; TLS: webhook-tls.test.ts.

import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import diagnostics from 'node:diagnostics_channel';
import { Agent, type AgentOptions, type ServerResponse } from 'node:http';
import { createServer as createNetServer, type AddressInfo, type Socket } from 'node:net';
import { networkInterfaces } from 'node:os';
import { join } from 'node:path';
import { mock, test } from 'node:test';
import type { OutboundPool } from '../../runtime/runs/outbound-connections.ts';
import { postOnce, PostTimeoutError } from '../../runtime/runs/outbound-post.ts';
import { eventually } from '../helpers/receiver.ts';
import { EVIDENCE_BODY_CAP, targetsSelf } from '../../runtime/runs/webhook-step.ts';
import { attempt, closeLastServer, closedAfterTests, connectionPool, errorOf, serve, settlesWithin, type Local } from '../helpers/webhook-attempts.ts';


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
  closedAfterTests(server);
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
  await closeLastServer();
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

test('a deadline that passes while the receiver\'s name is being resolved says so (phase lookup); one past an open connection is the receiver\'s (phase answer)', async () => {
  const hangingLookup = (): void => undefined;
  const pool = (agent: Agent): OutboundPool => ({ requestOptions: { agent, poolOrg: 'acct-a' }, untilClosed: () => () => undefined, stopping: () => false, isQueued: () => false, drop: () => undefined });
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
      { orgId: 'acct-a', url: 'http://127.0.0.1:9/hook', headers: {}, timeoutMs: 5000, body: '{}', idempotencyKey: 'run_1:step_1', fence: 1, attempt: 1, signingSecrets: () => [], nowMs: 0 },
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
