// Removing orgs' records from every fenced table (org-removal.ts), on LMDB and on memory: their
// ranges, their entries in the tables ordered by time or keyed by a hash, across chunk boundaries,
// and nothing of orgs whose ids share a prefix or sort around them; a second run removes nothing.
// Each chunk is told inside its own transaction (what a deletion's tally is written by). Many orgs
// at once read a table ordered by time once, not once per org.

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { fenceOrgWrites } from '../../runtime/ledger/org-fence.ts';
import type { Ledger } from '../../runtime/ledger/ledger.ts';
import { countOrgRecords, removeOrgRecords } from '../../runtime/tenancy/org-removal.ts';
import { LEDGER_KINDS } from '../helpers/ledgers.ts';

const NEIGHBOURS = ['acm', 'acme-2', 'acme_', 'acmf', 'a'];

async function fill(ledger: Ledger, orgs: readonly string[]): Promise<void> {
  const rows = ledger.openDatabase('rows');
  await ledger.root.transaction(() => {
    for (const org of orgs) {
      ledger.orgs.put([org], { id: org });
      for (let i = 0; i < 7; i++) rows.put([org, 'production', i, `row-${i}`], { i });
      rows.put([org, 'sandbox', 'x'], 'x');
      for (let i = 0; i < 5; i++) ledger.inboxByTime.put([1_000 + i, org, 'src', `e${i}`], null);
      ledger.apiKeys.put([`hash-${org}`], { org_id: org });
      ledger.openDatabase('runtime-boots').put([org], { ended: 'clean' });
    }
  });
}

