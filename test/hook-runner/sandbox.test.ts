// Tests hook-runner/sandbox.ts against the real wasmtime addon with WAT-built modules:
// admission refusals, the guest ABI, hostile guests, limits, concurrency, event loop.
import assert from 'node:assert/strict';
import { before, describe, it } from 'node:test';

import {
  SANDBOX_LIMITS,
  SandboxCompileError,
  compileModule,
  compileArtifact,
  loadArtifact,
  isSandboxAvailable,
  type CompileRefusalCode,
  type CompiledModule,
  type SandboxOutcome,
  type TrapKind,
} from '../../hook-runner/sandbox.ts';
import { runModule } from '../../hook-runner/sandbox-run.ts';
import { assemble, assembleFixture } from './fixtures/wat.ts';
import { countTurns } from '../helpers/loop-turns.ts';

const EXECUTE = '(func (export "execute") (param i32 i32) (result i32) (i32.const 0))';

let chaos: CompiledModule;
let echoAlloc: CompiledModule;
let echoPlain: CompiledModule;

before(async () => {
  chaos = compileModule(await assembleFixture('chaos.wat'));
  echoAlloc = compileModule(await assembleFixture('echo-alloc.wat'));
  echoPlain = compileModule(await assembleFixture('echo-plain.wat'));
});

const mode = (m: string): string => JSON.stringify({ mode: m });

function expectTrap(outcome: SandboxOutcome, trap: TrapKind, messagePart?: RegExp): void {
  assert.equal(outcome.kind, 'trap', `expected a ${trap} trap, got ${JSON.stringify(outcome)}`);
  assert.equal(outcome.trap, trap, outcome.message);
  if (messagePart) assert.match(outcome.message, messagePart);
}

function expectRefusal(bytes: Uint8Array, code: CompileRefusalCode, reasonPart: RegExp): void {
  assert.throws(
    () => compileModule(bytes),
    (error: unknown) => {
      assert.ok(error instanceof SandboxCompileError, `expected SandboxCompileError, got ${String(error)}`);
      assert.equal(error.code, code, error.reason);
      assert.match(error.reason, reasonPart);
      return true;
    },
  );
}

/** The same module (fresh store per call) still works after whatever came before. */
async function assertStillServes(): Promise<void> {
  const outcome = await runModule(chaos, mode('echo'));
  assert.deepEqual(outcome.kind === 'output' && JSON.parse(outcome.output), { mode: 'echo' });
}

describe('sandbox addon', () => {
  it('is built and loadable', () => {
    assert.equal(isSandboxAvailable(), true);
  });
});

