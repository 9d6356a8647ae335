// Paging an export (org-export.ts) on LMDB and on memory: each record once and in order, whatever the
// item, byte and scan budgets; keys that hold no record are passed over; orgs whose ids share the
// org's prefix or sort beside it are never read; a page full at the very end has no cursor; and
// only positions of the export's own shape are taken from a cursor.

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { fenceOrgWrites } from '../../runtime/ledger/org-fence.ts';
import { exportPage, isExportPosition, type ExportPosition, type ExportSection, type OrgExport } from '../../runtime/tenancy/org-export.ts';
import { LEDGER_KINDS } from '../helpers/ledgers.ts';

const NEIGHBOURS = ['acm', 'acme-2', 'acme_', 'acmf', 'a'];

const SECTIONS: ExportSection[] = [
  { kind: 'header', item: (orgId) => ({ org: orgId }) },
  // Every third key of `rows` is a marker that holds no record.
  { kind: 'row', table: 'rows', item: (_orgId, rest) => (rest[1] === 'marker' ? undefined : { at: rest }) },
  { kind: 'nothing', item: () => undefined },
  { kind: 'thing', table: 'things', item: (_orgId, [name]) => ({ name }) },
];

function readAll(exporter: OrgExport, orgId: string, limits: { items: number; bytes: number; scan: number }) {
  const lines: string[] = [];
  let pages = 0;
  let from: ExportPosition | null = { section: 0, after: null };
  while (from !== null) {
    const page = exportPage(exporter, orgId, from, limits);
    pages++;
    assert.ok(page.lines.length <= limits.items);
    // A cursor is what a client sends back: it must survive JSON and pass the check.
    if (page.next !== null) assert.ok(isExportPosition(JSON.parse(JSON.stringify([page.next.section, page.next.after])), exporter.sections));
    assert.ok(pages < 1_000, 'the pages move on');
    lines.push(...page.lines);
    from = page.next;
  }
  return { lines, pages };
}

for (const kind of LEDGER_KINDS) {
  describe(`export pages (${kind.name})`, () => {
    it('gives each record once, in order, under any budget, and nothing of the neighbours', async () => {
      const { ledger, close } = kind.open();
      try {
        const tables = fenceOrgWrites(ledger, () => false);
        const rows = ledger.openDatabase('rows');
        const things = ledger.openDatabase('things');
        await ledger.root.transaction(() => {
          for (const org of ['acme', ...NEIGHBOURS]) {
            for (let i = 0; i < 12; i++) rows.put([org, i, i % 3 === 2 ? 'marker' : `row-${org}`], null);
            for (const name of ['x', 'y']) things.put([org, `${name}-${org}`], null);
          }
        });
        const exporter = { sections: SECTIONS, tables };
        const whole = readAll(exporter, 'acme', { items: 1_000, bytes: 1 << 20, scan: 1_000 });
        assert.equal(whole.pages, 1);
        const expected = [
          '{"kind":"header","org":"acme"}',
          ...[0, 1, 3, 4, 6, 7, 9, 10].map((i) => `{"kind":"row","at":[${i},"row-acme"]}`),
          '{"kind":"thing","name":"x-acme"}',
          '{"kind":"thing","name":"y-acme"}',
        ];
        assert.deepEqual(whole.lines, expected);
        for (const limits of [
          { items: 1, bytes: 1 << 20, scan: 1_000 },
          { items: 4, bytes: 1 << 20, scan: 1_000 },
          { items: 1_000, bytes: 1, scan: 1_000 },
          { items: 1_000, bytes: 1 << 20, scan: 1 },
          { items: 2, bytes: 1 << 20, scan: 3 },
        ]) {
          const paged = readAll(exporter, 'acme', limits);
          assert.deepEqual(paged.lines, expected, JSON.stringify(limits));
          assert.ok(paged.pages > 1, JSON.stringify(limits));
        }
        // Full exactly at its last record: no page after it.
        assert.equal(readAll(exporter, 'acme', { items: expected.length, bytes: 1 << 20, scan: 1_000 }).pages, 1);
        // An org with no records has its header only.
        assert.deepEqual(readAll(exporter, 'acme-3', { items: 5, bytes: 1 << 20, scan: 5 }).lines, ['{"kind":"header","org":"acme-3"}']);
        // The key a page ended on, and the record after it, removed before the next page: it goes on after them.
        const first = exportPage(exporter, 'acme', { section: 0, after: null }, { items: 3, bytes: 1 << 20, scan: 1_000 });
        assert.deepEqual(first.next, { section: 1, after: [2, 'marker'] });
        await ledger.root.transaction(() => {
          rows.remove(['acme', 2, 'marker']);
          rows.remove(['acme', 3, 'row-acme']);
        });
        assert.deepEqual(exportPage(exporter, 'acme', first.next!, { items: 1, bytes: 1 << 20, scan: 1_000 }).lines, ['{"kind":"row","at":[4,"row-acme"]}']);
      } finally {
        await close();
      }
    });
  });
}

for (const kind of LEDGER_KINDS) {
  describe(`export pages over keys that cannot be a position (${kind.name})`, () => {
    it('reads through them, so every page moves on', async () => {
      const { ledger, close } = kind.open();
      try {
        const tables = fenceOrgWrites(ledger, () => false);
        const odd = ledger.openDatabase('odd');
        await ledger.root.transaction(() => {
          for (let i = 0; i < 10; i++) odd.put(['acme', 'a', true, i], null);
          odd.put(['acme', 'b'], null);
          odd.put(['acme', 'c'], null);
        });
        const exporter: OrgExport = { sections: [{ kind: 'odd', table: 'odd', item: (_orgId, rest) => ({ at: rest }) }], tables };
        const read = readAll(exporter, 'acme', { items: 100, bytes: 1 << 20, scan: 3 });
        assert.deepEqual(read.lines, ['{"kind":"odd","at":["b"]}', '{"kind":"odd","at":["c"]}']);
      } finally {
        await close();
      }
    });
  });
}

describe('export positions from a cursor', () => {
  it('takes a section and a key of strings and whole numbers, nothing else', () => {
    for (const good of [[0, null], [1, [3, 'row']], [3, ['x']], [1, ['a', 'b', 'c', 'd', 'e', 'f']]]) assert.ok(isExportPosition(good, SECTIONS), JSON.stringify(good));
    for (const bad of [
      [],
      [0],
      [4, null],
      [-1, null],
      [1.5, null],
      ['1', null],
      [1, []],
      [1, [{}]],
      [1, [true]],
      [1, [1.5]],
      [1, ['a', 'b', 'c', 'd', 'e', 'f', 'g']],
      [1, ['x'.repeat(801)]],
      // A section without a table has no keys.
      [0, ['x']],
      [1, null, 'extra'],
    ]) {
      assert.ok(!isExportPosition(bad, SECTIONS), JSON.stringify(bad));
    }
  });
});
