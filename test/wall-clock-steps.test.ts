// Intervals are measured on the monotonic clock, so a wall clock stepped (an NTP step) neither
// silences rate-limited log lines for as long (a failing disk's commit lines among them), nor makes
// /healthz's uptime negative, nor a webhook attempt's duration an hour long (a probe with
// libfaketime, 2026-12-08).

import assert from 'node:assert/strict';
import { mock, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { throttledStrays } from '../hook-runner/lmdb-commit-failure.ts';
import { sendWebhook } from '../runtime/runs/webhook-step.ts';
import { call } from './helpers/http.ts';
import { startRuntime } from './helpers/runtime.ts';
import { connectionPool, serve } from './helpers/webhook-attempts.ts';
import { SettableClock } from './helpers/settable-clock.ts';

test('a rate-limited log line comes again one interval later, though the wall clock was set back an hour meanwhile', async () => {
  mock.timers.enable({ apis: ['Date'], now: Date.UTC(2026, 11, 8, 12) });
  try {
    const emitted: number[] = [];
    const log = throttledStrays<number>((value) => emitted.push(value), undefined, 30);
    log(1);
    mock.timers.setTime(Date.UTC(2026, 11, 8, 11));
    log(2);
    assert.deepEqual(emitted, [1], 'within the interval: held back');
    await sleep(40);
    log(3);
    assert.deepEqual(emitted, [1, 3], 'an interval later, on the time that passed');
  } finally {
    mock.timers.reset();
  }
});

test('/healthz counts its uptime on the time that passed, not on a wall clock set back', async () => {
  const clock = new SettableClock(Date.UTC(2026, 11, 8, 12));
  const rt = await startRuntime({ clock });
  try {
    clock.advance(5_000);
    clock.wall -= 60 * 60_000;
    const health = await call(rt.url, 'GET', '/healthz');
    assert.equal(health.status, 200);
    assert.equal((health.body as { uptime_ms: number }).uptime_ms, 5_000);
  } finally {
    await rt.close();
  }
});

test("a webhook attempt's duration_ms is the time that passed, though the wall clock stepped an hour ahead during it", async () => {
  const local = await serve((_request, response) => {
    mock.timers.setTime(Date.UTC(2026, 11, 8, 13));
    response.end('ok');
  });
  mock.timers.enable({ apis: ['Date'], now: Date.UTC(2026, 11, 8, 12) });
  try {
    const request = { orgId: 'acct-a', url: local.url, headers: {}, timeoutMs: 5000, body: '{}', idempotencyKey: 'run_1:step_1', fence: 1, attempt: 1, signingSecrets: () => [], nowMs: Date.now() };
    const outcome = await sendWebhook(request, { selfPort: 1, connections: connectionPool() });
    assert.equal(outcome.ok, true);
    const { duration_ms: duration } = outcome.evidence as { duration_ms: number };
    assert.ok(duration < 10_000, `${duration} ms`);
  } finally {
    mock.timers.reset();
  }
});