describe('echo action (DESIGN 6.5 ABI)', () => {
  const payload = { payload: { order: 42, note: 'wörld ✓ 🚀' }, secrets: {}, permissions: [], action: 'echo' };

  it('round-trips UTF-8 JSON through a module that exports alloc', async () => {
    assert.equal(echoAlloc.hasAlloc, true);
    const outcome = await runModule(echoAlloc, JSON.stringify(payload));
    assert.equal(outcome.kind, 'output');
    assert.deepEqual(JSON.parse(outcome.output), payload);
    assert.ok(outcome.fuelUsed > 0 && outcome.fuelUsed < 1000, `fuelUsed ${outcome.fuelUsed}`);
  });

  it('round-trips through a module without alloc (input written into grown pages)', async () => {
    assert.equal(echoPlain.hasAlloc, false);
    assert.equal(echoPlain.initialPages, 1);
    const outcome = await runModule(echoPlain, JSON.stringify(payload));
    assert.equal(outcome.kind, 'output');
    assert.deepEqual(JSON.parse(outcome.output), payload);
  });

  it('reports return value 0 as rejected', async () => {
    const outcome = await runModule(chaos, mode('z'));
    assert.equal(outcome.kind, 'rejected');
    assert.ok(outcome.fuelUsed > 0);
  });

  it('refuses a buffer from alloc that lies outside memory', async () => {
    const big = JSON.stringify({ blob: 'x'.repeat(100_000) });
    expectTrap(await runModule(echoAlloc, big), 'abi_error', /alloc\(100011\) returned 0x400.*outside guest memory/);
  });

  it('refuses input that cannot fit in the memory cap', async () => {
    const huge = JSON.stringify({ blob: 'x'.repeat(SANDBOX_LIMITS.maxMemoryBytes) });
    expectTrap(await runModule(echoPlain, huge), 'abi_error', /beyond the sandbox memory limit/);
  });

  it('gives every call a fresh instance: globals and memory do not leak', async () => {
    for (let i = 0; i < 3; i++) {
      const outcome = await runModule(chaos, mode('k'));
      assert.equal(outcome.kind, 'output');
      assert.deepEqual(JSON.parse(outcome.output), { calls: 1, marker: 0 });
    }
  });

  it('compiles off the event loop too, into an artifact that loads without compiling again and runs', async () => {
    const artifact = await compileArtifact(await assembleFixture('echo-alloc.wat'));
    assert.equal(artifact.hasStart, false);
    const outcome = await runModule(await loadArtifact(artifact), '{"a":1}');
    assert.deepEqual(outcome.kind === 'output' && JSON.parse(outcome.output), { a: 1 });
    await assert.rejects(compileArtifact(new Uint8Array(0)), (error: unknown) => error instanceof SandboxCompileError && error.code === 'empty_module');
    const started = await compileArtifact(await assemble(`(module (memory (export "memory") 1) ${EXECUTE} (func $s) (start $s))`));
    assert.equal(started.hasStart, true);
    assert.equal((await loadArtifact(started)).initialPages, 1);
  });

  it('refuses to load bytes that are not an artifact of this addon (a host failure, not a refusal)', async () => {
    const wasm = await assembleFixture('echo-alloc.wat');
    await assert.rejects(loadArtifact({ code: wasm, hasStart: false }), /loading the compiled module failed/);
  });

  it('rejects a forged module handle', async () => {
    const forged = Object.freeze({ hasAlloc: false, initialPages: 1 }) as unknown as CompiledModule;
    await assert.rejects(runModule(forged, '{}'), TypeError);
    await assert.rejects(runModule(echoAlloc, { a: 1 } as unknown as string), TypeError);
  });
});

