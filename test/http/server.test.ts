// The uWS adapter on a real socket: a reply that cannot be serialized becomes a logged 500, and the
// server keeps serving; HEAD is answered as GET without the body; a repeated query parameter is a
// 400, so is one a read's handler never asks for, and the query string counts toward the 16 KiB head limit;
// a stop waits 5 s for bodies still arriving, then cuts them off (503 stopping).

import assert from 'node:assert/strict';
import { connect } from 'node:net';
import { after, before, mock, test } from 'node:test';
import { createLogger } from '../../runtime/log.ts';
import { createRuntimeMetrics } from '../../runtime/metrics.ts';
import { MAX_HEADER_BYTES } from '../../runtime/http/header-cap.ts';
import { HttpServer } from '../../runtime/http/server.ts';

const logged: string[] = [];
let server: HttpServer;
let url: string;

let writes = 0;
before(async () => {
  server = new HttpServer({ logger: createLogger('error', (line) => logged.push(line)), metrics: createRuntimeMetrics() });
  server.addRoutes(
    { method: 'GET', pattern: '/bigint', handler: () => ({ status: 200, json: { amount: 10n } }) },
    { method: 'GET', pattern: '/fine', handler: () => ({ status: 200, json: { ok: true }, headers: { 'x-kept': 'yes' } }) },
    { method: 'GET', pattern: '/reads', handler: (request) => ({ status: 200, json: { a: request.query.get('a'), b: request.query.has('b') } }) },
    { method: 'POST', pattern: '/writes', handler: () => ((writes += 1), { status: 204 }) },
    { method: 'DELETE', pattern: '/scoped', query: ['environment'], handler: () => ((writes += 1), { status: 204 }) },
    { method: 'POST', pattern: '/open', query: 'any', handler: () => ((writes += 1), { status: 204 }) },
  );
  url = `http://127.0.0.1:${await server.listen('127.0.0.1', 0)}`;
});
after(async () => server.close());

test('a reply whose body cannot be serialized is a logged 500 in the error shape, and nothing else breaks', async () => {
  const broken = await fetch(`${url}/bigint`);
  assert.equal(broken.status, 500);
  assert.deepEqual(await broken.json(), { error: { code: 'internal_error', message: 'An internal error occurred.' } });
  assert.ok(logged.some((line) => line.includes('could not serialize a reply')), logged.join('\n'));
  const fine = await fetch(`${url}/fine`);
  assert.equal(fine.status, 200);
  assert.equal(fine.headers.get('x-kept'), 'yes');
  assert.equal(fine.headers.get('content-type'), 'application/json');
  assert.deepEqual(await fine.json(), { ok: true });
});

test('HEAD is answered as GET: same status and headers, the body\'s length, no body', async () => {
  const head = await fetch(`${url}/fine`, { method: 'HEAD' });
  assert.equal(head.status, 200);
  assert.equal(head.headers.get('x-kept'), 'yes');
  assert.equal(head.headers.get('content-length'), String(JSON.stringify({ ok: true }).length));
  assert.equal(await head.text(), '');
  assert.equal((await fetch(`${url}/missing`, { method: 'HEAD' })).status, 404);
});

test('after a HEAD the connection serves the next request: one Content-Length, the next answer whole', async () => {
  const socket = connect(Number(new URL(url).port), '127.0.0.1');
  let text = '';
  socket.on('data', (chunk: Buffer) => (text += chunk.toString('latin1')));
  const answers = async (count: number): Promise<void> => {
    for (let i = 0; i < 500 && (text.match(/HTTP\/1\.1 /g) ?? []).length < count; i++) await new Promise((resolve) => setTimeout(resolve, 5));
  };
  try {
    socket.write('HEAD /fine HTTP/1.1\r\nhost: x\r\n\r\n');
    await answers(1);
    socket.write('GET /fine HTTP/1.1\r\nhost: x\r\n\r\n');
    await answers(2);
    const [head, get] = text.split(/(?=HTTP\/1\.1 )/);
    assert.match(head ?? '', /^HTTP\/1\.1 200/);
    assert.equal((head?.match(/^content-length:/gim) ?? []).length, 1, head);
    assert.match(head ?? '', new RegExp(`^content-length: ${JSON.stringify({ ok: true }).length}\r$`, 'im'));
    assert.match(get ?? '', /^HTTP\/1\.1 200[\s\S]*\r\n\r\n\{"ok":true\}$/, 'the GET after it is answered on the same connection');
  } finally {
    socket.destroy();
  }
});

