// The guests the wasm scenario runs: a trivial echo and an endless loop (WAT, assembled with wabt)
// and the reference order-risk-scorer (built by kits/build.mjs); each with its exact guest envelope.

import { createHash } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import wabtInit from 'wabt';
import { createGuestEnvelope } from '../../../hook-runner/envelope.ts';
import type { ActionId, ModuleDigest } from '../../../hook-runner/requests.ts';
import type { ScenarioContext } from '../../scenario.ts';
import type { WasmModuleSpec } from './wasm-protocol.ts';

/** Echoes its input envelope: an `alloc` bump allocator (fresh bytes are zero, so the input ends in NUL). */
const ECHO_WAT = `(module (memory (export "memory") 1)
  (global $bump (mut i32) (i32.const 1024))
  (func (export "alloc") (param $len i32) (result i32)
    (local $p i32) (local $end i32)
    (local.set $p (global.get $bump))
    (local.set $end (i32.add (local.get $p) (i32.add (local.get $len) (i32.const 1))))
    (block $ok
      (loop $grow
        (br_if $ok (i32.le_u (local.get $end) (i32.mul (memory.size) (i32.const 65536))))
        (if (i32.eq (memory.grow (i32.const 1)) (i32.const -1)) (then (unreachable)))
        (br $grow)))
    (global.set $bump (local.get $end))
    (local.get $p))
  (func (export "execute") (param $ptr i32) (param $len i32) (result i32) (local.get $ptr)))`;

const LOOP_WAT = `(module (memory (export "memory") 1)
  (func (export "execute") (param i32 i32) (result i32) (loop $forever (br $forever)) (i32.const 0)))`;

/** The README's sample order: the scorer reads every field of it. */
const SAMPLE_ORDER_JSON = JSON.stringify({
  order_id: 'ord_1001',
  amount_cents: 184900,
  currency: 'EUR',
  billing: { country: 'DE' },
  shipping: { country: 'US' },
  items: [{ sku: 'LAMP-01', quantity: 3 }, { sku: 'CABLE-7' }],
  customer: { id: 'cus_77', new: true },
});

export interface WasmGuests {
  readonly modules: readonly WasmModuleSpec[];
  readonly loopFile: string;
}

async function assemble(text: string): Promise<Uint8Array> {
  const wabt = await wabtInit();
  const module = wabt.parseWat('bench.wat', text);
  try {
    module.validate();
    return new Uint8Array(module.toBinary({}).buffer);
  } finally {
    module.destroy();
  }
}

/** The envelope the hook-runner builds for this module (no secrets, no permissions), byte for byte. */
function moduleSpec(name: WasmModuleSpec['name'], file: string, bytes: Uint8Array): WasmModuleSpec {
  const actionId = `act_${name}`;
  const digest = createHash('sha256').update(bytes).digest('hex');
  const envelope = createGuestEnvelope({
    payloadJson: SAMPLE_ORDER_JSON,
    secrets: {},
    permissions: [],
    actionId: actionId as ActionId,
    digest: digest as ModuleDigest,
  });
  return { name, file, payloadJson: SAMPLE_ORDER_JSON, envelope, actionId };
}

/** Writes the modules into a fresh temp dir; the scorer is built from the kit (AssemblyScript, from npm). */
export async function prepareGuests(context: ScenarioContext): Promise<WasmGuests> {
  const dir = context.tempDirs.make('wasm-modules');
  const echo = await assemble(ECHO_WAT);
  const echoFile = join(dir, 'echo.wasm');
  writeFileSync(echoFile, echo);
  const loopFile = join(dir, 'loop.wasm');
  writeFileSync(loopFile, await assemble(LOOP_WAT));

  const output = await context.children.runToEnd({
    name: 'kits/build.mjs assemblyscript',
    command: process.execPath,
    args: [join(context.repoRoot, 'kits', 'build.mjs'), 'assemblyscript', '--out', dir, '--json'],
    cwd: context.repoRoot,
    timeoutMs: 120_000,
  });
  const built = JSON.parse(output.trim().split('\n').at(-1) ?? '{}') as { built?: { example: string; path: string }[] };
  const scorer = built.built?.find((b) => b.example === 'order-risk-scorer');
  if (scorer === undefined) throw new Error(`kits/build.mjs built no order-risk-scorer: ${output.slice(0, 300)}`);
  return {
    modules: [moduleSpec('echo', echoFile, echo), moduleSpec('scorer', scorer.path, readFileSync(scorer.path))],
    loopFile,
  };
}
