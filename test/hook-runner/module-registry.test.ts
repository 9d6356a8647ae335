// The runner's compiled-module cache stays within its bounds, by count and by module bytes: the
// least recently used compiled form goes, and is compiled again from LMDB when it is next needed.

import assert from 'node:assert/strict';
import { rmSync } from 'node:fs';
import { after, before, test } from 'node:test';
import { digestOf, ModuleRegistry } from '../../hook-runner/module-registry.ts';
import { status } from '@grpc/grpc-js';
import { DiskFullError, RunnerError } from '../../hook-runner/runner-error.ts';
import { openRunnerStore, type RunnerStore } from '../../hook-runner/store.ts';
import { assembleWat, constantWat } from '../helpers/hook-runner-wat.ts';
import { tempDir } from '../helpers/runtime.ts';
import { moduleWithFunction } from '../helpers/wasm-bytes.ts';

const dir = tempDir('sluice-modules-');
let store: RunnerStore;
let modules: Uint8Array[];
before(async () => {
  store = openRunnerStore(dir);
  modules = await Promise.all(['first', 'second', 'third'].map((text) => assembleWat(text, constantWat(`"${text}"`))));
});
after(async () => {
  await store.close();
  rmSync(dir, { recursive: true, force: true });
});

test('past the byte bound the least recently used compiled module goes, and comes back from LMDB', async () => {
  const largest = Math.max(...modules.map((m) => m.length));
  const registry = new ModuleRegistry(store, { maxCachedBytes: 2 * largest });
  const [first, second, third] = await Promise.all(modules.map((bytes) => registry.compile(bytes)));
  assert.equal(registry.cached.count, 2, 'two fit, the third pushed the oldest out');
  assert.ok(registry.cached.bytes <= 2 * largest);
  for (const digest of [first!, second!, third!]) assert.ok(await registry.get(digest), 'each still runs: evicted ones are compiled again');
  assert.equal(registry.cached.count, 2);
});

test('past the count bound too', async () => {
  const registry = new ModuleRegistry(store, { maxCached: 1 });
  for (const bytes of modules) await registry.compile(bytes);
  assert.equal(registry.cached.count, 1);
});

test('compiles run one at a time; the same bytes sent again while compiling join the compile under way', async () => {
  const registry = new ModuleRegistry(store);
  const distinct = await Promise.all(['fourth', 'fifth'].map((text) => assembleWat(text, constantWat(`"${text}"`))));
  const all = [registry.compile(distinct[0]!), registry.compile(distinct[0]!), registry.compile(distinct[1]!)];
  assert.deepEqual(registry.compiles, { active: 1, queued: 1 }, 'the repeat joined the first; the other waits for the thread');
  const [a, again, b] = await Promise.all(all);
  assert.equal(a, again);
  assert.notEqual(a, b);
  assert.deepEqual(registry.compiles, { active: 0, queued: 0 });
});