test('a HEAD with Connection: close is answered and its connection ended, as a GET\'s is', async () => {
  for (const method of ['HEAD', 'GET']) {
    const socket = connect(Number(new URL(url).port), '127.0.0.1');
    let text = '';
    socket.on('data', (chunk: Buffer) => (text += chunk.toString('latin1')));
    socket.write(`${method} /fine HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n`);
    // uWS's own idle timeout would end it after ~10 s: the server must end it once answered.
    const ended = await new Promise<boolean>((resolve) => {
      const timer = setTimeout(() => resolve(false), 5000);
      socket.once('close', () => {
        clearTimeout(timer);
        resolve(true);
      });
    });
    socket.destroy();
    assert.equal(ended, true, `${method}: the connection was left open`);
    assert.match(text, /^HTTP\/1\.1 200/, method);
  }
});

test('a query parameter given twice is a 400 naming it; a query string past the head limit is a 431', async () => {
  const twice = await fetch(`${url}/fine?limit=1&limit=600`);
  assert.equal(twice.status, 400);
  assert.deepEqual(((await twice.json()) as { error: unknown }).error, { code: 'repeated_query_parameter', message: 'The query parameter "limit" is given more than once.', field: 'limit' });
  assert.equal((await fetch(`${url}/reads?a=1&b=2`)).status, 200);
  const long = await fetch(`${url}/fine?pad=${'x'.repeat(MAX_HEADER_BYTES)}`);
  assert.equal(long.status, 431);
});

test('requests held until a promise settles are answered after it, bodies intact; liveness answers meanwhile', async () => {
  const held = new HttpServer({ logger: createLogger('silent'), metrics: createRuntimeMetrics() });
  const seen: string[] = [];
  held.addRoutes(
    { method: 'POST', pattern: '/echo', handler: (request) => (seen.push(request.body.toString('utf8')), { status: 200, text: request.body.toString('utf8') }) },
    { method: 'GET', pattern: '/live', answersWhileHeld: true, handler: () => ({ status: 200, text: 'alive' }) },
  );
  let release: () => void = () => undefined;
  held.holdRequestsUntil(new Promise<void>((resolve) => (release = resolve)));
  const heldUrl = `http://127.0.0.1:${await held.listen('127.0.0.1', 0)}`;
  try {
    const answer = fetch(`${heldUrl}/echo`, { method: 'POST', body: 'x'.repeat(100_000) });
    let answered = false;
    void answer.then(() => (answered = true));
    // The body arrives while held; the handler must not run yet.
    for (let i = 0; i < 2000 && seen.length === 0; i++) await new Promise((resolve) => setImmediate(resolve));
    assert.deepEqual(seen, []);
    assert.equal(answered, false);
    assert.equal(await (await fetch(`${heldUrl}/live`)).text(), 'alive', 'a liveness route answers meanwhile');
    release();
    const reply = await answer;
    assert.equal(reply.status, 200);
    assert.equal((await reply.text()).length, 100_000);
    assert.equal((await fetch(`${heldUrl}/echo`, { method: 'POST', body: 'after' })).status, 200);
  } finally {
    await held.close();
  }
});

test('request bodies held at once have a budget: past it a request is 503 server_busy with Retry-After, and the budget frees up', async () => {
  const budgeted = new HttpServer({ logger: createLogger('silent'), metrics: createRuntimeMetrics(), bodyBudgetBytes: 1000, bodyBudgetPerTenantBytes: 1000 });
  let release: () => void = () => undefined;
  const gate = new Promise<void>((resolve) => (release = resolve));
  let holding = 0;
  budgeted.addRoutes(
    { method: 'POST', pattern: '/hold', handler: async () => ((holding += 1), await gate, { status: 200, text: 'held' }) },
    { method: 'POST', pattern: '/echo', handler: (request) => ({ status: 200, text: String(request.body.length) }) },
  );
  const budgetedUrl = `http://127.0.0.1:${await budgeted.listen('127.0.0.1', 0)}`;
  try {
    const held = fetch(`${budgetedUrl}/hold`, { method: 'POST', body: 'h'.repeat(800) });
    for (let i = 0; i < 2000 && holding === 0; i++) await new Promise((resolve) => setImmediate(resolve));
    assert.equal(holding, 1, 'the first body is read and held by its handler');
    const refused = await fetch(`${budgetedUrl}/echo`, { method: 'POST', body: 'e'.repeat(400) });
    assert.equal(refused.status, 503);
    assert.equal(refused.headers.get('retry-after'), '1');
    assert.equal(((await refused.json()) as { error: { code: string } }).error.code, 'server_busy');
    const small = await fetch(`${budgetedUrl}/echo`, { method: 'POST', body: 'e'.repeat(100) });
    assert.equal(await small.text(), '100', 'what fits the rest of the budget is served');
    release();
    assert.equal((await held).status, 200);
    const again = await fetch(`${budgetedUrl}/echo`, { method: 'POST', body: 'e'.repeat(900) });
    assert.equal(await again.text(), '900', 'the held body gave its bytes back');
  } finally {
    await budgeted.close();
  }
});

