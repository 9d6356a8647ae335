// Tests runModule's two paths (hook-runner/sandbox.ts) against the real addon: runs that fit the
// inline fuel slice finish on the event loop, longer ones start over on the pool with the same result.
import assert from 'node:assert/strict';
import { before, describe, it } from 'node:test';

import { SANDBOX_LIMITS, compileModule, type CompiledModule, type SandboxOutcome } from '../../hook-runner/sandbox.ts';
import {
  INLINE_FUEL_SLICE,
  INLINE_TIME_BUDGET_MS,
  afterInlineRun,
  INLINE_OVERRUNS_ALLOWED,
  NO_INLINE_HISTORY,
  type InlineHistory,
  runModule,
  runModuleOnThreadPool,
} from '../../hook-runner/sandbox-run.ts';
import { parseThreadPoolSize } from '../../hook-runner/thread-pool.ts';
import { assemble, assembleFixture } from './fixtures/wat.ts';

/** Spins (input length x 1000) times, then outputs that count in decimal: fuel grows with the input. */
const SPINNER_WAT = `(module (memory (export "memory") 1)
  (func (export "execute") (param $ptr i32) (param $len i32) (result i32)
    (local $i i32) (local $n i32) (local $at i32)
    (local.set $n (i32.mul (local.get $len) (i32.const 1000)))
    (block $done (loop $spin
      (br_if $done (i32.ge_u (local.get $i) (local.get $n)))
      (local.set $i (i32.add (local.get $i) (i32.const 1)))
      (br $spin)))
    (local.set $at (i32.const 1024))
    (i32.store8 (local.get $at) (i32.const 0))
    (loop $digit
      (local.set $at (i32.sub (local.get $at) (i32.const 1)))
      (i32.store8 (local.get $at) (i32.add (i32.const 48) (i32.rem_u (local.get $i) (i32.const 10))))
      (local.set $i (i32.div_u (local.get $i) (i32.const 10)))
      (br_if $digit (local.get $i)))
    (local.get $at)))`;

const LOOP_WAT = `(module (memory (export "memory") 1)
  (func (export "execute") (param i32 i32) (result i32) (loop $forever (br $forever)) (i32.const 0)))`;

/** An input of exactly `length` bytes, so the spinner does `length * 1000` iterations. */
const inputOf = (length: number): string => JSON.stringify({ pad: 'x'.repeat(length - 10) });
const CHEAP_INPUT = inputOf(12);
/** ~9 fuel per iteration: 200,000 iterations need several slices but far less than the ceiling. */
const EXPENSIVE_INPUT = inputOf(200);

let spinnerBytes: Uint8Array;
let loopBytes: Uint8Array;
/** A module compiled for one test, so no earlier run has taught runModule that it needs the pool. */
const fresh = (bytes: Uint8Array): CompiledModule => compileModule(bytes);

before(async () => {
  spinnerBytes = await assemble(SPINNER_WAT);
  loopBytes = await assemble(LOOP_WAT);
});

/**
 * Starts `run` while every libuv thread is busy with an endless loop and says whether its outcome
 * arrived before any of those finished. The pool queue is FIFO, so a run that went to the pool
 * cannot finish before a pool thread frees up: arriving first proves it ran on the event loop.
 */
async function raceSaturatedPool(run: () => Promise<SandboxOutcome>): Promise<{ outcome: SandboxOutcome; inline: boolean }> {
  const loop = fresh(loopBytes);
  let poolFinished = false;
  const busy = Array.from({ length: parseThreadPoolSize(process.env['UV_THREADPOOL_SIZE']) }, () =>
    runModuleOnThreadPool(loop, '{}').then((outcome) => {
      poolFinished = true;
      return outcome;
    }),
  );
  const outcome = await run();
  const inline = !poolFinished;
  for (const stopped of await Promise.all(busy)) assert.equal(stopped.kind === 'trap' && stopped.trap, 'out_of_fuel');
  return { outcome, inline };
}

function assertOutOfFuel(outcome: SandboxOutcome, fuelUsed: number): void {
  assert.equal(outcome.kind === 'trap' && outcome.trap, 'out_of_fuel', JSON.stringify(outcome));
  assert.equal(outcome.fuelUsed, fuelUsed);
}

describe('runModule inline fast path', () => {
  it('finishes a cheap run on the event loop, without waiting for a busy thread pool', async () => {
    const spinner = fresh(spinnerBytes);
    const { outcome, inline } = await raceSaturatedPool(() => runModule(spinner, CHEAP_INPUT));
    assert.deepEqual(outcome.kind === 'output' && outcome.output, '12000');
    assert.ok(outcome.fuelUsed < INLINE_FUEL_SLICE, `fuelUsed ${outcome.fuelUsed}`);
    assert.equal(inline, true, 'the cheap run waited for the thread pool');
  });

  it('gives the same outcome inline as on the pool, for every chaos mode (traps included)', async () => {
    const chaosBytes = await assembleFixture('chaos.wat');
    for (const mode of ['echo', 'z', 'k', 'g', 'l', 'r', 'o', 'u', 'p', 'n', 'x', 'y', 'm', 'i', 't', 'd', 'v', 'c']) {
      const input = JSON.stringify({ mode });
      assert.deepEqual(await runModule(fresh(chaosBytes), input), await runModuleOnThreadPool(fresh(chaosBytes), input), `mode ${mode}`);
    }
  });

  it('treats a caller fuel limit at or below the slice as final, without the pool', async () => {
    for (const fuel of [INLINE_FUEL_SLICE / 2, INLINE_FUEL_SLICE]) {
      const spinner = fresh(spinnerBytes);
      const { outcome, inline } = await raceSaturatedPool(() => runModule(spinner, EXPENSIVE_INPUT, { fuel }));
      assertOutOfFuel(outcome, fuel);
      assert.equal(inline, true, `fuel ${fuel}: the run went to the thread pool`);
      // The caller's own limit ran out, not the slice: the module is not marked as needing the pool.
      assert.equal((await raceSaturatedPool(() => runModule(spinner, CHEAP_INPUT))).inline, true);
    }
  });
});