test('a module whose code would take long to compile is refused before compiling: too many functions, a huge function, too much code, deep stacks and loop nests, many element items', async () => {
  const registry = new ModuleRegistry(store);
  const shell = (funcs: string) => `(module (memory (export "memory") 1) (func (export "execute") (param i32 i32) (result i32) (i32.const 0)) ${funcs})`;
  const cases = [
    ['functions', shell('(func)'.repeat(20_000)), /defines 20001 functions/],
    ['body', shell(`(func ${'nop '.repeat(256 * 1024)})`), /a function body is \d+ bytes/],
    ['code', shell(`(func ${'nop '.repeat(250 * 1024)})`.repeat(9)), /the code section is \d+ bytes/],
    // Small files that compile for long or into gigabytes: many types, many declared locals.
    ['types', shell('(type (func))'.repeat(20_000)), /declares 20001 types/],
    ['locals', shell(`(func (local ${'i64 '.repeat(50_000)}))`.repeat(21)), /more than 1000000 locals/],
    // Small bodies whose compile grows faster than their size: many values on the stack, loops in loops.
    ['operand stack', shell(`(func ${'i32.const 0 '.repeat(1001)}${'drop '.repeat(1001)})`), /more than 1000 values on its operand stack/],
    ['element items', shell(`(elem func ${'$e '.repeat(20_001)}) (func $e)`), /more than 20000 items/],
  ] as const;
  for (const [name, text, reason] of cases) {
    const bytes = await assembleWat(name, text);
    await assert.rejects(registry.compile(bytes), (error: Error & { code?: string }) => {
      assert.equal(error.code, 'code_too_large', name);
      assert.match(error.message, reason);
      return true;
    });
  }
  // Loops in loops, written byte by byte (wabt takes minutes to assemble deep nests): 1,414 count
  // 1,000,405, past the cap; 1,413 count 998,991.
  const loops = (depth: number): Uint8Array => moduleWithFunction([...Array(depth).fill([0x03, 0x40]).flat(), ...Array(depth).fill(0x0b)]);
  await assert.rejects(registry.compile(loops(1414)), (error: Error & { code?: string }) => error.code === 'code_too_large' && /loops nest too deeply/.test(error.message));
  assert.match(await registry.compile(loops(1413)), /^[0-9a-f]{64}$/);
  // At the other caps: 1,000 values at once, 20,000 element items.
  const atCaps = shell(`(func ${'i32.const 0 '.repeat(1000)}${'drop '.repeat(1000)}) (elem func ${'$e '.repeat(20_000)}) (func $e)`);
  assert.match(await registry.compile(await assembleWat('at-caps', atCaps)), /^[0-9a-f]{64}$/);
});

/** Signed LEB128, as wasm encodes i32.const. */
function sleb(value: number): number[] {
  const bytes: number[] = [];
  for (;;) {
    const byte = value & 0x7f;
    value >>= 7;
    const done = (value === 0 && (byte & 0x40) === 0) || (value === -1 && (byte & 0x40) !== 0);
    bytes.push(done ? byte : byte | 0x80);
    if (done) return bytes;
  }
}

/**
 * A module (one page, an `execute` returning 10) with one data segment "{}\0" at the offset `expr`
 * computes, written byte by byte: wabt cannot assemble extended-const offsets.
 */
function moduleWithDataOffset(expr: number[]): Uint8Array {
  const section = (id: number, content: number[]): number[] => [id, content.length, ...content];
  const name = (text: string): number[] => [text.length, ...Buffer.from(text)];
  return new Uint8Array([
    0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00,
    ...section(1, [1, 0x60, 2, 0x7f, 0x7f, 1, 0x7f]),
    ...section(3, [1, 0]),
    ...section(5, [1, 0x00, 1]),
    ...section(7, [2, ...name('memory'), 0x02, 0, ...name('execute'), 0x00, 0]),
    ...section(10, [1, 4, 0, 0x41, 10, 0x0b]),
    ...section(11, [1, 0x00, ...expr, 0x0b, 3, 0x7b, 0x7d, 0x00]),
  ]);
}

test('a data segment whose offset is computed (extended-const) is refused, not read as its first constant; a constant one past memory is too large', async () => {
  const registry = new ModuleRegistry(store);
  const computed = moduleWithDataOffset([0x41, ...sleb(100_000), 0x41, ...sleb(-99_990), 0x6a]);
  await assert.rejects(registry.compile(computed), (error: Error & { code?: string }) => error.code === 'code_too_large' && /is computed/.test(error.message));
  await assert.rejects(registry.compile(moduleWithDataOffset([0x41, ...sleb(100_000)])), (error: Error & { code?: string }) => error.code === 'data_segment_too_large');
  assert.match(await registry.compile(moduleWithDataOffset([0x41, ...sleb(10)])), /^[0-9a-f]{64}$/, 'offset 10 fits one page');
});

