// The uWS adapter on a real socket: a reply that cannot be serialized becomes a logged 500, and the
// server keeps serving.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { createLogger } from '../../runtime/log.ts';
import { createRuntimeMetrics } from '../../runtime/metrics.ts';
import { HttpServer } from '../../runtime/http/server.ts';

const logged: string[] = [];
let server: HttpServer;
let url: string;

before(async () => {
  server = new HttpServer({ logger: createLogger('error', (line) => logged.push(line)), metrics: createRuntimeMetrics() });
  server.addRoutes(
    { method: 'GET', pattern: '/bigint', handler: () => ({ status: 200, json: { amount: 10n } }) },
    { method: 'GET', pattern: '/fine', handler: () => ({ status: 200, json: { ok: true }, headers: { 'x-kept': 'yes' } }) },
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
