// A chain's derived-event budget outlives its root while a descendant is stored: retention prunes
// each event on its own, and the count going with the root gave a descendant still at work (in a
// delay, in backoff, resumed later) a fresh budget of 1,000. It goes once neither the root nor any
// descendant is stored. On every ledger.

import assert from 'node:assert/strict';
import { afterEach, beforeEach, describe, test } from 'node:test';
import type { StoredEvent } from '../../runtime/events/event-record.ts';
import { DerivedCounts } from '../../runtime/events/derived-counts.ts';
import type { Ledger } from '../../runtime/ledger/ledger.ts';
import { LEDGER_KINDS } from '../helpers/ledgers.ts';

const ORG = 'org_a';
const eventOf = (id: string, root: string): StoredEvent => ({ id, org_id: ORG, correlation_id: root, depth: id === root ? 0 : 1 }) as unknown as StoredEvent;

for (const kind of LEDGER_KINDS) {
  describe(`derived-event counts: ${kind.name}`, () => {
    let opened: ReturnType<typeof kind.open>;
    let ledger: Ledger;
    let counts: DerivedCounts;
    const within = (body: () => void) => ledger.root.transaction(body);
    /** Stores the root and `n` descendants of it, counting each descendant. */
    const chain = async (root: string, n: number): Promise<StoredEvent[]> => {
      const descendants = Array.from({ length: n }, (_, i) => eventOf(`${root}-d${i}`, root));
      await within(() => {
        void ledger.events.put([ORG, root], { id: root });
        for (const event of descendants) {
          void ledger.events.put([ORG, event.id], { id: event.id });
          counts.countWithin(ORG, root);
        }
      });
      return descendants;
    };
    /** Removes an event as retention does: the record, then the count's bookkeeping, in one write. */
    const prune = (event: StoredEvent) =>
      within(() => {
        void ledger.events.remove([ORG, event.id]);
        counts.removedWithin(event);
      });

    beforeEach(() => {
      opened = kind.open();
      ledger = opened.ledger;
      counts = new DerivedCounts(ledger);
    });
    afterEach(() => opened.close());

    test('the root pruned first: the count stays while a descendant is stored, and goes with the last', async () => {
      const [first, second] = await chain('root-1', 2);
      await prune(eventOf('root-1', 'root-1'));
      assert.equal(counts.derivedSoFar(ORG, 'root-1'), 2, 'a descendant still at work does not get a fresh budget');
      await within(() => counts.countWithin(ORG, 'root-1'));
      assert.equal(counts.derivedSoFar(ORG, 'root-1'), 3);
      await prune(first!);
      await prune(second!);
      assert.equal(counts.derivedSoFar(ORG, 'root-1'), 3, 'the one derived after the root went is still stored (as its record would be)');
      await prune(eventOf('root-1-d2', 'root-1'));
      assert.equal([...ledger.openDatabase('derived-counts').getKeys({})].length, 0, 'nothing of the chain is left');
    });

    test('the descendants pruned first: the count goes with the root', async () => {
      const descendants = await chain('root-2', 3);
      for (const event of descendants) await prune(event);
      assert.equal(counts.derivedSoFar(ORG, 'root-2'), 3, 'the root is still stored: its budget used stays');
      await prune(eventOf('root-2', 'root-2'));
      assert.equal(counts.derivedSoFar(ORG, 'root-2'), 0);
      assert.equal([...ledger.openDatabase('derived-counts').getKeys({})].length, 0);
    });

    test('a count written before descendants were counted (a bare number) stays for good: how many of them are stored is not known', async () => {
      await within(() => {
        void ledger.events.put([ORG, 'root-3'], { id: 'root-3' });
        void ledger.openDatabase('derived-counts').put([ORG, 'root-3'], 7);
      });
      assert.equal(counts.derivedSoFar(ORG, 'root-3'), 7);
      await within(() => counts.countWithin(ORG, 'root-3'));
      assert.equal(counts.derivedSoFar(ORG, 'root-3'), 8);
      // A descendant from before the count held them is pruned, then the root: one from before may still be stored.
      await prune(eventOf('root-3-old', 'root-3'));
      await prune(eventOf('root-3', 'root-3'));
      assert.equal(counts.derivedSoFar(ORG, 'root-3'), 8, 'the root went: the budget used stays');
      await prune(eventOf('root-3-new', 'root-3'));
      assert.equal(counts.derivedSoFar(ORG, 'root-3'), 8, 'and stays when the one counted since goes');
    });

    test('the roots whose count outlived them (for a sandbox reset) are read a page per event-loop turn, each found once', async () => {
      const gone: string[] = [];
      for (let i = 0; i < 11; i++) {
        const root = `root-p${String(i).padStart(2, '0')}`;
        await chain(root, 1);
        if (i % 3 === 0) {
          await prune(eventOf(root, root));
          gone.push(root);
        }
      }
      await within(() => void ledger.openDatabase('derived-counts').put(['org_b', 'root-other'], [1, 1]));
      let otherWorkRan = false;
      const reading = counts.rootsNotStored(ORG, 4);
      setImmediate(() => (otherWorkRan = true));
      const found = await reading;
      assert.equal(otherWorkRan, true, 'other work runs between pages');
      assert.deepEqual([...found].sort(), gone, 'another org\'s root is not among them');
      for (const perTurn of [1, 10, 11, 12]) assert.deepEqual([...(await counts.rootsNotStored(ORG, perTurn))].sort(), gone, `${perTurn} per turn`);
    });
  });
}