test('a recompile an Invoke waits for goes before uploads queued earlier, so one tenant\'s uploads cannot stall others\' runs', async () => {
  const registry = new ModuleRegistry(store, { maxCached: 1 });
  const [evicted, busy, upload] = await Promise.all(['evicted', 'busy', 'queued-upload'].map((text) => assembleWat(text, constantWat(`"${text}"`))));
  const evictedDigest = await registry.compile(evicted!);
  await registry.compile(modules[0]!);
  const running = registry.compile(busy!);
  const queued = registry.compile(upload!);
  let uploadCompiling: number | undefined;
  const invoked = registry.get(evictedDigest).then(() => (uploadCompiling = registry.compiles.active));
  assert.deepEqual(registry.compiles, { active: 1, queued: 2 });
  await Promise.all([running, queued, invoked]);
  // With the Invoke's recompile first, the upload took the thread when it finished; had the upload
  // gone first (arrival order), no compile would be left when the recompile finished.
  assert.equal(uploadCompiling, 1, 'the upload compiled after the recompile the Invoke waited for');
});

test('a queued upload whose every caller gave up is dropped before it compiles; one a caller still waits for is compiled', async () => {
  const registry = new ModuleRegistry(store);
  const [busy, dropped, joined] = await Promise.all(['busy-2', 'dropped', 'joined'].map((text) => assembleWat(text, constantWat(`"${text}"`))));
  const running = registry.compile(busy!);
  const gone = assert.rejects(registry.compile(dropped!, () => true), (error: unknown) => (error as { code?: string }).code === 'compile_abandoned');
  const first = registry.compile(joined!, () => true);
  const second = registry.compile(joined!, () => false);
  await running;
  await gone;
  assert.equal(store.modules.doesExist(await second), true, 'compiled and stored for the caller still waiting');
  assert.equal(await first, await second);
  assert.equal(registry.cached.count, 2, 'the dropped module never compiled');
});

test('a recompile whose every caller gave up before its turn is dropped uncompiled; one a caller still waits for is compiled', async () => {
  const registry = new ModuleRegistry(store, { maxCached: 1 });
  const [evicted, busy] = await Promise.all(['evicted-2', 'busy-3'].map((text) => assembleWat(text, constantWat(`"${text}"`))));
  const evictedDigest = await registry.compile(evicted!);
  await registry.compile(modules[0]!);
  const running = registry.compile(busy!);
  let gone = false;
  const dropped = assert.rejects(registry.get(evictedDigest, 'org_a', () => gone), (error: unknown) => (error as { code?: string }).code === 'invoke_abandoned');
  gone = true;
  await running;
  await dropped;
  const wanted = await registry.get(evictedDigest, 'org_a', () => false);
  assert.ok(wanted !== undefined);
});

test('when the cache is full, an org holding more than half of it gives up its own modules first: one org cycling through many cannot push another\'s out', async () => {
  const texts = Array.from({ length: 8 }, (_, index) => `share-${index}`);
  const own = await Promise.all(texts.map((text) => assembleWat(text, constantWat(`"${text}"`))));
  const size = Math.max(...own.map((bytes) => bytes.length));
  const registry = new ModuleRegistry(store, { maxCachedBytes: 4 * size });
  const quiet = await registry.compile(own[0]!, undefined, { tenant: 'org_quiet' });
  for (const bytes of own.slice(1)) await registry.compile(bytes, undefined, { tenant: 'org_busy' });
  assert.equal(registry.cachedFor('org_quiet').count, 1, 'the quiet org\'s module stayed');
  assert.equal(registry.cachedFor('org_busy').count, 3, 'the busy org has the rest');
  // Room for a third org comes from the org over half, not from the quiet one.
  await registry.compile(await assembleWat('third', constantWat('"third"')), undefined, { tenant: 'org_third' });
  assert.deepEqual([registry.cachedFor('org_quiet').count, registry.cachedFor('org_third').count, registry.cachedFor('org_busy').count], [1, 1, 2]);
  assert.ok(registry.cached.bytes <= 4 * size);

  // Alone, an org may fill the whole cache.
  const alone = new ModuleRegistry(store, { maxCachedBytes: 4 * size });
  for (const bytes of own) await alone.compile(bytes, undefined, { tenant: 'org_alone' });
  assert.equal(alone.cachedFor('org_alone').count, alone.cached.count);
  assert.ok(alone.cached.bytes > 3 * size, 'past half: nobody else wanted the room');
  // Recompiles count for the org whose call needed them.
  await registry.get(quiet, 'org_quiet');
  assert.equal(registry.cachedFor('org_quiet').count, 1);
  alone.close();
  registry.close();
});