describe('runModule thread-pool path (the slice ran out)', () => {
  it('finishes an expensive but finite run with the same output and fuelUsed as a pool-only run', async () => {
    const limits = { fuel: 10_000_000, maxMemoryBytes: 2 * 65_536 };
    const outcome = await runModule(fresh(spinnerBytes), EXPENSIVE_INPUT, limits);
    assert.deepEqual(outcome.kind === 'output' && outcome.output, '200000');
    assert.ok(outcome.fuelUsed > INLINE_FUEL_SLICE, `fuelUsed ${outcome.fuelUsed} fits the slice; the test needs more`);
    assert.deepEqual(outcome, await runModuleOnThreadPool(fresh(spinnerBytes), EXPENSIVE_INPUT, limits));
  });

  it('reports an endless loop as out_of_fuel with fuelUsed equal to the full limit, not the slice', async () => {
    assertOutOfFuel(await runModule(fresh(loopBytes), '{}'), SANDBOX_LIMITS.fuel);
    assertOutOfFuel(await runModule(fresh(loopBytes), '{}', { fuel: INLINE_FUEL_SLICE + 1 }), INLINE_FUEL_SLICE + 1);
    const spinner = fresh(spinnerBytes);
    assertOutOfFuel(await runModule(spinner, EXPENSIVE_INPUT, { fuel: 2 * INLINE_FUEL_SLICE }), 2 * INLINE_FUEL_SLICE);
  });

  it('sends later runs of a module that needed the pool straight there, with unchanged outcomes', async () => {
    const spinner = fresh(spinnerBytes);
    assert.equal((await runModule(spinner, EXPENSIVE_INPUT)).kind, 'output');
    const { outcome, inline } = await raceSaturatedPool(() => runModule(spinner, CHEAP_INPUT));
    assert.equal(inline, false, 'a module known to need the pool was tried inline again');
    assert.deepEqual(outcome, await runModule(fresh(spinnerBytes), CHEAP_INPUT));
  });
});

describe('which modules go to the pool for good', () => {
  const output: SandboxOutcome = { kind: 'output', output: '{}', fuelUsed: 10 };
  const outOfFuel: SandboxOutcome = { kind: 'trap', trap: 'out_of_fuel', message: 'all fuel consumed', fuelUsed: INLINE_FUEL_SLICE };
  const otherTrap: SandboxOutcome = { kind: 'trap', trap: 'unreachable', message: 'unreachable', fuelUsed: 10 };
  const FAST = 0.05;
  const SLOW = INLINE_TIME_BUDGET_MS + 0.01;
  /** Feeds inline runs of the given durations; returns after how many the module went to the pool, if it did. */
  const demotedAfter = (durations: readonly number[], outcome: SandboxOutcome = output): number | undefined => {
    let history: InlineHistory = NO_INLINE_HISTORY;
    for (const [index, elapsed] of durations.entries()) {
      const step = afterInlineRun(history, outcome, elapsed);
      if (step.toThreadPool) return index + 1;
      history = step.history;
    }
    return undefined;
  };

  it('one that ran out of the slice, at once', () => {
    assert.equal(demotedAfter([FAST], outOfFuel), 1);
  });

  it('not one that overran the time budget once or twice (preempted, cold caches)', () => {
    assert.equal(demotedAfter([SLOW, SLOW, ...Array<number>(1000).fill(FAST)]), undefined);
    assert.equal(demotedAfter([FAST, SLOW, ...Array<number>(500).fill(FAST), SLOW]), undefined);
    assert.equal(demotedAfter([SLOW, SLOW], otherTrap), undefined, 'a trap within the slice is an answer');
  });

  it('one that keeps overrunning: three overruns within 100 runs, however many cheap runs came before', () => {
    assert.equal(demotedAfter([SLOW, SLOW, SLOW]), INLINE_OVERRUNS_ALLOWED);
    assert.equal(demotedAfter([FAST, SLOW, FAST, SLOW, FAST, SLOW]), 6);
    const everyFiftieth = Array.from({ length: 1000 }, (_, i) => (i % 50 === 49 ? SLOW : FAST));
    assert.equal(demotedAfter(everyFiftieth), undefined, 'two in any 100 runs: stays inline');
    const everyThirtieth = Array.from({ length: 1000 }, (_, i) => (i % 30 === 29 ? SLOW : FAST));
    assert.equal(demotedAfter(everyThirtieth), 90, 'the third overrun within 100 runs');
    const burstAfterCredit = [...Array<number>(10_000).fill(FAST), SLOW, SLOW, SLOW, SLOW];
    assert.equal(demotedAfter(burstAfterCredit), 10_003, 'cheap runs earn no credit for a burst');
  });
});
