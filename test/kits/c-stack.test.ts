// A C action built with the kit's flags (kits/build.mjs C_FLAGS, as kits/c/README.md shows them)
// has its stack below its static data: a handler whose frames outgrow the stack traps
// (memory_out_of_bounds) in the real sandbox. With wasm-ld's default layout (the stack above the
// data) the same overflow wrote over the kit's tables and the action's globals and went on.

import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { compileModule } from '../../hook-runner/sandbox.ts';
import { runModule } from '../../hook-runner/sandbox-run.ts';
// @ts-expect-error: build.mjs is plain JavaScript without declarations.
import { C_FLAGS } from '../../kits/build.mjs';

const KIT_HEADER = join(import.meta.dirname, '../../kits/c/sluice_action.h');

/** Fills as many bytes of a frame just larger than the 64 KiB stack as `payload.s` has characters (with the stack above the data, such a frame starts inside the data). */
const OVERFLOWING = `#include "${KIT_HEADER}"
static bool handle(const sl_envelope *env) {
  volatile uint8_t frame[65600];
  sl_value s = sl_get(env->payload, "s");
  size_t n = sl_str_len(s);
  for (size_t i = 0; i < n; i++) frame[i] = (uint8_t)i;
  sl_begin_object(); sl_key("s"); sl_raw(s); sl_key("last"); sl_str(n > 0 && frame[n - 1] == (uint8_t)(n - 1) ? "kept" : "lost"); sl_end_object();
  return true;
}
SLUICE_ACTION(handle)
`;

test('a C action whose stack overflows traps with memory_out_of_bounds instead of overwriting its data', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'sluice-c-stack-'));
  try {
    writeFileSync(join(dir, 'overflow.c'), OVERFLOWING);
    const output = join(dir, 'overflow.wasm');
    const built = spawnSync(process.env.SLUICE_CLANG ?? 'clang', [...(C_FLAGS as string[]), join(dir, 'overflow.c'), '-o', output], { encoding: 'utf8' });
    assert.equal(built.status, 0, `clang failed: ${built.stderr}`);
    const module = compileModule(readFileSync(output));
    for (const n of [1, 100, 60_000]) {
      const outcome = await runModule(module, JSON.stringify({ payload: { s: 'x'.repeat(n) }, secrets: {}, permissions: [], action: { id: 'act_x', digest: 'd' } }));
      assert.equal(outcome.kind, 'trap', `n=${n}: ${JSON.stringify(outcome)}`);
      assert.equal(outcome.kind === 'trap' ? outcome.trap : '', 'memory_out_of_bounds', `n=${n}`);
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