test('a compile that waited its turn while the disk went below its floor is refused before its bytes are written', async () => {
  const registry = new ModuleRegistry(store);
  const [held, late] = await Promise.all(['held-turn', 'late-turn'].map((text) => assembleWat(text, constantWat(`"${text}"`))));
  let low = false;
  const assertWritable = (): void => {
    if (low) throw new DiskFullError('below the floor');
  };
  const first = registry.compile(held!, undefined, {}, assertWritable);
  const queued = registry.compile(late!, undefined, {}, assertWritable);
  assert.deepEqual(registry.compiles, { active: 1, queued: 1 });
  low = true; // crossed while both wait for the compile thread
  await assert.rejects(first, DiskFullError);
  await assert.rejects(queued, DiskFullError);
  assert.equal(store.modules.get(digestOf(held!)), undefined, 'nothing written');
  assert.equal(store.modules.get(digestOf(late!)), undefined);
  low = false;
  assert.equal(await registry.compile(late!, undefined, {}, assertWritable), digestOf(late!), 'sent again once there is room, it is stored');
  assert.ok(store.modules.get(digestOf(late!)));
});

test('a stored module that runs past the compile deadline compiling again (a busy machine) is retryable module_recompile_timeout, as is one the runtime restores; an upload past it is refused', async () => {
  // 3,000 functions besides: tens of ms to compile, so the 1 ms deadline below is always passed
  // (a trivial module compiled and answered within it at times).
  const padding = Array.from({ length: 3000 }, (_, i) => `(func (result i32) (i32.add (i32.const ${i}) (i32.const 1)))`).join('\n');
  const bytes = await assembleWat('slow-again', constantWat('"slow again"').replace(/\)$/, `${padding})`));
  const digest = await new ModuleRegistry(store).compile(bytes);
  // A deadline no compile meets: what a loaded machine does to one that met it at upload.
  const hurried = new ModuleRegistry(store, { compile: { timeoutMs: 1 } });
  try {
    await assert.rejects(hurried.get(digest), (error: unknown) => {
      assert.ok(error instanceof RunnerError, String(error));
      assert.deepEqual([error.grpcStatus, error.code], [status.UNAVAILABLE, 'module_recompile_timeout']);
      assert.match(error.message, /compiled in time when uploaded, so the call is retried/);
      return true;
    });
    await assert.rejects(hurried.compile(bytes, undefined, { first: true }), { code: 'module_recompile_timeout' });
    const fresh = await assembleWat('slow-new', constantWat('"never stored"').replace(/\)$/, `${padding})`));
    await assert.rejects(hurried.compile(fresh), { code: 'code_too_large' }, 'an upload past the deadline is the module\'s to fix');
  } finally {
    hurried.close();
  }
});

const usersOf = (digest: string): string[] => [...store.moduleUsers.getKeys({ start: [digest], end: [digest, '\uffff'] })].map((key) => (key as string[])[1]!);

