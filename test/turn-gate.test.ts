// A turn gate lets its number of callers through per event-loop turn, the others in later turns,
// in the order they came.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { TurnGate } from '../runtime/turn-gate.ts';

test('callers beyond the per-turn number pass in later turns, in order; other work runs between the turns', async () => {
  const gate = new TurnGate(3);
  const passed: Array<[caller: number, turn: number]> = [];
  let turn = 0;
  const turning = (async () => {
    for (; turn < 10; turn++) await new Promise((resolve) => setImmediate(resolve));
  })();
  await Promise.all(Array.from({ length: 8 }, async (_, caller) => {
    await gate.pass();
    passed.push([caller, turn]);
  }));
  await turning;
  assert.deepEqual(passed.map(([caller]) => caller), [0, 1, 2, 3, 4, 5, 6, 7]);
  const perTurn = new Map<number, number>();
  for (const [, at] of passed) perTurn.set(at, (perTurn.get(at) ?? 0) + 1);
  assert.deepEqual([...perTurn.values()], [3, 3, 2], `three a turn, over three turns: ${JSON.stringify(passed)}`);
});

test('once a turn has passed with nobody waiting, the next caller passes at once', async () => {
  const gate = new TurnGate(1);
  await gate.pass();
  await new Promise((resolve) => setImmediate(resolve));
  await new Promise((resolve) => setImmediate(resolve));
  let passed = false;
  void gate.pass().then(() => (passed = true));
  await Promise.resolve();
  assert.equal(passed, true);
});
