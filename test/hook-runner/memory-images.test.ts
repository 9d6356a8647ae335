// Compiled modules keep no copy-on-write memory image (hook-runner/native/src/engine.rs): wasmtime
// would hold one per module, a memfd as large as its initial memory up to its last data segment
// (a probe's 84-byte module with a byte at 9 MiB held 9 MiB each, gigabytes for a few hundred),
// until the module's last reference was collected. Data segments are copied at instantiation.

import assert from 'node:assert/strict';
import { readdirSync, readlinkSync } from 'node:fs';
import { test } from 'node:test';
import { compileModule } from '../../hook-runner/sandbox.ts';
import { runModule } from '../../hook-runner/sandbox-run.ts';
import { assemble } from './fixtures/wat.ts';

/** A module of 150 pages whose data lies at 16 (its output) and at 9 MiB (checked before answering). */
const farDataWat = (n: number): string => `(module
  (memory (export "memory") 150)
  (data (i32.const 16) "{\\"n\\":${n}}\\00")
  (data (i32.const 9437184) "x")
  (func (export "execute") (param i32 i32) (result i32)
    (if (i32.ne (i32.load8_u (i32.const 9437184)) (i32.const 120)) (then unreachable))
    (i32.const 16)))`;

/** The memfds wasmtime names for memory images among this process's open files. */
const memoryImages = (): number =>
  readdirSync('/proc/self/fd').filter((fd) => {
    try {
      return readlinkSync(`/proc/self/fd/${fd}`).includes('memfd:wasm-memory-image');
    } catch {
      return false; // closed since the listing
    }
  }).length;

test('modules whose data reaches far into their memory run with it in place and hold no memory image', async () => {
  const before = memoryImages();
  const modules = await Promise.all([1, 2, 3].map(async (n) => compileModule(await assemble(farDataWat(n)))));
  for (const [i, compiled] of modules.entries()) {
    const outcome = await runModule(compiled, '{}');
    assert.deepEqual(outcome.kind === 'output' ? JSON.parse(outcome.output) : outcome, { n: i + 1 });
  }
  // The modules are still referenced here (run again below): with images on, each would hold one now.
  assert.equal(memoryImages() - before, 0);
  for (const compiled of modules) assert.equal((await runModule(compiled, '{}')).kind, 'output');
});
