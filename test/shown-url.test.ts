// The CLI's URLs as printed: a password and a query are masked, in text with or without a scheme
// (a scheme-less `admin:s3cret@host` parses as a URL of scheme `admin:`, and printed it whole).

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { shownUrl } from '../runtime/shown-url.ts';

test('a password or a query is never shown, whatever the text looks like; anything else is shown as given', () => {
  const cases: Array<[string, string]> = [
    ['admin:s3cret@sluice.example.com', 'admin:***@sluice.example.com'],
    ['//admin:s3cret@host', '//admin:***@host'],
    ['admin:s3cret@h:80/path', 'admin:***@h:80/path'],
    ['ws://bob:s3cret@127.0.0.1:1', 'ws://bob:***@127.0.0.1:1/'],
    ['ftp://u:p@h', 'ftp://u:***@h/'],
    ['https://a@b.c/x?token=sk_1', 'https://a@b.c/x?***'],
    ['http://127.0.0.1:8787', 'http://127.0.0.1:8787'],
    ['http://h:8080/path@x', 'http://h:8080/path@x'],
    ['not a url', 'not a url'],
    ['u:p@ss@host', 'u:***@host'],
    ['//u:p@ss@host/x', '//u:***@host/x'],
    ['a:b:c@host', 'a:***@host'],
    [' admin:s3cret@host', 'admin:***@host'],
    ['admin:s3 cret@host', 'admin:***@host'],
    ['http://[::1]:80/x', 'http://[::1]:80/x'],
    ['user@host', 'user@host'],
  ];
  for (const [given, shown] of cases) assert.equal(shownUrl(given), shown, given);
});