for (const kind of LEDGER_KINDS) {
  describe(`org removal (${kind.name})`, () => {
    it('removes the org from every table, in chunks, and leaves every other org whole', async () => {
      const { ledger, close } = kind.open();
      const tables = fenceOrgWrites(ledger, () => false);
      await fill(ledger, ['acme', ...NEIGHBOURS]);
      const rows = ledger.openDatabase('rows');
      const before = (org: string) => [...rows.getKeys({})].filter((key) => (key as string[])[0] === org).length;
      assert.equal(before('acme'), 8);

      // Told of each chunk inside its transaction: a tally written there lands with the removal.
      const tally = ledger.openDatabase('tally');
      const told: Array<[string, number]> = [];
      const counted = (orgId: string, name: string, count: number): void => {
        assert.equal(orgId, 'acme');
        told.push([name, count]);
        tally.put([name], ((tally.get([name]) as number | undefined) ?? 0) + count);
      };
      const removed = (await removeOrgRecords({ root: ledger.root, tables, chunk: 3, readChunk: 2, counted }, ['acme'])).get('acme')!;
      assert.deepEqual(removed, { 'api-keys': 1, 'inbox-by-time': 5, orgs: 1, rows: 8 });
      assert.deepEqual(told.filter(([name]) => name === 'rows'), [['rows', 3], ['rows', 3], ['rows', 2]], 'a chunk at a time');
      for (const [name, count] of Object.entries(removed)) assert.equal(tally.get([name]), count, name);
      assert.equal(before('acme'), 0);
      assert.equal(ledger.orgs.get(['acme']), undefined);
      assert.equal(ledger.apiKeys.get(['hash-acme']), undefined);
      assert.equal([...ledger.inboxByTime.getKeys({})].filter((key) => (key as unknown[])[1] === 'acme').length, 0);
      // A runtime table is not the org's, whatever its keys look like.
      assert.deepEqual(ledger.openDatabase('runtime-boots').get(['acme']), { ended: 'clean' });
      for (const org of NEIGHBOURS) {
        assert.equal(before(org), 8, org);
        assert.deepEqual(ledger.orgs.get([org]), { id: org });
        assert.deepEqual(ledger.apiKeys.get([`hash-${org}`]), { org_id: org });
        assert.equal([...ledger.inboxByTime.getKeys({})].filter((key) => (key as unknown[])[1] === org).length, 5, org);
      }
      assert.deepEqual(await removeOrgRecords({ root: ledger.root, tables, chunk: 3 }, ['acme']), new Map([['acme', {}]]));
      await close();
    });

    it("reads an org's range no further than the first key of the next org", async () => {
      const { ledger, close } = kind.open();
      const tables = fenceOrgWrites(ledger, () => false);
      await fill(ledger, ['acme', ...NEIGHBOURS]);
      // The table as the fence knows it (lmdb-js may answer another object for a name opened again).
      const { table: rows } = tables().find(({ name }) => name === 'rows')!;
      // Every key the removal takes out of the table's iterators.
      let pulled = 0;
      const { getKeys } = rows;
      Object.assign(rows, {
        getKeys: (...args: Parameters<typeof getKeys>) =>
          (function* counted() {
            for (const key of getKeys.apply(rows, args)) {
              pulled++;
              yield key;
            }
          })(),
      });
      assert.deepEqual((await removeOrgRecords({ root: ledger.root, tables }, ['acme'])).get('acme')?.['rows'], 8);
      // Its 8 rows and the next org's first ('acme-2', 'acme_' and 'acmf' hold 24 more after them).
      assert.equal(pulled, 9);
      await close();
    });

    it('stops between its writes once told to, and a later run finishes', async () => {
      const { ledger, close } = kind.open();
      const tables = fenceOrgWrites(ledger, () => false);
      await fill(ledger, ['acme']);
      const stop = new AbortController();
      stop.abort();
      await assert.rejects(removeOrgRecords({ root: ledger.root, tables, stop: stop.signal }, ['acme']), { name: 'AbortError' });
      assert.deepEqual(ledger.orgs.get(['acme']), { id: 'acme' });
      assert.equal(Object.values((await removeOrgRecords({ root: ledger.root, tables }, ['acme'])).get('acme')!).reduce((a, b) => a + b, 0), 15);
      await close();
    });

    it('removes many orgs at once, each told and tallied apart, reading a table ordered by time once', async () => {
      const { ledger, close } = kind.open();
      const tables = fenceOrgWrites(ledger, () => false);
      const doomed = ['d0', 'd1', 'd2', 'd3', 'd4', 'd5'];
      await fill(ledger, [...doomed, ...NEIGHBOURS]);
      // Every read of the time-ordered table (its keys alone are read).
      let reads = 0;
      const { inboxByTime } = ledger;
      const { getKeys } = inboxByTime;
      Object.assign(inboxByTime, { getKeys: (...args: Parameters<typeof getKeys>) => (reads++, getKeys.apply(inboxByTime, args)) });
      const told = new Map<string, number>();
      const counted = (orgId: string, name: string, count: number): void => void told.set(`${orgId} ${name}`, (told.get(`${orgId} ${name}`) ?? 0) + count);
      // Reads of 4: the 55 time entries take 14 reads; a walk per org would be 6 times that.
      const removed = await removeOrgRecords({ root: ledger.root, tables, chunk: 4, readChunk: 4, counted }, doomed);
      assert.deepEqual([...removed.keys()], doomed);
      for (const org of doomed) {
        assert.deepEqual(removed.get(org), { 'api-keys': 1, 'inbox-by-time': 5, orgs: 1, rows: 8 }, org);
        for (const [name, count] of Object.entries(removed.get(org)!)) assert.equal(told.get(`${org} ${name}`), count, `${org} ${name}`);
      }
      assert.equal(reads, 14, 'the time-ordered table read once, 4 keys at a time');
      const left = await countOrgRecords(tables, [...doomed, ...NEIGHBOURS]);
      for (const org of doomed) assert.deepEqual(left.get(org), {}, org);
      for (const org of NEIGHBOURS) assert.deepEqual(left.get(org), { 'api-keys': 1, 'inbox-by-time': 5, orgs: 1, rows: 8 }, org);
      await close();
    });
  });
}
