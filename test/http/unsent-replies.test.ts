// A reply the socket cannot take at once is sent as its client reads it, and its unread bytes are
// counted per org (unsent-replies.ts): past an org's share its requests are 503 server_busy until
// those answers are read or their clients go; another org is served meanwhile. A file of its own:
// its 32 MiB answer's garbage collection made undici's pooled sockets of other tests' fetches fail.

import assert from 'node:assert/strict';
import { get as httpGet } from 'node:http';
import { connect } from 'node:net';
import { test } from 'node:test';
import { HttpServer } from '../../runtime/http/server.ts';
import { createLogger } from '../../runtime/log.ts';
import { createRuntimeMetrics } from '../../runtime/metrics.ts';

test('answers a client does not read are sent as it reads, counted per org: past an org\'s share its requests are 503 until they are read or their client goes', async () => {
  const big = 'x'.repeat(32 * 1024 * 1024);
  const server = new HttpServer({ logger: createLogger('silent'), metrics: createRuntimeMetrics(), unsentReplyBytes: 256 * 1024 * 1024, unsentReplyPerTenantBytes: 16 * 1024 * 1024 });
  server.addRoutes(
    { method: 'GET', pattern: '/orgs/:org_id/big', handler: () => ({ status: 200, text: big }) },
    { method: 'GET', pattern: '/orgs/:org_id/small', handler: () => ({ status: 200, text: 'small' }) },
  );
  const port = await server.listen('127.0.0.1', 0);
  // node:http, one connection per request: fetch's pool kept sockets this test's server closed.
  const ask = (org: string): Promise<{ status: number; retryAfter: string | undefined; text: string }> =>
    new Promise((resolve, reject) => {
      httpGet({ host: '127.0.0.1', port, path: `/orgs/${org}/small`, agent: false }, (answer) => {
        let text = '';
        answer.setEncoding('utf8').on('data', (chunk: string) => (text += chunk)).on('end', () => resolve({ status: answer.statusCode ?? 0, retryAfter: answer.headers['retry-after'], text }));
      }).on('error', reject);
    });
  const small = async (org: string): Promise<number> => (await ask(org)).status;
  /** A client that asks for the big answer and reads nothing of it until told. */
  const unread = (): { socket: ReturnType<typeof connect>; read: () => Promise<Buffer> } => {
    const socket = connect(port, '127.0.0.1');
    socket.write('GET /orgs/noisy/big HTTP/1.1\r\nhost: x\r\n\r\n');
    socket.pause();
    const chunks: Buffer[] = [];
    let bytes = 0;
    return {
      socket,
      read: () =>
        new Promise((resolve) => {
          socket.on('data', (chunk: Buffer) => {
            chunks.push(chunk);
            bytes += chunk.byteLength;
            const all = bytes > big.length ? Buffer.concat(chunks) : undefined;
            if (all !== undefined && all.length - (all.indexOf('\r\n\r\n') + 4) >= big.length) resolve(all);
          });
          socket.resume();
        }),
    };
  };
  try {
    const first = unread();
    let status = 200;
    for (let tries = 0; tries < 500 && status !== 503; tries++) status = await small('noisy');
    assert.equal(status, 503, 'the unread 32 MiB fill the org\'s 16 MiB share');
    const refused = await ask('noisy');
    assert.equal(refused.retryAfter, '1');
    assert.equal((JSON.parse(refused.text) as { error: { code: string } }).error.code, 'server_busy');
    assert.equal(await small('quiet'), 200, 'another org is served');
    const answer = await first.read();
    const body = answer.subarray(answer.indexOf('\r\n\r\n') + 4);
    assert.ok(body.length === big.length && body.every((byte) => byte === 0x78), 'the whole answer arrives, in order, as it is read');
    first.socket.destroy();
    for (let tries = 0; tries < 500 && status !== 200; tries++) status = await small('noisy');
    assert.equal(status, 200, 'read, its bytes are given back');
    // A client that goes without reading gives them back too.
    const second = unread();
    for (let tries = 0; tries < 500 && status !== 503; tries++) status = await small('noisy');
    assert.equal(status, 503);
    second.socket.destroy();
    for (let tries = 0; tries < 500 && status !== 200; tries++) status = await small('noisy');
    assert.equal(status, 200, 'gone, its bytes are given back');
  } finally {
    await server.close();
  }
});
