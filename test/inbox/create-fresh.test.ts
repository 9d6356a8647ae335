// Inbox.createFresh: a name made again forgets the claims a deleted one of the name left, in
// transactions of at most `chunk` with other writes going on between them; a name still held keeps
// its claims.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { durably } from '../../runtime/ledger/durable-write.ts';
import { Inbox, DEFAULT_DEDUP_WINDOW_MS } from '../../runtime/inbox/inbox.ts';
import type { Ledger } from '../../runtime/ledger/ledger.ts';
import { LEDGER_KINDS } from '../helpers/ledgers.ts';

const claimIds = (inbox: Inbox, source: string): string[] => [...inbox.claimsOf('org', source)].map(({ key }) => (key as string[])[2]!);

async function claim(ledger: Ledger, inbox: Inbox, source: string, ids: readonly string[]): Promise<void> {
  await durably(ledger.root, ledger.root.transaction(() => ids.forEach((id, i) => inbox.writeClaim('org', source, id, `evt_${id}`, 1_000 + i))));
}

for (const kind of LEDGER_KINDS) {
  test(`${kind.name}: a name made again forgets its old claims in chunks, and only then is created; another source keeps its claims`, async () => {
    const { ledger, close } = kind.open();
    try {
      const inbox = new Inbox(ledger, DEFAULT_DEDUP_WINDOW_MS);
      await claim(ledger, inbox, 'gone', ['a', 'b', 'c', 'd', 'e']);
      await claim(ledger, inbox, 'kept', ['a']);
      const transactions: number[] = [];
      const transaction = ledger.root.transaction.bind(ledger.root);
      ledger.root.transaction = ((work: () => unknown) => transaction(() => {
        const result = work();
        transactions.push(result as number);
        return result;
      })) as typeof ledger.root.transaction;
      let claimsSeenAtCreate: string[] | undefined;
      const made = await inbox.createFresh('org', 'gone', () => false, async () => {
        claimsSeenAtCreate = claimIds(inbox, 'gone');
        return 'made';
      }, 2);
      assert.equal(made, 'made');
      assert.deepEqual(transactions, [2, 2, 1], 'five claims forgotten two at a time, each in its own transaction');
      assert.deepEqual(claimsSeenAtCreate, []);
      assert.deepEqual(claimIds(inbox, 'kept'), ['a']);
    } finally {
      await close();
    }
  });

  test(`${kind.name}: a name still held keeps its claims`, async () => {
    const { ledger, close } = kind.open();
    try {
      const inbox = new Inbox(ledger, DEFAULT_DEDUP_WINDOW_MS);
      await claim(ledger, inbox, 'held', ['x', 'y']);
      await inbox.createFresh('org', 'held', () => true, async () => undefined);
      assert.deepEqual(claimIds(inbox, 'held'), ['x', 'y'], 'an existing name is not forgotten');

    } finally {
      await close();
    }
  });
}