describe('compile refusals', () => {
  it('refuses empty input', () => expectRefusal(new Uint8Array(0), 'empty_module', /empty/));

  it('refuses random bytes', () => {
    let seed = 7;
    const bytes = Uint8Array.from({ length: 256 }, () => (seed = (seed * 1103515245 + 12345) >>> 0) >>> 24);
    bytes[0] = 0x42;
    expectRefusal(bytes, 'not_wasm', /not a WebAssembly binary.*first bytes: 42/);
  });

  it('refuses WebAssembly text', () =>
    expectRefusal(new TextEncoder().encode(`(module (memory (export "memory") 1) ${EXECUTE})`), 'wasm_text', /text format/));

  it('refuses a component-model binary', () =>
    expectRefusal(Uint8Array.of(0, 0x61, 0x73, 0x6d, 0x0d, 0, 0x01, 0), 'component_model', /component/));

  it('refuses precompiled native artifacts (ELF / .cwasm)', () =>
    expectRefusal(Uint8Array.of(0x7f, 0x45, 0x4c, 0x46, 2, 1, 1, 0), 'precompiled_artifact', /\.cwasm/));

  it('refuses a malformed binary', () =>
    expectRefusal(Uint8Array.of(0, 0x61, 0x73, 0x6d, 1, 0, 0, 0, 0xff, 0xff), 'invalid_module', /malformed/));

  it('refuses a WASI import', async () => {
    const bytes = await assemble(`(module
      (import "wasi_snapshot_preview1" "fd_write" (func (param i32 i32 i32 i32) (result i32)))
      (memory (export "memory") 1) ${EXECUTE})`);
    expectRefusal(bytes, 'imports_not_allowed', /wasi_snapshot_preview1\.fd_write \(function\)/);
  });

  it('refuses any host function import', async () => {
    const bytes = await assemble(`(module (import "env" "log" (func (param i32)))
      (memory (export "memory") 1) ${EXECUTE})`);
    expectRefusal(bytes, 'imports_not_allowed', /env\.log/);
  });

  it('refuses an imported memory', async () => {
    const bytes = await assemble(`(module (import "env" "memory" (memory 1)) ${EXECUTE})`);
    expectRefusal(bytes, 'imports_not_allowed', /env\.memory \(memory\)/);
    // With data in it (what clang --import-memory makes): the import is the problem, not the data's fit.
    const withData = await assemble(`(module (import "env" "memory" (memory 1)) (data (i32.const 0) "hello") ${EXECUTE})`);
    expectRefusal(withData, 'imports_not_allowed', /env\.memory \(memory\)/);
  });

  it('refuses a module without an exported memory', async () => {
    expectRefusal(await assemble(`(module (memory 1) ${EXECUTE})`), 'missing_export', /`memory`/);
  });

  it('refuses a module without execute', async () => {
    const bytes = await assemble('(module (memory (export "memory") 1))');
    expectRefusal(bytes, 'missing_export', /`execute` of type \(i32, i32\) -> \(i32\)/);
  });

  it('refuses execute of the wrong type', async () => {
    const bytes = await assemble(`(module (memory (export "memory") 1)
      (func (export "execute") (param i32) (result i32) (i32.const 0)))`);
    expectRefusal(bytes, 'bad_export_type', /`execute` must have type \(i32, i32\) -> \(i32\), found \(i32\) -> \(i32\)/);
  });

  it('refuses alloc of the wrong type', async () => {
    const bytes = await assemble(`(module (memory (export "memory") 1) ${EXECUTE}
      (func (export "alloc") (param i32 i32) (result i32) (i32.const 0)))`);
    expectRefusal(bytes, 'bad_export_type', /`alloc` must have type \(i32\) -> \(i32\)/);
  });

  it('refuses an initial memory of 161 pages and accepts 160 (with alloc: the input needs a place)', async () => {
    const ALLOC = '(func (export "alloc") (param i32) (result i32) (i32.const 0))';
    expectRefusal(await assemble(`(module (memory (export "memory") 161) ${EXECUTE})`), 'memory_too_large', /161 initial pages/);
    assert.equal(compileModule(await assemble(`(module (memory (export "memory") 160) ${EXECUTE} ${ALLOC})`)).initialPages, 160);
  });

  it('refuses a module without alloc whose memory cannot grow (no input could ever be placed)', async () => {
    expectRefusal(await assemble(`(module (memory (export "memory") 160) ${EXECUTE})`), 'missing_export', /no `alloc` and its memory cannot grow \(160 initial pages of at most 160\)/);
    expectRefusal(await assemble(`(module (memory (export "memory") 1 1) ${EXECUTE})`), 'missing_export', /\(1 initial pages of at most 1\)/);
    assert.equal(compileModule(await assemble(`(module (memory (export "memory") 1 2) ${EXECUTE})`)).initialPages, 1, 'one page to grow is enough for a small input');
  });

  it("says when an input does not fit under the module's own declared maximum", async () => {
    const module = compileModule(await assemble(`(module (memory (export "memory") 1 2) ${EXECUTE})`));
    expectTrap(await runModule(module, JSON.stringify({ blob: 'x'.repeat(70_000) })), 'abi_error', /beyond the module's declared maximum of 2 pages/);
  });

  it('accepts a large declared maximum (capped at run time)', async () => {
    const module = compileModule(await assemble(`(module (memory (export "memory") 1 65536) ${EXECUTE})`));
    assert.equal((await runModule(module, '{}')).kind, 'rejected');
  });

  it('refuses a data segment that cannot fit', async () => {
    const blob = 'x'.repeat(70_000);
    const bytes = await assemble(`(module (memory (export "memory") 1) (data (i32.const 0) "${blob}") ${EXECUTE})`);
    expectRefusal(bytes, 'data_segment_too_large', /70000 bytes at offset 0\) does not fit/);
  });

  it('refuses an upload of more than 4,096 data segments before compiling (each costs compile time and memory), takes 4,096, and compiles stored bytes with more', async () => {
    const segments = (count: number) => Array.from({ length: count }, (_, i) => `(data (i32.const ${i}) "x")`).join(' ');
    const ALLOC = '(func (export "alloc") (param i32) (result i32) (i32.const 0))';
    expectRefusal(await assemble(`(module (memory (export "memory") 1) ${segments(4097)} ${EXECUTE} ${ALLOC})`), 'code_too_large', /4097 data segments; the sandbox compiles at most 4096/);
    assert.equal(compileModule(await assemble(`(module (memory (export "memory") 1) ${segments(4096)} ${EXECUTE} ${ALLOC})`)).initialPages, 1);
    const before = await assemble(`(module (memory (export "memory") 1) ${segments(5000)} ${EXECUTE} ${ALLOC})`);
    assert.equal(compileModule(before, { stored: true }).initialPages, 1, 'stored before the cap: compiled again from the store, it runs on');
  });

  it('refuses an element segment that overruns its table', async () => {
    const bytes = await assemble(`(module (memory (export "memory") 1) (table 1 funcref) (func $f)
      (elem (i32.const 5) $f) ${EXECUTE})`);
    expectRefusal(bytes, 'instantiation_failed', /out of bounds table access/);
  });

  it('refuses computed initializers (global.get, extended-const) of globals, data and element offsets, and takes constants', async () => {
    const shell = (parts: string) => `(module (memory (export "memory") 1) (table 2 funcref) (func $f) (global $g i32 (i32.const 0)) ${parts} ${EXECUTE})`;
    // Valid wasm since the extended-const and GC proposals (wasmtime validates it); wabt's validator refuses it.
    const computed = (parts: string) => assemble(shell(parts), { features: { extended_const: true }, validate: false });
    expectRefusal(await computed('(data (global.get $g) "x")'), 'code_too_large', /the offset of data segment #0 is computed/);
    expectRefusal(await computed('(data (i32.const 0) "a") (data (i32.add (i32.const 1) (i32.const 1)) "b")'), 'code_too_large', /data segment #1 is computed/);
    expectRefusal(await computed('(global i32 (global.get $g))'), 'code_too_large', /the initializer of global #1 is computed/);
    expectRefusal(await computed('(elem (global.get $g) $f)'), 'code_too_large', /the offset of element segment #0 is computed/);
    const constants = shell('(global f64 (f64.const 1.5)) (global funcref (ref.func $f)) (data (i32.const 8) "x") (elem (i32.const 1) $f) (elem funcref (ref.null func))');
    assert.equal((await runModule(compileModule(await assemble(constants, { features: { reference_types: true } })), '{}')).kind, 'rejected');
  });

  it('refuses a table beyond the pool limits', async () => {
    const bytes = await assemble(`(module (memory (export "memory") 1) (table 30000 funcref) ${EXECUTE})`);
    expectRefusal(bytes, 'exceeds_sandbox_limits', /30000/);
  });
});

describe('hostile guests', () => {
  const cases: ReadonlyArray<readonly [string, string, TrapKind, RegExp]> = [
    ['unbounded recursion', 'r', 'stack_overflow', /call stack exhausted/],
    ['a load far out of bounds', 'o', 'memory_out_of_bounds', /out of bounds memory access/],
    ['unreachable', 'u', 'unreachable', /unreachable/],
    ['a pointer past the end of memory', 'p', 'abi_error', /0x7ffffff0, past the end of guest memory/],
    ['output without a NUL within 256 KiB + 1', 'n', 'abi_error', /no NUL terminator within 262144 bytes/],
    ['262,145 bytes of output', 'y', 'abi_error', /no NUL terminator within 262144 bytes/],
    ['output running to the end of memory', 'm', 'abi_error', /end of guest memory without a NUL/],
    ['invalid UTF-8 output', 'i', 'abi_error', /not valid UTF-8/],
    ['a store just past the memory cap', 't', 'memory_out_of_bounds', /out of bounds memory access/],
    ['division by zero', 'd', 'integer_divide_by_zero', /divide by zero/],
    ['signed division overflow', 'v', 'integer_overflow', /integer overflow/],
    ['call_indirect through a null slot', 'c', 'indirect_call', /uninitialized element/],
  ];
  for (const [name, m, trap, message] of cases) {
    it(`maps ${name} to ${trap}, and the module still serves the next call`, async () => {
      expectTrap(await runModule(chaos, mode(m)), trap, message);
      await assertStillServes();
    });
  }

  it('stops an infinite loop with out_of_fuel after exactly 50,000,000 fuel', async (t) => {
    const started = performance.now();
    const outcome = await runModule(chaos, mode('l'));
    t.diagnostic(`out-of-fuel run took ${(performance.now() - started).toFixed(1)} ms`);
    expectTrap(outcome, 'out_of_fuel', /all fuel consumed/);
    assert.equal(outcome.fuelUsed, SANDBOX_LIMITS.fuel);
    await assertStillServes();
  });

  it('accepts exactly 262,144 bytes of output', async () => {
    const outcome = await runModule(chaos, mode('x'));
    assert.equal(outcome.kind, 'output');
    assert.equal(outcome.output.length, SANDBOX_LIMITS.maxOutputBytes);
  });

  it('makes memory.grow past 10 MiB return -1 inside the guest', async () => {
    const outcome = await runModule(chaos, mode('g'));
    assert.equal(outcome.kind, 'output');
    // one initial page + one grown for the input; growing to 160 works, one more fails
    assert.deepEqual(JSON.parse(outcome.output), { first: 2, second: -1, pages: 160 });
  });

  // A plain loop spends 50,000,000 units in ~55 ms; each of these spent them in seconds when it cost 1.
  const runtimeCalls: ReadonlyArray<readonly [string, string, number]> = [
    ['memory.fill of length 0', '(memory.fill (i32.const 0) (i32.const 0) (i32.const 0))', 200_000],
    ['ref.func', '(drop (ref.func $f))', 160_000],
  ];
  for (const [name, operator, least] of runtimeCalls) {
    it(`charges ${name}, which the runtime carries out, by its time, not 1 unit: 1,000 of them cost over ${least}`, async () => {
      const module = compileModule(
        await assemble(`(module (memory (export "memory") 1) (func $f) (elem declare func $f)
          (func (export "execute") (param i32 i32) (result i32) (local $n i32)
            (loop $l ${operator}
              (local.set $n (i32.add (local.get $n) (i32.const 1))) (br_if $l (i32.lt_u (local.get $n) (i32.const 1000))))
            (i32.const 0)))`, { features: { reference_types: true } }),
      );
      const outcome = await runModule(module, '{}');
      assert.equal(outcome.kind, 'rejected');
      assert.ok(outcome.fuelUsed > least && outcome.fuelUsed < least + 100_000, `fuel used: ${outcome.fuelUsed}`);
    });
  }

  it('runs a start function under fuel too', async () => {
    const module = compileModule(
      await assemble(`(module (memory (export "memory") 1) (func $spin (loop $l (br $l))) (start $spin) ${EXECUTE})`),
    );
    const outcome = await runModule(module, '{}');
    expectTrap(outcome, 'out_of_fuel', /instantiation failed/);
    assert.equal(outcome.fuelUsed, SANDBOX_LIMITS.fuel);
  });
});

describe('per-call limits', () => {
  it('lowers fuel', async () => {
    const outcome = await runModule(chaos, mode('l'), { fuel: 1_000 });
    expectTrap(outcome, 'out_of_fuel');
    assert.equal(outcome.fuelUsed, 1_000);
  });

  it('clamps fuel above the ceiling', async () => {
    const outcome = await runModule(chaos, mode('l'), { fuel: 1e12 });
    expectTrap(outcome, 'out_of_fuel');
    assert.equal(outcome.fuelUsed, SANDBOX_LIMITS.fuel);
  });

  it('lowers the memory cap, and clamps it above the ceiling', async () => {
    const low = await runModule(chaos, mode('g'), { maxMemoryBytes: 3 * 65_536 });
    assert.deepEqual(low.kind === 'output' && JSON.parse(low.output), { first: -1, second: 2, pages: 3 });
    const high = await runModule(chaos, mode('g'), { maxMemoryBytes: 2 ** 40 });
    assert.deepEqual(high.kind === 'output' && JSON.parse(high.output), { first: 2, second: -1, pages: 160 });
  });

  it('lowers the output cap', async () => {
    expectTrap(await runModule(chaos, mode('echo'), { maxOutputBytes: 4 }), 'abi_error', /within 4 bytes/);
  });

  it('rejects nonsense limits', async () => {
    await assert.rejects(runModule(chaos, mode('e'), { fuel: -1 }), RangeError);
    await assert.rejects(runModule(chaos, mode('e'), { maxMemoryBytes: Number.NaN }), RangeError);
  });
});

describe('concurrency and the event loop', () => {
  it('completes 100 concurrent invocations, hostile and benign, with the right outcomes', async (t) => {
    const plan = Array.from({ length: 100 }, (_, i) => ['e', 'l', 'r', 'o', 'g', 'n', 'a'][i % 7] ?? 'e');
    const started = performance.now();
    const outcomes = await Promise.all(
      plan.map((m, i) =>
        m === 'a'
          ? runModule(echoAlloc, JSON.stringify({ i }))
          : runModule(chaos, m === 'e' ? JSON.stringify({ mode: 'echo', i }) : mode(m)),
      ),
    );
    t.diagnostic(`100 mixed invocations took ${(performance.now() - started).toFixed(0)} ms`);
    outcomes.forEach((outcome, i) => {
      const m = plan[i];
      if (m === 'e') assert.deepEqual(outcome.kind === 'output' && JSON.parse(outcome.output), { mode: 'echo', i });
      if (m === 'a') assert.deepEqual(outcome.kind === 'output' && JSON.parse(outcome.output), { i });
      if (m === 'l') expectTrap(outcome, 'out_of_fuel');
      if (m === 'r') expectTrap(outcome, 'stack_overflow');
      if (m === 'o') expectTrap(outcome, 'memory_out_of_bounds');
      if (m === 'n') expectTrap(outcome, 'abi_error');
      if (m === 'g') assert.deepEqual(outcome.kind === 'output' && JSON.parse(outcome.output), { first: 2, second: -1, pages: 160 });
    });
    const rssMiB = process.memoryUsage().rss / 2 ** 20;
    t.diagnostic(`rss after the burst: ${rssMiB.toFixed(0)} MiB`);
    assert.ok(rssMiB < 512, `rss ${rssMiB.toFixed(0)} MiB: pool slots should be virtual, not resident`);
  });

  it('keeps the event loop responsive while out-of-fuel runs execute', async (t) => {
    const turns = countTurns();
    const runs = Array.from({ length: 4 }, () => runModule(chaos, mode('l')));
    const outcomes = await Promise.all(runs).finally(turns.stop);
    const ticks = turns.count();
    outcomes.forEach((outcome) => expectTrap(outcome, 'out_of_fuel'));
    t.diagnostic(`setImmediate ticked ${ticks} times during 4 concurrent out-of-fuel runs`);
    assert.ok(ticks > 10, `event loop advanced only ${ticks} times during the runs`);
  });
});
