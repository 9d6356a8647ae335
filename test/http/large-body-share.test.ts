// How much of the event loop one org's large request bodies may take (large-body-share.ts): read
// one at a time, in order; past a burst, in turn with the time they took; refused (429) past the
// longest wait; other orgs are not held by it. Found by a probe: an org sending 1 MiB bodies of tiny
// values to the workflow API held every other org's requests for up to a second. On the share's own
// clock (timers mocked); then a real server.

import assert from 'node:assert/strict';
import { request as httpRequest } from 'node:http';
import { after, before, mock, test } from 'node:test';
import { LargeBodiesTooFastError, LargeBodyShare } from '../../runtime/http/large-body-share.ts';
import { parseJsonRequest } from '../../runtime/http/parse-json.ts';
import { HttpServer } from '../../runtime/http/server.ts';
import { createLogger } from '../../runtime/log.ts';
import { createRuntimeMetrics } from '../../runtime/metrics.ts';

/** Whether `promise` has settled, after the loop's pending immediates ran. */
async function settled(promise: Promise<unknown>): Promise<boolean> {
  let done = false;
  promise.then(() => (done = true), () => (done = true));
  await new Promise((resolve) => setImmediate(resolve));
  await new Promise((resolve) => setImmediate(resolve));
  return done;
}

test('an org\'s large bodies are read one at a time in order; past its burst the next waits for its share, one that would wait too long is refused; another org goes on', async () => {
  mock.timers.enable({ apis: ['setTimeout'] });
  try {
    let now = 0;
    // A tenth of the loop, a burst of 30 ms of it, waits of at most 1 s.
    const share = new LargeBodyShare({ share: 0.1, burstMs: 30, maxWaitMs: 1000, now: () => now });
    const first = share.turn('a');
    const second = share.turn('a');
    await first;
    assert.equal(await settled(second), false, 'one at a time');
    share.done('a', 20);
    await second;
    share.done('a', 200); // 190 ms overdrawn: 1.9 s to pay back at a tenth
    await assert.rejects(share.turn('a'), (error: unknown) => error instanceof LargeBodiesTooFastError && error.status === 429 && error.retryAfterMs === 1900);
    const other = share.turn('b');
    await other;
    share.done('b', 5);
    now = 1000;
    const waiting = share.turn('a');
    assert.equal(await settled(waiting), false, 'waits 900 ms more');
    now = 1900;
    mock.timers.tick(900);
    await waiting;
    share.done('a', 0);
  } finally {
    mock.timers.reset();
  }
});

test('a body waiting its turn can be withdrawn (a stop), and the next goes; orgs paid off are forgotten', async () => {
  let now = 0;
  const share = new LargeBodyShare({ share: 0.5, burstMs: 50, maxWaitMs: 1000, now: () => now });
  const reading = share.turn('a');
  let cut: ((error: Error) => void) | undefined;
  const withdrawn = share.turn('a', (cutOff) => (cut = cutOff));
  const next = share.turn('a');
  await reading;
  cut?.(new Error('stopping'));
  await assert.rejects(withdrawn, /stopping/);
  share.done('a', 10);
  await next;
  share.done('a', 10);
  for (let i = 0; i < 2000; i += 1) {
    const org = `org-${i}`;
    await share.turn(org);
    share.done(org, 1);
    now += 10;
  }
  assert.ok(share.trackedOrgs < 1100, `${share.trackedOrgs} orgs kept`);
});

let server: HttpServer;
let port: number;
let parsed = 0;

before(async () => {
  // A millionth of the loop: any read of a large body leaves its org in debt for seconds; no burst;
  // no wait over 1 s. The share's clock stands still.
  const largeBodies = new LargeBodyShare({ share: 1e-6, burstMs: 0, maxWaitMs: 1000, now: () => 0 });
  server = new HttpServer({ logger: createLogger('silent'), metrics: createRuntimeMetrics(), largeBodies });
  const parse = (request: Parameters<typeof parseJsonRequest>[0]) => {
    parseJsonRequest(request);
    parsed += 1;
    return { status: 204 };
  };
  server.addRoutes(
    { method: 'POST', pattern: '/orgs/:org_id/parse', handler: parse },
    { method: 'POST', pattern: '/orgs/:org_id/threaded', readsLargeBodiesInThread: true, handler: () => ({ status: 204 }) },
  );
  port = await server.listen('127.0.0.1', 0);
});
after(() => server.close());

/** POSTs `body` as JSON; resolves with the status, Retry-After and error code. */
const post = (path: string, body: string): Promise<{ status: number; retryAfter: string | undefined; code: string | undefined }> =>
  new Promise((resolve, reject) => {
    const sent = httpRequest({ host: '127.0.0.1', port, path, method: 'POST', agent: false, headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) } }, (answer) => {
      let text = '';
      answer.setEncoding('utf8').on('data', (chunk: string) => (text += chunk)).on('end', () =>
        resolve({ status: answer.statusCode ?? 0, retryAfter: answer.headers['retry-after'], code: text === '' ? undefined : (JSON.parse(text) as { error: { code: string } }).error.code }),
      );
    });
    sent.on('error', reject).end(body);
  });

test('a real server: an org past its share is answered 429 before its next large body is read; its small bodies, threaded routes and other orgs go on', async () => {
  const large = JSON.stringify({ filler: Array.from({ length: 20_000 }, (_, i) => i) });
  assert.ok(large.length >= 64 * 1024);
  assert.equal((await post('/orgs/noisy/parse', large)).status, 204);
  const before = parsed;
  const refused = await post('/orgs/noisy/parse', large);
  assert.equal(refused.status, 429);
  assert.equal(refused.code, 'large_bodies_too_fast');
  assert.ok(Number(refused.retryAfter) >= 1);
  assert.equal(parsed, before, 'refused before its handler read it');
  assert.equal((await post('/orgs/noisy/parse', '{"small":true}')).status, 204, 'a small body is not held to the share');
  assert.equal((await post('/orgs/noisy/threaded', large)).status, 204, 'nor a body its route reads in a thread');
  assert.equal((await post('/orgs/quiet/parse', large)).status, 204, 'another org has its own share');
});
