// The runner store's layout stamp (store-format.ts): a runner stamps a store it opens, takes one an
// earlier release left unstamped as layout 1, upgrades earlier layouts (store-upgrade.ts), and
// refuses one a newer release wrote (one line and exit 2 from the process) without changing it or
// keeping its lock.

import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { open } from 'lmdb';
import { RunnerConfigError } from '../../hook-runner/runner-error.ts';
import { createHookRunnerServer } from '../../hook-runner/server.ts';
import { openRunnerStore, runnerStoreDir } from '../../hook-runner/store.ts';
import { pruneRunnerRecords, RECORD_RETENTION_MS } from '../../hook-runner/record-pruning.ts';
import { privateDirectory } from '../../hook-runner/private-directory.ts';
import { digestOf } from '../../hook-runner/module-registry.ts';
import { newMasterKey, newToken, startRunner as startRunnerProcess, tempDataDir } from '../helpers/hook-runner.ts';
import { assembleWat, ECHO_WAT } from '../helpers/hook-runner-wat.ts';

const MAIN = fileURLToPath(new URL('../../hook-runner/main.ts', import.meta.url));

const startRunner = (dataDir: string, log: (line: string) => void = () => undefined) =>
  createHookRunnerServer({ listen: '127.0.0.1:0', dataDir, token: newToken(), masterKey: newMasterKey(), log });

/** The upgrade lines a runner's log got. */
const upgradeLines = (lines: readonly string[]): string[] => lines.filter((line) => line.includes('store upgraded'));

/** Opens runner.mdb with LMDB directly (as store.ts does), not through the code under test. */
const openRaw = (dataDir: string) => open({ path: join(runnerStoreDir(dataDir), 'runner.mdb'), maxDbs: 8, overlappingSync: true });

/** Writes a store as another release left it: only the given tables, each with its entries. */
async function writeRawStore(dataDir: string, tables: Record<string, { encoding: 'msgpack' | 'string' | 'binary'; entries: [key: string | string[], value: unknown][] }>): Promise<void> {
  privateDirectory(runnerStoreDir(dataDir));
  const root = openRaw(dataDir);
  await root.transaction(() => {
    for (const [name, { encoding, entries }] of Object.entries(tables)) {
      const table = root.openDB<unknown, string | string[]>({ name, encoding });
      for (const [key, value] of entries) void table.put(key, value);
    }
  });
  await root.flushed;
  await root.close();
}

/** The stamp as stored, read with LMDB directly; undefined when there is none. */
async function readStamp(dataDir: string): Promise<unknown> {
  const root = openRaw(dataDir);
  try {
    return root.openDB<unknown, string>({ name: 'data-format', encoding: 'msgpack' }).get('version');
  } finally {
    await root.close();
  }
}

/** A store as a release with a later layout might leave it: stamped 4, its tables not this release's (with the mark every release reading SLUICE_DATA_DIR writes). */
async function writeNewerStore(dataDir: string): Promise<void> {
  await writeRawStore(dataDir, {
    'data-format': { encoding: 'msgpack', entries: [['version', 4]] },
    'invocations-v2': { encoding: 'msgpack', entries: [[['org_a', 'run_1:step_1'], { output: '{}' }]] },
  });
  writeFileSync(join(runnerStoreDir(dataDir), 'reads-sluice-data-dir'), '', { mode: 0o600 });
}

test('a runner stamps a fresh store with this release\'s format', async () => {
  const dataDir = tempDataDir();
  const lines: string[] = [];
  const server = await startRunner(dataDir, (line) => lines.push(line));
  await server.close();
  assert.equal(await readStamp(dataDir), 3);
  assert.deepEqual(upgradeLines(lines), [], 'a new store is no upgrade');
});

