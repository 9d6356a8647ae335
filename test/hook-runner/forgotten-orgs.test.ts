// Forgetting an org in the runner's store (forgotten-orgs.ts) on real LMDB: its keys leave every
// table across chunk boundaries (its ranges, and the time-ordered indexes read whole), orgs whose
// ids it prefixes or that sort beside it keep theirs; a removal cut short is done by the next
// ForgetOrg, and one done answers 0 at once; the mark outlives a reopen.
import assert from 'node:assert/strict';
import { rmSync } from 'node:fs';
import { describe, it } from 'node:test';
import { ForgottenOrgs } from '../../hook-runner/forgotten-orgs.ts';
import { openRunnerStore, type RunnerStore } from '../../hook-runner/store.ts';
import { tempDataDir } from '../helpers/hook-runner.ts';

const ORG = 'o';
const NEIGHBOURS = ['o2', 'o.x', 'n', 'p'];
const PER_TABLE = 23;

async function fill(store: RunnerStore, orgs: readonly string[]): Promise<void> {
  await store.durable(
    store.fences.transaction(() => {
      for (const org of orgs) {
        for (let i = 0; i < PER_TABLE; i++) {
          store.secrets.putSync([org, `act_${i}`, 'KEY'], Buffer.from('sealed'));
          store.secretRevisions.putSync([org, `act_${i}`, 'KEY'], Buffer.from('mark'));
          store.fences.putSync([org, `run_${i}`], '1');
          store.invocations.putSync([org, `run_${i}:step`], { actionId: 'a', digest: 'd', fence: '1', outcome: { kind: 'output', outputJson: '{}' }, fuelUsed: 1, completedAtMs: i });
          // Interleaved in time with the other orgs'.
          store.fencesByTime.putSync([i, org, `run_${i}`], '1');
          store.invocationsByTime.putSync([i, org, `run_${i}:step`], null);
        }
      }
    }),
  );
}

const count = (store: RunnerStore, org: string): number =>
  [store.secrets, store.secretRevisions, store.fences, store.invocations].reduce((n, table) => n + [...table.getKeys({})].filter((key) => (key as unknown[])[0] === org).length, 0) +
  [store.fencesByTime, store.invocationsByTime].reduce((n, table) => n + [...table.getKeys({})].filter((key) => (key as unknown[])[1] === org).length, 0);

describe('forgotten orgs', () => {
  it('removes the org from every table in chunks, leaves its neighbours whole, and says when it is done', async () => {
    const dataDir = tempDataDir();
    let store = openRunnerStore(dataDir);
    try {
      await fill(store, [ORG, ...NEIGHBOURS]);
      assert.equal(count(store, ORG), PER_TABLE * 6);
      const forgotten = new ForgottenOrgs(store, { chunk: 5 });
      assert.equal(forgotten.has(ORG), false);
      // Two at once: the second joins the first.
      const [first, second] = await Promise.all([forgotten.forget(ORG, 1_000), forgotten.forget(ORG, 2_000)]);
      assert.deepEqual([first, second], [PER_TABLE * 6, 0]);
      assert.equal(count(store, ORG), 0);
      for (const org of NEIGHBOURS) assert.equal(count(store, org), PER_TABLE * 6, org);
      assert.deepEqual(store.forgottenOrgs.get(ORG), { at: 1_000, done: true });
      // Done: answered at once, without reading the tables again (a key put there since stays).
      await store.durable(store.fences.put([ORG, 'run_stray'], '1'));
      assert.equal(forgotten.done(ORG), true);
      assert.equal(await forgotten.forget(ORG, 3_000), 0);
      assert.equal(store.fences.get([ORG, 'run_stray']), '1');
      await store.durable(store.fences.remove([ORG, 'run_stray']));

      // A removal cut short (its mark written, records left): the next ForgetOrg, in a new process, finishes it.
      await store.durable(store.forgottenOrgs.put('o2', { at: 500, done: false }));
      await store.close();
      store = openRunnerStore(dataDir);
      const reopened = new ForgottenOrgs(store, { chunk: 5 });
      assert.equal(reopened.has(ORG), true);
      assert.equal(reopened.has('o2'), true, 'a mark alone refuses the org\'s calls');
      assert.equal(await reopened.forget('o2', 4_000), PER_TABLE * 6);
      assert.deepEqual(store.forgottenOrgs.get('o2'), { at: 500, done: true });
      for (const org of ['o.x', 'n', 'p']) assert.equal(count(store, org), PER_TABLE * 6, org);
    } finally {
      await store.close();
      rmSync(dataDir, { recursive: true, force: true });
    }
  });
});

describe('forgotten orgs\' modules', () => {
  it('removes the org\'s uses of modules across chunks, and with them the bytes no one else uses, in the same write', async () => {
    const dataDir = tempDataDir();
    const store = openRunnerStore(dataDir);
    try {
      const digest = (name: string): string => name.padEnd(64, '0');
      // Twelve modules only the org uploaded (more than two chunks of 5), one shared with a
      // neighbour whose id it prefixes, one also stored before uploads named theirs (''), one of
      // the neighbour alone.
      const own = Array.from({ length: 12 }, (_, i) => digest(`a${i.toString(16)}`));
      const users: Array<[string, string]> = [...own.map((d): [string, string] => [d, ORG]), [digest('b'), ORG], [digest('b'), 'o2'], [digest('c'), ''], [digest('c'), ORG], [digest('d'), 'o2']];
      await store.durable(
        store.modules.transaction(() => {
          for (const [d, org] of users) {
            store.modules.putSync(d, Buffer.from(`bytes of ${d}`));
            store.moduleUsers.putSync([d, org], null);
          }
        }),
      );
      const dropped: string[] = [];
      let droppedWhileUsesLeft = 0;
      const usesLeft = (): number => [...store.moduleUsers.getKeys({})].filter((key) => (key as string[])[1] === ORG).length;
      const forgotten = new ForgottenOrgs(store, {
        chunk: 5,
        dropCompiled: (d) => {
          assert.equal(store.modules.get(d), undefined, 'dropped once its bytes\' removal is durable');
          if (usesLeft() > 0) droppedWhileUsesLeft += 1;
          dropped.push(d);
        },
      });
      // 14 uses, 12 modules.
      assert.equal(await forgotten.forget(ORG, 1_000), 26);
      assert.deepEqual(dropped.sort(), own);
      assert.ok(droppedWhileUsesLeft > 0, 'each chunk\'s modules leave memory with their chunk, not at the end');
      assert.deepEqual([...store.modules.getKeys({})], [digest('b'), digest('c'), digest('d')]);
      assert.deepEqual([...store.moduleUsers.getKeys({})], [[digest('b'), 'o2'], [digest('c'), ''], [digest('d'), 'o2']]);
    } finally {
      await store.close();
      rmSync(dataDir, { recursive: true, force: true });
    }
  });
});
