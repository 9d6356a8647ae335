// A handler may read its request body only before its first await (what the org's share of large
// bodies counts): reading it later is a logged 500 naming the route, for small bodies as for large
// ones, so the first test of a route that gets this wrong fails. Routes that read large bodies in a
// thread of their own are exempt.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { BodyReadLateError, bodyReadWindow } from '../../runtime/http/body-read-window.ts';
import { LARGE_BODY_BYTES } from '../../runtime/http/large-body-share.ts';
import { createLogger } from '../../runtime/log.ts';
import { createRuntimeMetrics } from '../../runtime/metrics.ts';
import { HttpServer } from '../../runtime/http/server.ts';
import type { HttpRequest } from '../../runtime/http/types.ts';

const lines: string[] = [];
let server: HttpServer;
let url: string;

const lengthAfterAwait = async (request: HttpRequest) => {
  await Promise.resolve();
  return { status: 200, text: String(request.body.length) };
};

before(async () => {
  server = new HttpServer({ logger: createLogger('error', (line) => void lines.push(line)), metrics: createRuntimeMetrics() });
  server.addRoutes(
    { method: 'POST', pattern: '/orgs/:org_id/early', handler: async (request) => {
      const length = request.body.length;
      await Promise.resolve();
      return { status: 200, text: String(length) };
    } },
    { method: 'POST', pattern: '/orgs/:org_id/late', handler: lengthAfterAwait },
    { method: 'POST', pattern: '/orgs/:org_id/threaded', readsLargeBodiesInThread: true, handler: lengthAfterAwait },
  );
  url = `http://127.0.0.1:${await server.listen('127.0.0.1', 0)}`;
});
after(async () => server.close());

const post = async (path: string, bytes: number) => {
  const answer = await fetch(`${url}${path}`, { method: 'POST', body: 'x'.repeat(bytes) });
  return { status: answer.status, text: await answer.text() };
};

test('a body read before the first await is the handler\'s, small or large', async () => {
  assert.deepEqual(await post('/orgs/acct-a/early', 10), { status: 200, text: '10' });
  assert.deepEqual(await post('/orgs/acct-a/early', LARGE_BODY_BYTES), { status: 200, text: String(LARGE_BODY_BYTES) });
});

test('a body read after the first await is a 500, logged with the route and why', async () => {
  for (const bytes of [10, LARGE_BODY_BYTES]) {
    const answer = await post('/orgs/acct-a/late', bytes);
    assert.equal(answer.status, 500, `${bytes} bytes`);
    assert.deepEqual(JSON.parse(answer.text), { error: { code: 'internal_error', message: 'An internal error occurred.' } });
  }
  // One line per 10 s: the second 500 is counted in the next.
  const logged = lines.map((line) => JSON.parse(line) as { message: string; route?: string; error?: string }).filter((line) => line.message === 'unhandled error in request handler');
  assert.equal(logged.length, 1, lines.join('\n'));
  assert.equal(logged[0]?.route, '/orgs/:org_id/late');
  assert.match(logged[0]?.error ?? '', /the handler of \/orgs\/acct-a\/late read its request body after its first await/);
});

test('a route that reads large bodies in a thread of its own may read its body after an await', async () => {
  assert.deepEqual(await post('/orgs/acct-a/threaded', LARGE_BODY_BYTES), { status: 200, text: String(LARGE_BODY_BYTES) });
});

test('the window: the body and the head while open, BodyReadLateError once closed, the head still readable', () => {
  const head = { method: 'POST', path: '/p', query: new URLSearchParams(), headers: {}, params: { id: 'a' } };
  const window = bodyReadWindow(head, Buffer.from('abc'));
  assert.equal(window.request.body.toString(), 'abc');
  window.close();
  assert.throws(() => window.request.body, BodyReadLateError);
  assert.deepEqual(window.request.params, { id: 'a' });
});