test('a store an earlier release left without a stamp opens as format 1, keeps its records and is upgraded and stamped', async () => {
  const dataDir = tempDataDir();
  await writeRawStore(dataDir, {
    modules: { encoding: 'string', entries: [] },
    fences: { encoding: 'string', entries: [[['org_a', 'run_1'], '7']] },
  });
  assert.equal(await readStamp(dataDir), undefined, 'unstamped, as earlier releases left it');

  const lines: string[] = [];
  const server = await startRunner(dataDir, (line) => lines.push(line));
  await server.close();
  assert.equal(await readStamp(dataDir), 3);
  // Said once, as it happens: an earlier release's runner must not open it from now on.
  assert.deepEqual(upgradeLines(lines), ["hook-runner: store upgraded from format 1 to 3; do not run an earlier release's runner on it (to go back, restore a copy taken before this start)"]);
  const again: string[] = [];
  await (await startRunner(dataDir, (line) => again.push(line))).close();
  assert.deepEqual(upgradeLines(again), [], 'not said again');
  const store = openRunnerStore(dataDir);
  try {
    assert.equal(store.fences.get(['org_a', 'run_1']), '7', 'its records read as before');
  } finally {
    await store.close();
  }
});

test('a store stamped by a newer release is refused, naming it and both formats, and left as it was, lock released', async () => {
  const dataDir = tempDataDir();
  await writeNewerStore(dataDir);
  const storeDir = runnerStoreDir(dataDir);
  const filesBefore = readdirSync(storeDir).sort();
  const bytesBefore = readFileSync(join(storeDir, 'runner.mdb'));

  assert.throws(
    () => openRunnerStore(dataDir),
    (error: unknown) =>
      error instanceof RunnerConfigError &&
      error.message === `${storeDir} holds a hook-runner store written by a newer Sluice (store format 4; this release reads up to 3). Run that release or a newer one on it, or start this one on another data dir.`,
  );
  const refusal = await startRunner(dataDir).then(async (server) => void (await server.close()), (error: Error) => error);
  assert.ok(refusal instanceof RunnerConfigError, String(refusal));

  assert.deepEqual(readdirSync(storeDir).sort(), filesBefore, 'no lock left, no key file');
  assert.ok(readFileSync(join(storeDir, 'runner.mdb')).equals(bytesBefore), 'runner.mdb unchanged');
  assert.equal(await readStamp(dataDir), 4, 'still the newer stamp');
});

test('the hook-runner process on a newer store exits 2 with that one line, no stack trace', async () => {
  const dataDir = tempDataDir();
  await writeNewerStore(dataDir);
  const env = Object.fromEntries(Object.entries(process.env).filter(([name]) => !name.startsWith('SLUICE_')));
  const result = spawnSync(process.execPath, ['--import', import.meta.resolve('tsx'), MAIN, '--listen', '127.0.0.1:0', '--data-dir', dataDir], { env, encoding: 'utf8', timeout: 30_000 });

  assert.equal(result.status, 2, result.stderr);
  const storeDir = runnerStoreDir(dataDir).replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  assert.match(result.stderr, new RegExp(`^hook-runner: ${storeDir} holds a hook-runner store written by a newer Sluice \\(store format 4; this release reads up to 3\\)\\. Run that release or a newer one on it, or start this one on another data dir\\.\\n$`));
  assert.equal(existsSync(join(runnerStoreDir(dataDir), 'owner.pid')), false, 'its lock released');
  assert.equal(await readStamp(dataDir), 4);
});

