// The pacing of `sluice device` on its own, with time in the test's hands: never more unanswered
// than the window allows, a retryable nack holding every send for the wait Sluice named and its
// message sent again first, and answers matched to messages by the id Sluice reads from them.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { DevicePacer } from '../runtime/device-pacer.ts';

/** A pacer whose sends are recorded and whose waits end only when the test ends them. */
function pacer(cap: number) {
  const sent: string[] = [];
  const waits: Array<{ ms: number; end: () => void }> = [];
  const p = new DevicePacer({
    cap,
    send: (text) => sent.push(/"id":"([^"]*)"/.exec(text)?.[1] ?? text),
    sleep: (ms) => new Promise((resolve) => waits.push({ ms, end: resolve })),
    onProgress: () => {},
  });
  const add = (...ids: string[]): void => ids.forEach((id) => p.add(JSON.stringify({ id, type: 'bulk.ev' })));
  return { p, sent, waits, add };
}

test('never more than the cap unanswered: each answer lets the next message go', () => {
  const { p, sent, add } = pacer(3);
  add('m1', 'm2', 'm3', 'm4', 'm5');
  assert.deepEqual(sent, ['m1', 'm2', 'm3']);
  assert.equal(p.queued, 2);
  assert.deepEqual(p.answer({ type: 'ack', id: 'm2' }), { kind: 'final', acked: true });
  assert.deepEqual(sent, ['m1', 'm2', 'm3', 'm4']);
  assert.deepEqual(p.answer({ type: 'nack', id: 'm1', retryable: false }), { kind: 'final', acked: false });
  assert.deepEqual(sent, ['m1', 'm2', 'm3', 'm4', 'm5']);
  for (const id of ['m3', 'm4', 'm5']) p.answer({ type: 'ack', id });
  assert.equal(p.settled, true);
});

test('a retryable nack holds every send for the wait it names, then its message goes first; the window halves and grows back per ack', async () => {
  const { p, sent, waits, add } = pacer(4);
  add('m1', 'm2', 'm3', 'm4', 'm5', 'm6');
  assert.deepEqual(p.answer({ type: 'nack', id: 'm2', retryable: true, retry_after_ms: 50 }), { kind: 'retry', waitMs: 50 });
  assert.deepEqual(waits.map((w) => w.ms), [50]);
  p.answer({ type: 'ack', id: 'm1' });
  assert.deepEqual(sent, ['m1', 'm2', 'm3', 'm4'], 'nothing is sent during the wait, though an ack made room');
  waits[0]!.end();
  await Promise.resolve();
  // The window: 4 halved to 2, one more for m1's ack; m3 and m4 are unanswered, so one goes.
  assert.deepEqual(sent, ['m1', 'm2', 'm3', 'm4', 'm2'], 'm2 again, before the lines not sent yet');
  p.answer({ type: 'ack', id: 'm3' });
  assert.deepEqual(sent, ['m1', 'm2', 'm3', 'm4', 'm2', 'm5', 'm6'], "m3's ack grows the window back to 4");
  for (const id of ['m4', 'm2', 'm5', 'm6']) p.answer({ type: 'ack', id });
  assert.equal(p.settled, true);
});

test('several messages nacked while out go again in the order they were given, ahead of the lines not sent yet', async () => {
  const { p, sent, waits, add } = pacer(4);
  add('m1', 'm2', 'm3', 'm4', 'm5', 'm6');
  for (const id of ['m2', 'm3', 'm4']) p.answer({ type: 'nack', id, retryable: true, retry_after_ms: 10 });
  for (const wait of waits) wait.end();
  await new Promise((resolve) => setImmediate(resolve));
  // Each ack widens the window again: answer what went out as it goes out (the first four sends: m1 only).
  p.answer({ type: 'ack', id: 'm1' });
  for (let next = 4; next < sent.length; next++) p.answer({ type: 'ack', id: sent[next]! });
  assert.deepEqual(sent.slice(4), ['m2', 'm3', 'm4', 'm5', 'm6'], 'not m4, m3, m2');
  assert.equal(p.settled, true);
});

test('without a wait from Sluice the backoff is 250 ms doubling; a nack naming no id settles a message whose id cannot be read', async () => {
  const { p, sent, waits } = pacer(8);
  p.add('not json');
  p.add(JSON.stringify({ id: 'a', type: 't' }));
  assert.deepEqual(p.answer({ type: 'nack', id: 'a', retryable: true }), { kind: 'retry', waitMs: waits[0]!.ms });
  assert.ok(waits[0]!.ms >= 125 && waits[0]!.ms <= 250, String(waits[0]!.ms));
  assert.deepEqual(p.answer({ type: 'nack', id: null, retryable: false }), { kind: 'final', acked: false });
  assert.deepEqual(p.answer({ type: 'ack', id: 'nobody' }), { kind: 'unmatched' });
  assert.deepEqual(p.answer({ type: 'ready' }), { kind: 'unmatched' });
  waits[0]!.end();
  await Promise.resolve();
  assert.deepEqual(sent, ['not json', 'a', 'a']);
  p.answer({ type: 'nack', id: 'a', retryable: true });
  assert.ok(waits[1]!.ms >= 250 && waits[1]!.ms <= 500, String(waits[1]!.ms));
});

test('unfinished names the messages without a final answer, in the order given: sent and unanswered, and not sent (or waiting to be sent again)', () => {
  const { p, add } = pacer(2);
  add('m1', 'm2', 'm3');
  assert.deepEqual(p.unfinished(), { sent: ['m1', 'm2'], unsent: ['m3'] });
  p.answer({ type: 'ack', id: 'm1' });
  assert.deepEqual(p.unfinished(), { sent: ['m2', 'm3'], unsent: [] });
  p.answer({ type: 'nack', id: 'm2', retryable: true, retry_after_ms: 10 });
  assert.deepEqual(p.unfinished(), { sent: ['m3'], unsent: ['m2'] });
  p.answer({ type: 'nack', id: 'm3', retryable: false });
  assert.deepEqual(p.unfinished(), { sent: [], unsent: ['m2'] }, 'a final nack is an answer');
});
