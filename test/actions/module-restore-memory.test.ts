// What the restoring invoker remembers of restores is bounded: past RESTORES_REMEMBERED (set low
// here) the least recently used module is forgotten, and the one cost of forgetting is one more
// transfer, to a call whose Invoke was sent before that restore finished. (A memory probe found one
// entry kept per module ever restored, deleted orgs' too.) A scripted runner: the point is the
// invoker's bookkeeping, which the real runner cannot be made to interleave on cue.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { moduleDigest } from '../../runtime/actions/custom-action-record.ts';
import { createRestoringInvoker, type RestoringRunner } from '../../runtime/actions/module-restore.ts';
import { SluiceError } from '../../runtime/errors.ts';
import type { InvokeInput, InvokeResult } from '../../runtime/hook-runner/client.ts';

const ORG = 'acct-restore-memory';
const MODULES = new Map([new Uint8Array([1]), new Uint8Array([2])].map((bytes) => [moduleDigest(bytes), bytes]));
const [A, B] = [...MODULES.keys()] as [string, string];

/** A runner that has no module until it is compiled; the Invoke of `held` waits until released, then finds it missing. */
function scriptedRunner(held: string) {
  const has = new Set<string>();
  let compiles = 0;
  let release: () => void = () => undefined;
  const released = new Promise<void>((resolve) => (release = resolve));
  let heldOnce = false;
  const runner: RestoringRunner = {
    invoke: async (input: InvokeInput): Promise<InvokeResult> => {
      if (input.digest === held && !heldOnce) {
        heldOnce = true;
        await released;
        throw new SluiceError(404, 'module_not_found', 'lost');
      }
      if (!has.has(input.digest)) throw new SluiceError(404, 'module_not_found', 'lost');
      return { outcome: { kind: 'ok' }, fuelUsed: 1, replayed: false } as unknown as InvokeResult;
    },
    compile: async (wasm: Uint8Array) => {
      compiles += 1;
      const digest = moduleDigest(wasm);
      has.add(digest);
      return digest;
    },
  };
  return { runner, compiles: () => compiles, release: () => release() };
}

const call = (digest: string, key: string): InvokeInput => ({ orgId: ORG, actionId: 'act', digest, permissions: [], payloadJson: '{}', idempotencyKey: key, fence: 1 });

for (const [remembered, compiles] of [[2, 2], [1, 3]] as const) {
  test(`remembering ${remembered} restore(s): a call sent before A's restore finished costs ${compiles - 2} more transfer(s) once B's restore came after`, async () => {
    const scripted = scriptedRunner(A);
    const invoker = createRestoringInvoker(scripted.runner, { moduleBytes: (_org, digest) => MODULES.get(digest) }, { remembered });
    // Sent before anything was restored; its answer (module_not_found) comes after both restores.
    const early = invoker.invoke(call(A, 'run_1:s'));
    await invoker.invoke(call(A, 'run_2:s'));
    await invoker.invoke(call(B, 'run_3:s'));
    assert.equal(scripted.compiles(), 2, 'one transfer per module');
    scripted.release();
    await early;
    assert.equal(scripted.compiles(), compiles);
  });
}