test('each upload records its org as a user of the module, once, beside its bytes; a forgotten org\'s upload stores nothing', async () => {
  const forgottenOrgs = new Set(['org_gone']);
  const registry = new ModuleRegistry(store, { forgotten: (orgId) => forgottenOrgs.has(orgId) });
  const bytes = await assembleWat('users', constantWat('"users"'));
  const digest = digestOf(bytes);
  assert.equal(await registry.compile(bytes, undefined, { tenant: 'org_a' }), digest);
  assert.equal(await registry.compile(bytes, undefined, { tenant: 'org_b' }), digest);
  assert.equal(await registry.compile(bytes, undefined, { tenant: 'org_a' }), digest);
  assert.equal(await registry.compile(bytes, undefined, { tenant: 'org_c', first: true }), digest, 'a restore too');
  assert.equal(await registry.compile(bytes), digest, 'an upload naming no org: the unknown user');
  assert.deepEqual(usersOf(digest), ['', 'org_a', 'org_b', 'org_c']);

  const other = await assembleWat('gone-upload', constantWat('"gone"'));
  await assert.rejects(registry.compile(other, undefined, { tenant: 'org_gone' }), { code: 'organization_forgotten' });
  assert.equal(store.modules.get(digestOf(other)), undefined);
  assert.deepEqual(usersOf(digestOf(other)), []);
});

// The bytes are looked for again inside the write: a removal of the module with its last user
// (forgotten-orgs.ts) that committed after the upload read them must not leave a user without bytes.
test('an upload that read the bytes before their removal committed stores them again with its use', async () => {
  const registry = new ModuleRegistry(store);
  const bytes = await assembleWat('removed-meanwhile', constantWat('"removed meanwhile"'));
  const digest = digestOf(bytes);
  await registry.compile(bytes, undefined, { tenant: 'org_a' });
  // What the upload read before the removal: intact bytes. By its write they are gone.
  const readBeforeRemoval = Object.create(store.modules, { get: { value: () => Buffer.from(bytes) } }) as RunnerStore['modules'];
  const racing = new ModuleRegistry({ ...store, modules: readBeforeRemoval }, { maxCached: 1 });
  await store.durable(store.modules.transaction(() => {
    store.moduleUsers.removeSync([digest, 'org_a']);
    store.modules.removeSync(digest);
  }));
  assert.equal(await racing.compile(bytes, undefined, { tenant: 'org_b' }), digest);
  assert.ok(store.modules.get(digest)?.equals(Buffer.from(bytes)), 'stored again');
  assert.deepEqual(usersOf(digest), ['org_b']);
  racing.close();
  registry.close();
});

test('an upload refused once compiled (its org forgotten while it waited its turn) leaves nothing behind, compiled form included', async () => {
  let forgotten = false;
  const registry = new ModuleRegistry(store, { forgotten: () => forgotten });
  const bytes = await assembleWat('forgotten-while-waiting', constantWat('"forgotten while waiting"'));
  const upload = registry.compile(bytes, undefined, { tenant: 'org_late' });
  forgotten = true; // ForgetOrg while the compile runs
  await assert.rejects(upload, { code: 'organization_forgotten' });
  assert.throws(() => registry.assertStored(digestOf(bytes)), { code: 'module_not_found' }, 'not served from memory either');
  assert.equal(registry.cached.count, 0);
  registry.close();
});

test('a call records its org as a user of the module once (a module sent back for one org serves others); not for a forgotten org or bytes removed meanwhile', async () => {
  const forgottenOrgs = new Set(['org_gone']);
  const registry = new ModuleRegistry(store, { forgotten: (orgId) => forgottenOrgs.has(orgId) });
  const bytes = await assembleWat('called', constantWat('"called"'));
  const digest = await registry.compile(bytes, undefined, { tenant: 'org_a', first: true });
  let asked = 0;
  const writable = (): boolean => (asked += 1) > 0;
  await registry.noteUse(digest, 'org_b', () => false);
  assert.deepEqual(usersOf(digest), ['org_a'], 'not while the disk is below its floor');
  await registry.noteUse(digest, 'org_b', writable);
  await registry.noteUse(digest, 'org_b', writable);
  assert.equal(asked, 1, 'written once: the second call finds it');
  await registry.noteUse(digest, 'org_gone');
  assert.deepEqual(usersOf(digest), ['org_a', 'org_b']);
  await store.durable(store.modules.remove(digest));
  await registry.noteUse(digest, 'org_c');
  assert.deepEqual(usersOf(digest), ['org_a', 'org_b'], 'no use of bytes that are gone');
  registry.close();
});
