// An API event body of 64 KiB or more is checked and parsed in the body-reading thread, not on the
// event loop (parsing 1 MiB there held every org for ~160 ms): stored and answered exactly as a
// small one, refused for the same reasons with the same codes, and bounded by the thread's
// deadline (a runtime given a 1 ms one refuses it as too complex: it went through the thread).

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { THREAD_READ_BYTES } from '../../runtime/ingest/read-webhook-body.ts';
import { call, createOrg } from '../helpers/http.ts';
import { ADMIN_TOKEN, startRuntime, type TestRuntime } from '../helpers/runtime.ts';

const ORG = 'acct-large-api';
let rt: TestRuntime;
let key: string;

before(async () => {
  rt = await startRuntime();
  key = await createOrg(rt.url, ADMIN_TOKEN, ORG);
});
after(() => rt.close());

/** POSTs `text` as the body of an API event. */
const send = (url: string, token: string, text: string) => call(url, 'POST', `/organizations/${ORG}/events`, { token, body: text, headers: { 'content-type': 'application/json' } });

const filler = 'f'.repeat(THREAD_READ_BYTES);

test('a large body is stored with its payload as sent and answered as a small one is', async () => {
  const text = `{"type":"bulk.loaded","id":"bulk-1","payload":{"n":12345678901234567890,"rows":["${filler}"],"nested":{"a":[1,{"b":null}]}}}`;
  const sent = await send(rt.url, key, text);
  assert.equal(sent.status, 202, sent.text.slice(0, 300));
  const payloadText = `{"n":12345678901234567890,"rows":["${filler}"],"nested":{"a":[1,{"b":null}]}}`;
  assert.ok(sent.text.includes(`"payload":${payloadText}`), 'the answer carries the payload as sent');
  const read = await call(rt.url, 'GET', `/organizations/${ORG}/events/bulk-1`, { token: key });
  assert.equal(read.status, 200);
  assert.ok(read.text.includes(`"payload":${payloadText}`), 'and so does the stored event');
  assert.equal((await send(rt.url, key, text)).status, 409, 'its id is a dedup key as a small one\'s is');
});

test('a large body is refused for what a small one would be, with the same codes', async () => {
  const cases: Array<[string, number, string, string | undefined]> = [
    [`{"type":"bulk.loaded","payload":{"rows":["${filler}"]},"extra":1}`, 400, 'unknown_field', 'extra'],
    [`{"type":"bulk.loaded","payload":{"rows":["${filler}"]},"__proto__":{"x":1}}`, 400, 'unknown_field', '__proto__'],
    [`{"type":"bad type","payload":{"rows":["${filler}"]}}`, 400, 'invalid_request', 'type'],
    [`{"type":"bulk.loaded","payload":{"rows":["${filler}"]},"environment":["sandbox"]}`, 400, 'invalid_request', 'environment'],
    [`{"type":"bulk.loaded","payload":{"rows":["${filler}\\ud800"]}}`, 400, 'invalid_unicode', 'payload.rows[0]'],
    [`{"type":"bulk.loaded","payload":{"rows":["${filler}"]}`, 400, 'malformed_json', undefined],
    [`["${filler}"]`, 400, 'invalid_request', undefined],
  ];
  for (const [text, status, code, field] of cases) {
    const small = await send(rt.url, key, text.replace(filler, 'f'));
    const large = await send(rt.url, key, text);
    assert.deepEqual([large.status, large.body?.error?.code, large.body?.error?.field], [status, code, field], `${text.slice(0, 60)}: ${large.text.slice(0, 200)}`);
    assert.deepEqual([small.status, small.body?.error?.code, small.body?.error?.field], [status, code, field], `small ${text.slice(0, 60)}`);
  }
});

test('a large body is read in the thread: past its deadline it is refused as too complex, a small one is not', async () => {
  const hurried = await startRuntime({ schemaDeadlines: { checkMs: 1, compileMs: 1 } });
  try {
    const hurriedKey = await createOrg(hurried.url, ADMIN_TOKEN, ORG);
    const rows = JSON.stringify(Array.from({ length: 12_000 }, (_, i) => ({ i, s: 'x'.repeat(40) })));
    const large = await send(hurried.url, hurriedKey, `{"type":"bulk.loaded","payload":{"rows":${rows}}}`);
    assert.deepEqual([large.status, large.body?.error?.code], [422, 'body_too_complex'], large.text.slice(0, 300));
    assert.equal((await send(hurried.url, hurriedKey, '{"type":"bulk.loaded","payload":{}}')).status, 202);
  } finally {
    await hurried.close();
  }
});
