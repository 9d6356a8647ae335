// The ledger contract (runtime/ledger/ledger.ts), run against every implementation: LMDB and
// memory. A second implementation (PostgreSQL, say) joins LEDGER_KINDS and must pass the same.

import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { durably } from '../../runtime/ledger/durable-write.ts';
import type { Ledger, LedgerTable } from '../../runtime/ledger/ledger.ts';
import { LEDGER_KINDS } from '../helpers/ledgers.ts';

for (const kind of LEDGER_KINDS) {
  describe(`ledger contract: ${kind.name}`, () => {
    let opened: ReturnType<typeof kind.open>;
    let ledger: Ledger;
    let table: LedgerTable;
    before(() => {
      opened = kind.open();
      ledger = opened.ledger;
    });
    after(() => opened.close());

    /** A fresh table per test, so tests do not see each other's keys. */
    let tables = 0;
    const freshTable = (): LedgerTable => ledger.openDatabase(`contract-${(tables += 1)}`);

    it('stores structured values and returns copies with the same types', async () => {
      table = freshTable();
      const value = { name: 'Lumen', n: 3, ratio: 0.5, ok: true, none: null, list: [1, 'two', { three: 3 }], nested: { deep: { text: 'é✓' } } };
      await durably(ledger.root, table.put(['org_a', 'k'], value));
      const read = table.get(['org_a', 'k']) as typeof value;
      assert.deepEqual(read, value);
      read.nested.deep.text = 'changed';
      assert.equal((table.get(['org_a', 'k']) as typeof value).nested.deep.text, 'é✓', 'a read value is a copy');
      await durably(ledger.root, table.put(['org_a', 'index'], null));
      assert.equal(table.get(['org_a', 'index']), null);
      assert.equal(table.doesExist(['org_a', 'index']), true, 'a null value exists');
      assert.equal(table.get(['org_a', 'missing']), undefined);
      assert.equal(table.doesExist(['org_a', 'missing']), false);
      await durably(ledger.root, table.remove(['org_a', 'k']));
      assert.equal(table.get(['org_a', 'k']), undefined);
    });

    it('returns binary values as copies: changing what get, getRange or getBinaryFast gave changes nothing stored', async () => {
      table = freshTable();
      await durably(ledger.root, table.put(['org_a', 'bytes'], Buffer.from([1, 2, 3, 4])));
      await durably(ledger.root, table.put(['org_a', 'nested'], { b: Buffer.from([9, 9]) }));
      (table.get(['org_a', 'bytes']) as Buffer)[0] = 0x63;
      (table.get(['org_a', 'nested']) as { b: Buffer }).b[0] = 0x63;
      for (const { value } of table.getRange({ start: ['org_a'], end: ['org_a', '\uffff'] })) {
        if (Buffer.isBuffer(value)) value[1] = 0x63;
      }
      const fast = table.getBinaryFast(['org_a', 'bytes']);
      assert.ok(fast !== undefined);
      fast.fill(0x63);
      assert.deepEqual([...(table.get(['org_a', 'bytes']) as Buffer)], [1, 2, 3, 4]);
      assert.deepEqual([...(table.get(['org_a', 'nested']) as { b: Buffer }).b], [9, 9]);
    });

    it('keeps tables apart and hands out the same table for the same name', async () => {
      const first = freshTable();
      const second = freshTable();
      await durably(ledger.root, first.put(['org_a', 'same'], 1));
      assert.equal(second.get(['org_a', 'same']), undefined);
      assert.equal(ledger.openDatabase(`contract-${tables - 1}`).get(['org_a', 'same']), 1);
    });

    it('orders keys as LMDB does: numbers by value, strings by code unit, a prefix first', async () => {
      table = freshTable();
      const keys = [['org_a', 10], ['org_a', 2], ['org_a', 'b'], ['org_a', 'B'], ['org_a'], ['org_a', 2, 'x'], ['org_b', 0], ['org_a', 'a\u00e9']];
      await durably(ledger.root, ledger.root.batch(() => keys.forEach((key, i) => void table.put(key, i))));
      assert.deepEqual([...table.getKeys({})], [['org_a'], ['org_a', 2], ['org_a', 2, 'x'], ['org_a', 10], ['org_a', 'B'], ['org_a', 'a\u00e9'], ['org_a', 'b'], ['org_b', 0]].map((k) => (k.length === 1 ? k[0] : k)));
    });

    it('ranges include start, exclude end, run backwards with reverse, and stop at limit', async () => {
      table = freshTable();
      await durably(ledger.root, ledger.root.batch(() => {
        for (let at = 1; at <= 5; at++) void table.put(['org_a', 'production', at, `evt_${at}`], at);
        void table.put(['org_b', 'production', 3, 'evt_b'], 99);
      }));
      const keysOf = (range: Parameters<LedgerTable['getKeys']>[0]): unknown[] => [...table.getKeys(range)].map((key) => (key as unknown[])[2]);
      assert.deepEqual(keysOf({ start: ['org_a', 'production', 2], end: ['org_a', 'production', 4] }), [2, 3]);
      assert.deepEqual(keysOf({ start: ['org_a', 'production', Number.MAX_SAFE_INTEGER], end: ['org_a', 'production', 3, 'evt_3'], reverse: true }), [5, 4]);
      assert.deepEqual(keysOf({ start: ['org_a', 'production', Number.MAX_SAFE_INTEGER], end: ['org_a', 'production', 2], reverse: true }), [5, 4, 3, 2], 'a longer key sorts after its prefix');
      assert.deepEqual(keysOf({ start: ['org_a', 'production', 4, 'evt_4'], end: ['org_a', 'production'], reverse: true, limit: 2 }), [4, 3]);
      assert.deepEqual(keysOf({ start: ['org_a'], end: ['org_a', '\uffff'], limit: 3 }), [1, 2, 3]);
      assert.deepEqual(keysOf({ end: ['org_a', 'production', 3] }), [1, 2], 'no start: from the first key');
      assert.deepEqual([...table.getRange({ start: ['org_b'], end: ['org_b', '\uffff'] })], [{ key: ['org_b', 'production', 3, 'evt_b'], value: 99 }]);
      assert.equal(table.getKeysCount({ start: ['org_a'], end: ['org_a', '\uffff'] }), 5);
      assert.equal(table.getKeysCount({ start: ['org_a'], end: ['org_a', '\uffff'], limit: 2 }), 5, 'the count ignores limit');
    });

    it('a range read outside a transaction is a snapshot of keys and values', async () => {
      table = freshTable();
      await durably(ledger.root, ledger.root.batch(() => [1, 2, 3].forEach((n) => void table.put(['org_a', n], `v${n}`))));
      const seen: unknown[] = [];
      for (const { key, value } of table.getRange({ start: ['org_a'], end: ['org_a', '\uffff'] })) {
        seen.push(value);
        if ((key as unknown[])[1] === 1) await durably(ledger.root, table.put(['org_a', 2], 'changed'));
      }
      assert.deepEqual(seen, ['v1', 'v2', 'v3']);
      assert.equal(table.get(['org_a', 2]), 'changed');
    });

    it('refuses a key longer than 1978 bytes', () => {
      table = freshTable();
      assert.throws(() => table.put(['org_a', 'k'.repeat(2100)], 1), /maximum key size/);
    });

    it('ifNoExists runs its callback at once and commits its writes only when the key was absent', async () => {
      table = freshTable();
      const other = freshTable();
      let ran = false;
      const first = table.ifNoExists(['org_a', 'claim'], () => {
        ran = true;
        void table.put(['org_a', 'claim'], 'first');
        void other.put(['org_a', 'event'], 'first');
      });
      assert.equal(ran, true, 'the callback ran before ifNoExists returned');
      assert.equal(await durably(ledger.root, first), true);
      const second = table.ifNoExists(['org_a', 'claim'], () => {
        void table.put(['org_a', 'claim'], 'second');
        void other.put(['org_a', 'event'], 'second');
        void other.put(['org_a', 'extra'], 'second');
      });
      assert.equal(await durably(ledger.root, second), false);
      assert.equal(table.get(['org_a', 'claim']), 'first');
      assert.equal(other.get(['org_a', 'event']), 'first', 'writes to other tables were dropped too');
      assert.equal(other.doesExist(['org_a', 'extra']), false);
    });

    it('two ifNoExists on one absent key before either commits: the first commits, the second does not', async () => {
      table = freshTable();
      const claim = ['org_a', 'shop', 'msg_same'];
      const first = table.ifNoExists(claim, () => void table.put(claim, 'first'));
      const second = table.ifNoExists(claim, () => void table.put(claim, 'second'));
      assert.deepEqual(await Promise.all([durably(ledger.root, first), durably(ledger.root, second)]), [true, false]);
      assert.equal(table.get(claim), 'first');
    });

    it('a transaction runs later, one at a time, sees its own writes and resolves with its result', async () => {
      table = freshTable();
      const order: string[] = [];
      const first = ledger.root.transaction(() => {
        order.push('first');
        void table.put(['org_a', 'count'], 1);
        return table.get(['org_a', 'count']);
      });
      const second = ledger.root.transaction(() => {
        order.push('second');
        const count = table.get(['org_a', 'count']) as number;
        void table.put(['org_a', 'count'], count + 1);
        return count + 1;
      });
      assert.deepEqual(order, [], 'not run synchronously');
      assert.equal(await durably(ledger.root, first), 1, 'reads inside see the writes before them');
      assert.equal(await durably(ledger.root, second), 2);
      assert.deepEqual(order, ['first', 'second']);
      assert.equal(table.get(['org_a', 'count']), 2);
    });

    it('a transaction runs after the writes and batches made in the same event turn, even after it', async () => {
      table = freshTable();
      const first = ledger.root.transaction(() => void table.put(['org_a', 'value'], 'from the transaction'));
      const batch = ledger.root.batch(() => void table.put(['org_a', 'value'], 'from the batch'));
      const claim = table.ifNoExists(['org_a', 'claim'], () => void table.put(['org_a', 'claim'], 'claimed'));
      const late = ledger.root.transaction(() => table.doesExist(['org_a', 'claim']));
      await Promise.all([durably(ledger.root, first), durably(ledger.root, batch)]);
      assert.equal(table.get(['org_a', 'value']), 'from the transaction');
      assert.equal(await durably(ledger.root, claim), true);
      assert.equal(await durably(ledger.root, late), true, 'the same-turn claim had committed before it');
    });

    it('a batch or ifNoExists inside a transaction belongs to it', async () => {
      table = freshTable();
      const outcome = await durably(ledger.root, ledger.root.transaction(() => {
        void ledger.root.batch(() => void table.put(['org_a', 'inner'], 1));
        void table.ifNoExists(['org_a', 'inner-claim'], () => void table.put(['org_a', 'inner-claim'], 2));
        return [table.get(['org_a', 'inner']), table.get(['org_a', 'inner-claim'])];
      }));
      assert.deepEqual(outcome, [1, 2], 'visible inside the transaction');
    });

    it('a throw rejects the transaction and takes back every write it made', async () => {
      table = freshTable();
      await durably(ledger.root, table.put(['org_a', 'kept'], 'before'));
      const failing = ledger.root.transaction(() => {
        void table.put(['org_a', 'before-throw'], true);
        void table.put(['org_a', 'kept'], 'changed');
        void table.remove(['org_a', 'kept']);
        void ledger.root.batch(() => void table.put(['org_a', 'in-a-batch'], true));
        throw new Error('boom');
      });
      await assert.rejects(failing, /boom/);
      await ledger.root.flushed;
      assert.deepEqual([table.get(['org_a', 'before-throw']), table.get(['org_a', 'kept']), table.get(['org_a', 'in-a-batch'])], [undefined, 'before', undefined]);
      assert.equal(await durably(ledger.root, ledger.root.transaction(() => table.get(['org_a', 'kept']))), 'before', 'and the next transaction sees the old value');
    });

    it('a throw inside a batch keeps the writes made before it (batch callbacks must not throw after writing)', async () => {
      table = freshTable();
      assert.throws(() =>
        ledger.root.batch(() => {
          void table.put(['org_a', 'before-throw'], true);
          throw new Error('boom');
        }),
      /boom/);
      await ledger.root.flushed;
      assert.equal(table.get(['org_a', 'before-throw']), true);
    });

    it('a batch runs its callback at once and commits its writes together', async () => {
      table = freshTable();
      let ran = false;
      const write = ledger.root.batch(() => {
        ran = true;
        void table.put(['org_a', 1], 'a');
        void table.put(['org_a', 2], 'b');
        void table.remove(['org_a', 1]);
      });
      assert.equal(ran, true);
      assert.equal(await durably(ledger.root, write), true);
      assert.deepEqual([...table.getRange({ start: ['org_a'], end: ['org_a', '\uffff'] })], [{ key: ['org_a', 2], value: 'b' }]);
    });
  });
}
