// List pages end by the UTF-8 bytes of what they show, as the answer is written: a character of CJK
// text is one UTF-16 unit but three bytes, and pages counted by string length ran to 48 MiB.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { byteCappedPage } from '../../runtime/api/byte-capped-page.ts';
import type { StoredEvent } from '../../runtime/events/event-record.ts';
import { weighEvent, withPayloadText } from '../../runtime/events/payload-text.ts';
import { MAX_PAGE_BYTES } from '../../runtime/ledger/page-by-time.ts';

const MIB = 1024 * 1024;

test('a page ends once the bytes of its views pass the cap, three-byte characters counted as three', () => {
  const page = (text: string) => byteCappedPage(Array.from({ length: 40 }, (_, i) => ({ i, text })), 100, (record) => record, (last) => String(last.i));
  // One MiB of ASCII per view: the view that reaches 16 MiB is the page's last.
  const ascii = page('a'.repeat(MIB));
  assert.equal(ascii.views.length, MAX_PAGE_BYTES / MIB);
  assert.equal(ascii.nextCursor, String(MAX_PAGE_BYTES / MIB - 1));
  // One Mi characters of CJK per view is 3 MiB of UTF-8: six views pass 16 MiB.
  const cjk = page('中'.repeat(MIB));
  assert.equal(cjk.views.length, 6);
  assert.equal(cjk.nextCursor, '5');
});

test("an event weighs its payload text's bytes and 512 for the rest", () => {
  const text = JSON.stringify({ note: '中'.repeat(1000) });
  const event = withPayloadText({ id: 'e1' } as StoredEvent, text);
  assert.equal(weighEvent(event), Buffer.byteLength(text) + 512);
  assert.equal(weighEvent(event), text.length + 2000 + 512);
});
