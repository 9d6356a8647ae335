// The write fence of deleted orgs (org-fence.ts), on LMDB and on memory: a deleted org's writes
// are refused inside a group (taken back with it) and outside one (a rejected promise), wherever the
// table keeps the org (first, second, in the value); other orgs' writes, removes and the runtime's
// own tables go through; every table opened is known to the removal with its org's place.

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { fenceOrgWrites, OrgDeletedError } from '../../runtime/ledger/org-fence.ts';
import { LEDGER_KINDS } from '../helpers/ledgers.ts';

for (const kind of LEDGER_KINDS) {
  describe(`org write fence (${kind.name})`, () => {
    const open = () => {
      const opened = kind.open();
      const gone = new Set<string>();
      const tables = fenceOrgWrites(opened.ledger, (orgId) => gone.has(orgId));
      return { ...opened, gone, tables };
    };

    it('refuses a deleted org\'s put inside a transaction, taking back what the transaction wrote', async () => {
      const { ledger, gone, close } = open();
      const rows = ledger.openDatabase('rows');
      gone.add('doomed');
      await assert.rejects(
        ledger.root.transaction(() => {
          rows.put(['keeper', 'a'], 1);
          rows.put(['doomed', 'a'], 1);
        }),
        (error: unknown) => error instanceof OrgDeletedError && error.orgId === 'doomed' && error.status === 404,
      );
      assert.equal(rows.get(['keeper', 'a']), undefined);
      assert.equal(rows.get(['doomed', 'a']), undefined);
      await ledger.root.transaction(() => rows.put(['keeper', 'a'], 2));
      assert.equal(rows.get(['keeper', 'a']), 2);
      await close();
    });

    it('answers a top-level put or ifNoExists of a deleted org with a rejected promise, never a throw', async () => {
      const { ledger, gone, close } = open();
      const rows = ledger.openDatabase('rows');
      gone.add('doomed');
      const put = rows.put(['doomed', 'b'], 1);
      await assert.rejects(put, OrgDeletedError);
      const conditional = rows.ifNoExists(['doomed', 'c'], () => void rows.put(['doomed', 'c'], 1));
      await assert.rejects(conditional, OrgDeletedError);
      await assert.rejects(ledger.root.batch(() => void rows.put(['doomed', 'd'], 1)), OrgDeletedError);
      assert.equal([...rows.getKeys({})].length, 0);
      await close();
    });

    it('reads the org where each table keeps it; removes and the runtime\'s own tables are never fenced', async () => {
      const { ledger, gone, tables, close } = open();
      const byTime = ledger.inboxByTime;
      const hashes = ledger.apiKeys;
      const boots = ledger.openDatabase('runtime-boots');
      const rows = ledger.openDatabase('rows');
      await rows.put(['doomed', 'x'], 1);
      gone.add('doomed');
      await assert.rejects(byTime.put([1_000, 'doomed', 'src', 'id'], null), OrgDeletedError);
      await byTime.put([1_000, 'keeper', 'src', 'id'], null);
      await assert.rejects(hashes.put(['hash-1'], { org_id: 'doomed' }), OrgDeletedError);
      await hashes.put(['hash-2'], { org_id: 'keeper' });
      // The string first part of a runtime table is not an org, even one named like a deleted org.
      await boots.put(['doomed'], { ended: 'clean' });
      await rows.remove(['doomed', 'x']);
      assert.equal(rows.get(['doomed', 'x']), undefined);
      assert.deepEqual(boots.get(['doomed']), { ended: 'clean' });
      const places = Object.fromEntries(tables().map((table) => [table.name, table.place]));
      assert.equal(places['rows'], 'first');
      assert.equal(places['orgs'], 'first');
      assert.equal(places['inbox-by-time'], 'second');
      assert.equal(places['api-keys'], 'value');
      assert.equal(places['runtime-boots'], 'none');
      await close();
    });
  });
}
