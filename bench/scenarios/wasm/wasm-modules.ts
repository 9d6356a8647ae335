// The guests the wasm scenario runs: a trivial echo and an endless loop (WAT, assembled with wabt)
// and the reference order-risk-scorer (built by kits/build.mjs); each with its exact guest envelope.

import { createHash } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { createGuestEnvelope } from '../../../hook-runner/envelope.ts';
import type { ActionId, ModuleDigest } from '../../../hook-runner/requests.ts';
import type { ScenarioContext } from '../../scenario.ts';
// The same guests the hook-runner tests use: one echo and one endless loop for the whole repo.
import { assembleWat, ECHO_WAT, HOSTILE_WAT } from '../../../test/helpers/hook-runner-wat.ts';
import type { WasmModuleSpec } from './wasm-protocol.ts';

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
  const echo = await assembleWat('echo', ECHO_WAT);
  const echoFile = join(dir, 'echo.wasm');
  writeFileSync(echoFile, echo);
  const loopFile = join(dir, 'loop.wasm');
  writeFileSync(loopFile, await assembleWat('loop', HOSTILE_WAT.loop));

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
