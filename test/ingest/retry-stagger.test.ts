// The waits told to an org's refused senders are spread one token apart (retry-stagger.ts): a crowd
// of senders sharing a quota, each coming back when told, is refused about once per message stored,
// not once per sender per token. Simulated on a virtual clock against the real token bucket.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { MAX_STAGGER_MS, RetryStagger } from '../../runtime/ingest/retry-stagger.ts';
import { TokenBucket } from '../../runtime/token-bucket.ts';

/** `senders` each send `each` messages one after another at `rate` a second; returns refusals per message stored. */
function refusalsPerStored(senders: number, each: number, rate: number, hint: (now: number, waitMs: number) => number): number {
  const bucket = new TokenBucket(rate, rate, 0);
  // Each sender's next attempt, in clock ms; all start at once.
  const due = Array.from({ length: senders }, () => 0);
  const left = Array.from({ length: senders }, () => each);
  let refused = 0;
  let stored = 0;
  while (stored < senders * each) {
    let next = -1;
    for (let i = 0; i < senders; i += 1) if (left[i]! > 0 && (next === -1 || due[i]! < due[next]!)) next = i;
    const now = due[next]!;
    const waitMs = bucket.take(now);
    if (waitMs === 0) {
      stored += 1;
      left[next]! -= 1;
    } else {
      refused += 1;
      due[next] = now + hint(now, waitMs);
    }
  }
  return refused / stored;
}

test('fifty senders sharing 250 a second: told the same wait they are refused ~20 times per message stored (47 measured over sockets); told staggered waits, about once', () => {
  const rate = 250;
  const herd = refusalsPerStored(50, 40, rate, (_now, waitMs) => waitMs);
  assert.ok(herd > 10, `without staggering: ${herd.toFixed(1)} refusals per stored`);
  const stagger = new RetryStagger();
  const spread = refusalsPerStored(50, 40, rate, (now, waitMs) => stagger.hint('acct', now, waitMs, 1000 / rate));
  assert.ok(spread < 2, `staggered: ${spread.toFixed(2)} refusals per stored`);
});

test('each hint is a slot after the one before while it is ahead, never before the sender\'s own wait, at most MAX_STAGGER_MS past it; orgs are apart', () => {
  const stagger = new RetryStagger();
  assert.deepEqual([stagger.hint('a', 0, 4, 4), stagger.hint('a', 0, 4, 4), stagger.hint('a', 1, 3, 4)], [4, 8, 11]);
  assert.equal(stagger.hint('b', 1, 3, 4), 3, 'another org: its own timeline');
  assert.equal(stagger.hint('a', 100, 500, 4), 500, 'the sender\'s own wait is later than the slot');
  assert.equal(stagger.hint('a', 2000, 4, 4), 4, 'a timeline passed starts again');
  for (let i = 0; i < 5000; i += 1) stagger.hint('c', 0, 10, 4);
  assert.equal(stagger.hint('c', 0, 10, 4), 10 + MAX_STAGGER_MS, 'a crowd larger than the horizon: capped');
  stagger.forget('a');
  assert.equal(stagger.hint('a', 2000, 4, 4), 4);
});