test('a body still arriving 30 s after its first piece is cut off with 408, and its share of the budget comes back', async () => {
  const slow = new HttpServer({ logger: createLogger('silent'), metrics: createRuntimeMetrics(), bodyBudgetBytes: 1000, bodyBudgetPerTenantBytes: 1000 });
  slow.addRoutes({ method: 'POST', pattern: '/echo', handler: (request) => ({ status: 200, text: String(request.body.length) }) });
  const port = await slow.listen('127.0.0.1', 0);
  mock.timers.enable({ apis: ['setTimeout'] });
  try {
    const socket = connect(port, '127.0.0.1');
    const received: Buffer[] = [];
    socket.on('data', (chunk: Buffer) => received.push(chunk));
    socket.write('POST /echo HTTP/1.1\r\nhost: x\r\ncontent-length: 900\r\n\r\n');
    socket.write('x'.repeat(600));
    // The server starts its 30 s deadline when the first piece arrives; move the clock until it answers.
    for (let i = 0; i < 500 && received.length === 0; i++) {
      await new Promise((resolve) => setImmediate(resolve));
      mock.timers.tick(1000);
    }
    assert.match(Buffer.concat(received).toString('latin1'), /^HTTP\/1\.1 408[\s\S]*body_timeout/);
    socket.destroy();
    mock.timers.reset();
    const after = await fetch(`http://127.0.0.1:${port}/echo`, { method: 'POST', body: 'y'.repeat(900) });
    assert.equal(await after.text(), '900', 'the cut-off body gave its 600 bytes back');
  } finally {
    mock.timers.reset();
    await slow.close();
  }
});

test('a body that comes in pieces holds its buffer\'s size of the budget (doubling, up to its declared length); pieces without a length arrive whole', async () => {
  const pieces = new HttpServer({ logger: createLogger('silent'), metrics: createRuntimeMetrics(), bodyBudgetBytes: 2000, bodyBudgetPerTenantBytes: 2000 });
  pieces.addRoutes({ method: 'POST', pattern: '/echo', handler: (request) => ({ status: 200, text: request.body.toString('latin1') }) });
  const port = await pieces.listen('127.0.0.1', 0);
  const answerOf = (socket: ReturnType<typeof connect>): Promise<string> =>
    new Promise((resolve) => {
      const received: Buffer[] = [];
      socket.on('data', (chunk: Buffer) => {
        received.push(chunk);
        const text = Buffer.concat(received).toString('latin1');
        if (/\r\n\r\n/.test(text) && text.length >= text.indexOf('\r\n\r\n') + 4 + Number(/content-length: (\d+)/i.exec(text)?.[1] ?? 0)) resolve(text);
      });
    });
  try {
    // 1,100 bytes of 1,900 declared, in two pieces: its buffer of 1 KiB doubled, up to the declared 1,900, the memory counted.
    const slow = connect(port, '127.0.0.1');
    const slowAnswer = answerOf(slow);
    slow.write('POST /echo HTTP/1.1\r\nhost: x\r\ncontent-length: 1900\r\n\r\n');
    slow.write('a'.repeat(600));
    // A round trip, so the second piece comes as a piece of its own.
    assert.equal((await fetch(`http://127.0.0.1:${port}/echo`, { method: 'POST', body: 'b' })).status, 200);
    slow.write('a'.repeat(500));
    let status = 0;
    for (let tries = 0; tries < 200 && status !== 503; tries++) status = (await fetch(`http://127.0.0.1:${port}/echo`, { method: 'POST', body: 'b'.repeat(200) })).status;
    assert.equal(status, 503, 'the 1,100 bytes that came hold the 1,900 of their buffer');
    slow.write('a'.repeat(800));
    assert.match(await slowAnswer, new RegExp(`^HTTP/1\\.1 200[^]*\r\n\r\n${'a'.repeat(1900)}$`));
    slow.destroy();
    // Chunked, in 6-byte pieces: one buffer grows (from 1 KiB, doubling) to hold them, in order.
    const chunked = connect(port, '127.0.0.1');
    const chunkedAnswer = answerOf(chunked);
    chunked.write('POST /echo HTTP/1.1\r\nhost: x\r\ntransfer-encoding: chunked\r\n\r\n');
    const sent = Array.from({ length: 100 }, (_, i) => `p${String(i).padStart(5, '0')}`);
    for (const piece of sent) {
      chunked.write(`6\r\n${piece}\r\n`);
      await new Promise((resolve) => setImmediate(resolve));
    }
    chunked.write('0\r\n\r\n');
    const got = await chunkedAnswer;
    assert.ok(got.endsWith(`\r\n\r\n${sent.join('')}`), got.slice(0, 300));
    chunked.destroy();
  } finally {
    await pieces.close();
  }
});