// Found by review: stores written before record pruning existed had no pruning index entries for
// their invocation records and fences, and layout 1 said nothing of it: those were never pruned.
test('the upgrade from layout 1 indexes invocation records and fences written without pruning entries, so pruning finds them', async () => {
  const dataDir = tempDataDir();
  const record = (completedAtMs?: number) => ({ actionId: 'act', digest: 'd'.repeat(64), fence: '3', outcome: { kind: 'output', outputJson: '{}' }, fuelUsed: 1, ...(completedAtMs === undefined ? {} : { completedAtMs }) });
  await writeRawStore(dataDir, {
    invocations: { encoding: 'msgpack', entries: [[['org_a', 'run_1:s'], record(1_000)], [['org_a', 'run_2:s'], record()]] },
    fences: { encoding: 'string', entries: [[['org_a', 'run_1'], '3'], [['org_a', 'run_2'], '5'], [['org_b', 'run_9'], '2']] },
    // One fence already indexed, as a release with pruning wrote it.
    'fences-by-time': { encoding: 'string', entries: [[[5_000 as unknown as string, 'org_b', 'run_9'] as unknown as string[], '2']] },
  });
  const upgradedAt = Date.now();
  const server = await startRunner(dataDir);
  await server.close();
  assert.equal(await readStamp(dataDir), 3);
  const store = openRunnerStore(dataDir);
  try {
    // The runner prunes as it starts: the record completed long ago, indexed at its time by the
    // upgrade, is gone already, and so is the fence indexed long ago.
    assert.equal(store.invocations.get(['org_a', 'run_1:s']), undefined, 'pruned at the start, once indexed');
    assert.equal(store.fences.get(['org_b', 'run_9']), undefined);
    const invocationsAt = [...store.invocationsByTime.getKeys({})] as Array<[number, string, string]>;
    assert.equal(invocationsAt.length, 1);
    const [at, org, key] = invocationsAt[0]!;
    assert.deepEqual([org, key], ['org_a', 'run_2:s']);
    assert.ok(at >= upgradedAt, 'a record without a time is dated the upgrade');
    assert.equal((store.invocations.get(['org_a', 'run_2:s']) as { completedAtMs: number }).completedAtMs, at, 'and says so, as pruning checks');
    const fencesAt = [...store.fencesByTime.getRange({})] as Array<{ key: [number, string, string]; value: string }>;
    assert.deepEqual(fencesAt.map(({ key: [when, fenceOrg, run], value }) => [when >= upgradedAt, fenceOrg, run, value]).sort(), [[true, 'org_a', 'run_1', '3'], [true, 'org_a', 'run_2', '5']]);
    const pruned = await pruneRunnerRecords(store, Date.now() + RECORD_RETENTION_MS + 1);
    assert.deepEqual(pruned, { invocations: 1, fences: 2 }, 'the rest a retention after the upgrade');
  } finally {
    await store.close();
  }
});

// A module stored before uploads named their org may be in use by any org: forgetting one must
// never remove it, so the upgrade from layout 2 gives each the user '' that no org's removal takes.
test('the upgrade from layout 2 gives every stored module the unknown user, so forgetting an org that uploads it again keeps it', async () => {
  const dataDir = tempDataDir();
  const bytes = await assembleWat('echo', ECHO_WAT);
  const digest = digestOf(bytes);
  await writeRawStore(dataDir, {
    'data-format': { encoding: 'msgpack', entries: [['version', 2]] },
    modules: { encoding: 'binary', entries: [[digest, Buffer.from(bytes)], ['e'.repeat(64), Buffer.from('other')]] },
  });
  const lines: string[] = [];
  const server = await startRunner(dataDir, (line) => lines.push(line));
  await server.close();
  assert.equal(await readStamp(dataDir), 3);
  assert.match(upgradeLines(lines).join('\n'), /^hook-runner: store upgraded from format 2 to 3;/);
  let store = openRunnerStore(dataDir);
  try {
    assert.deepEqual([...store.moduleUsers.getKeys({})], [[digest, ''], ['e'.repeat(64), '']]);
  } finally {
    await store.close();
  }

  // An org uploads it again, then is forgotten: the bytes stay for whoever stored them before.
  const runner = await startRunnerProcess({ dataDir });
  try {
    assert.equal(await runner.client.compile(bytes, 'org_a'), digest);
    assert.equal(await runner.client.forgetOrg('org_a'), 1, 'its use only');
  } finally {
    await runner.close({ keepData: true });
  }
  store = openRunnerStore(dataDir);
  try {
    assert.ok(store.modules.get(digest)?.equals(Buffer.from(bytes)), 'the module stays');
    assert.deepEqual([...store.moduleUsers.getKeys({ start: [digest], end: [digest, '\uffff'] })], [[digest, '']]);
  } finally {
    await store.close();
  }
});
