// Retry schedule: 30 s doubling to the cap, exhaustion after the budget, server hints capped,
// and Retry-After in both forms measured against an injected now.

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { DEFAULT_RETRY_POLICY, jitterOf, nextRetryDelay, parseRetryAfter, resolveRetryPolicy } from '../../actors/retry-policy.ts';

describe('nextRetryDelay', () => {
  it('follows 30 s, 60 s, 120 s, 240 s, 480 s and is exhausted after 5 retries', () => {
    const delays = [1, 2, 3, 4, 5, 6].map((n) => nextRetryDelay(DEFAULT_RETRY_POLICY, n));
    assert.deepEqual(delays, [30_000, 60_000, 120_000, 240_000, 480_000, 'exhausted']);
  });

  it('caps the doubling at max_ms (1 h by default)', () => {
    const policy = resolveRetryPolicy({ max_retries: 20 });
    assert.equal(nextRetryDelay(policy, 7), 1_920_000);
    assert.equal(nextRetryDelay(policy, 8), 3_600_000);
    assert.equal(nextRetryDelay(policy, 20), 3_600_000);
    assert.equal(nextRetryDelay(policy, 21), 'exhausted');
  });

  it('applies a per-step override', () => {
    const policy = resolveRetryPolicy({ max_retries: 3, initial_ms: 100, max_ms: 250 });
    assert.deepEqual([1, 2, 3, 4].map((n) => nextRetryDelay(policy, n)), [100, 200, 250, 'exhausted']);
    assert.equal(nextRetryDelay(resolveRetryPolicy({ max_retries: 0 }), 1), 'exhausted');
  });

  it('raises the default cap to meet an initial delay above it', () => {
    assert.deepEqual(resolveRetryPolicy({ initial_ms: 7_200_000 }), { maxRetries: 5, initialMs: 7_200_000, maxMs: 7_200_000 });
  });

  it('honours retryAfterMs instead of the backoff, capped at max_ms, within the budget', () => {
    assert.equal(nextRetryDelay(DEFAULT_RETRY_POLICY, 1, 5_000), 5_000);
    assert.equal(nextRetryDelay(DEFAULT_RETRY_POLICY, 2, 0), 1_000, 'Retry-After: 0 still waits a second');
    assert.equal(nextRetryDelay({ maxRetries: 5, initialMs: 200, maxMs: 10_000 }, 1, 0), 200, 'or the step\'s shorter first delay');
    assert.equal(nextRetryDelay(DEFAULT_RETRY_POLICY, 1, 86_400_000), 3_600_000);
    assert.equal(nextRetryDelay(DEFAULT_RETRY_POLICY, 6, 1_000), 'exhausted');
    assert.equal(nextRetryDelay(DEFAULT_RETRY_POLICY, 1, Number.NaN), 30_000);
  });

  it('shortens the backoff by its jitter, at most a fifth, but never a Retry-After hint', () => {
    assert.equal(nextRetryDelay(DEFAULT_RETRY_POLICY, 1, undefined, 0.5), 27_000);
    assert.equal(nextRetryDelay(DEFAULT_RETRY_POLICY, 2, undefined, 0.999_999), 48_000);
    assert.equal(nextRetryDelay(resolveRetryPolicy({ max_retries: 20 }), 9, undefined, 0.5), 3_240_000, 'of the capped wait');
    assert.equal(nextRetryDelay(DEFAULT_RETRY_POLICY, 1, 5_000, 0.5), 5_000);
    assert.equal(nextRetryDelay(DEFAULT_RETRY_POLICY, 6, undefined, 0.5), 'exhausted');
  });

  it('draws the jitter from its key: fixed per key, spread over [0, 1) across keys', () => {
    assert.equal(jitterOf('run_1:a:1'), jitterOf('run_1:a:1'));
    const draws = Array.from({ length: 1000 }, (_, i) => jitterOf(`run_${i}:call:1`));
    assert.ok(draws.every((j) => j >= 0 && j < 1));
    const tenths = new Set(draws.map((j) => Math.floor(j * 10)));
    assert.equal(tenths.size, 10, 'every tenth of the range is drawn');
    assert.notEqual(jitterOf('run_1:a:1'), jitterOf('run_1:a:2'), 'each retry of a run draws again');
  });

  it('refuses attempt numbers below 1', () => {
    assert.throws(() => nextRetryDelay(DEFAULT_RETRY_POLICY, 0), RangeError);
  });
});

describe('parseRetryAfter', () => {
  const now = Date.UTC(2025, 5, 1, 12, 0, 0);

  it('reads delta-seconds', () => {
    assert.equal(parseRetryAfter('120', now), 120_000);
    assert.equal(parseRetryAfter(' 0 ', now), 0);
    // Any number of digits is delta-seconds (RFC 9110): a very long one asks for a very long wait.
    assert.equal(parseRetryAfter('9999999999999', now), 1e15);
    assert.equal(parseRetryAfter('9'.repeat(400), now), 1e15);
  });

  it('reads an HTTP-date relative to the injected now', () => {
    assert.equal(parseRetryAfter('Sun, 01 Jun 2025 12:01:30 GMT', now), 90_000);
    assert.equal(parseRetryAfter('Sun, 01 Jun 2025 11:00:00 GMT', now), 0);
    // A now measured with sub-millisecond precision still gives whole milliseconds, never early.
    assert.equal(parseRetryAfter('Sun, 01 Jun 2025 12:01:30 GMT', now + 428.517822265625), 89_572);
  });

  it('reads all three HTTP-date forms as GMT, whatever the host\'s time zone', () => {
    const zone = process.env['TZ'];
    // Node reads TZ again when it is set: asctime's form names no zone, and Date.parse takes local time.
    process.env['TZ'] = 'America/New_York';
    try {
      assert.equal(new Date(Date.UTC(2025, 5, 1, 12)).getHours(), 8, 'the host is in New York now');
      assert.equal(parseRetryAfter('Sun Jun  1 12:05:00 2025', now), 300_000, 'asctime');
      assert.equal(parseRetryAfter('Sunday, 01-Jun-25 12:05:00 GMT', now), 300_000, 'RFC 850');
      assert.equal(parseRetryAfter('Sun, 01 Jun 2025 12:05:00 GMT', now), 300_000, 'IMF-fixdate');
      assert.equal(parseRetryAfter('2025-06-01T12:05:00', now), 300_000, 'an ISO time with no zone, not an HTTP-date, is taken as GMT too');
      assert.equal(parseRetryAfter('Sun Jun  1 12:04:60 2025', now), 299_000, 'a leap second, as the second before it (Date.parse read asctime\'s as 1960)');
      assert.equal(parseRetryAfter('Sun, 01 Jun 2025 12:04:60 GMT', now), 299_000);
    } finally {
      if (zone === undefined) delete process.env['TZ'];
      else process.env['TZ'] = zone;
    }
  });

  it('ignores absent and malformed values', () => {
    for (const header of [undefined, null, '', '-5', '1.5', 'soon', '12:00:00', 'Sun, 99 Foo 2025 12:00:00 GMT']) {
      assert.equal(parseRetryAfter(header, now), undefined, String(header));
    }
  });

  it('feeds nextRetryDelay, which caps it', () => {
    const hint = parseRetryAfter('Mon, 02 Jun 2025 12:00:00 GMT', now);
    assert.equal(hint, 86_400_000);
    assert.equal(nextRetryDelay(DEFAULT_RETRY_POLICY, 1, hint), 3_600_000);
  });
});