test('one org may hold an eighth of the body budget: its senders get 503 while another org is still served', async () => {
  const shared = new HttpServer({ logger: createLogger('silent'), metrics: createRuntimeMetrics(), bodyBudgetBytes: 8000 });
  let release: () => void = () => undefined;
  const gate = new Promise<void>((resolve) => (release = resolve));
  let holding = 0;
  shared.addRoutes({ method: 'POST', pattern: '/orgs/:org_id/hold', handler: async (request) => {
    const length = request.body.length;
    holding += 1;
    await gate;
    return { status: 200, text: String(length) };
  } });
  const sharedUrl = `http://127.0.0.1:${await shared.listen('127.0.0.1', 0)}`;
  try {
    const held = fetch(`${sharedUrl}/orgs/noisy/hold`, { method: 'POST', body: 'n'.repeat(900) });
    for (let i = 0; i < 2000 && holding === 0; i++) await new Promise((resolve) => setImmediate(resolve));
    assert.equal(holding, 1);
    const overShare = await fetch(`${sharedUrl}/orgs/noisy/hold`, { method: 'POST', body: 'n'.repeat(200) });
    assert.equal(overShare.status, 503, 'noisy holds 900 of its 1000');
    const other = fetch(`${sharedUrl}/orgs/quiet/hold`, { method: 'POST', body: 'q'.repeat(900) });
    for (let i = 0; i < 2000 && holding === 1; i++) await new Promise((resolve) => setImmediate(resolve));
    assert.equal(holding, 2, 'another org still gets its share');
    release();
    assert.deepEqual([(await held).status, (await other).status], [200, 200]);
  } finally {
    await shared.close();
  }
});

test('a GET or HEAD with a query parameter its handler never asks for is a 400 naming it; asked ones, given or not, are fine', async () => {
  const typo = await fetch(`${url}/reads?a=1&enviroment=sandbox`);
  assert.equal(typo.status, 400);
  const error = ((await typo.json()) as { error: { code: string; field: string; message: string } }).error;
  assert.deepEqual([error.code, error.field], ['unknown_query_parameter', 'enviroment']);
  assert.match(error.message, /no query parameter "enviroment"/);
  assert.equal((await fetch(`${url}/fine?x=1`, { method: 'HEAD' })).status, 400);
  const read = await fetch(`${url}/reads?b=`);
  assert.equal(read.status, 200);
  assert.deepEqual(await read.json(), { a: null, b: true });
  assert.equal((await fetch(`${url}/fine`)).status, 200);
});

test('a write with a query parameter its route does not declare is a 400 before its handler runs; declared ones and `any` pass', async () => {
  const before = writes;
  const create = await fetch(`${url}/writes?environment=sandbox`, { method: 'POST', body: '{}' });
  assert.equal(create.status, 400);
  const error = ((await create.json()) as { error: { code: string; field: string; message: string } }).error;
  assert.deepEqual([error.code, error.field], ['unknown_query_parameter', 'environment']);
  assert.match(error.message, /where a new record has an environment, it goes in the JSON body/);
  assert.equal((await fetch(`${url}/scoped?enviroment=sandbox`, { method: 'DELETE' })).status, 400);
  assert.equal(writes, before, 'neither handler ran');
  assert.equal((await fetch(`${url}/scoped?environment=sandbox`, { method: 'DELETE' })).status, 204);
  assert.equal((await fetch(`${url}/writes`, { method: 'POST' })).status, 204);
  assert.equal((await fetch(`${url}/open?provider=x`, { method: 'POST' })).status, 204);
  assert.equal(writes, before + 3);
});

