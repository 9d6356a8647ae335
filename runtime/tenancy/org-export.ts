// One page of an organization's export: JSON lines, one per record, read section by section (the
// org itself, its keys, sources, ..., events, runs, projection rows: org-export-sections.ts) in
// each section's key order. A page ends at its item count, its bytes or its scan budget, and names
// where the next one starts: the section and the last key read. The export is a walk, not a
// snapshot: a record written or removed while it runs is in it or not, as its page finds it.

import type { LedgerKey, LedgerTable } from '../ledger/ledger.ts';
import { textBytes } from '../ledger/page-by-time.ts';
import { namesSomething } from '../http/router.ts';
import type { OrgTable } from '../ledger/org-fence.ts';
import { sameKey } from '../ledger/range-in-turns.ts';
import { stringifyWithRaw } from '../validation/raw-json.ts';

/** One part of a ledger key as the export's positions carry it. */
export type KeyPart = string | number;

export interface ExportSection {
  /** The `kind` member of each of its lines. */
  readonly kind: string;
  /**
   * The table (as org-fence.ts names it) whose records under [orgId, ...] the section lists, one
   * line per record; without one, the section is one line about the org.
   */
  readonly table?: string;
  /** The line's members besides `kind` for the record under [orgId, ...rest]; undefined passes the key over (not a record, or gone). */
  readonly item: (orgId: string, rest: readonly KeyPart[]) => Record<string, unknown> | undefined;
}

/** Where a page starts: a section, and the key (without the org) read last in it, or null for its start. */
export interface ExportPosition {
  readonly section: number;
  readonly after: readonly KeyPart[] | null;
}

export interface ExportPage {
  /** JSON text of each item, without line ends; received payloads in their exact text. */
  readonly lines: string[];
  /** Where the next page starts; null when this one holds the export's last record. */
  readonly next: ExportPosition | null;
}

export interface ExportLimits {
  readonly items: number;
  /** Past this many bytes of lines the page ends (it always holds one item). */
  readonly bytes: number;
  /** Keys read per page at most, records or not: a page never reads on without end. */
  readonly scan: number;
}

/** Key parts in a position: the longest section key (projection rows) has four after the org. */
const MAX_KEY_PARTS = 6;

const isKeyPart = (part: unknown): part is KeyPart => (typeof part === 'string' && namesSomething(part)) || Number.isSafeInteger(part);
const LINE_BREAKS = /\r\n?|\n/g;

/** Whether `value` is a position of one of `sections` (a cursor decoded from a client is checked with it). */
export function isExportPosition(value: readonly unknown[], sections: readonly ExportSection[]): boolean {
  const [section, after] = value;
  if (value.length !== 2 || !Number.isSafeInteger(section) || (section as number) < 0 || (section as number) >= sections.length) return false;
  if (after === null) return true;
  return Array.isArray(after) && after.length >= 1 && after.length <= MAX_KEY_PARTS && after.every(isKeyPart) && sections[section as number]?.table !== undefined;
}

/** What is exported, and where: the sections, and every table the runtime opened, by name (org-fence.ts). */
export interface OrgExport {
  readonly sections: readonly ExportSection[];
  readonly tables: () => readonly OrgTable[];
}

/** The page of `orgId`'s export that starts at `from` (the start: `{ section: 0, after: null }`). */
export function exportPage(source: OrgExport, orgId: string, from: ExportPosition, limits: ExportLimits): ExportPage {
  const lines: string[] = [];
  let bytes = 0;
  let scanned = 0;
  const full = (): boolean => lines.length >= limits.items || bytes >= limits.bytes;
  const add = (kind: string, item: Record<string, unknown>): void => {
    // A payload is written as received, and may hold line breaks between its tokens (never inside
    // a string, where JSON has them escaped): spaces instead keep each record on its line.
    const line = stringifyWithRaw({ kind, ...item }).replace(LINE_BREAKS, ' ');
    lines.push(line);
    bytes += textBytes(line) + 1;
  };
  for (let index = from.section; index < source.sections.length; index++) {
    const section = source.sections[index] as ExportSection;
    if (section.table === undefined) {
      const item = section.item(orgId, []);
      if (item === undefined) continue;
      if (full()) return { lines, next: { section: index, after: null } };
      add(section.kind, item);
      continue;
    }
    let last = index === from.section ? from.after : null;
    const start: LedgerKey = last === null ? [orgId] : [orgId, ...last];
    // Read lazily, as far as the page goes.
    for (const key of tableNamed(source, section.table).getKeys({ start, end: [orgId, '\uffff'] })) {
      if (!Array.isArray(key) || key[0] !== orgId) break;
      const rest = key.slice(1);
      if (last !== null && sameKey(rest, last)) continue;
      // Keys of another shape than strings and whole numbers hold no record of a section, and
      // cannot be a position: read through (none of the exported tables holds one).
      if (rest.length === 0 || !rest.every(isKeyPart)) {
        scanned++;
        continue;
      }
      // Out of budget, the page ends before this key, unless it has not moved yet (then it ends after it).
      const moved = index !== from.section || last !== from.after;
      if (scanned >= limits.scan && moved) return { lines, next: { section: index, after: last } };
      scanned++;
      const item = section.item(orgId, rest);
      if (item !== undefined) {
        if (full()) return { lines, next: { section: index, after: last } };
        add(section.kind, item);
      }
      last = rest;
    }
  }
  return { lines, next: null };
}

function tableNamed(source: OrgExport, name: string): LedgerTable {
  const found = source.tables().find((table) => table.name === name);
  if (found === undefined) throw new Error(`the export reads table ${name}, which the runtime has not opened`);
  return found.table;
}
