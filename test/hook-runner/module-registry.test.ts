// The runner's compiled-module cache stays within its bounds, by count and by module bytes: the
// least recently used compiled form goes, and is compiled again from LMDB when it is next needed.

import assert from 'node:assert/strict';
import { rmSync } from 'node:fs';
import { after, before, test } from 'node:test';
import { ModuleRegistry } from '../../hook-runner/module-registry.ts';
import { openRunnerStore, type RunnerStore } from '../../hook-runner/store.ts';
import { assembleWat, constantWat } from '../helpers/hook-runner-wat.ts';
import { tempDir } from '../helpers/runtime.ts';

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