test('a request arriving on an open connection while the server shuts down is 503 shutting_down and its connection closed; the one in flight is answered', async () => {
  let release!: () => void;
  const held = new Promise<void>((resolve) => (release = resolve));
  let started!: () => void;
  const slowStarted = new Promise<void>((resolve) => (started = resolve));
  let receiving!: () => void;
  const uploadStarted = new Promise<void>((resolve) => (receiving = resolve));
  const closing = new HttpServer({ logger: createLogger('error', () => undefined), metrics: createRuntimeMetrics() });
  closing.addRoutes(
    { method: 'GET', pattern: '/slow', handler: async () => (started(), await held, { status: 200, json: { done: true } }) },
    { method: 'GET', pattern: '/fine', handler: () => ({ status: 200, json: { ok: true } }) },
    // Answered where the body's last chunk arrives: inside uWS's data callback.
    { method: 'POST', pattern: '/sized', beforeBody: () => receiving(), handler: (request) => ({ status: 200, json: { bytes: request.body.length } }) },
  );
  const port = await closing.listen('127.0.0.1', 0);
  /** A raw connection and everything it received, and whether the server closed it. */
  const open = async () => {
    const socket = connect(port, '127.0.0.1');
    await new Promise<void>((resolve) => socket.once('connect', () => resolve()));
    const state = { received: '', ended: false };
    socket.on('data', (chunk: Buffer) => (state.received += chunk.toString('latin1')));
    socket.on('close', () => (state.ended = true));
    return { socket, state };
  };
  const inFlight = await open();
  const idle = await open();
  const uploading = await open();
  inFlight.socket.write('GET /slow HTTP/1.1\r\nhost: x\r\n\r\n');
  await slowStarted;
  uploading.socket.write('POST /sized HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: 10\r\n\r\n12345');
  await uploadStarted;
  const closed = closing.close();
  try {
    idle.socket.write('GET /fine HTTP/1.1\r\nhost: x\r\n\r\n');
    await waitUntil(() => idle.state.ended);
    assert.match(idle.state.received, /^HTTP\/1\.1 503 /);
    assert.match(idle.state.received, /retry-after: 1\r\n/i);
    assert.match(idle.state.received, /"code":"shutting_down"/);
  } finally {
    release();
  }
  await waitUntil(() => inFlight.state.received.includes('{"done":true}'));
  assert.match(inFlight.state.received, /^HTTP\/1\.1 200 /);
  // Answered during the stop: the client is told not to send another request on that connection
  // (one it sent at once would meet the connection being dropped: a reset, not the 503).
  assert.match(inFlight.state.received, /\r\nconnection: close\r\n/i);
  await waitUntil(() => inFlight.state.ended);
  // The last request in flight is answered as its body completes, and that answer goes out before the connections close.
  uploading.socket.write('67890');
  await closed;
  await waitUntil(() => uploading.state.ended && inFlight.state.ended);
  assert.match(uploading.state.received, /^HTTP\/1\.1 200 [^]*\{"bytes":10\}/);
});

test('a HEAD answered once the server stops accepting keeps its connection, and the next request on it is 503 shutting_down', async () => {
  let release!: () => void;
  const held = new Promise<void>((resolve) => (release = resolve));
  let started!: () => void;
  const slowStarted = new Promise<void>((resolve) => (started = resolve));
  const stopping = new HttpServer({ logger: createLogger('error', () => undefined), metrics: createRuntimeMetrics() });
  stopping.addRoutes({ method: 'GET', pattern: '/slow', handler: async () => (started(), await held, { status: 200, json: { done: true } }) });
  const port = await stopping.listen('127.0.0.1', 0);
  const socket = connect(port, '127.0.0.1');
  let received = '';
  let ended = false;
  socket.on('data', (chunk: Buffer) => (received += chunk.toString('latin1')));
  socket.on('close', () => (ended = true));
  try {
    socket.write('HEAD /slow HTTP/1.1\r\nhost: x\r\n\r\n');
    await slowStarted;
    stopping.stopAccepting();
    release();
    await waitUntil(() => received.includes('\r\n\r\n'));
    assert.match(received, /^HTTP\/1\.1 200 /);
    socket.write('GET /slow HTTP/1.1\r\nhost: x\r\n\r\n');
    await waitUntil(() => ended);
    assert.match(received, /HTTP\/1\.1 503 [^]*"code":"shutting_down"/, received);
  } finally {
    socket.destroy();
    await stopping.close();
  }
});

