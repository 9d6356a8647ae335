// Guests with long names in their `name` section, through the real runner and addon: an upload whose
// function name is past the cap is refused (400), a module stored before the cap still runs (without
// its names, also when an upload of the same bytes is compiling), and a trap message is built
// within its cap however long the frames' names.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { SANDBOX_LIMITS, compileModule } from '../../hook-runner/sandbox.ts';
import { runModule } from '../../hook-runner/sandbox-run.ts';
import { invocation, startRunner, type RunnerFixture } from '../helpers/hook-runner.ts';
import { assembleWat } from '../helpers/hook-runner-wat.ts';
import { uleb } from '../helpers/wasm-bytes.ts';

const sized = (content: number[]): number[] => [...uleb(content.length), ...content];

/** One recursive function (#0) named `name` (any UTF-8): it traps `stack_overflow`, every frame of its backtrace named so. */
async function recursionNamed(name: string): Promise<Uint8Array> {
  const unnamed = await assembleWat('recursion', `(module (memory (export "memory") 1)
    (func (param i32) (result i32) (call 0 (local.get 0)))
    (func (export "execute") (param i32 i32) (result i32) (call 0 (i32.const 0))))`);
  const functionNames = [1, ...sized([1, 0, ...sized([...Buffer.from(name, 'utf8')])])];
  const section = [0, ...sized([...sized([...Buffer.from('name')]), ...functionNames])];
  return Buffer.concat([unnamed, Buffer.from(section)]);
}

let runner: RunnerFixture;
let hugeName: Uint8Array;

before(async () => {
  runner = await startRunner();
  // A 7 MiB name: each trap made wasmtime copy it into every frame it captured (~1.2 GiB, ~259 ms).
  hugeName = await recursionNamed('A'.repeat(7 * 1024 * 1024));
});
after(() => runner.close());

describe('long names in a module', () => {
  it('refuses an upload naming a function past the cap, or with a name section past its cap, with 400 exceeds_sandbox_limits', async () => {
    const refusals: [Uint8Array, RegExp][] = [
      [await recursionNamed('A'.repeat(SANDBOX_LIMITS.maxNameBytes + 1)), /gives function #0 a name of 1025 bytes; the sandbox takes names of at most 1024 bytes/],
      [hugeName, /the name section is 7340043 bytes; the sandbox takes one of at most 4194304 bytes/],
    ];
    for (const [bytes, reason] of refusals) {
      await assert.rejects(runner.client.compile(bytes, 'org_names'), (error: Error & { status?: unknown; code?: unknown }) => {
        assert.equal(error.status, 400);
        assert.equal(error.code, 'exceeds_sandbox_limits');
        assert.match(error.message, reason);
        return true;
      });
    }
  });

  it('builds a trap message within 2,048 bytes, each frame name within 256, in the addon itself', async () => {
    const atCap = compileModule(await recursionNamed('é'.repeat(SANDBOX_LIMITS.maxNameBytes / 2)));
    const outcome = await runModule(atCap, '{}');
    assert.equal(outcome.kind, 'trap');
    if (outcome.kind !== 'trap') return;
    assert.equal(outcome.trap, 'stack_overflow');
    assert.ok(Buffer.byteLength(outcome.message) <= 2048, `message of ${Buffer.byteLength(outcome.message)} bytes`);
    const frames = /\(at (.*)/.exec(outcome.message)?.[1]?.split(' <- ') ?? [];
    assert.ok(frames.length >= 2, outcome.message);
    for (const frame of frames.slice(0, -1)) {
      assert.ok(Buffer.byteLength(frame) <= 256, `a frame name of ${Buffer.byteLength(frame)} bytes`);
      assert.match(frame, /^é+…$/, 'cut at a character boundary');
    }
  });

  it('runs a module stored before the cap (sent back to restore a runner, compiled again after a restart) without its names', async () => {
    const digest = await runner.client.compile(hugeName, 'org_names', true);
    const expectUnnamedTrap = async (): Promise<void> => {
      const result = await runner.client.invoke(invocation(digest, { orgId: 'org_names' }));
      assert.equal(result.outcome.kind, 'trap');
      if (result.outcome.kind !== 'trap') return;
      assert.equal(result.outcome.trap, 'stack_overflow');
      assert.match(result.outcome.message, /\(at func\[0\] <- func\[0\]/);
      assert.ok(!result.outcome.message.includes('AAAA'), 'the name section was left out');
    };
    await expectUnnamedTrap();
    await runner.restart();
    await expectUnnamedTrap();
  });

  it('refuses an upload of bytes compiled before as a restore or a recompile (names left out), whichever org sent them', async () => {
    const refusedUpload = async (bytes: Uint8Array, org: string): Promise<void> => {
      await assert.rejects(runner.client.compile(bytes, org), (error: Error & { code?: unknown }) => error.code === 'exceeds_sandbox_limits');
    };
    const restored = await recursionNamed('C'.repeat(SANDBOX_LIMITS.maxNameBytes + 3));
    const digest = await runner.client.compile(restored, 'org_restorer', true);
    await refusedUpload(restored, 'org_uploader');
    await refusedUpload(restored, 'org_restorer');
    // Compiled again from the store after a restart, for an invoke: still not an upload's check.
    await runner.restart();
    assert.equal((await runner.client.invoke(invocation(digest, { orgId: 'org_restorer' }))).outcome.kind, 'trap');
    await refusedUpload(restored, 'org_uploader');
    // A module within the caps compiled as a restore is uploaded as ever.
    const fine = await recursionNamed('short');
    const fineDigest = await runner.client.compile(fine, 'org_restorer', true);
    assert.equal(await runner.client.compile(fine, 'org_uploader'), fineDigest);
  });

  it('answers an upload and a restore of the same bytes sent at once each by its own rule: the upload refused, the restore compiled', async () => {
    const bytes = await recursionNamed('B'.repeat(SANDBOX_LIMITS.maxNameBytes + 7));
    const [upload, restore] = await Promise.allSettled([runner.client.compile(bytes, 'org_names'), runner.client.compile(bytes, 'org_names', true)]);
    assert.equal(upload.status, 'rejected');
    assert.equal((upload as PromiseRejectedResult).reason.code, 'exceeds_sandbox_limits');
    assert.equal(restore.status, 'fulfilled', String((restore as PromiseRejectedResult).reason));
  });
});