test('a body still arriving when the stop is 5 s old is cut off with 503 stopping (Retry-After), so the stop ends; a complete one was answered', async () => {
  const stopping = new HttpServer({ logger: createLogger('silent'), metrics: createRuntimeMetrics() });
  let handled = 0;
  stopping.addRoutes({ method: 'POST', pattern: '/echo', handler: (request) => ((handled += 1), { status: 200, text: String(request.body.length) }) });
  const port = await stopping.listen('127.0.0.1', 0);
  const socket = connect(port, '127.0.0.1');
  await new Promise<void>((resolve) => socket.once('connect', () => resolve()));
  const state = { received: '', ended: false };
  socket.on('data', (chunk: Buffer) => (state.received += chunk.toString('latin1')));
  socket.on('close', () => (state.ended = true));
  socket.write('POST /echo HTTP/1.1\r\nhost: x\r\ncontent-length: 900\r\n\r\n');
  socket.write('x'.repeat(100));
  const complete = await fetch(`http://127.0.0.1:${port}/echo`, { method: 'POST', body: 'y'.repeat(10) });
  assert.equal(await complete.text(), '10');
  mock.timers.enable({ apis: ['setTimeout'] });
  let stopped = false;
  try {
    const closed = stopping.close().then(() => (stopped = true));
    // A trickle: more of the body, never all of it.
    socket.write('x'.repeat(100));
    for (let i = 0; i < 4; i++) {
      await new Promise((resolve) => setImmediate(resolve));
      mock.timers.tick(1000);
    }
    assert.equal(state.received, '', 'within the grace the body is still waited for');
    assert.equal(stopped, false);
    for (let i = 0; i < 50 && state.received === ''; i++) {
      await new Promise((resolve) => setImmediate(resolve));
      mock.timers.tick(1000);
    }
    mock.timers.reset();
    await closed;
    assert.match(state.received, /^HTTP\/1\.1 503 /);
    assert.match(state.received, /retry-after: 2\r\n/i);
    assert.match(state.received, /"code":"stopping"/);
    assert.equal(handled, 1, 'the cut-off request reached no handler');
  } finally {
    mock.timers.reset();
    socket.destroy();
  }
});

test('an unexpected error is a 500 in the error shape, logged with its route once per 10 s with how many were held back', async () => {
  const lines: string[] = [];
  mock.timers.enable({ apis: ['Date'], now: Date.UTC(2026, 11, 4) });
  const failing = new HttpServer({ logger: createLogger('error', (line) => void lines.push(line)), metrics: createRuntimeMetrics(), logClock: () => Date.now() });
  failing.addRoutes({ method: 'GET', pattern: '/broken/:id', handler: () => { throw new Error('a bug'); } });
  const port = await failing.listen('127.0.0.1', 0);
  try {
    for (let i = 0; i < 3; i++) {
      const answer = await fetch(`http://127.0.0.1:${port}/broken/${i}`);
      assert.equal(answer.status, 500);
      assert.deepEqual(await answer.json(), { error: { code: 'internal_error', message: 'An internal error occurred.' } });
    }
    const logged = () => lines.map((line) => JSON.parse(line) as { message: string; route?: string; error?: string; held_back?: number }).filter((line) => line.message === 'unhandled error in request handler');
    assert.deepEqual(logged().map(({ route, error, held_back }) => ({ route, error, held_back })), [{ route: '/broken/:id', error: 'a bug', held_back: undefined }]);
    mock.timers.tick(10_000);
    assert.equal((await fetch(`http://127.0.0.1:${port}/broken/9`)).status, 500);
    assert.equal(logged().length, 2);
    assert.equal(logged()[1]?.held_back, 2, 'the two held back are counted');
  } finally {
    mock.timers.reset();
    await failing.close();
  }
});

async function waitUntil(condition: () => boolean): Promise<void> {
  for (let i = 0; i < 500 && !condition(); i++) await new Promise((resolve) => setTimeout(resolve, 10));
  assert.ok(condition(), 'condition not met within 5 s');
}
